//! Tensors whose arrays share memory (copy-on-write `Store`s, as `tessera.asarray` makes of
//! NumPy arrays and as every Python tensor's arrays are): kernels read them in place, on the
//! JIT, the C backend and the IR interpreter, serially and in parallel chunks, and never
//! write them. A kernel that writes a given tensor (accumulating into it, or rebuilding a
//! sparse output, growing and sorting its arrays) writes a copy; every other holder of the
//! memory keeps the old values, and the results equal the reference evaluator's.

mod common;

use common::{fmt, formats_of, parse, run_eval, runners};
use std::collections::BTreeMap;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

const N: usize = 23;

fn matrix(format: &str, salt: usize) -> Tensor {
    let mut coords = vec![vec![], vec![]];
    let mut vals = vec![];
    for i in 0..N {
        for j in 0..N {
            if (i * 7 + j * 3 + salt).is_multiple_of(4) || i == j {
                coords[0].push(i as i64);
                coords[1].push(j as i64);
                vals.push(((i * 5 + j + salt) % 9) as f64 - 3.5);
            }
        }
    }
    Tensor::from_coo(
        &fmt(format),
        &[N, N],
        &coords,
        &Buffer::from(vals),
        |_, b| b,
    )
    .unwrap()
}

fn vector(shift: usize) -> Tensor {
    let v: Vec<f64> = (0..N)
        .map(|k| ((k * 3 + shift) % 7) as f64 - 2.25)
        .collect();
    Tensor::from_dense(&fmt("Dense(Element(0.0))"), &[N], &Buffer::from(v)).unwrap()
}

/// The tensor with its arrays made shared, and a second holder of the same memory.
fn shared(mut t: Tensor) -> (Tensor, Tensor) {
    t.share();
    let other = t.clone();
    (t, other)
}

/// Each array's first element's address (shared clones have the same ones).
fn addresses(t: &Tensor) -> Vec<usize> {
    t.levels
        .iter()
        .flatten()
        .map(|b| b.as_ptr() as usize)
        .collect()
}

/// Run `program` on shared copies of `tensors` (`written` are the ones it writes) on every
/// backend with `threads`; results must equal the evaluator's, the read tensors must still
/// share their memory, and the second holders of every tensor must be unchanged.
fn check(program: &str, tensors: &BTreeMap<String, Tensor>, written: &[&str], threads: usize) {
    let p = parse(program);
    let want = run_eval(&p, tensors).unwrap_or_else(|e| panic!("{e}\n{program}"));
    for (name, runner) in runners() {
        runner.set_threads(threads);
        let mut given = BTreeMap::new();
        let mut kept = BTreeMap::new();
        for (n, t) in tensors {
            let (a, b) = shared(t.clone());
            given.insert(n.clone(), a);
            kept.insert(n.clone(), b);
        }
        let c = runner
            .compile(&p, &formats_of(&given))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
        runner
            .execute(&c, &mut given)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
        for (n, t) in &given {
            t.validate(n).unwrap();
            let got = t.to_dense();
            let close = match (&got, &want[n]) {
                (Buffer::F64(x), Buffer::F64(y)) => {
                    x.len() == y.len()
                        && x.iter()
                            .zip(y.iter())
                            .all(|(p, q)| (p - q).abs() <= 1e-9 * (1.0 + q.abs()))
                }
                (a, b) => a == b,
            };
            assert!(close, "{name} x{threads}: `{n}` differs\n{program}");
            let k = &kept[n];
            assert_eq!(
                k.to_dense(),
                tensors[n].to_dense(),
                "{name}: the other holder of `{n}` changed\n{program}"
            );
            if !written.contains(&n.as_str()) {
                assert_eq!(
                    addresses(t),
                    addresses(k),
                    "{name}: `{n}` is only read, yet its arrays were copied"
                );
                assert!(t.levels.iter().flatten().all(Buffer::is_shared));
            }
        }
    }
}

const MATRIX_FORMATS: &[&str] = &[
    "Dense(SparseList(Element(0.0)))",
    "Dense(SparseList(Element(0.0), coord=i32))",
    "SparseList(SparseList(Element(0.0)))",
    "SparseCOO{2}(Element(0.0))",
    "Dense(SparseRunList(Element(0.0)))",
    "Dense(SparseByteMap(Element(0.0)))",
    "Dense(Dense(Element(0.0)))",
];

#[test]
fn kernels_read_shared_arrays_in_place_and_write_copies() {
    for f in MATRIX_FORMATS {
        let mut t = BTreeMap::new();
        t.insert("A".to_string(), matrix(f, 0));
        t.insert("x".to_string(), vector(1));
        // `y` is given with values: the kernel accumulates into a copy of them.
        t.insert("y".to_string(), vector(4));
        check(
            "for i = _, j = _\n  y[i] += A[i, j] * x[j]\nend",
            &t,
            &["y"],
            1,
        );
    }
}

#[test]
fn a_sparse_output_given_shared_is_rebuilt_in_a_copy() {
    // The output's arrays are declared (filled, grown) anew and, for COO, sorted: each of
    // those writes must go to memory of the output's own.
    for out in [
        "Dense(SparseList(Element(0.0)))",
        "SparseCOO{2}(Element(0.0))",
        "Dense(SparseRunList(Element(0.0)))",
    ] {
        let mut t = BTreeMap::new();
        t.insert(
            "A".to_string(),
            matrix("Dense(SparseList(Element(0.0)))", 1),
        );
        t.insert("B".to_string(), matrix(out, 2));
        check(
            "B .= 0\nfor i = _, j = _\n  B[i, j] = A[i, j] * 2 + 1\nend",
            &t,
            &["B"],
            1,
        );
    }
}

#[test]
fn parallel_chunks_read_shared_arrays_and_fold_into_copies() {
    for f in [
        "Dense(SparseList(Element(0.0)))",
        "Dense(Dense(Element(0.0)))",
    ] {
        let mut t = BTreeMap::new();
        t.insert("A".to_string(), matrix(f, 3));
        t.insert("x".to_string(), vector(2));
        t.insert("y".to_string(), vector(5));
        let s = Tensor::from_dense(&fmt("Scalar(0.0)"), &[], &Buffer::from(vec![1.5])).unwrap();
        t.insert("s".to_string(), s);
        for threads in [2, 3] {
            check(
                "for i = parallel(_), j = _\n  y[i] += A[i, j] * x[j]\n  s[] += A[i, j]\nend",
                &t,
                &["y", "s"],
                threads,
            );
        }
    }
}
