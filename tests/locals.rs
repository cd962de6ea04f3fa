//! 0-d locals declared inside a loop body live in variables (`ir::locals`): results equal the
//! reference evaluator's on the JIT, the IR interpreter and the C backend, every tensor
//! compared (the locals too: after the run each holds what the last iteration left, as the
//! one-element buffer did); the loop IR shows the variable and its write-back; a local read
//! after its loop, a local updated in nested `if`/`else`, one a `break` leaves, a 0-d output declared
//! outside every loop (a buffer still), and locals in a parallel loop on 1, 2 and 3 threads.

mod common;

use common::{fmt, formats_of, parse, run_eval, runners};
use std::collections::BTreeMap;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

type Tensors = BTreeMap<String, Tensor>;

const N: usize = 23;

/// A matrix with empty, full and scattered rows, in `format`; its values have both signs.
fn matrix(format: &str) -> Tensor {
    let mut coords = vec![vec![], vec![]];
    let mut vals = vec![];
    for i in 0..N {
        for j in 0..N {
            let keep = i % 5 == 2 || (i != 7 && (i * 7 + j * 3) % 4 == 0);
            if keep {
                coords[0].push(i as i64);
                coords[1].push(j as i64);
                vals.push(((i * 13 + j * 7) % 11) as f64 * 0.5 - 2.25);
            }
        }
    }
    Tensor::from_coo(
        &fmt(format),
        &[N, N],
        &coords,
        &Buffer::F64(vals.into()),
        |_, b| b,
    )
    .unwrap()
}

fn vector(shift: usize) -> Tensor {
    let v: Vec<f64> = (0..N)
        .map(|k| ((k * 5 + shift) % 9) as f64 * 0.37 - 1.1)
        .collect();
    Tensor::from_dense(&fmt("Dense(Element(0.0))"), &[N], &Buffer::F64(v.into())).unwrap()
}

/// A 0-d tensor holding `v`: a value no iteration leaves, so a local whose final state were
/// not written back would show.
fn scalar(v: f64) -> Tensor {
    Tensor::from_dense(&fmt("Scalar(0.0)"), &[], &Buffer::F64(vec![v].into())).unwrap()
}

const FORMATS: &[&str] = &[
    "Dense(Dense(Element(0.0)))",
    "Dense(SparseList(Element(0.0)))",
    "SparseCOO{2}(Element(0.0))",
    "Dense(RunList(Element(0.0)))",
];

fn inputs(a_format: &str, scalars: &[&str]) -> Tensors {
    let mut t = BTreeMap::new();
    t.insert("A".to_string(), matrix(a_format));
    t.insert("x".to_string(), vector(0));
    t.insert(
        "y".to_string(),
        Tensor::empty(&fmt("Dense(Element(0.0))"), &[N]).unwrap(),
    );
    for (k, s) in scalars.iter().enumerate() {
        t.insert(s.to_string(), scalar(7.5 + k as f64));
    }
    t
}

/// The loop IR the runner compiles for `program` (before the backends' own passes).
fn code(program: &str, tensors: &Tensors) -> String {
    let (k, _, _) = Runner::lower(&parse(program), &formats_of(tensors)).unwrap();
    k.to_string()
}

/// Run on every backend with `threads` threads and compare every tensor with the evaluator,
/// exactly (the programs here sum in the evaluator's order).
fn agree(program: &str, tensors: &Tensors, threads: usize) {
    let want = run_eval(&parse(program), tensors).unwrap_or_else(|e| panic!("{e}\n{program}"));
    for (name, runner) in runners() {
        runner.set_threads(threads);
        runner.set_min_parallel_work(0);
        let mut got = tensors.clone();
        let c = runner
            .compile(&parse(program), &formats_of(&got))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
        if threads > 1 {
            assert!(c.parallel.is_some(), "{name}: not split\n{}", c.ir);
        }
        runner
            .execute(&c, &mut got)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
        for (n, t) in &got {
            t.validate(n).unwrap();
            assert_eq!(
                t.to_dense(),
                want[n],
                "{name} x{threads}: `{n}` differs from the evaluator\n{program}\n{}",
                c.ir
            );
        }
    }
}

