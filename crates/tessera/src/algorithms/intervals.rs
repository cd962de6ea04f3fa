//! Genomic interval operations as Tessera programs over continuous tensors (issue 14; the
//! continuous tensor abstraction's genomics case study, `bedtools intersect` definitions).
//!
//! A BED file becomes `B[chrom, id, x]`: `chrom` the chromosome's number, `id` the record's
//! 0-based data-line number, `x` the record's half-open span `[start, end)` on a real
//! dimension (zero-length records as bedtools compares them, see [`BedRecord::span`]). The
//! format is `Dense(SparseList(SparseRunList(Pattern(), coord=f64)))`: each chromosome lists
//! only its own records, so storage is proportional to the number of records (a `Dense` id
//! level would hold one empty fiber per chromosome and record).
//!
//! Two intervals overlap when their spans share a real point; right-open spans make touching
//! intervals (`[1, 5)` and `[5, 9)`) disjoint, as in bedtools.

use crate::error::{Error, Result};
use crate::io::bed::BedRecord;
use crate::levels::Format;
use crate::notation::parse::parse_program;
use crate::run::Runner;
use crate::runtime::Buffer;
use crate::tensor::Tensor;
use crate::tensor::pieces::{Piece, PieceCoord};
use crate::types::Scalar;
use std::collections::BTreeMap;

/// The storage format of an interval tensor `[chrom, id, x]`.
pub const INTERVAL_FORMAT: &str = crate::tensor::files::BED_FORMAT;

/// The format of the overlapping pairs `J[chrom, a_id, b_id]`: written in loop order, it
/// stores only the pairs (a `false` a kernel may store is not a pair).
const PAIR_FORMAT: &str = "Dense(SparseList(SparseList(Element(false))))";

/// Which `bedtools intersect` operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntervalOp {
    /// `intersect -u`: the A records that overlap some B record.
    Overlap,
    /// `intersect -c`: every A record with the number of B records it overlaps.
    Count,
    /// `intersect -wa -wb`: every overlapping (A record, B record) pair.
    Join,
}

/// The program each operation runs. `A` and `B` are the two interval tensors.
pub fn program_text(op: IntervalOp) -> &'static str {
    match op {
        // O[i]: A record i overlaps some B record of its chromosome.
        IntervalOp::Overlap => {
            "O .= false\nfor c = _, i = _, j = _, x = _\n  O[i] |= A[c, i, x] && B[c, j, x]\nend\n"
        }
        // A pair overlapping over a whole interval is one hit, not one per point: the pairs
        // are flagged first (an idempotent |= over x), then each flagged pair counts once.
        // (A flag per pair in a scalar inside the j loop would make that loop dense: its
        // count statement reads no B, so every j of the dimension would be visited.)
        IntervalOp::Count => {
            "J .= false\nfor c = _, i = _, j = _, x = _\n  J[c, i, j] |= A[c, i, x] && B[c, j, x]\nend\nK .= 0\nfor c = _, i = _, j = _\n  if J[c, i, j]\n    K[i] += 1\n  end\nend\n"
        }
        // J[c, i, j] is written in loop order (c, then i within c, then j), so a sparse
        // output keeps only the overlapping pairs.
        IntervalOp::Join => {
            "J .= false\nfor c = _, i = _, j = _, x = _\n  J[c, i, j] |= A[c, i, x] && B[c, j, x]\nend\n"
        }
    }
}

/// What an operation returns, indexed by A's record number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IntervalResult {
    /// Per A record: overlaps some B record.
    Overlap(Vec<bool>),
    /// Per A record: the number of B records it overlaps.
    Count(Vec<i64>),
    /// The overlapping `(A record, B record)` pairs, sorted.
    Join(Vec<(usize, usize)>),
}

/// The interval tensor `[chrom, id, x]` of `records` (chromosome numbers below `n_chroms`).
pub fn interval_tensor(records: &[BedRecord], n_chroms: usize) -> Result<Tensor> {
    crate::tensor::files::bed_tensor(records, n_chroms, &Format::parse(INTERVAL_FORMAT, None)?)
}

fn fmt(s: &str) -> Result<Format> {
    Format::parse(s, None)
}

