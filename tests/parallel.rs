//! Parallel loops (`for i = parallel(_)`, issue 17): results on 2 and 3 threads equal the
//! serial kernel's and the reference evaluator's on the JIT, the C backend and the IR
//! interpreter, over several input formats; injective writes, privatised reductions (exact for
//! integers and `min`/`max`, within rounding for float sums), two outputs, a `let`; racing
//! programs are refused with the access's place; a fault inside a chunk is the serial error.

mod common;

use common::{fmt, formats_of, parse, run_eval, runners};
use std::collections::BTreeMap;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::{Error, Result};

const N: usize = 37;

/// A matrix with a few dense rows (so equal-entry chunks differ from equal-row ones), stored
/// in `format`.
fn matrix(format: &str, int: bool) -> Tensor {
    let mut coords = vec![vec![], vec![]];
    let mut vals = vec![];
    for i in 0..N {
        for j in 0..N {
            let keep = i % 7 == 3 || (i * 31 + j * 17) % 5 == 0 || i.abs_diff(j) <= 1;
            if keep {
                coords[0].push(i as i64);
                coords[1].push(j as i64);
                vals.push(((i * 13 + j * 7) % 11) as f64 - 4.5);
            }
        }
    }
    let (f, values) = if int {
        let f = format.replace("0.0", "0");
        let v: Vec<i64> = vals.iter().map(|v| (v * 2.0) as i64).collect();
        (f, Buffer::I64(v.into()))
    } else {
        (format.to_string(), Buffer::F64(vals.into()))
    };
    Tensor::from_coo(&fmt(&f), &[N, N], &coords, &values, |_, b| b).unwrap()
}

fn vector(int: bool, shift: usize) -> Tensor {
    if int {
        let v: Vec<i64> = (0..N).map(|k| ((k * 5 + shift) % 9) as i64 - 3).collect();
        Tensor::from_dense(&fmt("Dense(Element(0))"), &[N], &Buffer::I64(v.into())).unwrap()
    } else {
        let v: Vec<f64> = (0..N)
            .map(|k| ((k * 5 + shift) % 9) as f64 * 0.37 - 1.1)
            .collect();
        Tensor::from_dense(&fmt("Dense(Element(0.0))"), &[N], &Buffer::F64(v.into())).unwrap()
    }
}

fn run(
    runner: &Runner,
    threads: usize,
    program: &str,
    tensors: &BTreeMap<String, Tensor>,
) -> Result<BTreeMap<String, Buffer>> {
    let p = parse(program);
    let mut t = tensors.clone();
    runner.set_threads(threads);
    let c = runner.compile(&p, &formats_of(&t))?;
    // Every program here has its parallel loop at the top: it must run split into chunks.
    assert!(c.parallel.is_some(), "not split:\n{program}\n{}", c.ir);
    runner.execute(&c, &mut t)?;
    Ok(t.into_iter().map(|(n, t)| (n, t.to_dense())).collect())
}

fn close(a: &Buffer, b: &Buffer, exact: bool) -> bool {
    match (a, b) {
        (Buffer::F64(x), Buffer::F64(y)) if !exact => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(p, q)| (p - q).abs() <= 1e-9 * (1.0 + p.abs().max(q.abs())))
        }
        _ => a == b,
    }
}

/// Run `program` serially, on 2 and 3 threads, on every backend and the evaluator, and
/// compare the `outputs`; `exact` for results that must agree bit for bit.
fn agree(program: &str, tensors: &BTreeMap<String, Tensor>, outputs: &[&str], exact: bool) {
    let want = run_eval(&parse(program), tensors).unwrap_or_else(|e| panic!("{e}\n{program}"));
    for (name, runner) in runners() {
        let serial = run(&runner, 1, program, tensors).unwrap_or_else(|e| panic!("{name}: {e}"));
        for threads in [2, 3] {
            let par = run(&runner, threads, program, tensors)
                .unwrap_or_else(|e| panic!("{name} x{threads}: {e}\n{program}"));
            for o in outputs {
                assert!(
                    close(&par[*o], &want[*o], exact),
                    "{name} x{threads}, `{o}`: {:?} vs evaluator {:?}\n{program}",
                    par[*o],
                    want[*o]
                );
                // Injective writes and exact reductions equal the serial kernel bit for bit.
                assert!(
                    close(&par[*o], &serial[*o], exact),
                    "{name} x{threads} `{o}`"
                );
            }
        }
    }
}

fn inputs(a_format: &str, int: bool) -> BTreeMap<String, Tensor> {
    let mut t = BTreeMap::new();
    t.insert("A".to_string(), matrix(a_format, int));
    t.insert("x".to_string(), vector(int, 0));
    let f = if int {
        "Dense(Element(0))"
    } else {
        "Dense(Element(0.0))"
    };
    t.insert("y".to_string(), Tensor::empty(&fmt(f), &[N]).unwrap());
    let s = if int { "Scalar(0)" } else { "Scalar(0.0)" };
    t.insert("s".to_string(), Tensor::empty(&fmt(s), &[]).unwrap());
    t
}

