//! Views: windows `A[(lo:hi)(i)]` and swizzles `swizzle(A, p...)[...]`, compiled on several
//! formats against the reference evaluator, and their errors.

mod common;

use common::{agree, fmt, parse, run_eval, run_jit};
use std::collections::BTreeMap;
use tessera::error::Error;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

const MATRIX_FORMATS: &[&str] = &[
    "Dense(Dense(Element(0.0)))",
    "Dense(SparseList(Element(0.0)))",
    "SparseList(SparseList(Element(0.0)))",
    "SparseCOO{2}(Element(0.0))",
    "Dense(RunList(Element(0.0)))",
];

const VECTOR_FORMATS: &[&str] = &[
    "Dense(Element(0.0))",
    "SparseList(Element(0.0))",
    "RunList(Element(0.0))",
];

fn tensor(format: &str, shape: &[usize], values: Vec<f64>) -> Tensor {
    Tensor::from_dense(&fmt(format), shape, &Buffer::F64(values.into())).unwrap()
}

fn zeros(format: &str, shape: &[usize]) -> Tensor {
    Tensor::empty(&fmt(format), shape).unwrap()
}

fn tensors(list: Vec<(&str, Tensor)>) -> BTreeMap<String, Tensor> {
    list.into_iter().map(|(n, t)| (n.to_string(), t)).collect()
}

/// Both the compiled kernel and the evaluator fail; returns both messages.
fn both_fail(program: &str, tensors: BTreeMap<String, Tensor>) -> (Error, Error) {
    let p = parse(program);
    let evaluated = run_eval(&p, &tensors).expect_err("the evaluator accepts it");
    let mut got = tensors;
    let compiled = run_jit(&p, &mut got).expect_err("the compiler accepts it");
    (compiled, evaluated)
}

/// 0 1 0 2 0 0 3 0 0 4 0 5, a vector with stored entries, gaps and a run.
fn vector_values() -> Vec<f64> {
    vec![0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 3.0, 3.0, 3.0, 4.0, 0.0, 5.0]
}

/// A 4 × 6 matrix with empty rows and columns.
fn matrix_values() -> Vec<f64> {
    vec![
        1.0, 0.0, 0.0, 2.0, 0.0, 0.0, //
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, //
        0.0, 3.0, 4.0, 4.0, 0.0, 5.0, //
        6.0, 0.0, 0.0, 0.0, 7.0, 0.0,
    ]
}

#[test]
fn vector_windows_copy_and_sum() {
    let x = vector_values();
    let n = x.len();
    let copy = "y .= 0\nfor i = _\n  y[i] = x[(2:7)(i)]\nend\n";
    let sum = "s .= 0\nfor i = _\n  s[] += x[(lo:hi)(i)] * 10 + 1\nend\n";
    for f in VECTOR_FORMATS {
        let got = agree(
            copy,
            tensors(vec![
                ("x", tensor(f, &[n], x.clone())),
                ("y", zeros("Dense(Element(0.0))", &[6])),
            ]),
        );
        assert_eq!(
            got["y"].to_dense(),
            Buffer::F64((x[2..8].to_vec()).into()),
            "{f}"
        );
        // Windows at both edges, in the middle, of one coordinate and empty ones (which may
        // sit just past the end).
        for (lo, hi) in [
            ("0", "3"),
            ("size(x, 0) - 4", "size(x, 0) - 1"),
            ("0", "size(x, 0) - 1"),
            ("5", "5"),
            ("4", "3"),
            ("size(x, 0)", "size(x, 0) - 1"),
        ] {
            let p = sum.replace("lo", lo).replace("hi", hi);
            let got = agree(
                &p,
                tensors(vec![
                    ("x", tensor(f, &[n], x.clone())),
                    ("s", zeros("Scalar(0.0)", &[])),
                ]),
            );
            let (l, h) = (bound(lo, n), bound(hi, n));
            let want = (l..=h).fold(0.0, |s, k| s + x[k as usize] * 10.0 + 1.0);
            assert_eq!(
                got["s"].get(&[]).unwrap(),
                Scalar::F64(want),
                "{f} {lo}:{hi}"
            );
        }
    }
}

