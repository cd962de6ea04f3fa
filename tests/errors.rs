//! Error messages name the tensor, the loop and the place, and say what to change: lifecycle
//! errors (a tensor read and written inside one loop) and writes a format cannot take in the
//! loop order (out-of-order writes into SparseList-like levels).

mod common;

use common::{fmt, parse, run_eval};
use std::collections::BTreeMap;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

fn vector(format: &str, values: &[f64]) -> Tensor {
    Tensor::from_dense(&fmt(format), &[values.len()], &Buffer::F64(values.to_vec())).unwrap()
}

fn matrix(format: &str, rows: usize, values: &[f64]) -> Tensor {
    let cols = values.len() / rows;
    Tensor::from_dense(&fmt(format), &[rows, cols], &Buffer::F64(values.to_vec())).unwrap()
}

/// The compiled run's error message (the run must fail).
fn jit_error(text: &str, tensors: &[(&str, Tensor)]) -> String {
    let mut ts: BTreeMap<String, Tensor> = tensors
        .iter()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .collect();
    match common::run_jit(&parse(text), &mut ts) {
        Ok(()) => panic!("expected an error:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "`{p}` missing from: {msg}");
    }
}

#[test]
fn read_and_written_in_one_loop() {
    let x = vector("Dense(Element(0.0))", &[1.0, 2.0, 3.0]);
    let text = "x .= 0\nfor i = _\n  x[i] = x[i] + 1\nend\n";
    let msg = jit_error(text, &[("x", x.clone())]);
    assert_mentions(
        &msg,
        &[
            "2:1",
            "`x`",
            "loop over `i`",
            "read at 3:10",
            "written at 3:3",
            "Hint",
            "x[i] +=",
            "x .= 0",
        ],
    );
    // The evaluator refuses the same program.
    let ts = BTreeMap::from([("x".to_string(), x)]);
    assert!(run_eval(&parse(text), &ts).is_err());
}

#[test]
fn read_and_written_in_nested_loops_names_the_outer_loop() {
    let a = matrix("Dense(SparseList(Element(0.0)))", 2, &[1.0, 0.0, 2.0, 3.0]);
    let s = Tensor::empty(&fmt("Element(0.0)"), &[]).unwrap();
    let text = "s .= 0\nfor i = _, j = _\n  s[] += A[i, j] * s[]\nend\n";
    let msg = jit_error(text, &[("A", a), ("s", s)]);
    assert_mentions(
        &msg,
        &[
            "2:1",
            "`s`",
            "loop over `i`",
            "read at 3:20",
            "written at 3:3",
        ],
    );
}

#[test]
fn read_and_written_under_if() {
    let y = vector("Dense(Element(0.0))", &[1.0, 2.0]);
    let text = "y .= 0\nfor i = _\n  if i > 0\n    y[i] = y[i - 1]\n  end\nend\n";
    let msg = jit_error(text, &[("y", y)]);
    assert_mentions(&msg, &["2:1", "`y`", "loop over `i`", "written at 4:5"]);
}

/// `for j, i: C[i, j] = ...` into CSR: the SparseList rows are opened once per `j`.
#[test]
fn transposed_write_into_csr_names_the_tensor_and_loops() {
    let a = matrix("Dense(Dense(Element(0.0)))", 2, &[1.0, 2.0, 3.0, 4.0]);
    let c = Tensor::empty(&fmt("Dense(SparseList(Element(0.0)))"), &[2, 2]).unwrap();
    let text = "C .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n";
    let msg = jit_error(text, &[("A", a), ("C", c)]);
    assert_mentions(
        &msg,
        &[
            "`C`",
            "SparseList",
            "C[i, j]",
            "3:3",
            "`j` (2:1)",
            "`i` (2:12)",
            "for i = _, j = _",
            "SparseByteMap",
            "SparseDict",
        ],
    );
}

/// A scatter through a permutation into a SparseList vector writes coordinates out of order.
#[test]
fn out_of_order_scatter_into_sparse_list() {
    let x = vector("Dense(Element(0.0))", &[1.0, 2.0, 3.0]);
    let p =
        Tensor::from_dense(&fmt("Dense(Element(0))"), &[3], &Buffer::I64(vec![2, 0, 1])).unwrap();
    let y = Tensor::empty(&fmt("SparseList(Element(0.0))"), &[3]).unwrap();
    let text = "y .= 0\nfor i = _\n  y[P[i]] = x[i]\nend\n";
    let msg = jit_error(text, &[("x", x), ("P", p), ("y", y)]);
    assert_mentions(
        &msg,
        &[
            "`y`",
            "y[P[i]]",
            "3:3",
            "`i` (2:1)",
            "SparseByteMap",
            "Dense",
        ],
    );
}

/// The same writes into formats that take them in any order work.
#[test]
fn random_writes_formats_take_the_same_writes() {
    for out in [
        "Dense(SparseByteMap(Element(0.0)))",
        "Dense(SparseDict(Element(0.0)))",
        "SparseCOO{2}(Element(0.0))",
        "Dense(Dense(Element(0.0)))",
    ] {
        let a = matrix("Dense(Dense(Element(0.0)))", 2, &[1.0, 2.0, 3.0, 4.0]);
        let c = Tensor::empty(&fmt(out), &[2, 2]).unwrap();
        let mut ts = BTreeMap::from([("A".to_string(), a), ("C".to_string(), c)]);
        let p = parse("C .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n");
        common::run_jit(&p, &mut ts).unwrap_or_else(|e| panic!("{out}: {e}"));
        assert_eq!(ts["C"].to_dense(), ts["A"].to_dense(), "{out}");
    }
}
