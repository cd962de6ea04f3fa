//! Genomic interval overlap and count (the continuous tensor abstraction's §8.4 study) with an
//! interval index expressed as a tensor: the data intervals `B` are cut at every endpoint into
//! disjoint elementary segments, each listing the ids of the intervals covering it,
//! `G[chrom, x, j]` stored as `Dense(SparseRunList(SparseList(Pattern()), coord=f64))` (the
//! paper's non-overlapping x-level with duplicated sub-fibers, §2.4). A query interval then
//! meets only the segments it overlaps (a binary search and a walk), not every data interval.
//!
//! `count` does not enumerate pairs: a data interval meets query `i` when it starts inside
//! `[s_i, e_i)` or holds `s_i` in its interior, never both, so the count is the sum of the
//! data starts `S[c, x]` over the query's piece plus the interior coverage `C[c, x]` read at
//! `s_i` (a piecewise-constant tensor with open gaps, exact with `Limit` endpoints), both
//! found by binary search (`gallop`): a query costs the same however many pairs it has.
//!
//! ```text
//! cargo run --release --example interval_overlap -- [N] [M] [MEAN_LEN] [REPEATS] [--dump DIR]
//! #   defaults 100000 100000 1000 5; positions uniform in [0, 10^8) on 4 chromosomes
//! cargo run --release --example interval_overlap -- --a A.bed --b B.bed [REPEATS]
//! #   real BED files (`tessera::io::bed`): A's lines are the queries in their order, B's the
//! #   data; chromosomes are matched by name; zero-length records compare as bedtools does
//! ```
//!
//! Prints one JSON line per operation (`overlap`: how many query intervals meet any data
//! interval, bedtools `intersect -u`; `count`: the number of (query, data) overlapping pairs,
//! the sum of bedtools `intersect -c`), with the median kernel time; building the index tensor
//! is timed separately. `--dump DIR` writes `a.bed` and `b.bed` for the peers
//! (`bench/interval_overlap.py`).

mod common;

use common::{Uniform, median};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Instant;
use tessera::Scalar;
use tessera::error::{Error, Result};
use tessera::io::bed::{BedRecord, ChromNames, read_bed};
use tessera::levels::Format;
use tessera::limit::Limit;
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::tensor::Tensor;
use tessera::tensor::pieces::{Piece, PieceCoord};

const CHROMS: usize = 4;
const SPAN: f64 = 1e8;

/// `(chrom, start, end)`: a half-open interval on a numbered chromosome.
type Interval = (usize, f64, f64);

/// Integer positions, half-open, lengths uniform in `[1, 2 * mean]`, on `CHROMS` chromosomes.
fn intervals(rng: &mut Uniform, n: usize, mean: f64) -> Vec<Interval> {
    (0..n)
        .map(|_| {
            let c = (rng.next() * CHROMS as f64) as usize;
            let s = (rng.next() * SPAN).floor();
            let len = 1.0 + (rng.next() * 2.0 * mean).floor();
            (c, s, s + len)
        })
        .collect()
}

/// The elementary segments of `b` per chromosome (`chroms` of them), with the ids covering each.
fn segments(b: &[Interval], chroms: usize) -> Vec<Piece> {
    let mut out = vec![];
    for c in 0..chroms {
        // Sweep the endpoints: +1 at a start, -1 at an end; between consecutive distinct
        // endpoints the covering set is constant.
        let mut events: Vec<(f64, bool, usize)> = vec![];
        for (j, &(cb, s, e)) in b.iter().enumerate() {
            if cb == c {
                events.push((s, true, j));
                events.push((e, false, j));
            }
        }
        events.sort_by(|p, q| p.0.total_cmp(&q.0));
        let mut open: std::collections::BTreeSet<usize> = Default::default();
        let mut k = 0;
        while k < events.len() {
            let at = events[k].0;
            while k < events.len() && events[k].0 == at {
                let (_, start, j) = events[k];
                if start {
                    open.insert(j);
                } else {
                    open.remove(&j);
                }
                k += 1;
            }
            if let (false, Some(&(next, _, _))) = (open.is_empty(), events.get(k)) {
                let seg = PieceCoord::Real(Limit::exact(at), Limit::minus_eps(next));
                for &j in &open {
                    out.push((
                        vec![PieceCoord::Int(c as i64), seg, PieceCoord::Int(j as i64)],
                        Scalar::Bool(true),
                    ));
                }
            }
        }
    }
    out
}

