//! Loop distribution (`ir::distribute`): an innermost loop that folds into variables and
//! stores to memory runs as two loops, folds first. Results equal the reference evaluator's
//! exactly on the JIT, the IR interpreter and the C backend (each half keeps its order); the
//! loop IR shows the split where it applies; zeros against infinities and NaN keep the strong
//! zero; parallel row loops too. (Halves that read each other, and faults, are programs the
//! language does not accept or cannot make: `backend::distribute_tests` builds them as loop
//! IR.)

mod common;

use common::{fmt, formats_of, parse, run_eval, runners};
use std::collections::BTreeMap;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

type Tensors = BTreeMap<String, Tensor>;

const N: usize = 19;
const M: usize = 13;

/// An N x M matrix with zeros, empty rows and both signs, in `format`.
fn matrix(format: &str) -> Tensor {
    let mut coords = vec![vec![], vec![]];
    let mut vals = vec![];
    for i in 0..N {
        for j in 0..M {
            if i % 6 != 4 && (i * 5 + j * 3) % 4 != 1 {
                coords[0].push(i as i64);
                coords[1].push(j as i64);
                // Some stored zeros, against the infinities of `x`.
                let v = ((i * 13 + j * 7) % 11) as f64 * 0.5 - 2.5;
                vals.push(v);
            }
        }
    }
    Tensor::from_coo(
        &fmt(format),
        &[N, M],
        &coords,
        &Buffer::F64(vals.into()),
        |_, b| b,
    )
    .unwrap()
}

/// A dense vector of `n`; with `special`, an infinity, a NaN and a negative zero in it.
fn vector(n: usize, shift: usize, special: bool) -> Tensor {
    let mut v: Vec<f64> = (0..n)
        .map(|k| ((k * 5 + shift) % 9) as f64 * 0.37 - 1.1)
        .collect();
    if special {
        v[1] = f64::INFINITY;
        v[4] = f64::NAN;
        v[6] = -0.0;
    }
    Tensor::from_dense(&fmt("Dense(Element(0.0))"), &[n], &Buffer::F64(v.into())).unwrap()
}

fn inputs(a_format: &str, special: bool) -> Tensors {
    let mut t = BTreeMap::new();
    t.insert("A".to_string(), matrix(a_format));
    t.insert("x".to_string(), vector(M, 0, special));
    t.insert("z".to_string(), vector(N, 3, false));
    t.insert(
        "s".to_string(),
        Tensor::empty(&fmt("Dense(Element(0.0))"), &[N]).unwrap(),
    );
    t.insert(
        "C".to_string(),
        Tensor::empty(&fmt("Dense(Dense(Element(0.0)))"), &[N, M]).unwrap(),
    );
    t
}

/// The kernel's loop IR after every pass, as the JIT compiles it.
fn compiled_ir(program: &str, tensors: &Tensors) -> String {
    let runner = Runner::jit();
    let c = runner
        .compile(&parse(program), &formats_of(tensors))
        .unwrap();
    c.ir.to_string()
}

/// Every tensor after a run on every backend equals the evaluator's, bit for bit (NaN
/// matching NaN).
fn agree(program: &str, tensors: &Tensors, threads: usize) {
    let want = run_eval(&parse(program), tensors).unwrap_or_else(|e| panic!("{e}\n{program}"));
    for (name, runner) in runners() {
        runner.set_threads(threads);
        runner.set_min_parallel_work(0);
        let mut got = tensors.clone();
        let c = runner
            .compile(&parse(program), &formats_of(&got))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
        runner
            .execute(&c, &mut got)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
        for (n, t) in &got {
            let (a, b) = (t.to_dense(), &want[n]);
            let same = a.len() == b.len()
                && a.to_scalars().iter().zip(b.to_scalars()).all(|(p, q)| {
                    (p.is_nan() && q.is_nan())
                        || (p == &q
                            && p.as_f64().is_sign_negative() == q.as_f64().is_sign_negative())
                });
            assert!(
                same,
                "{name} x{threads}: `{n}` differs from the evaluator\n{program}\n{a:?}\n{b:?}\n{}",
                c.ir
            );
        }
    }
}

const DENSE: &[&str] = &["Dense(Dense(Element(0.0)))", "Dense(RunList(Element(0.0)))"];
const SPARSE: &[&str] = &[
    "Dense(SparseList(Element(0.0)))",
    "SparseCOO{2}(Element(0.0))",
    "Dense(SparseBand(Element(0.0)))",
];

/// `p` split on dense rows (the IR shows it) and equal to the evaluator on every format, with
/// and without infinities, NaN and negative zeros in `x`.
fn split_on_dense_rows(p: &str) {
    for special in [false, true] {
        for f in DENSE.iter().chain(SPARSE) {
            let t = inputs(f, special);
            if *f == DENSE[0] {
                let ir = compiled_ir(p, &t);
                assert!(ir.contains("dist_start"), "{ir}");
            }
            agree(p, &t, 1);
        }
    }
}

/// A row's dot product with `x` (a fold) and a scaled copy of the row (stores), in one loop:
/// split on dense rows, each half in its order; sparse rows gather `x` and stay whole.
#[test]
fn a_fold_and_stores_become_two_loops() {
    let p = "for i = _\n  for j = _\n    s[i] += A[i, j] * x[j]\n    C[i, j] += A[i, j] * z[i]\n  end\nend\n";
    split_on_dense_rows(p);
}

/// Several folds and several stores interleaved, as in a gradient's backward loop; a `let`
/// temporary that only the stores read goes with them.
#[test]
fn interleaved_folds_and_stores_keep_their_orders() {
    let p = "for i = _\n  for j = _\n    s[i] += A[i, j] * x[j]\n    let t = A[i, j] * z[i]\n      C[i, j] += t * t\n    end\n    s[i] -= x[j] * z[i]\n    C[i, j] += x[j] * 0.5\n  end\nend\n";
    split_on_dense_rows(p);
}

/// The row loop on 2 and 3 threads: each chunk's inner loops are split as on one thread.
#[test]
fn parallel_rows_split_their_inner_loops() {
    let p = "for i = parallel(_)\n  for j = _\n    s[i] += A[i, j] * x[j]\n    C[i, j] += A[i, j] * z[i]\n  end\nend\n";
    for threads in [2, 3] {
        for f in DENSE.iter().chain(SPARSE) {
            agree(p, &inputs(f, false), threads);
        }
    }
}