const FORMATS: &[&str] = &[
    "Dense(Dense(Element(0.0)))",
    "Dense(SparseList(Element(0.0)))",
    "SparseCOO{2}(Element(0.0))",
    "Dense(RunList(Element(0.0)))",
    "Dense(SparseBand(Element(0.0)))",
];

#[test]
fn spmv_rows_in_parallel_equal_serial() {
    let p = "y .= 0\nfor i = parallel(_), j = _\n  y[i] += A[i, j] * x[j]\nend";
    for f in FORMATS {
        agree(p, &inputs(f, false), &["y"], true);
    }
}

#[test]
fn transposed_spmv_is_privatised() {
    let p = "y .= 0\nfor i = parallel(_), j = _\n  y[j] += A[i, j] * x[i]\nend";
    for f in FORMATS {
        agree(p, &inputs(f, false), &["y"], false);
        agree(p, &inputs(f, true), &["y"], true);
    }
}

#[test]
fn scalar_reductions() {
    let f = "Dense(SparseList(Element(0.0)))";
    agree(
        "s .= 0\nfor i = parallel(_), j = _\n  s[] += A[i, j] * x[i]\nend",
        &inputs(f, false),
        &["s"],
        false,
    );
    for op in ["+=", "<<min>>=", "<<max>>=", "*="] {
        let p = format!("for i = parallel(_)\n  s[] {op} x[i]\nend");
        agree(&p, &inputs(f, true), &["s"], true);
    }
    for op in ["<<min>>=", "<<max>>="] {
        let p = format!("s .= 0\nfor i = parallel(_), j = _\n  s[] {op} A[i, j]\nend");
        agree(&p, &inputs(f, false), &["s"], true);
    }
}

#[test]
fn two_outputs_and_a_let() {
    let p = "y .= 0\ns .= 0\nfor i = parallel(_)\n  let t = x[i] * 2\n    for j = _\n      y[i] += A[i, j] * t\n      s[] += A[i, j]\n    end\n  end\nend";
    for f in FORMATS {
        agree(p, &inputs(f, true), &["y", "s"], true);
    }
}

fn refused(program: &str, tensors: &BTreeMap<String, Tensor>) -> Error {
    let runner = Runner::jit();
    runner
        .compile(&parse(program), &formats_of(tensors))
        .err()
        .unwrap_or_else(|| panic!("accepted:\n{program}"))
}

#[test]
fn races_are_refused_with_places() {
    let t = inputs("Dense(SparseList(Element(0.0)))", false);
    let e = refused("for i = parallel(_), j = _\n  y[j] = A[i, j]\nend", &t);
    assert!(
        matches!(&e, Error::Race { span, .. } if (span.line, span.col) == (2, 3)),
        "{e}"
    );
    assert!(
        e.to_string().contains("parallel loop over `i` (at 1:1)"),
        "{e}"
    );
    let e = refused("for i = parallel(_)\n  s[] -= x[i]\nend", &t);
    assert!(matches!(e, Error::Race { .. }), "{e}");
}

#[test]
fn separate_sparse_output_is_refused() {
    // Finch.jl #672: each row of a sparse output written by its own thread with `+=` raced
    // silently there; here the sparse output is refused.
    let mut t = inputs("Dense(SparseList(Element(0.0)))", false);
    t.insert(
        "B".to_string(),
        Tensor::empty(&fmt("Dense(SparseList(Element(0.0)))"), &[N, N]).unwrap(),
    );
    let e = refused(
        "B .= 0\nfor i = parallel(_), j = _\n  B[i, j] += A[i, j]\nend",
        &t,
    );
    assert!(
        matches!(&e, Error::Race { span, .. } if (span.line, span.col) == (3, 3)),
        "{e}"
    );
    assert!(e.to_string().contains("sparse level"), "{e}");
}

#[test]
fn a_fault_in_a_chunk_is_the_serial_error() {
    let mut t = BTreeMap::new();
    let p: Vec<i64> = (0..N as i64)
        .map(|k| if k == 30 { 99 } else { k })
        .collect();
    t.insert(
        "p".to_string(),
        Tensor::from_dense(&fmt("Dense(Element(0))"), &[N], &Buffer::I64(p.into())).unwrap(),
    );
    t.insert("x".to_string(), vector(false, 1));
    t.insert(
        "y".to_string(),
        Tensor::empty(&fmt("Dense(Element(0.0))"), &[N]).unwrap(),
    );
    let prog = "y .= 0\nfor i = parallel(_)\n  y[i] = x[p[i]]\nend";
    for (name, runner) in runners() {
        let serial = run(&runner, 1, prog, &t).unwrap_err();
        assert!(matches!(serial, Error::Kernel(_)), "{name}: {serial}");
        for threads in [2, 4] {
            let par = run(&runner, threads, prog, &t).unwrap_err();
            assert_eq!(par, serial, "{name} x{threads}");
        }
    }
}