/// Run `op` on A and B (read with one chromosome table of `n_chroms` names) with `runner`.
pub fn run(
    runner: &Runner,
    op: IntervalOp,
    a: &[BedRecord],
    b: &[BedRecord],
    n_chroms: usize,
) -> Result<IntervalResult> {
    let (n, m) = (a.len(), b.len());
    let mut ts = BTreeMap::new();
    ts.insert("A".to_string(), interval_tensor(a, n_chroms)?);
    ts.insert("B".to_string(), interval_tensor(b, n_chroms)?);
    let out = match op {
        IntervalOp::Overlap => {
            ts.insert(
                "O".into(),
                Tensor::empty(&fmt("Dense(Element(false))")?, &[n])?,
            );
            "O"
        }
        IntervalOp::Count => {
            ts.insert("K".into(), Tensor::empty(&fmt("Dense(Element(0))")?, &[n])?);
            ts.insert(
                "J".into(),
                Tensor::empty(&fmt(PAIR_FORMAT)?, &[n_chroms, n, m])?,
            );
            "K"
        }
        IntervalOp::Join => {
            ts.insert(
                "J".into(),
                Tensor::empty(&fmt(PAIR_FORMAT)?, &[n_chroms, n, m])?,
            );
            "J"
        }
    };
    finish(runner, program_text(op), op, &mut ts, out, n, 1)
}

/// Compile and run `text` on `ts`, then read `op`'s result from `out` (its pair coordinates,
/// for a join, at dimensions `pair_at` and `pair_at + 1`).
fn finish(
    runner: &Runner,
    text: &str,
    op: IntervalOp,
    ts: &mut BTreeMap<String, Tensor>,
    out: &str,
    n: usize,
    pair_at: usize,
) -> Result<IntervalResult> {
    let program = parse_program(text)?;
    let formats = ts
        .iter()
        .map(|(k, t)| (k.clone(), t.format.clone()))
        .collect();
    let compiled = runner.compile(&program, &formats)?;
    runner.execute(&compiled, ts)?;
    let t = &ts[out];
    let int = |c: &PieceCoord| match c {
        PieceCoord::Int(i) => Ok(*i as usize),
        PieceCoord::Real(..) => Err(Error::Backend(format!("{out}: a real coordinate"))),
    };
    Ok(match op {
        IntervalOp::Overlap => {
            let mut o = vec![false; n];
            for (c, v) in t.pieces() {
                o[int(&c[0])?] = v.as_bool();
            }
            IntervalResult::Overlap(o)
        }
        IntervalOp::Count => {
            let mut k = vec![0i64; n];
            for (c, v) in t.pieces() {
                k[int(&c[0])?] = v.as_i64();
            }
            IntervalResult::Count(k)
        }
        IntervalOp::Join => {
            let mut pairs = vec![];
            for (c, v) in t.pieces() {
                if v == Scalar::Bool(true) {
                    pairs.push((int(&c[pair_at])?, int(&c[pair_at + 1])?));
                }
            }
            pairs.sort_unstable();
            IntervalResult::Join(pairs)
        }
    })
}

/// The grid programs (the paper's 1-D grid index, §8.4, on integer bins): `Ab[i, g]` lists the
/// bins record i of A touches, `G[g, j]` the records of B touching bin g, and only the pairs
/// sharing a bin are compared. Bins are numbered across chromosomes, so a shared bin means a
/// shared chromosome. A pair sharing several bins is met once per bin: `|=` makes that one
/// hit, and the pair flags `J` (a hash level, which takes writes in any order) one pair.
pub fn grid_program_text(op: IntervalOp) -> &'static str {
    match op {
        IntervalOp::Overlap => {
            "O .= false\nfor i = _, g = _, j = _, x = _\n  O[i] |= Ab[i, g] && G[g, j] && A[i, x] && B[j, x]\nend\n"
        }
        IntervalOp::Count => {
            "J .= false\nfor i = _, g = _, j = _, x = _\n  J[i, j] |= Ab[i, g] && G[g, j] && A[i, x] && B[j, x]\nend\nK .= 0\nfor i = _, j = _\n  if J[i, j]\n    K[i] += 1\n  end\nend\n"
        }
        IntervalOp::Join => {
            "J .= false\nfor i = _, g = _, j = _, x = _\n  J[i, j] |= Ab[i, g] && G[g, j] && A[i, x] && B[j, x]\nend\n"
        }
    }
}