#[test]
fn windows_known_only_at_run_time_and_written_windows() {
    let x = vector_values();
    let n = x.len();
    // The bounds come from a `let` (a value the compiler cannot see): the loop is sized by
    // `hi - lo` when it starts.
    let prog = "s .= 0\nfor j = 0:2\n  let lo = j * 3, hi = j * 3 + j\n    for i = _\n      s[] += x[(lo:hi)(i)] * (j + 1)\n    end\n  end\nend\n";
    // Writes through a window land at the window's offset.
    let write = "y .= 0\nfor i = _\n  y[(3:8)(i)] = x[(4:9)(i)] + 1\nend\n";
    for f in VECTOR_FORMATS {
        let got = agree(
            prog,
            tensors(vec![
                ("x", tensor(f, &[n], x.clone())),
                ("s", zeros("Scalar(0.0)", &[])),
            ]),
        );
        // j = 0: x[0]; j = 1: x[3..=4]; j = 2: x[6..=8].
        let want = x[0] + 2.0 * (x[3] + x[4]) + 3.0 * (x[6] + x[7] + x[8]);
        assert_eq!(got["s"].get(&[]).unwrap(), Scalar::F64(want), "{f}");
        for yf in ["Dense(Element(0.0))", "SparseList(Element(0.0))"] {
            let got = agree(
                write,
                tensors(vec![
                    ("x", tensor(f, &[n], x.clone())),
                    ("y", zeros(yf, &[10])),
                ]),
            );
            let mut want = vec![0.0; 10];
            for i in 0..6 {
                want[3 + i] = x[4 + i] + 1.0;
            }
            assert_eq!(got["y"].to_dense(), Buffer::F64(want.into()), "{f} {yf}");
        }
    }
}

/// The value of a window bound of `vector_windows_copy_and_sum`.
fn bound(text: &str, n: usize) -> i64 {
    let n = n as i64;
    match text {
        "size(x, 0)" => n,
        "size(x, 0) - 1" => n - 1,
        "size(x, 0) - 4" => n - 4,
        t => t.parse().unwrap(),
    }
}

#[test]
fn matrix_windows_on_every_format() {
    let a = matrix_values();
    let copy = "B .= 0\nfor i = _, j = _\n  B[i, j] = A[(1:3)(i), (2:5)(j)]\nend\n";
    let rows = "y .= 0\nfor i = _, j = _\n  y[i] += A[(2:3)(i), (0:size(A, 1) - 1)(j)]\nend\n";
    for f in MATRIX_FORMATS {
        let got = agree(
            copy,
            tensors(vec![
                ("A", tensor(f, &[4, 6], a.clone())),
                ("B", zeros("Dense(Dense(Element(0.0)))", &[3, 4])),
            ]),
        );
        let want: Vec<f64> = (1..=3)
            .flat_map(|i| (2..=5).map(move |j| (i, j)))
            .map(|(i, j)| a[i * 6 + j])
            .collect();
        assert_eq!(got["B"].to_dense(), Buffer::F64(want.into()), "{f}");
        let got = agree(
            rows,
            tensors(vec![
                ("A", tensor(f, &[4, 6], a.clone())),
                ("y", zeros("Dense(Element(0.0))", &[2])),
            ]),
        );
        assert_eq!(
            got["y"].to_dense(),
            Buffer::F64(vec![16.0, 13.0].into()),
            "{f}"
        );
    }
}

#[test]
fn sliding_windows_convolve() {
    // y[j] = Σ_i x[j + i] w[i]: the window's bounds use the outer index, its size is 3.
    let x = vector_values();
    let n = x.len();
    let prog = "y .= 0\nfor j = _, i = _\n  y[j] += x[(j:j + 2)(i)] * w[i]\nend\n";
    let w = vec![1.0, -2.0, 0.5];
    for f in VECTOR_FORMATS {
        let got = agree(
            prog,
            tensors(vec![
                ("x", tensor(f, &[n], x.clone())),
                ("w", tensor("Dense(Element(0.0))", &[3], w.clone())),
                ("y", zeros("Dense(Element(0.0))", &[n - 2])),
            ]),
        );
        let want: Vec<f64> = (0..n - 2)
            .map(|j| (0..3).map(|i| x[j + i] * w[i]).sum())
            .collect();
        assert_eq!(got["y"].to_dense(), Buffer::F64(want.into()), "{f}");
    }
    // The window alone sizes the inner loop.
    let prog = "y .= 0\nfor j = _, i = _\n  y[j] <<max>>= x[(j:j + 2)(i)]\nend\n";
    let got = agree(
        prog,
        tensors(vec![
            ("x", tensor("SparseList(Element(0.0))", &[n], x.clone())),
            ("y", zeros("Dense(Element(0.0))", &[n - 2])),
        ]),
    );
    let want: Vec<f64> = (0..n - 2)
        .map(|j| x[j..j + 3].iter().copied().fold(0.0, f64::max))
        .collect();
    assert_eq!(got["y"].to_dense(), Buffer::F64(want.into()));
}