/// The count index of `b`: `S[c, x]`, how many data intervals start at each position, and
/// `C[c, x]`, how many contain `x` in their interior (`s_j < x < e_j`), piecewise constant:
/// an exact value at each endpoint and one on each open gap between endpoints.
fn count_index(b: &[Interval], chroms: usize) -> (Vec<Piece>, Vec<Piece>) {
    let (mut starts, mut cover) = (vec![], vec![]);
    for c in 0..chroms {
        let mut events: Vec<(f64, i64)> = vec![];
        for &(cb, s, e) in b {
            if cb == c {
                events.push((s, 1));
                events.push((e, -1));
            }
        }
        events.sort_by(|p, q| p.0.total_cmp(&q.0).then(p.1.cmp(&q.1)));
        let (mut open, mut k) = (0i64, 0);
        while k < events.len() {
            let at = events[k].0;
            let (mut opened, mut closed) = (0, 0);
            while k < events.len() && events[k].0 == at {
                if events[k].1 > 0 {
                    opened += 1
                } else {
                    closed += 1
                }
                k += 1;
            }
            let int = |v: i64| PieceCoord::Int(v);
            if opened > 0 {
                starts.push((
                    vec![int(c as i64), PieceCoord::point(at)],
                    Scalar::I64(opened),
                ));
            }
            // At `at` itself: the intervals open before it that do not end there.
            if open - closed > 0 {
                cover.push((
                    vec![int(c as i64), PieceCoord::point(at)],
                    Scalar::I64(open - closed),
                ));
            }
            open += opened - closed;
            if let (true, Some(&(next, _))) = (open > 0, events.get(k)) {
                let gap = PieceCoord::Real(Limit::plus_eps(at), Limit::minus_eps(next));
                cover.push((vec![int(c as i64), gap], Scalar::I64(open)));
            }
        }
    }
    (starts, cover)
}