/// The bin width and the first global bin of each chromosome for a pair of files: the mean
/// span of B (so a B record touches about two bins), widened until there are at most
/// `4 (N + M) + 1024` bins, which keeps the grid's size proportional to the records.
fn bins(a: &[BedRecord], b: &[BedRecord], n_chroms: usize) -> (i64, Vec<i64>) {
    let mut top = vec![0i64; n_chroms];
    for r in a.iter().chain(b) {
        // Spans start at -1 at the least (a zero-length record at 0); +1 makes them >= 0.
        top[r.chrom] = top[r.chrom].max(r.span().1 + 1);
    }
    let total: i64 = top.iter().sum();
    let mean = if b.is_empty() {
        1
    } else {
        b.iter().map(|r| r.span().1 - r.span().0).sum::<i64>() / b.len() as i64
    };
    let most = 4 * (a.len() + b.len()) as i64 + 1024;
    let width = mean.max(1).max((total + most - 1) / most);
    let mut first = Vec::with_capacity(n_chroms + 1);
    let mut next = 0;
    for t in top {
        first.push(next);
        next += t / width + 1;
    }
    first.push(next);
    (width, first)
}

/// The global bins `[lo, hi]` a record touches.
fn record_bins(r: &BedRecord, width: i64, first: &[i64]) -> (i64, i64) {
    let (lo, hi) = r.span();
    (
        first[r.chrom] + (lo + 1) / width,
        first[r.chrom] + hi / width,
    )
}

/// `[id, x]`: each record's span, without the chromosome (the bins hold it).
fn span_tensor(records: &[BedRecord]) -> Result<Tensor> {
    let pieces: Vec<Piece> = records
        .iter()
        .enumerate()
        .map(|(id, r)| {
            let (lo, hi) = r.span();
            (
                vec![
                    PieceCoord::Int(id as i64),
                    PieceCoord::right_open(lo as f64, hi as f64),
                ],
                Scalar::Bool(true),
            )
        })
        .collect();
    Tensor::from_pieces(
        &fmt("Dense(SparseRunList(Pattern(), coord=f64))")?,
        &[records.len(), 0],
        &pieces,
    )
}

/// A pattern matrix of `shape` with the given entries (integer coordinates: the COO
/// builder, which sorts columns of plain integers, not the general piece builder).
fn pattern(shape: [usize; 2], entries: Vec<(i64, i64)>) -> Result<Tensor> {
    let (rows, cols): (Vec<i64>, Vec<i64>) = entries.into_iter().unzip();
    let values = Buffer::Bool(vec![true; rows.len()].into());
    Tensor::from_coo(
        &fmt("Dense(SparseList(Pattern()))")?,
        &shape,
        &[rows, cols],
        &values,
        |a, _| a,
    )
}

/// Run `op` with the grid programs ([`grid_program_text`]): the same results as [`run`],
/// comparing only records that share a bin.
pub fn run_grid(
    runner: &Runner,
    op: IntervalOp,
    a: &[BedRecord],
    b: &[BedRecord],
    n_chroms: usize,
) -> Result<IntervalResult> {
    let (n, m) = (a.len(), b.len());
    let (width, first) = bins(a, b, n_chroms);
    let n_bins = *first.last().unwrap_or(&0) as usize;
    let mut ab = vec![];
    for (i, r) in a.iter().enumerate() {
        let (lo, hi) = record_bins(r, width, &first);
        ab.extend((lo..=hi).map(|g| (i as i64, g)));
    }
    let mut grid = vec![];
    for (j, r) in b.iter().enumerate() {
        let (lo, hi) = record_bins(r, width, &first);
        grid.extend((lo..=hi).map(|g| (g, j as i64)));
    }
    let mut ts = BTreeMap::new();
    ts.insert("A".to_string(), span_tensor(a)?);
    ts.insert("B".to_string(), span_tensor(b)?);
    ts.insert("Ab".to_string(), pattern([n, n_bins], ab)?);
    ts.insert("G".to_string(), pattern([n_bins, m], grid)?);
    let pairs = "Dense(SparseDict(Element(false)))";
    let out = match op {
        IntervalOp::Overlap => {
            ts.insert(
                "O".into(),
                Tensor::empty(&fmt("Dense(Element(false))")?, &[n])?,
            );
            "O"
        }
        IntervalOp::Count => {
            ts.insert("K".into(), Tensor::empty(&fmt("Dense(Element(0))")?, &[n])?);
            ts.insert("J".into(), Tensor::empty(&fmt(pairs)?, &[n, m])?);
            "K"
        }
        IntervalOp::Join => {
            ts.insert("J".into(), Tensor::empty(&fmt(pairs)?, &[n, m])?);
            "J"
        }
    };
    finish(runner, grid_program_text(op), op, &mut ts, out, n, 0)
}