#[test]
fn swizzled_spmv_is_the_transposed_spmv() {
    let a = matrix_values();
    let x: Vec<f64> = vec![1.0, -1.0, 2.0, 0.5];
    let swizzled = "y .= 0\nfor i = _, j = _\n  y[i] += swizzle(A, 1, 0)[i, j] * x[j]\nend\n";
    let transposed = "y .= 0\nfor i = _, j = _\n  y[i] += A[j, i] * x[j]\nend\n";
    let want: Vec<f64> = (0..6)
        .map(|i| (0..4).map(|j| a[j * 6 + i] * x[j]).sum())
        .collect();
    for f in MATRIX_FORMATS {
        let ts = tensors(vec![
            ("A", tensor(f, &[4, 6], a.clone())),
            ("x", tensor("Dense(Element(0.0))", &[4], x.clone())),
            ("y", zeros("Dense(Element(0.0))", &[6])),
        ]);
        let s = agree(swizzled, ts.clone());
        let t = agree(transposed, ts);
        assert_eq!(s["y"].to_dense(), Buffer::F64(want.clone().into()), "{f}");
        assert_eq!(s["y"].to_dense(), t["y"].to_dense(), "{f}");
    }
    // Swizzling twice is the plain SpMV; the output shape is inferred through the swizzle.
    let twice =
        "y .= 0\nfor i = _, j = _\n  y[i] += swizzle(swizzle(A, 1, 0), 1, 0)[i, j] * z[j]\nend\n";
    let got = agree(
        twice,
        tensors(vec![
            (
                "A",
                tensor("Dense(SparseList(Element(0.0)))", &[4, 6], a.clone()),
            ),
            ("z", tensor("Dense(Element(0.0))", &[6], vec![1.0; 6])),
            ("y", zeros("Dense(Element(0.0))", &[4])),
        ]),
    );
    assert_eq!(
        got["y"].to_dense(),
        Buffer::F64(vec![3.0, 0.0, 16.0, 13.0].into())
    );
}

#[test]
fn swizzled_writes_and_higher_ranks() {
    let a = matrix_values();
    let prog = "B .= 0\nfor i = _, j = _\n  swizzle(B, 1, 0)[i, j] = A[i, j]\nend\n";
    for f in MATRIX_FORMATS {
        let got = agree(
            prog,
            tensors(vec![
                ("A", tensor(f, &[4, 6], a.clone())),
                ("B", zeros("Dense(Dense(Element(0.0)))", &[6, 4])),
            ]),
        );
        let want: Vec<f64> = (0..6)
            .flat_map(|j| (0..4).map(move |i| (i, j)))
            .map(|(i, j)| a[i * 6 + j])
            .collect();
        assert_eq!(got["B"].to_dense(), Buffer::F64(want.into()), "{f}");
    }
    // Rank 3: index k addresses dimension perm[k]; with a window on a swizzled dimension.
    let c: Vec<f64> = (0..24)
        .map(|v| if v % 3 == 0 { 0.0 } else { v as f64 })
        .collect();
    let prog = "s .= 0\nfor i = _, j = _, k = _\n  s[] += swizzle(C, 2, 0, 1)[(1:2)(i), j, k] * (i + 10 * j + 100 * k)\nend\n";
    for f in [
        "Dense(Dense(Dense(Element(0.0))))",
        "SparseList(SparseList(SparseList(Element(0.0))))",
        "SparseCOO{3}(Element(0.0))",
    ] {
        let got = agree(
            prog,
            tensors(vec![
                ("C", tensor(f, &[2, 3, 4], c.clone())),
                ("s", zeros("Scalar(0.0)", &[])),
            ]),
        );
        // C[j, k, 1 + i] for i in 0:1, j in 0:1, k in 0:2.
        let mut want = 0.0;
        for i in 0..2 {
            for j in 0..2 {
                for k in 0..3 {
                    want += c[j * 12 + k * 4 + (1 + i)] * (i + 10 * j + 100 * k) as f64;
                }
            }
        }
        assert_eq!(got["s"].get(&[]).unwrap(), Scalar::F64(want), "{f}");
    }
}