fn write_bed(path: &str, list: &[Interval]) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for &(c, s, e) in list {
        writeln!(f, "chr{}\t{}\t{}", c + 1, s as u64, e as u64)?;
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// The queries `A`, the data `B`, the number of chromosomes and the mean length the JSON
/// reports (generated: the requested one; files: B's), from the command line.
pub struct Input {
    a: Vec<Interval>,
    b: Vec<Interval>,
    chroms: usize,
    mean: f64,
    repeats: usize,
}

fn input(args: &common::Args) -> Result<Input> {
    match &args.files {
        (None, None) => {
            let (n, m) = (args.num(0, 100_000usize)?, args.num(1, 100_000usize)?);
            let (mean, repeats) = (args.num(2, 1000.0f64)?, args.num(3, 5usize)?.max(1));
            let mut rng = Uniform(7);
            let a = intervals(&mut rng, n, mean);
            let b = intervals(&mut rng, m, mean);
            if let Some(dir) = &args.dump {
                let io = |e: std::io::Error| Error::Usage(format!("--dump {dir}: {e}"));
                std::fs::create_dir_all(dir).map_err(io)?;
                write_bed(&format!("{dir}/a.bed"), &a).map_err(io)?;
                write_bed(&format!("{dir}/b.bed"), &b).map_err(io)?;
            }
            let chroms = CHROMS;
            Ok(Input {
                a,
                b,
                chroms,
                mean,
                repeats,
            })
        }
        (Some(fa), Some(fb)) => {
            if args.dump.is_some() {
                return Err(Error::Usage(
                    "--dump writes generated data; with --a/--b the peers read the files".into(),
                ));
            }
            read_files(Path::new(fa), Path::new(fb), args.num(0, 5usize)?.max(1))
        }
        _ => Err(Error::Usage(
            "--a and --b go together: the query and the data BED files".into(),
        )),
    }
}

/// The file mode: A's lines are the queries in their order, B's the data.
pub fn read_files(fa: &Path, fb: &Path, repeats: usize) -> Result<Input> {
    // One name table for both files: a chromosome is the same number in A and B.
    let mut names = ChromNames::new();
    let ra = read_bed(fa, &mut names)?;
    let rb = read_bed(fb, &mut names)?;
    // `span` widens a zero-length record to [start - 1, end + 1), as bedtools does.
    let list = |rs: &[BedRecord]| -> Vec<Interval> {
        rs.iter()
            .map(|r| {
                let (s, e) = r.span();
                (r.chrom, s as f64, e as f64)
            })
            .collect()
    };
    let (a, b) = (list(&ra), list(&rb));
    let mean = b.iter().map(|&(_, s, e)| e - s).sum::<f64>() / b.len().max(1) as f64;
    let chroms = names.len();
    Ok(Input {
        a,
        b,
        chroms,
        mean,
        repeats,
    })
}

/// One operation's outcome: per query, whether it meets B (`overlap`, 0 or 1) or how many of
/// B's intervals it meets (`count`), with the median kernel time and the index build time.
pub struct Measured {
    pub op: &'static str,
    pub per_query: Vec<i64>,
    pub median_ms: f64,
    pub compile_ms: f64,
    pub index_build_ms: f64,
    /// Numbering the queries by (chromosome, start), outside the kernel time.
    pub query_sort_ms: f64,
}

fn run() -> Result<()> {
    let args = common::Args::from_env();
    let input = input(&args)?;
    let (n, m, mean) = (input.a.len(), input.b.len(), input.mean);
    for r in operations(&input)? {
        // Overlap: the flagged queries; count: the sum of the per-query counts.
        let result: i64 = r.per_query.iter().sum();
        println!(
            "{{\"op\": \"{}\", \"n\": {n}, \"m\": {m}, \"mean_len\": {mean}, \"result\": {result}, \"median_ms\": {:.3}, \"compile_ms\": {:.2}, \"index_build_ms\": {:.1}, \"query_sort_ms\": {:.1}}}",
            r.op, r.median_ms, r.compile_ms, r.index_build_ms, r.query_sort_ms
        );
    }
    Ok(())
}

/// Builds the index tensors over B and runs `overlap` and `count` `repeats` times each.
pub fn operations(input: &Input) -> Result<Vec<Measured>> {
    let (b, chroms, repeats) = (&input.b, input.chroms, input.repeats);
    let (n, m) = (input.a.len(), b.len());
    // The queries are numbered by (chromosome, start), so consecutive queries search nearby
    // places of the index and its arrays stay in cache (random order made the kernels 2-3x
    // slower at 10^6); `order[k]` is A's line of query k, to report in A's order.
    let t0 = Instant::now();
    let mut order: Vec<usize> = (0..n).collect();
    let key = |k: usize| (input.a[k].0, input.a[k].1);
    order.sort_by(|&p, &q| key(p).0.cmp(&key(q).0).then(key(p).1.total_cmp(&key(q).1)));
    let a: Vec<Interval> = order.iter().map(|&k| input.a[k]).collect();
    let sort_ms = t0.elapsed().as_secs_f64() * 1e3;

    // The queries: A[c, i, x], one half-open interval per id. The id level is sparse so that a
    // chromosome visits only its own queries (a `Dense` one walked all N ids per chromosome).
    let qf = Format::parse(
        "Dense(SparseList(SparseInterval(Pattern(), coord=f64)))",
        None,
    )?;
    let qp: Vec<Piece> = a
        .iter()
        .enumerate()
        .map(|(i, &(c, s, e))| {
            (
                vec![
                    PieceCoord::Int(c as i64),
                    PieceCoord::Int(i as i64),
                    PieceCoord::right_open(s, e),
                ],
                Scalar::Bool(true),
            )
        })
        .collect();
    let qa = Tensor::from_pieces(&qf, &[chroms, n, 0], &qp)?;
    let t0 = Instant::now();
    let gf = Format::parse(
        "Dense(SparseRunList(SparseList(Pattern()), coord=f64))",
        None,
    )?;
    let g = Tensor::from_pieces(&gf, &[chroms, 0, m], &segments(b, chroms))?;
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;

    // The count index, and each query's start as a pinpoint `As[c, i, x]`.
    let t0 = Instant::now();
    let (starts, cover) = count_index(b, chroms);
    let sf = Format::parse("Dense(SparseList(Element(0), coord=f64))", None)?;
    let st = Tensor::from_pieces(&sf, &[chroms, 0], &starts)?;
    let cf = Format::parse("Dense(SparseRunList(Element(0), coord=f64))", None)?;
    let ct = Tensor::from_pieces(&cf, &[chroms, 0], &cover)?;
    let count_build_ms = t0.elapsed().as_secs_f64() * 1e3;
    // The queries once more with the value 1 (multiplying by it keeps the loops sparse), and
    // their starts as pinpoints. `halfopen=true` (every query is `[s, e)`) makes the searches
    // of `S`, whose coordinates are pinpoints, plain float comparisons. `A` does not take it:
    // `G`'s segment ends keep their signs in arrays, and a float start compared with those
    // keys is rebuilt into a key at every probe (overlap on refseq x aluY took 8 ms, not 3).
    let one = |list: &[Piece]| -> Vec<Piece> {
        list.iter()
            .map(|(c, _)| (c.clone(), Scalar::I64(1)))
            .collect()
    };
    let q1 = Tensor::from_pieces(
        &Format::parse(
            "Dense(SparseList(SparseInterval(Element(0), coord=f64, halfopen=true)))",
            None,
        )?,
        &[chroms, n, 0],
        &one(&qp),
    )?;
    let ap: Vec<Piece> = a
        .iter()
        .enumerate()
        .map(|(i, &(c, s, _))| {
            let at = vec![
                PieceCoord::Int(c as i64),
                PieceCoord::Int(i as i64),
                PieceCoord::point(s),
            ];
            (at, Scalar::I64(1))
        })
        .collect();
    let af = Format::parse("Dense(SparseList(SparseList(Element(0), coord=f64)))", None)?;
    let qs = Tensor::from_pieces(&af, &[chroms, n, 0], &ap)?;

    let runner = Runner::jit();
    let ops = [
        (
            "overlap",
            "o .= false\nfor c = _, i = _, x = _, j = _\n  o[i] |= A[c, i, x] && G[c, x, j]\nend",
            "Dense(Element(false))",
            vec![n],
            build_ms,
        ),
        // A data interval meets query i when it starts inside `[s_i, e_i)` or contains `s_i`
        // in its interior, never both: the starts inside are summed over the query's piece
        // and the covering intervals read at its start, so each pair costs nothing.
        (
            "count",
            "o .= 0\nfor c = _, i = _, x = _\n  o[i] += A1[c, i, x] * S[c, x]\nend\nfor c = _, i = _, x = _\n  o[i] += As[c, i, gallop(x)] * C[c, gallop(x)]\nend",
            "Dense(Element(0))",
            vec![n],
            count_build_ms,
        ),
    ];
    let mut out = vec![];
    for (name, text, out_format, shape, index_ms) in ops {
        let prog = parse_program(text)?;
        let mut ts: BTreeMap<String, Tensor> = BTreeMap::new();
        if name == "overlap" {
            ts.insert("A".into(), qa.clone());
            ts.insert("G".into(), g.clone());
        } else {
            ts.insert("A1".into(), q1.clone());
            ts.insert("As".into(), qs.clone());
            ts.insert("S".into(), st.clone());
            ts.insert("C".into(), ct.clone());
        }
        ts.insert(
            "o".into(),
            Tensor::empty(&Format::parse(out_format, None)?, &shape)?,
        );
        let formats = ts
            .iter()
            .map(|(k, t)| (k.clone(), t.format.clone()))
            .collect();
        let t1 = Instant::now();
        let c = runner.compile(&prog, &formats)?;
        let compile_ms = t1.elapsed().as_secs_f64() * 1e3;
        if std::env::var_os("SHOW_IR").is_some() {
            eprintln!("{}", c.ir);
        }
        let mut times = vec![];
        for _ in 0..repeats {
            let t2 = Instant::now();
            runner.execute(&c, &mut ts)?;
            times.push(t2.elapsed().as_secs_f64() * 1e3);
        }
        let mut per_query = vec![0i64; n];
        ts["o"].for_each_stored(&mut |at, v| {
            per_query[order[at[0]]] = match v {
                Scalar::Bool(b) => b as i64,
                v => v.as_i64(),
            }
        });
        out.push(Measured {
            op: name,
            per_query,
            median_ms: median(times),
            compile_ms,
            index_build_ms: index_ms,
            query_sort_ms: sort_ms,
        });
    }
    Ok(out)
}
