//! Differential property tests: random programs × random formats × random data (the
//! strategies of `common::loops`); the JIT-compiled kernel must give exactly what the dense
//! reference evaluator gives. A failure shrinks to a small program over small tensors and
//! prints its text, formats and values. Matrix outputs, the slowest to compile, are in
//! `differential_matrix.rs`; the C backend's sample in `c_backend.rs`.
//!
//! CI runs a fixed set of cases per test (`CASES`). A long run of fresh cases, kernels of
//! any size included (the seed is printed; `PROPTEST_RNG_SEED=seed` replays it):
//! `PROPTEST_CASES=2000 cargo test --release --test differential --test differential_matrix -- --nocapture`

mod common;

use common::cases::{Case, Outcome, compare};
use common::loops::{ALL_OUTPUTS, Output, jit_matches_evaluator, with_views_and_user_reducers};
use common::run_jit;
use tessera::notation::ast::Program;

/// Cases per test on CI.
const CASES: u32 = 75;

#[test]
fn scalar_outputs_match_evaluator() {
    jit_matches_evaluator(
        "scalar_outputs_match_evaluator",
        CASES,
        &[Output::Scalar],
        Program::clone,
    );
}

#[test]
fn row_outputs_match_evaluator() {
    jit_matches_evaluator(
        "row_outputs_match_evaluator",
        CASES,
        &[Output::Rows],
        Program::clone,
    );
}

#[test]
fn column_outputs_match_evaluator() {
    jit_matches_evaluator(
        "column_outputs_match_evaluator",
        CASES,
        &[Output::Cols],
        Program::clone,
    );
}

/// The same programs through views and user reducers that mean the same thing.
#[test]
fn views_and_user_reducers_match_evaluator() {
    jit_matches_evaluator(
        "views_and_user_reducers_match_evaluator",
        50,
        ALL_OUTPUTS,
        with_views_and_user_reducers,
    );
}

/// Cases that once failed, kept so the bugs they found stay fixed.
#[test]
fn past_failures_stay_fixed() {
    // A galloping walk moved its jumper past the chunk, and the advance test then read the
    // entry after the fiber's last one.
    let case = Case::from_text(
        "y .= 0
for i = _, j = _
  y[i] <<max>>= ifelse(j <= A[i, gallop(j)], A[i, follow(j)] * A[i, follow(j)], max(v[follow(j)], u[i]))
end
",
        &[
            (
                "A",
                "SparseBand(SparsePoint(Element(0.0)))",
                &[4, 4],
                &[
                    2.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 9.0, 0.0, 0.0, 0.0,
                ],
            ),
            ("u", "SparseList(Element(2.0))", &[4], &[2.0, 2.0, 2.0, 4.0]),
            ("v", "SparseBand(Element(0.0))", &[4], &[5.0, 0.0, 0.0, 7.0]),
            ("y", "SparseByteMap(Element(0.0))", &[4], &[0.0; 4]),
        ],
    );
    let outcome = compare(&case, &run_jit).unwrap_or_else(|e| panic!("{e}{case:?}"));
    assert_eq!(outcome, Outcome::Agreed);
}
