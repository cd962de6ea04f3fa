//! Differential property tests writing matrices (`C[i, j]`), the slowest kernels to compile:
//! the cases of `differential.rs`, in a binary of their own to keep each test binary short.
//!
//! A long run of fresh cases: see `differential.rs`.

mod common;

use common::loops::{Output, jit_matches_evaluator};
use tessera::notation::ast::Program;

#[test]
fn matrix_reductions_match_evaluator() {
    jit_matches_evaluator(
        "matrix_reductions_match_evaluator",
        45,
        &[Output::Matrix],
        Program::clone,
    );
}

#[test]
fn matrix_overwrites_match_evaluator() {
    jit_matches_evaluator(
        "matrix_overwrites_match_evaluator",
        30,
        &[Output::MatrixOverwrite],
        Program::clone,
    );
}
