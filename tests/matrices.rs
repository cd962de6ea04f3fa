//! The classic kernels on real matrices from `../shared/data/matrices`, checked against SciPy
//! (weighted checksums printed by `scripts/scipy_golden.py`) and, position by position, against
//! plain Rust loops over the file's entries.

mod common;

use common::scipy::GOLDEN;
use common::{fmt, parse, run_jit};
use std::collections::BTreeMap;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::tensor::files::load_tensor;

fn close(got: f64, want: f64, what: &str) {
    let tol = 1e-9 * want.abs().max(1.0);
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got}, SciPy gives {want}"
    );
}

fn dense_vec(values: Vec<f64>) -> Tensor {
    let n = values.len();
    Tensor::from_dense(
        &fmt("Dense(Element(0.0))"),
        &[n],
        &Buffer::F64(values.into()),
    )
    .unwrap()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_dense()
        .to_scalars()
        .iter()
        .map(|v| v.as_f64())
        .collect()
}

fn weighted(v: &[f64], w: impl Fn(usize) -> f64) -> f64 {
    v.iter().enumerate().map(|(k, x)| x * w(k)).sum()
}

/// Run `text` with the given tensors plus an empty dense output `out` of `shape`.
fn run(
    text: &str,
    mut tensors: BTreeMap<String, Tensor>,
    out: &str,
    out_format: &str,
    shape: &[usize],
) -> Tensor {
    tensors.insert(
        out.to_string(),
        Tensor::empty(&fmt(out_format), shape).unwrap(),
    );
    run_jit(&parse(text), &mut tensors).unwrap_or_else(|e| panic!("{e}\n{text}"));
    tensors.remove(out).unwrap()
}

fn entries(a: &Tensor) -> Vec<(usize, usize, f64)> {
    let mut out = vec![];
    a.for_each_stored(&mut |c, v| out.push((c[0], c[1], v.as_f64())));
    out
}

#[test]
fn classic_kernels_match_scipy() {
    let Some(dir) = common::data_dir("classic_kernels_match_scipy") else {
        return;
    };
    for (name, golden, r1) in GOLDEN {
        let path = dir.join(format!("matrices/{name}.mtx"));
        let a = load_tensor(
            path.to_str().unwrap(),
            Some("Dense(SparseList(Element(0.0)))"),
        )
        .unwrap();
        let (m, n) = (a.shape[0], a.shape[1]);
        let es = entries(&a);
        let x: Vec<f64> = (0..n).map(|j| (j % 7) as f64 - 3.0).collect();
        let with = |pairs: Vec<(&str, Tensor)>| -> BTreeMap<String, Tensor> {
            pairs.into_iter().map(|(k, t)| (k.to_string(), t)).collect()
        };

        // SpMV, and the same with the loops in the non-concordant order.
        let mut want = vec![0.0; m];
        for &(i, j, v) in &es {
            want[i] += v * x[j];
        }
        for text in [
            "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend",
            "y .= 0\nfor j = _, i = _\n  y[i] += A[i, j] * x[j]\nend",
        ] {
            let y = f64s(&run(
                text,
                with(vec![("A", a.clone()), ("x", dense_vec(x.clone()))]),
                "y",
                "Dense(Element(0.0))",
                &[m],
            ));
            for (k, (g, w)) in y.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-9 * w.abs().max(1.0),
                    "{name} {text}: y[{k}] = {g}, expected {w}"
                );
            }
            close(
                weighted(&y, |i| (i % 5) as f64 + 1.0),
                golden[0],
                &format!("{name} spmv"),
            );
        }

        // Transposed SpMV.
        let xt: Vec<f64> = (0..m).map(|i| (i % 5) as f64 - 2.0).collect();
        let z = f64s(&run(
            "z .= 0\nfor i = _, j = _\n  z[j] += A[i, j] * x[i]\nend",
            with(vec![("A", a.clone()), ("x", dense_vec(xt))]),
            "z",
            "Dense(Element(0.0))",
            &[n],
        ));
        close(
            weighted(&z, |j| (j % 3) as f64 + 1.0),
            golden[1],
            &format!("{name} transposed spmv"),
        );

        // SpMM with a dense right-hand side.
        let bvals: Vec<f64> = (0..n * 4)
            .map(|k| ((k / 4 + k % 4) % 4) as f64 - 1.5)
            .collect();
        let b = Tensor::from_dense(
            &fmt("Dense(Dense(Element(0.0)))"),
            &[n, 4],
            &Buffer::F64(bvals.into()),
        )
        .unwrap();
        let c = f64s(&run(
            "C .= 0\nfor i = _, j = _, k = _\n  C[i, k] += A[i, j] * B[j, k]\nend",
            with(vec![("A", a.clone()), ("B", b)]),
            "C",
            "Dense(Dense(Element(0.0)))",
            &[m, 4],
        ));
        close(
            weighted(&c, |p| ((p / 4) % 3 + p % 4) as f64),
            golden[2],
            &format!("{name} spmm"),
        );

        // Upper-triangle sum.
        let s = run(
            "s .= 0\nfor i = _, j = _\n  if i <= j\n    s[] += A[i, j]\n  end\nend",
            with(vec![("A", a.clone())]),
            "s",
            "Element(0.0)",
            &[],
        );
        close(
            s.get(&[]).unwrap().as_f64(),
            golden[3],
            &format!("{name} upper-triangle sum"),
        );

        // Sparse vectors: two rows of the matrix as SparseLists.
        let r2 = (r1 + 1) % m;
        let row = |r: usize| {
            let mut vals = vec![0.0; n];
            for &(_, j, v) in es.iter().filter(|e| e.0 == r) {
                vals[j] += v;
            }
            Tensor::from_dense(
                &fmt("SparseList(Element(0.0))"),
                &[n],
                &Buffer::F64(vals.into()),
            )
            .unwrap()
        };
        let (va, vb) = (row(*r1), row(r2));
        let vecs = || with(vec![("a", va.clone()), ("b", vb.clone())]);
        let w = |j: usize| (j % 4) as f64 + 1.0;
        let dot = run(
            "s .= 0\nfor j = _\n  s[] += a[j] * b[j]\nend",
            vecs(),
            "s",
            "Element(0.0)",
            &[],
        );
        close(
            dot.get(&[]).unwrap().as_f64(),
            golden[4],
            &format!("{name} sparse dot"),
        );
        for (k, op, out_format) in [
            (5, "+", "SparseList(Element(0.0))"),
            (6, "*", "SparseList(Element(0.0))"),
            (5, "+", "Dense(Element(0.0))"),
        ] {
            let text = format!("z .= 0\nfor j = _\n  z[j] = a[j] {op} b[j]\nend");
            let z = run(&text, vecs(), "z", out_format, &[n]);
            z.validate("z").unwrap();
            close(
                weighted(&f64s(&z), w),
                golden[k],
                &format!("{name} sparse {op} into {out_format}"),
            );
        }
    }
}