#[test]
fn view_errors() {
    let x = || tensor("Dense(Element(0.0))", &[6], vec![1.0; 6]);
    let dense = |shape: &[usize]| zeros("Dense(Element(0.0))", shape);
    // A window whose size disagrees with another dimension of the index.
    let (c, e) = both_fail(
        "y .= 0\nfor i = _\n  y[i] = x[(1:3)(i)]\nend",
        tensors(vec![("x", x()), ("y", dense(&[4]))]),
    );
    let want = "3:10: dimension mismatch: index `i` ranges over dimension 0 of `y` (size 4) but also over the window 1:3 of dimension 0 of `x` (size 3)";
    assert_eq!(c.to_string(), want);
    assert_eq!(e.to_string(), want);
    // A window that leaves its tensor (constant bounds: before running).
    let (c, e) = both_fail(
        "s .= 0\nfor i = _\n  s[] += x[(3:6)(i)]\nend",
        tensors(vec![("x", x()), ("s", zeros("Scalar(0.0)", &[]))]),
    );
    let want = "tensor `x`: 3:10: the window 3:6 leaves dimension 0 (size 6)";
    assert_eq!(c.to_string(), want);
    assert_eq!(e.to_string(), want);
    // An explicit range longer than the window.
    let (c, e) = both_fail(
        "s .= 0\nfor i = 0:3\n  s[] += x[(0:2)(i)]\nend",
        tensors(vec![("x", x()), ("s", zeros("Scalar(0.0)", &[]))]),
    );
    assert!(matches!(c, Error::DimensionMismatch { .. }), "{c}");
    assert_eq!(
        e.to_string(),
        "tensor `x`: 3:18: index `i` = 3 is outside the window 0:2 (size 3) of dimension 0"
    );
    // Sliding windows the evaluator catches leaving the tensor as they move.
    let p = parse("s .= 0\nfor j = 0:4, i = _\n  s[] += x[(j:j + 2)(i)]\nend");
    let e = run_eval(
        &p,
        &tensors(vec![("x", x()), ("s", zeros("Scalar(0.0)", &[]))]),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "tensor `x`: 3:10: the window 4:6 leaves dimension 0 (size 6)"
    );
    // Bad permutations: syntax errors with their position, and the same check for programs
    // built in Rust.
    let e = tessera::notation::parse::parse_program("s[] += swizzle(A, 0, 0)[i, j]").unwrap_err();
    assert_eq!(
        e.to_string(),
        "1:8: syntax error: swizzle dimensions (0, 0) are not a permutation of 0..2"
    );
    use tessera::notation::build::*;
    let bad = program([assign(
        access("s", []),
        Reducer::Add,
        read(access("A", [idx("i"), idx("j")]).swizzled(&[2, 0])),
    )]);
    let a = tensor("Dense(Dense(Element(0.0)))", &[2, 2], vec![1.0; 4]);
    let ts = tensors(vec![("A", a), ("s", zeros("Scalar(0.0)", &[]))]);
    let want = "`A`: swizzle dimensions (2, 0) are not a permutation of 0..2";
    assert_eq!(run_eval(&bad, &ts).unwrap_err().to_string(), want);
    let mut got = ts;
    assert_eq!(run_jit(&bad, &mut got).unwrap_err().to_string(), want);
    // A window sizing a loop cannot use what the loop binds.
    let (c, e) = both_fail(
        "s .= 0\nfor i = _, j = _\n  s[] += x[(j:j + 1)(i)] * z[j]\nend",
        tensors(vec![
            ("x", x()),
            ("z", x()),
            ("s", zeros("Scalar(0.0)", &[])),
        ]),
    );
    let want = "3:13: this window of `x` sizes the loop over `i` at 2:1 but uses `j`, which is bound inside that loop";
    assert_eq!(c.to_string(), want);
    assert_eq!(e.to_string(), want);
}
