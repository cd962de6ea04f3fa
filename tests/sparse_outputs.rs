//! Sparse outputs against the reference evaluator: fixed computations written into every
//! sparse output format (in concordant order, and in any order for the formats that take
//! it), on the JIT and a sample on the C backend. Operand formats and data are drawn by
//! proptest strategies, so a failure shrinks to small operands and prints them. SparseInterval
//! outputs are in `sparse_interval.rs`.
//!
//! CI runs a fixed set of cases per program. A long run of fresh cases (the seed is printed;
//! `PROPTEST_RNG_SEED=seed` replays it):
//! `PROPTEST_CASES=500 cargo test --release --test sparse_outputs -- --nocapture`

mod common;

use common::cases::{Case, Outcome, c_matches_evaluator, compare, run_cases};
use common::random::{Data, all_matrix_formats, data_s};
use common::{fmt, parse, run_jit};
use proptest::prelude::*;
use proptest::sample::select;
use std::collections::BTreeMap;
use tessera::tensor::Tensor;

/// A program writing `C`, the format of `C`, and the format `B` must have if not any (outputs
/// that hold one entry per fiber get an operand that has one).
type SparseOutput = (&'static str, &'static str, Option<&'static str>);

/// Outputs written in concordant order.
const ORDERED: &[SparseOutput] = &[
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "Dense(SparseList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] + B[i, j]\nend\n",
        "Dense(SparseList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += A[i, j] * B[i, j]\nend\n",
        "SparseList(SparseList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = max(A[i, j], B[i, j])\nend\n",
        "Dense(SparseList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "SparseCOO{2}(Element(0.0))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += A[i, j] + B[i, j]\nend\n",
        "Dense(SparseCOO{1}(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "Dense(SparseBand(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += A[i, j] + B[i, j]\nend\n",
        "SparseBand(SparseBand(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = max(A[i, j], B[i, j])\nend\n",
        "SparseBlockList(SparseBand(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "Dense(SparseBlockList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += A[i, j] + B[i, j]\nend\n",
        "SparseBand(SparseBlockList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "Dense(SparsePoint(Element(0.0)))",
        Some("Dense(SparsePoint(Element(0.0)))"),
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += B[i, j]\nend\n",
        "SparsePoint(SparsePoint(Element(0.0)))",
        Some("SparsePoint(SparsePoint(Element(0.0)))"),
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "SparsePoint(SparseBlockList(Element(0.0)))",
        Some("SparsePoint(Dense(Element(0.0)))"),
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "SparseBlockList(SparsePoint(Element(0.0)))",
        Some("Dense(SparsePoint(Element(0.0)))"),
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += A[i, j] * B[i, j]\nend\n",
        "SparseList(SparseBand(Element(0.0)))",
        None,
    ),
];

/// Formats that take writes in any order (also from transposed loops), run-length outputs, and
/// writes that may not happen (sparse parents retry positions their child opened).
const ANY_ORDER_AND_RUNS: &[SparseOutput] = &[
    // Formats that take writes in any order: also transposed loops.
    (
        "C .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "Dense(SparseByteMap(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor j = _, i = _\n  C[i, j] += A[i, j] + B[i, j]\nend\n",
        "SparseByteMap(SparseByteMap(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = max(A[i, j], B[i, j])\nend\n",
        "SparseByteMap(SparseList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor j = _, i = _\n  C[i, j] += A[i, j] * B[i, j]\nend\n",
        "SparseDict(SparseDict(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j] + B[i, j]\nend\n",
        "Dense(SparseDict(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = max(A[i, j], B[i, j])\nend\n",
        "SparseDict(SparseByteMap(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] + B[i, j]\nend\n",
        "RunList(RunList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] * B[i, j]\nend\n",
        "Dense(RunList(Element(0.0), merge=false))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = max(A[i, j], B[i, j])\nend\n",
        "SparseRunList(SparseRunList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] += A[i, j] * 2\nend\n",
        "SparseList(RunList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j] - B[i, j]\nend\n",
        "RunList(SparseList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j]\nend\n",
        "SparseRunList(Dense(Element(0.0)), merge=false)",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  if A[i, j] > 1\n    C[i, j] = B[i, j] + 1\n  end\nend\n",
        "RunList(RunList(Element(0.0)))",
        None,
    ),
    // Writes that may not happen: sparse parents retry positions their child opened.
    (
        "C .= 0\nfor i = _, j = _\n  if A[i, j] > 1\n    C[i, j] = B[i, j] + 1\n  end\nend\n",
        "SparseList(RunList(Element(0.0)))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  if A[i, j] > 1\n    C[i, j] = B[i, j] + 1\n  end\nend\n",
        "SparseRunList(RunList(Element(0.0), merge=false))",
        None,
    ),
    (
        "C .= 0\nfor i = _, j = _\n  if B[i, j] != 2\n    C[i, j] = A[i, j]\n  end\nend\n",
        "RunList(SparseList(Pattern()))",
        None,
    ),
];

/// Cases per program on CI.
const CASES: u32 = 40;

/// The case of `program` on operands `A` and `B` of any formats (`B`'s fixed if the program
/// says so) and extents below 7.
fn sparse_output_case_s((text, out, b_format): SparseOutput) -> impl Strategy<Value = Case> {
    let operand = || (select(all_matrix_formats()), data_s(36));
    // The extents come before the data: shrinking them crops the data, which works while it
    // is dense.
    (0..7usize, 0..7usize, operand(), operand()).prop_map(
        move |(ni, nj, (af, ad), (bf, bd)): (usize, usize, (&str, Data), (&str, Data))| {
            let bf = b_format.unwrap_or(bf);
            let tensors = BTreeMap::from([
                ("A".to_string(), ad.tensor(&fmt(af), &[ni, nj])),
                ("B".to_string(), bd.tensor(&fmt(bf), &[ni, nj])),
                (
                    "C".to_string(),
                    Tensor::empty(&fmt(out), &[ni, nj]).unwrap(),
                ),
            ]);
            Case {
                program: parse(text),
                tensors,
            }
        },
    )
}

/// Every program here must run and agree: neither side may refuse it.
fn agreed(outcome: Outcome) -> Result<(), TestCaseError> {
    match outcome {
        Outcome::Agreed => Ok(()),
        other => Err(TestCaseError::fail(format!("{other:?}"))),
    }
}

/// Every program of `programs` on `CASES` cases: compiled, it must give the evaluator's
/// values in a valid `C`.
fn sparse_outputs_match_evaluator(name: &str, programs: &[SparseOutput]) {
    for (k, &p) in programs.iter().enumerate() {
        run_cases(
            &format!("{name} {k}"),
            CASES,
            sparse_output_case_s(p),
            |case| agreed(compare(&case, &run_jit)?),
        );
    }
}

#[test]
fn ordered_sparse_outputs_match_evaluator() {
    sparse_outputs_match_evaluator("ordered_sparse_outputs_match_evaluator", ORDERED);
}

#[test]
fn any_order_and_run_length_outputs_match_evaluator() {
    sparse_outputs_match_evaluator(
        "any_order_and_run_length_outputs_match_evaluator",
        ANY_ORDER_AND_RUNS,
    );
}

/// A sample of every program through the C backend (each kernel is a compiler run).
#[test]
fn sparse_outputs_match_evaluator_on_c() {
    let programs: Vec<SparseOutput> = [ORDERED, ANY_ORDER_AND_RUNS].concat();
    c_matches_evaluator(
        "sparse_outputs_match_evaluator_on_c",
        20,
        select(programs).prop_flat_map(sparse_output_case_s),
        agreed,
    );
}