/// A row's sum and its largest entry, updated in `if`/`else` branches, then read: both are
/// variables of the row loop, written back once per row.
#[test]
fn a_local_updated_in_nested_branches_is_a_variable() {
    let p = "for i = _\n  t .= 0.0\n  m .= -100.0\n  for j = _\n    if A[i, j] > 0.0\n      t[] += A[i, j] * x[j]\n      if A[i, j] > m[]\n        m[] = A[i, j]\n      end\n    else\n      t[] -= x[j]\n    end\n  end\n  y[i] = t[] * m[]\nend\n";
    for f in FORMATS {
        let t = inputs(f, &["t", "m"]);
        let shown = code(p, &t);
        assert!(shown.contains("t_val_local = 0.0;"), "{shown}");
        assert!(shown.contains("m_val_local = -100.0;"), "{shown}");
        assert!(shown.contains("t_val[0] = t_val_local;"), "{shown}");
        assert!(!shown.contains("fill(t_val"), "{shown}");
        assert!(!shown.contains("= t_val[0]"), "{shown}");
        agree(p, &t, 1);
    }
}

/// A local read after its loop (`z[] = t[]`): inside the loop a variable, written back at
/// the end of each iteration, so the read after the loop sees the last row's sum; a row loop
/// that runs no iteration leaves it as it was. A 0-d output declared outside every loop
/// stays in memory.
#[test]
fn a_local_read_after_its_loop_is_written_back() {
    let p = "z .= 0.0\nfor i = _\n  t .= 0.0\n  for j = _\n    t[] += A[i, j] * x[j]\n  end\n  z[] += t[]\n  y[i] = t[]\nend\nw .= 1.0\nw[] = t[] * 2.0\n";
    for f in FORMATS {
        let t = inputs(f, &["t", "w", "z"]);
        let shown = code(p, &t);
        assert!(shown.contains("t_val_local = 0.0;"), "{shown}");
        assert!(shown.contains("t_val[0] = t_val_local;"), "{shown}");
        // Declared at the top level: a buffer, as before.
        assert!(!shown.contains("w_val_local"), "{shown}");
        assert!(!shown.contains("z_val_local"), "{shown}");
        assert!(shown.contains("w_val[0] = t_val[0] * 2.0"), "{shown}");
        agree(p, &t, 1);
    }
    // No row at all: `t` keeps the value it came with, and `w` is twice that.
    let mut t = inputs(FORMATS[0], &["t", "w", "z"]);
    t.insert(
        "A".to_string(),
        Tensor::empty(&fmt(FORMATS[0]), &[0, N]).unwrap(),
    );
    t.insert(
        "y".to_string(),
        Tensor::empty(&fmt("Dense(Element(0.0))"), &[0]).unwrap(),
    );
    agree(p, &t, 1);
}

/// A short-circuiting `|=` breaks out of the row's loop once a running product is negative,
/// from inside the scope of `t`, declared per entry: `t` is written back before the
/// `break`, and the read after the loop sees the entry it stopped at.
#[test]
fn a_local_before_a_break_is_written_back() {
    let p = "for i = _\n  f .= false\n  for j = _\n    t .= 0.0\n    t[] += A[i, j] * x[j]\n    f[] |= t[] < 0.0\n  end\n  y[i] = ifelse(f[], t[], 0.0)\nend\n";
    for f in FORMATS {
        let mut t = inputs(f, &["t"]);
        t.insert(
            "f".to_string(),
            Tensor::from_dense(&fmt("Scalar(false)"), &[], &Buffer::Bool(vec![true].into()))
                .unwrap(),
        );
        let shown = code(p, &t);
        assert!(shown.contains("f_val_local = false;"), "{shown}");
        let lines: Vec<&str> = shown.lines().map(str::trim).collect();
        assert!(
            lines
                .windows(2)
                .any(|w| w == ["t_val[0] = t_val_local;", "break;"]),
            "{shown}"
        );
        agree(p, &t, 1);
    }
}

/// Locals of a parallel loop's iterations: each chunk's own variables (and its own copy of
/// the buffer, which ends as the last chunk's), on 1, 2 and 3 threads.
#[test]
fn locals_of_a_parallel_loop_are_each_chunks_own() {
    let p = "for i = parallel(_)\n  t .= 0.0\n  m .= -100.0\n  for j = _\n    t[] += A[i, j] * x[j]\n    m[] <<max>>= A[i, j]\n  end\n  if t[] > 0.0\n    y[i] = t[] + m[]\n  else\n    y[i] = m[]\n  end\nend\n";
    for f in FORMATS {
        let t = inputs(f, &["t", "m"]);
        let shown = code(p, &t);
        assert!(shown.contains("t_val_local = 0.0;"), "{shown}");
        for threads in [1, 2, 3] {
            agree(p, &t, threads);
        }
    }
}
