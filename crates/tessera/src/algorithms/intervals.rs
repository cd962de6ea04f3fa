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
use crate::tensor::Tensor;
use crate::tensor::pieces::{Piece, PieceCoord};
use crate::types::Scalar;
use std::collections::BTreeMap;

/// The storage format of an interval tensor `[chrom, id, x]`.
pub const INTERVAL_FORMAT: &str = "Dense(SparseList(SparseRunList(Pattern(), coord=f64)))";

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
    let pieces: Vec<Piece> = records
        .iter()
        .enumerate()
        .map(|(id, r)| {
            let (lo, hi) = r.span();
            (
                vec![
                    PieceCoord::Int(r.chrom as i64),
                    PieceCoord::Int(id as i64),
                    PieceCoord::right_open(lo as f64, hi as f64),
                ],
                Scalar::Bool(true),
            )
        })
        .collect();
    Tensor::from_pieces(
        &Format::parse(INTERVAL_FORMAT, None)?,
        &[n_chroms, records.len(), 0],
        &pieces,
    )
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
    let program = parse_program(program_text(op))?;
    let formats = ts
        .iter()
        .map(|(k, t)| (k.clone(), t.format.clone()))
        .collect();
    let compiled = runner.compile(&program, &formats)?;
    runner.execute(&compiled, &mut ts)?;
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
                    pairs.push((int(&c[1])?, int(&c[2])?));
                }
            }
            pairs.sort_unstable();
            IntervalResult::Join(pairs)
        }
    })
}
