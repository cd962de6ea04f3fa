//! SpMV `y[i] += A[i, j] * x[j]` with A stored in each level format: on the real matrices of
//! `../shared/data/matrices` (checked entry by entry against a plain loop over the file's
//! entries and against SciPy's weighted checksum), and on synthetic banded, triangular and
//! permutation matrices whose structure suits the blocked and singular formats.

mod common;

use common::scipy::GOLDEN;
use common::{fmt, parse, run_jit};
use std::collections::BTreeMap;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::tensor::files::load_tensor;

/// Formats that hold any matrix.
const GENERAL: &[&str] = &[
    "Dense(SparseList(Element(0.0)))",
    "Dense(SparseList(Pattern()))",
    "Dense(SparseSliceList(Element(0.0)))",
    "Dense(SparseSliceList(Pattern(), coord=i32))",
    "SparseList(SparseList(Element(0.0)))",
    "SparseCOO{2}(Element(0.0))",
    "Dense(SparseBlockList(Element(0.0)))",
    "Dense(SparseBand(Element(0.0)))",
    "Dense(SparseByteMap(Element(0.0)))",
    "Dense(SparseDict(Element(0.0)))",
    "Dense(RunList(Element(0.0)))",
    "Dense(SparseRunList(Element(0.0)))",
];

const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend";

/// `(i, j, value)` with values as the format stores them (`Pattern` stores `true` = 1).
fn entries(a: &Tensor) -> Vec<(usize, usize, f64)> {
    let mut out = vec![];
    a.for_each_stored(&mut |c, v| out.push((c[0], c[1], v.as_f64())));
    out
}

fn spmv(a: &Tensor, x: &[f64]) -> Vec<f64> {
    let mut tensors = BTreeMap::new();
    tensors.insert("A".to_string(), a.clone());
    tensors.insert(
        "x".to_string(),
        Tensor::from_dense(
            &fmt("Dense(Element(0.0))"),
            &[x.len()],
            &Buffer::F64(x.to_vec().into()),
        )
        .unwrap(),
    );
    tensors.insert(
        "y".to_string(),
        Tensor::empty(&fmt("Dense(Element(0.0))"), &[a.shape[0]]).unwrap(),
    );
    run_jit(&parse(SPMV), &mut tensors).unwrap_or_else(|e| panic!("{}: {e}", a.format));
    let y = tensors.remove("y").unwrap().to_dense();
    (0..y.len()).map(|k| y.get(k).as_f64()).collect()
}

/// Check SpMV on `a` against a plain loop over its stored entries.
fn check(what: &str, a: &Tensor) -> Vec<f64> {
    let (m, n) = (a.shape[0], a.shape[1]);
    let x: Vec<f64> = (0..n).map(|j| (j % 7) as f64 - 3.0).collect();
    let mut want = vec![0.0; m];
    for (i, j, v) in entries(a) {
        want[i] += v * x[j];
    }
    let got = spmv(a, &x);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-9 * w.abs().max(1.0),
            "{what} as {}: y[{k}] = {g}, expected {w}",
            a.format
        );
    }
    got
}

#[test]
fn spmv_matches_scipy_in_every_general_format() {
    let Some(dir) = common::data_dir("spmv_matches_scipy_in_every_general_format") else {
        return;
    };
    for (name, golden, _) in GOLDEN {
        let path = dir.join(format!("matrices/{name}.mtx"));
        for f in GENERAL {
            let a = load_tensor(path.to_str().unwrap(), Some(f)).unwrap();
            let y = check(name, &a);
            if f.contains("Pattern") {
                continue; // SciPy's checksum is for the weighted matrix
            }
            let sum: f64 = y
                .iter()
                .enumerate()
                .map(|(i, v)| v * ((i % 5) as f64 + 1.0))
                .sum();
            assert!(
                (sum - golden[0]).abs() <= 1e-9 * golden[0].abs().max(1.0),
                "{name} as {f}: checksum {sum}, SciPy gives {}",
                golden[0]
            );
        }
    }
}

/// A square matrix from `(i, j)` pairs, with distinct small integer values.
fn synthetic(format: &str, n: usize, pairs: impl Iterator<Item = (usize, usize)>) -> Tensor {
    let (mut rows, mut cols, mut vals) = (vec![], vec![], vec![]);
    for (k, (i, j)) in pairs.enumerate() {
        rows.push(i as i64);
        cols.push(j as i64);
        vals.push((k % 9) as f64 + 1.0);
    }
    Tensor::from_coo(
        &fmt(format),
        &[n, n],
        &[rows, cols],
        &Buffer::F64(vals.into()),
        |a, _| a,
    )
    .unwrap()
}

fn banded(n: usize, half: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n).flat_map(move |i| (i.saturating_sub(half)..(i + half + 1).min(n)).map(move |j| (i, j)))
}

fn upper(n: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n).flat_map(move |i| (i..n).map(move |j| (i, j)))
}

fn reverse_permutation(n: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n).map(move |i| (i, n - 1 - i))
}

#[test]
fn spmv_on_structured_matrices() {
    for f in GENERAL {
        for half in [5, 30, 100] {
            check(
                &format!("banded {half}"),
                &synthetic(f, 2000, banded(2000, half)),
            );
        }
        check("upper triangle", &synthetic(f, 300, upper(300)));
        check(
            "permutation",
            &synthetic(f, 5000, reverse_permutation(5000)),
        );
    }
}
