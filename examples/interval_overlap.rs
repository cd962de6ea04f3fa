//! Genomic interval overlap and count (the continuous tensor abstraction's §8.4 study) with an
//! interval index expressed as a tensor: the data intervals `B` are cut at every endpoint into
//! disjoint elementary segments, each listing the ids of the intervals covering it,
//! `G[chrom, x, j]` stored as `Dense(SparseRunList(SparseList(Pattern()), coord=f64))` (the
//! paper's non-overlapping x-level with duplicated sub-fibers, §2.4). A query interval then
//! meets only the segments it overlaps (a binary search and a walk), not every data interval.
//!
//! ```text
//! cargo run --release --example interval_overlap -- [N] [M] [MEAN_LEN] [REPEATS] [--dump DIR]
//! #   defaults 100000 100000 1000 5; positions uniform in [0, 10^8) on 4 chromosomes
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
use std::time::Instant;
use tessera::Scalar;
use tessera::error::{Error, Result};
use tessera::levels::Format;
use tessera::limit::Limit;
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::tensor::Tensor;
use tessera::tensor::pieces::{Piece, PieceCoord};

const CHROMS: usize = 4;
const SPAN: f64 = 1e8;

/// `(chrom, start, end)` with integer positions, half-open, lengths uniform in `[1, 2 * mean]`.
fn intervals(rng: &mut Uniform, n: usize, mean: f64) -> Vec<(usize, f64, f64)> {
    (0..n)
        .map(|_| {
            let c = (rng.next() * CHROMS as f64) as usize;
            let s = (rng.next() * SPAN).floor();
            let len = 1.0 + (rng.next() * 2.0 * mean).floor();
            (c, s, s + len)
        })
        .collect()
}

/// The elementary segments of `b` per chromosome, with the ids covering each.
fn segments(b: &[(usize, f64, f64)]) -> Vec<Piece> {
    let mut out = vec![];
    for c in 0..CHROMS {
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

fn write_bed(path: &str, list: &[(usize, f64, f64)]) -> std::io::Result<()> {
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

fn run() -> Result<()> {
    let args = common::Args::from_env();
    let dump = args.dump.clone();
    let (n, m) = (args.num(0, 100_000usize)?, args.num(1, 100_000usize)?);
    let (mean, repeats) = (args.num(2, 1000.0f64)?, args.num(3, 5usize)?.max(1));
    let mut rng = Uniform(7);
    let a = intervals(&mut rng, n, mean);
    let b = intervals(&mut rng, m, mean);
    if let Some(dir) = &dump {
        let io = |e: std::io::Error| Error::Usage(format!("--dump {dir}: {e}"));
        std::fs::create_dir_all(dir).map_err(io)?;
        write_bed(&format!("{dir}/a.bed"), &a).map_err(io)?;
        write_bed(&format!("{dir}/b.bed"), &b).map_err(io)?;
    }

    // The queries: A[c, i, x], one half-open interval per id.
    let qf = Format::parse("Dense(Dense(SparseInterval(Pattern(), coord=f64)))", None)?;
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
    let qa = Tensor::from_pieces(&qf, &[CHROMS, n, 0], &qp)?;
    let t0 = Instant::now();
    let gf = Format::parse(
        "Dense(SparseRunList(SparseList(Pattern()), coord=f64))",
        None,
    )?;
    let g = Tensor::from_pieces(&gf, &[CHROMS, 0, m], &segments(&b))?;
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;

    let runner = Runner::jit();
    let ops = [
        (
            "overlap",
            "o .= false\nfor c = _, i = _, x = _, j = _\n  o[i] |= A[c, i, x] && G[c, x, j]\nend",
            "Dense(Element(false))",
            vec![n],
        ),
        (
            "count",
            "o .= false\nfor c = _, i = _, x = _, j = _\n  o[i, j] |= A[c, i, x] && G[c, x, j]\nend",
            "Dense(SparseDict(Element(false)))",
            vec![n, m],
        ),
    ];
    for (name, text, out_format, shape) in ops {
        let prog = parse_program(text)?;
        let mut ts: BTreeMap<String, Tensor> = BTreeMap::new();
        ts.insert("A".into(), qa.clone());
        ts.insert("G".into(), g.clone());
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
        let mut times = vec![];
        for _ in 0..repeats {
            let t2 = Instant::now();
            runner.execute(&c, &mut ts)?;
            times.push(t2.elapsed().as_secs_f64() * 1e3);
        }
        let result = ts["o"]
            .pieces()
            .iter()
            .filter(|(_, v)| *v == Scalar::Bool(true))
            .count();
        println!(
            "{{\"op\": \"{name}\", \"n\": {n}, \"m\": {m}, \"mean_len\": {mean}, \"result\": {result}, \"median_ms\": {:.3}, \"compile_ms\": {compile_ms:.2}, \"index_build_ms\": {build_ms:.1}}}",
            median(times)
        );
    }
    Ok(())
}
