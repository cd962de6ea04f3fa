//! Parallel loops (`for i = parallel(_)`, issue 17): results on 2 and 3 threads equal the
//! serial kernel's and the reference evaluator's on the JIT, the C backend and the IR
//! interpreter, over several input formats; injective writes, privatised reductions (exact for
//! integers and `min`/`max`, within rounding for float sums), two outputs, a `let`; racing
//! programs are refused with the access's place; a fault inside a chunk is the serial error.
//! Sparse outputs appended by rows (matrices and 1-D vectors) store exactly the serial arrays,
//! and the graph drivers (BFS, Bellman-Ford) give the serial results on several threads.

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
    // The inputs are small: split them anyway (the threshold has its own tests below).
    runner.set_min_parallel_work(0);
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

/// Workspaces each iteration declares first (a row's accumulator, a row vector stored dense
/// or sparse) are the iteration's own: every chunk gets a copy, and afterwards each holds what
/// the last iteration left, as in the serial loop.
#[test]
fn iteration_workspaces_are_private() {
    let p = "y .= 0\nfor i = parallel(_)\n  s .= 0\n  w .= 0\n  for j = _\n    s[] += A[i, j] * x[j]\n    w[j] += A[i, j] * x[j] * x[j]\n  end\n  for j = _\n    y[i] += w[j] + s[]\n  end\nend";
    for f in FORMATS {
        for w in ["Dense(Element(0.0))", "SparseList(Element(0.0))"] {
            let mut t = inputs(f, false);
            t.insert("w".to_string(), Tensor::empty(&fmt(w), &[N]).unwrap());
            agree(p, &t, &["y", "s", "w"], false);
        }
    }
    // Integers, and a workspace read through `let` before the row's output is written.
    let p = "for i = parallel(_)\n  s .= 0\n  for j = _\n    s[] <<max>>= A[i, j]\n  end\n  let m = s[]\n    y[i] = m * 2\n  end\nend";
    agree(
        p,
        &inputs("Dense(SparseList(Element(0.0)))", true),
        &["y", "s"],
        true,
    );
}

/// The outer formats whose stored rows the chunks' ranges may miss entirely.
const SPARSE_OUTER: &[&str] = &[
    "SparseList(SparseList(Element(0.0)))",
    "Dense(SparseList(Element(0.0)))",
    "SparseCOO{2}(Element(0.0))",
    "SparseByteMap(SparseList(Element(0.0)))",
    "SparseDict(SparseList(Element(0.0)))",
    "SparseRunList(SparseList(Element(0.0)))",
    "SparseBand(SparseList(Element(0.0)))",
];

/// A workspace's state after a parallel loop is the serial loop's: what the last iteration
/// left. The last chunks of a sparse outer loop may hold no stored entry (here every row past
/// `N / 3` is empty, so with 2 or 3 chunks the last one has none); they still run their
/// indices, each declaring the workspace afresh, so their state is the last iteration's, and
/// the workspaces start from values (`s` = 5, `w` = 3) that no iteration leaves, so a chunk
/// state taken from a copy that ran nothing would show. A loop that runs no iteration at all
/// (an empty outer dimension) leaves every workspace as it was before the loop.
#[test]
fn workspace_state_after_empty_chunks_is_the_serial_state() {
    let mut entries = vec![];
    for i in 0..N / 3 {
        for j in 0..N {
            if (i + j) % 3 == 0 || i == 5 {
                entries.push((i, j, (i * 2 + j) as f64 + 0.5));
            }
        }
    }
    let programs = [
        "for i = parallel(_)\n  s .= 0\n  w .= 0\n  for j = _\n    s[] += A[i, j]\n    w[j] += A[i, j]\n  end\nend",
        "for i = parallel(_)\n  s .= 0\n  for j = _\n    s[] <<max>>= A[i, j]\n  end\n  z[] += s[]\nend",
        "for i = parallel(_)\n  w .= 0\n  for j = _\n    w[j] += A[i, j]\n  end\n  for j = _\n    z[] += w[j] * x[j]\n  end\nend",
    ];
    let state = |t: &mut BTreeMap<String, Tensor>, w_format: &str, n: usize| {
        let scalar = |v: f64| {
            Tensor::from_dense(&fmt("Scalar(0.0)"), &[], &Buffer::F64(vec![v].into())).unwrap()
        };
        t.insert("s".to_string(), scalar(5.0));
        t.insert("z".to_string(), scalar(1.0));
        let w = Buffer::F64(vec![3.0; n].into());
        t.insert(
            "w".to_string(),
            Tensor::from_dense(&fmt(w_format), &[n], &w).unwrap(),
        );
    };
    for a_format in SPARSE_OUTER {
        for w_format in [
            "Dense(Element(0.0))",
            "SparseList(Element(0.0))",
            "SparseByteMap(Element(0.0))",
        ] {
            for (what, a) in [
                ("first rows", sparse(a_format, N, N, &entries)),
                ("no entry", sparse(a_format, N, N, &[])),
            ] {
                for p in programs {
                    let mut t = inputs("Dense(SparseList(Element(0.0)))", false);
                    t.insert("A".to_string(), a.clone());
                    state(&mut t, w_format, N);
                    eprintln!("A {a_format} ({what}), w {w_format}");
                    agree(p, &t, &["s", "w", "z"], false);
                }
            }
        }
    }
    // No iteration at all: the outer dimension is empty.
    for p in programs {
        let mut t = BTreeMap::new();
        t.insert(
            "A".to_string(),
            sparse("SparseList(SparseList(Element(0.0)))", 0, N, &[]),
        );
        t.insert("x".to_string(), vector(false, 0));
        state(&mut t, "Dense(Element(0.0))", N);
        let want = run_eval(&parse(p), &t).unwrap();
        assert_eq!(want["s"], Buffer::F64(vec![5.0].into()));
        agree(p, &t, &["s", "w", "z"], true);
    }
}

/// A parallel loop nested in another runs as its serial loop inside each chunk of the outer
/// one (no nested scheduler): its private copies are not made, and its writes go straight to
/// the outputs, which the race check allowed because it checked each of them against the
/// outer loop too. The outer loop still runs in chunks (`run` asserts the split), also when
/// the inner loop alone would privatise an output the outer one writes injectively.
#[test]
fn nested_parallel_loops_run_serially_inside_each_chunk() {
    let programs = [
        // The inner loop privatises `y`; the outer one writes it by its own index.
        "y .= 0\nfor i = parallel(_)\n  for j = parallel(_)\n    y[i] += A[i, j] * x[j]\n  end\nend",
        // The outer loop privatises `y`, the inner one writes it by its own index.
        "y .= 0\nfor i = parallel(_)\n  for j = parallel(_)\n    y[j] += A[i, j] * x[i]\n  end\nend",
        // Both privatise `s`; three levels.
        "s .= 0\nfor i = parallel(_)\n  for j = parallel(_)\n    s[] += A[i, j] * x[i]\n    for k = parallel(_)\n      s[] += A[j, k] * x[k]\n    end\n  end\nend",
        // Injective in both.
        "for i = parallel(_)\n  for j = parallel(_)\n    C[i, j] = A[i, j] * 2\n  end\nend",
        // An outer workspace filled by a parallel inner loop.
        "y .= 0\nfor i = parallel(_)\n  w .= 0\n  for j = parallel(_)\n    w[j] += A[i, j]\n  end\n  for j = _\n    y[i] += w[j] * x[j]\n  end\nend",
        // Two inner loops, one privatising `y` and one writing it by its index.
        "y .= 0\nfor i = parallel(_)\n  for j = parallel(_)\n    y[i] += A[i, j]\n  end\n  for j = parallel(_)\n    y[j] += A[i, j]\n  end\nend",
    ];
    for f in [
        "Dense(SparseList(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
    ] {
        for int in [false, true] {
            let mut t = inputs(f, int);
            let (c, w) = match int {
                true => ("Dense(Dense(Element(0)))", "Dense(Element(0))"),
                false => ("Dense(Dense(Element(0.0)))", "Dense(Element(0.0))"),
            };
            t.insert("C".to_string(), Tensor::empty(&fmt(c), &[N, N]).unwrap());
            t.insert("w".to_string(), Tensor::empty(&fmt(w), &[N]).unwrap());
            for p in programs {
                let outputs: Vec<&str> = ["y", "s", "C", "w"]
                    .into_iter()
                    .filter(|o| p.contains(&format!("{o}[")))
                    .collect();
                agree(p, &t, &outputs, int);
            }
        }
    }
    // A parallel loop under a serial one is not at the kernel's top level: the whole kernel
    // runs serially, on any number of threads, and equals the evaluator.
    let p = "y .= 0\nfor i = _\n  for j = parallel(_)\n    y[j] += A[i, j] * x[i]\n  end\nend";
    let t = inputs("Dense(SparseList(Element(0.0)))", true);
    let (want, runs) = unsplit_runs(p, &t);
    for (name, got) in runs {
        assert_eq!(got["y"].to_dense(), want["y"], "{name}");
    }
    // What would race in the inner loop is refused although it would run serially: the race
    // check does not depend on how the loop is scheduled.
    race_at(
        "y .= 0\nfor i = parallel(_)\n  for j = parallel(_)\n    y[i] = A[i, j]\n  end\nend",
        &t,
        (4, 5),
        "parallel loop over `j`",
        "",
    );
    // A workspace the inner loop declares is not the outer loop's own: refused.
    let mut t = t;
    t.insert(
        "w".to_string(),
        Tensor::empty(&fmt("Scalar(0)"), &[]).unwrap(),
    );
    race_at(
        "y .= 0\nfor i = parallel(_)\n  for j = parallel(_)\n    w .= 0\n    w[] += A[i, j]\n    y[i] += w[]\n  end\nend",
        &t,
        (4, 5),
        "parallel loop over `i`",
        "",
    );
}

/// `<<choose(z)>>=` from many iterations is privatised: each chunk chooses into a copy
/// starting at `z`, and the copies fold in chunk order, which is the serial order, so the
/// result is exactly the serial loop's first value other than `z` (a BFS push step's parent
/// `P[k] <<choose(-1)>>= j`), also where the output held a value before the loop.
#[test]
fn choose_outputs_are_folded_in_chunk_order() {
    let int_programs = [
        "for j = parallel(_), k = _\n  if A[j, k] != 0\n    P[k] <<choose(-1)>>= j\n  end\nend",
        "for j = parallel(_), k = _\n  if A[j, k] > 2\n    c[] <<choose(-1)>>= j * 100 + k\n  end\nend",
        "for j = parallel(_), k = _\n  if A[j, k] < 0\n    B[k] <<choose(true)>>= A[j, k] < -4\n  end\nend",
    ];
    for f in FORMATS {
        let mut t = inputs(f, true);
        // Some parents already set, some still -1.
        let p: Vec<i64> = (0..N as i64)
            .map(|k| if k % 4 == 1 { k } else { -1 })
            .collect();
        t.insert(
            "P".to_string(),
            Tensor::from_dense(&fmt("Dense(Element(-1))"), &[N], &Buffer::I64(p.into())).unwrap(),
        );
        t.insert(
            "c".to_string(),
            Tensor::empty(&fmt("Scalar(-1)"), &[]).unwrap(),
        );
        t.insert(
            "B".to_string(),
            Tensor::empty(&fmt("Dense(Element(true))"), &[N]).unwrap(),
        );
        for p in int_programs {
            let out = ["P", "c", "B"]
                .into_iter()
                .find(|o| p.contains(&format!("{o}[")))
                .unwrap();
            agree(p, &t, &[out], true);
        }
        // A float output choosing past -1.5.
        let mut t = inputs(f, false);
        t.insert(
            "Q".to_string(),
            Tensor::from_dense(
                &fmt("Dense(Element(-1.5))"),
                &[N],
                &Buffer::F64(vec![-1.5; N].into()),
            )
            .unwrap(),
        );
        agree(
            "for j = parallel(_), k = _\n  Q[k] <<choose(-1.5)>>= A[j, k] * x[j]\nend",
            &t,
            &["Q"],
            true,
        );
    }
    // `choose(0.0)` on floats: a copy's untouched `0.0` and a stored `-0.0` compare equal, so
    // the loop runs serially (not split), with the evaluator's result.
    let mut t = inputs("Dense(SparseList(Element(0.0)))", false);
    let q: Vec<f64> = (0..N)
        .map(|k| if k % 3 == 0 { -0.0 } else { 0.0 })
        .collect();
    t.insert(
        "Q".to_string(),
        Tensor::from_dense(&fmt("Dense(Element(0.0))"), &[N], &Buffer::F64(q.into())).unwrap(),
    );
    let p =
        "for j = parallel(_), k = _\n  if A[j, k] > 3\n    Q[k] <<choose(0.0)>>= x[j]\n  end\nend";
    let (want, runs) = unsplit_runs(p, &t);
    for (name, got) in runs {
        let (Buffer::F64(g), Buffer::F64(w)) = (got["Q"].to_dense(), &want["Q"]) else {
            panic!("f64 outputs");
        };
        assert!(
            g.iter()
                .zip(w.iter())
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{name}: {g:?} vs {w:?}"
        );
    }
}

/// Tensors by name, as a run leaves them.
type Tensors = BTreeMap<String, Tensor>;

/// The evaluator's result for `program`, and each backend's run of it on 2 threads with
/// every range split where it may be, asserting the kernel was not split into chunks.
fn unsplit_runs(
    program: &str,
    tensors: &Tensors,
) -> (BTreeMap<String, Buffer>, Vec<(String, Tensors)>) {
    let want = run_eval(&parse(program), tensors).unwrap();
    let runs = runners()
        .into_iter()
        .map(|(name, runner)| {
            runner.set_threads(2);
            runner.set_min_parallel_work(0);
            let c = runner
                .compile(&parse(program), &formats_of(tensors))
                .unwrap();
            assert!(c.parallel.is_none(), "{name}: split\n{}", c.ir);
            let mut got = tensors.clone();
            runner.execute(&c, &mut got).unwrap();
            (name.to_string(), got)
        })
        .collect();
    (want, runs)
}

fn refused(program: &str, tensors: &BTreeMap<String, Tensor>) -> Error {
    let runner = Runner::jit();
    runner
        .compile(&parse(program), &formats_of(tensors))
        .err()
        .unwrap_or_else(|| panic!("accepted:\n{program}"))
}

/// `program` must be refused as a race at line:column `at`, with a message saying `says`
/// (`case` names the case in a failure).
fn race_at(
    program: &str,
    tensors: &BTreeMap<String, Tensor>,
    at: (u32, u32),
    says: &str,
    case: &str,
) {
    let e = refused(program, tensors);
    assert!(
        matches!(&e, Error::Race { span, .. } if (span.line, span.col) == at),
        "{case}: {e}"
    );
    assert!(e.to_string().contains(says), "{case}: {e}");
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
    // A workspace read before this iteration declares it holds the previous iteration's value.
    let e = refused(
        "for i = parallel(_)\n  y[i] = s[]\n  s .= 0\n  s[] += x[i]\nend",
        &t,
    );
    assert!(
        matches!(&e, Error::Race { span, .. } if (span.line, span.col) == (3, 3)),
        "{e}"
    );
}

#[test]
fn separate_sparse_output_is_refused() {
    // Finch.jl #672: each row of a sparse output written by its own thread with `+=` raced
    // silently there; here a sparse output whose rows are not the loop's is refused.
    let mut t = inputs("Dense(SparseList(Element(0.0)))", false);
    t.insert(
        "B".to_string(),
        Tensor::empty(&fmt("SparseList(SparseList(Element(0.0)))"), &[N, N]).unwrap(),
    );
    race_at(
        "B .= 0\nfor i = parallel(_), j = _\n  B[i, j] += A[i, j]\nend",
        &t,
        (3, 3),
        "sparse level",
        "",
    );
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
    // The same program without `parallel`: its unsplit kernel's error, which one thread (the
    // split kernel's segments, one chunk) must raise too.
    let plain = "y .= 0\nfor i = _\n  y[i] = x[p[i]]\nend";
    for (name, runner) in runners() {
        let mut tensors = t.clone();
        let c = runner
            .compile(&parse(plain), &formats_of(&tensors))
            .unwrap();
        assert!(c.parallel.is_none());
        let unsplit = runner.execute(&c, &mut tensors).unwrap_err();
        let serial = run(&runner, 1, prog, &t).unwrap_err();
        assert!(matches!(serial, Error::Kernel(_)), "{name}: {serial}");
        assert_eq!(serial, unsplit, "{name}: one thread vs the unsplit kernel");
        for threads in [2, 4] {
            let par = run(&runner, threads, prog, &t).unwrap_err();
            assert_eq!(par, serial, "{name} x{threads}");
        }
    }
}

// The automatic parallel outer loop of einsum and the lazy API (issue 17, item 3): with a
// runner of two threads, einsum marks the outermost loop parallel when `parallelize` and the
// race check accept it; results equal the serial runner's, with the default threshold (small
// inputs run as one chunk) and with every range split.

use tessera::api::{Plan, einsum_with, formats_of as api_formats, lazy, plan_einsum, prepare};
use tessera::levels::row_appended_level;

/// Matrix formats einsum reads; `F` is the fill.
const EINSUM_FORMATS: &[&str] = &[
    "Dense(Dense(Element(F)))",
    "Dense(SparseList(Element(F)))",
    "SparseList(SparseList(Element(F)))",
    "SparseCOO{2}(Element(F))",
    "Dense(RunList(Element(F)))",
    "Dense(SparseByteMap(Element(F)))",
];

/// A small deterministic generator (xorshift), so shapes and data vary per seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random `rows x cols` matrix in `format` (runs of equal values, so run-length levels
/// store runs longer than one), integer-valued, as f64 or i64.
fn random_matrix(format: &str, int: bool, rows: usize, cols: usize, rng: &mut Rng) -> Tensor {
    let mut coords = vec![vec![], vec![]];
    let mut vals = vec![];
    for i in 0..rows {
        let mut v = 0i64;
        for j in 0..cols {
            if rng.below(4) == 0 {
                v = rng.below(9) as i64 - 4;
            }
            if v != 0 {
                coords[0].push(i as i64);
                coords[1].push(j as i64);
                vals.push(v);
            }
        }
    }
    let (f, values) = if int {
        (format.replace('F', "0"), Buffer::I64(vals.into()))
    } else {
        let v: Vec<f64> = vals.iter().map(|&v| v as f64 * 0.37).collect();
        (format.replace('F', "0.0"), Buffer::F64(v.into()))
    };
    Tensor::from_coo(&fmt(&f), &[rows, cols], &coords, &values, |_, b| b).unwrap()
}

fn random_vector(int: bool, n: usize, rng: &mut Rng) -> Tensor {
    if int {
        let v: Vec<i64> = (0..n).map(|_| rng.below(7) as i64 - 3).collect();
        Tensor::from_dense(&fmt("Dense(Element(0))"), &[n], &Buffer::I64(v.into())).unwrap()
    } else {
        let v: Vec<f64> = (0..n)
            .map(|_| rng.below(100) as f64 * 0.013 - 0.6)
            .collect();
        Tensor::from_dense(&fmt("Dense(Element(0.0))"), &[n], &Buffer::F64(v.into())).unwrap()
    }
}

/// The loop einsum on `threads` threads marks parallel, if any.
fn parallel_index(spec: &str, inputs: &[(&str, &Tensor)], threads: usize) -> Option<String> {
    let formats: Vec<_> = inputs.iter().map(|(n, t)| (*n, &t.format)).collect();
    let mut plan: Plan = plan_einsum(spec, &formats, None).unwrap();
    let tensors = prepare(&plan, inputs).unwrap();
    plan.parallelize(&api_formats(&tensors), threads);
    plan.parallel
}

/// `spec` on one thread, and on two with the default threshold and with every range split:
/// the same format and values (`exact`, or within rounding for float sums); a sparse output
/// appended row by row holds the same arrays. Returns the loop marked parallel and whether
/// the output's rows are separate: stored densely, or as `Dense` levels over one appending
/// level (`levels::row_appended_level`).
fn einsum_agrees(
    serial: &Runner,
    par: &Runner,
    spec: &str,
    inputs: &[(&str, &Tensor)],
    exact: bool,
) -> (Option<String>, bool) {
    let want = einsum_with(serial, spec, inputs, None).unwrap_or_else(|e| panic!("{spec}: {e}"));
    for min_work in [tessera::backend::parallel::MIN_PARALLEL_WORK, 0] {
        par.set_min_parallel_work(min_work);
        let got = einsum_with(par, spec, inputs, None)
            .unwrap_or_else(|e| panic!("{spec} on 2 threads: {e}"));
        let shapes: Vec<_> = inputs.iter().map(|(n, t)| (*n, t.shape.clone())).collect();
        assert_eq!(got.format, want.format, "{spec} {shapes:?}");
        if row_appended_level(&want.format).is_some() {
            assert_eq!(
                got.levels, want.levels,
                "{spec} {shapes:?} min work {min_work}"
            );
        }
        assert!(
            close(&got.to_dense(), &want.to_dense(), exact),
            "{spec} {shapes:?} min work {min_work}: {:?} vs serial {:?}",
            got.to_dense(),
            want.to_dense()
        );
    }
    (
        parallel_index(spec, inputs, par.threads()),
        want.format.is_dense() || row_appended_level(&want.format).is_some(),
    )
}

fn two_runners() -> (Runner, Runner) {
    let serial = Runner::jit();
    serial.set_threads(1);
    let par = Runner::jit();
    par.set_threads(2);
    (serial, par)
}

#[test]
fn einsum_outer_loop_in_parallel_equals_serial() {
    let (serial, par) = two_runners();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for format in EINSUM_FORMATS {
        for int in [false, true] {
            // Tiny shapes (one row, one column) and larger ones.
            let mut shapes = vec![(1, 1), (1, 5), (6, 1)];
            for _ in 0..3 {
                shapes.push((1 + rng.below(40) as usize, 1 + rng.below(40) as usize));
            }
            for (rows, cols) in shapes {
                let a = random_matrix(format, int, rows, cols, &mut rng);
                let b = random_matrix(format, int, rows, cols, &mut rng);
                let x = random_vector(int, cols, &mut rng);
                let v = random_vector(int, rows, &mut rng);
                let d = random_matrix("Dense(Dense(Element(F)))", int, cols, 3, &mut rng);
                let ax = [("A", &a), ("x", &x)];
                // Injective in the outer loop (rows of the output): parallel exactly when the
                // output's rows are separate (a sparse root level shares them).
                let (p, dense) = einsum_agrees(&serial, &par, "y[i] += A[i, j] * x[j]", &ax, int);
                assert_eq!(p.is_some(), dense, "{format}: SpMV");
                let ad = [("A", &a), ("D", &d)];
                let spmm = "C[i, k] += A[i, j] * D[j, k]";
                let (p, dense) = einsum_agrees(&serial, &par, spmm, &ad, int);
                assert_eq!(p.is_some(), dense, "{format}: SpMM");
                // Reductions across the outer loop: privatised, min and max exact.
                let av = [("A", &a), ("v", &v)];
                einsum_agrees(&serial, &par, "y[j] += A[i, j] * v[i]", &av, int);
                let aa = [("A", &a)];
                let (p, _) = einsum_agrees(&serial, &par, "s[] += A[i, j]", &aa, int);
                assert_eq!(p.as_deref(), Some("i"), "{format}: a sum is privatised");
                einsum_agrees(&serial, &par, "m[] <<min>>= A[i, j]", &aa, true);
                einsum_agrees(&serial, &par, "m[j] <<max>>= A[i, j]", &aa, true);
                // Elementwise: dense outputs and sparse ones appended by rows in parallel,
                // others serially.
                let ab = [("A", &a), ("B", &b)];
                for spec in ["C[i, j] = A[i, j] + B[i, j]", "C[i, j] = A[i, j] * B[i, j]"] {
                    let (p, dense) = einsum_agrees(&serial, &par, spec, &ab, true);
                    assert_eq!(p.is_some(), dense, "{format}: {spec}");
                }
            }
        }
    }
}

#[test]
fn einsum_outputs_that_may_not_run_in_parallel_stay_serial() {
    let (serial, par) = two_runners();
    let mut rng = Rng(77);
    for format in EINSUM_FORMATS.iter().skip(1) {
        for (rows, cols) in [(1, 1), (9, 9), (30, 30)] {
            let a = random_matrix(format, false, rows, cols, &mut rng);
            let b = random_matrix(format, false, rows, cols, &mut rng);
            // A sparse output: in parallel when its rows are appended separately (a `Dense`
            // root level), else serial (appends into shared positions).
            let aa = [("A", &a)];
            let (p, separate) = einsum_agrees(&serial, &par, "C[i, j] = A[i, j] * 2", &aa, true);
            assert_eq!(p.is_some(), separate, "{format}: elementwise");
            // A sparse product (Gustavson: a workspace declared inside the outer loop, rows
            // of the output appended).
            let ab = [("A", &a), ("B", &b)];
            let spgemm = "C[i, j] += A[i, k] * B[k, j]";
            let (p, separate) = einsum_agrees(&serial, &par, spgemm, &ab, false);
            assert!(p.is_none() || separate, "{format}: SpGEMM");
            // `-=` into one location from every iteration: no private copy folds it.
            let (p, _) = einsum_agrees(&serial, &par, "s[] -= A[i, j]", &aa, false);
            assert_eq!(p, None, "{format}: -=");
            // The same column of the output from several rows, subtracted.
            let x = random_vector(false, rows, &mut rng);
            let ax = [("A", &a), ("x", &x)];
            let (p, _) = einsum_agrees(&serial, &par, "y[j] -= A[i, j] * x[i]", &ax, false);
            assert_ne!(p.as_deref(), Some("i"), "{format}: scatter with -=");
        }
    }
    // One thread: nothing is marked.
    let a = random_matrix(EINSUM_FORMATS[1], false, 5, 5, &mut rng);
    let x = random_vector(false, 5, &mut rng);
    assert_eq!(
        parallel_index("y[i] += A[i, j] * x[j]", &[("A", &a), ("x", &x)], 1),
        None
    );
}

#[test]
fn einsum_over_the_threshold_runs_in_chunks() {
    // Large enough for the default threshold: 60 000 rows (indices) and entries.
    let (serial, par) = two_runners();
    let mut rng = Rng(5);
    let n = 60_000;
    for int in [false, true] {
        let a = random_vector(int, n, &mut rng);
        let b = random_vector(int, n, &mut rng);
        let ab = [("a", &a), ("b", &b)];
        let p = einsum_agrees(&serial, &par, "y[i] = a[i] * b[i]", &ab, true);
        assert_eq!(p.0.as_deref(), Some("i"));
        einsum_agrees(&serial, &par, "s[] += a[i] * b[i]", &ab, int);
        einsum_agrees(&serial, &par, "s[] <<max>>= a[i]", &[("a", &a)], true);
        let m = random_matrix(EINSUM_FORMATS[1], int, n, 4, &mut rng);
        let x = random_vector(int, 4, &mut rng);
        einsum_agrees(
            &serial,
            &par,
            "y[i] += M[i, j] * x[j]",
            &[("M", &m), ("x", &x)],
            int,
        );
    }
}

#[test]
fn lazy_kernels_run_their_outer_loop_in_parallel() {
    let (serial, par) = two_runners();
    let mut rng = Rng(11);
    for format in EINSUM_FORMATS {
        let a = random_matrix(format, false, 23, 17, &mut rng);
        let b = random_matrix("Dense(Dense(Element(F)))", false, 23, 17, &mut rng);
        let c = random_matrix("Dense(Dense(Element(F)))", false, 17, 5, &mut rng);
        let (la, lb, lc) = (lazy(&a), lazy(&b), lazy(&c));
        // Row sums of a product (dense output, one kernel), a matrix product (dense output),
        // SDDMM (sparse output for sparse `a`: serial).
        let cases = [
            (&la * &lb).sum(&[1]),
            la.matmul(&lc),
            &la * &lb.matmul(&lb.transpose()).sum(&[1]).expand_dims(1),
            &la * &lb.matmul(&lb.transpose()).transpose().matmul(&la),
        ];
        for (k, l) in cases.iter().enumerate() {
            let (want, _) = l.compute_with(&serial, None).unwrap();
            for min_work in [tessera::backend::parallel::MIN_PARALLEL_WORK, 0] {
                par.set_min_parallel_work(min_work);
                let (got, _) = l.compute_with(&par, None).unwrap();
                assert_eq!(got.format, want.format, "{format} case {k}");
                assert!(
                    close(&got.to_dense(), &want.to_dense(), false),
                    "{format} case {k} min work {min_work}"
                );
            }
        }
    }
}

#[test]
fn the_printed_einsum_program_shows_the_parallel_loop() {
    let mut rng = Rng(3);
    let a = random_matrix(EINSUM_FORMATS[1], false, 8, 8, &mut rng);
    let x = random_vector(false, 8, &mut rng);
    let inputs = [("A", &a), ("x", &x)];
    let formats: Vec<_> = inputs.iter().map(|(n, t)| (*n, &t.format)).collect();
    let mut plan = plan_einsum("y[i] += A[i, j] * x[j]", &formats, None).unwrap();
    let tensors = prepare(&plan, &inputs).unwrap();
    assert!(plan.parallelize(&api_formats(&tensors), 2));
    let text = plan.program.to_string();
    assert!(text.contains("for i = parallel(_)"), "{text}");
    // The kernel's code prints the chunked range.
    let (ir, _, _) = Runner::lower(&plan.program, &api_formats(&tensors)).unwrap();
    let code = ir.to_string();
    assert!(code.contains("parallel (i_lo, i_hi)"), "{code}");
    // Only that loop: the plan's loops share one place, and the loop over `j` inside was once
    // lowered as a parallel range too, its extent opaque chunk bounds (so the sparse row
    // searched for its start and loaded its last coordinate at every row).
    assert_eq!(code.matches("parallel (").count(), 1, "{code}");
    assert!(!code.contains("j_lo"), "{code}");
    // A sparse output appended by rows: in parallel, listed as such.
    let mut plan = plan_einsum("C[i, j] = A[i, j] * 2", &formats[..1], None).unwrap();
    let tensors = prepare(&plan, &inputs[..1]).unwrap();
    assert!(plan.parallelize(&api_formats(&tensors), 2));
    let (ir, _, _) = Runner::lower(&plan.program, &api_formats(&tensors)).unwrap();
    assert!(
        ir.to_string().contains("rows appended to C_idx C_val"),
        "{ir}"
    );
    // A sparse output with a sparse root level: the program stays serial.
    let dcsr = random_matrix(EINSUM_FORMATS[2], false, 8, 8, &mut rng);
    let mut plan = plan_einsum("C[i, j] = A[i, j] * 2", &[("A", &dcsr.format)], None).unwrap();
    let tensors = prepare(&plan, &[("A", &dcsr)]).unwrap();
    assert!(!plan.parallelize(&api_formats(&tensors), 2));
    assert!(!plan.program.to_string().contains("parallel"));
}

/// The chunked range's weights (the position array of the rows it drives), if any.
fn chunk_weights(stmts: &[tessera::ir::Stmt]) -> Option<Option<tessera::ir::BufId>> {
    stmts.iter().find_map(|s| match s {
        tessera::ir::Stmt::Chunked(c) => Some(c.weights),
        _ => None,
    })
}

#[test]
fn csr_rows_are_weighed_by_their_entries_at_either_index_width() {
    // A `coord=i32` CSR (a SciPy matrix shared from Python) has 4-byte positions; a range
    // over its rows must still be cut and thresholded by entries, not by rows.
    for format in [
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseList(Element(0.0), coord=i32))",
    ] {
        let mut rng = Rng(9);
        let a = random_matrix("Dense(SparseList(Element(F)))", false, 12, 12, &mut rng);
        let a = a.to_format(&fmt(format)).unwrap();
        let x = random_vector(false, 12, &mut rng);
        let inputs = [("A", &a), ("x", &x)];
        let formats: Vec<_> = inputs.iter().map(|(n, t)| (*n, &t.format)).collect();
        let mut plan = plan_einsum("y[i] += A[i, j] * x[j]", &formats, None).unwrap();
        let tensors = prepare(&plan, &inputs).unwrap();
        assert!(plan.parallelize(&api_formats(&tensors), 2));
        let (ir, _, _) = Runner::lower(&plan.program, &api_formats(&tensors)).unwrap();
        let weights = chunk_weights(&ir.body).expect("a chunked range");
        let w = weights.unwrap_or_else(|| panic!("no weights for {format}:\n{ir}"));
        assert_eq!(ir.bufs[w.0 as usize].name, "A_ptr", "{ir}");
    }
}

/// Give every statement of `body` one place, as a generated program may.
fn one_place(body: &mut [tessera::notation::ast::Stmt]) {
    use tessera::notation::ast::StmtKind;
    for s in body {
        s.span = tessera::span::Span::new(1, 1);
        if let StmtKind::Loop { body, .. } | StmtKind::Block(body) = &mut s.kind {
            one_place(body);
        }
    }
}

#[test]
fn parallel_loops_sharing_a_place_and_index_run_serially() {
    // Two sibling parallel loops over `i` at one place: one key for two loops with different
    // privatised outputs (none, then `s`). Neither may take the other's: both run serially.
    let mut p = parse(
        "y .= 0\ns .= 0\nfor i = parallel(_)\n  y[i] = x[i] * 2\nend\nfor i = parallel(_)\n  s[] += x[i]\nend",
    );
    one_place(&mut p.body);
    let t = inputs("Dense(SparseList(Element(0.0)))", true);
    let (ir, _, _) = Runner::lower(&p, &formats_of(&t)).unwrap();
    assert!(!ir.to_string().contains("parallel ("), "{ir}");
    let want = run_eval(&p, &t).unwrap();
    let runner = Runner::jit();
    runner.set_threads(2);
    runner.set_min_parallel_work(0);
    let mut got = t.clone();
    let c = runner.compile(&p, &formats_of(&got)).unwrap();
    runner.execute(&c, &mut got).unwrap();
    for n in ["y", "s"] {
        assert_eq!(got[n].to_dense(), want[n], "{n}");
    }
}

// Sparse outputs appended row by row (`Plan::rows`): each chunk of rows appends into fragments
// of its own, concatenated in chunk order, so the stored arrays equal the serial ones exactly.

/// A `rows x cols` matrix holding `entries` (row, column, value), in `format`.
fn sparse(format: &str, rows: usize, cols: usize, entries: &[(usize, usize, f64)]) -> Tensor {
    let coords = vec![
        entries.iter().map(|e| e.0 as i64).collect(),
        entries.iter().map(|e| e.1 as i64).collect(),
    ];
    let vals: Vec<f64> = entries.iter().map(|e| e.2).collect();
    Tensor::from_coo(
        &fmt(format),
        &[rows, cols],
        &coords,
        &Buffer::F64(vals.into()),
        |_, b| b,
    )
    .unwrap()
}

/// Square matrices with empty rows, dense rows, every entry in one row, no entry at all, and
/// one row (fewer rows than threads).
fn row_cases(format: &str) -> Vec<(String, Tensor)> {
    let mut out = vec![("mixed".to_string(), matrix(format, false))];
    let mut gaps = vec![];
    for i in 0..N {
        if i % 4 == 1 || i > N - 6 {
            continue; // empty rows, and a run of them at the end
        }
        for j in 0..N {
            if (i * 7 + j * 3) % 6 == 0 {
                gaps.push((i, j, (i + j) as f64 * 0.25 - 3.0));
            }
        }
    }
    out.push(("empty rows".into(), sparse(format, N, N, &gaps)));
    let one: Vec<_> = (0..N)
        .step_by(2)
        .map(|j| (N - 3, j, j as f64 + 0.75))
        .collect();
    out.push(("one row".into(), sparse(format, N, N, &one)));
    out.push(("no entry".into(), sparse(format, N, N, &[])));
    let single: Vec<_> = (0..3).map(|j| (0, j * 2, 1.5 + j as f64)).collect();
    out.push(("1 x 7".into(), sparse(format, 1, 7, &single)));
    out
}

/// Compile and run `program`, returning every tensor as stored.
fn run_stored(
    runner: &Runner,
    threads: usize,
    program: &str,
    tensors: &BTreeMap<String, Tensor>,
    split: bool,
) -> Result<BTreeMap<String, Tensor>> {
    let p = parse(program);
    let mut t = tensors.clone();
    runner.set_threads(threads);
    runner.set_min_parallel_work(0);
    let c = runner.compile(&p, &formats_of(&t))?;
    assert_eq!(c.parallel.is_some(), split, "split:\n{program}\n{}", c.ir);
    runner.execute(&c, &mut t)?;
    Ok(t)
}

/// `program` (with a top-level `parallel` loop writing the sparse `out`) on 2 and 3 threads
/// equals the serial run and the program without `parallel`, array for array, and the
/// reference evaluator's values, on every backend.
fn rows_agree(program: &str, tensors: &BTreeMap<String, Tensor>, out: &str, what: &str) {
    let plain = program.replace("parallel(_)", "_");
    let want = run_eval(&parse(program), tensors).unwrap_or_else(|e| panic!("{e}\n{program}"));
    let unsplit = run_stored(&Runner::jit(), 1, &plain, tensors, false).unwrap();
    for (name, runner) in runners() {
        let serial = run_stored(&runner, 1, program, tensors, true)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            serial[out].levels, unsplit[out].levels,
            "{name} {what}: 1 thread"
        );
        for threads in [2, 3] {
            let par = run_stored(&runner, threads, program, tensors, true)
                .unwrap_or_else(|e| panic!("{name} x{threads} {what}: {e}\n{program}"));
            assert_eq!(
                par[out].levels, serial[out].levels,
                "{name} x{threads} {what}: stored arrays\n{program}"
            );
            assert_eq!(par[out].to_dense(), want[out], "{name} x{threads} {what}");
        }
    }
}

const GUSTAVSON: &str = "C .= 0\nfor i = parallel(_)\n  w .= 0\n  for k = _, j = _\n    w[j] += A[i, k] * B[k, j]\n  end\n  for j = _\n    C[i, j] = w[j]\n  end\nend";

#[test]
fn row_wise_spgemm_in_parallel_equals_serial() {
    let csr = "Dense(SparseList(Element(0.0)))";
    for a_format in [
        csr,
        "SparseCOO{2}(Element(0.0))",
        "Dense(Dense(Element(0.0)))",
    ] {
        for (what, a) in row_cases(a_format) {
            let n = a.shape[1];
            let b = matrix(csr, false).to_dense();
            let b = Tensor::from_dense(&fmt("Dense(Dense(Element(0.0)))"), &[N, N], &b).unwrap();
            let b = b.to_format(&fmt(csr)).unwrap();
            let b = if n == N {
                b
            } else {
                let e: Vec<_> = (0..n).map(|k| (k, (k * 3) % 5, k as f64 - 0.5)).collect();
                sparse(csr, n, 5, &e)
            };
            for c_format in [csr, "Dense(SparseByteMap(Element(0.0)))"] {
                for w_format in ["SparseByteMap(Element(0.0))", "Dense(Element(0.0))"] {
                    let mut t = BTreeMap::new();
                    let m = b.shape[1];
                    t.insert("A".to_string(), a.clone());
                    t.insert("B".to_string(), b.clone());
                    t.insert(
                        "C".to_string(),
                        Tensor::empty(&fmt(c_format), &[a.shape[0], m]).unwrap(),
                    );
                    t.insert(
                        "w".to_string(),
                        Tensor::empty(&fmt(w_format), &[m]).unwrap(),
                    );
                    let what = format!("{what}: A {a_format}, C {c_format}, w {w_format}");
                    rows_agree(GUSTAVSON, &t, "C", &what);
                }
            }
        }
    }
}

/// Rows of C with hundreds of slots spread over a range tens of times longer (the bucket sort
/// of `runtime::intrinsics::sort_slots`), some rows empty, one full row of A, with 4- and
/// 8-byte indices: 1, 2 and 3 threads store the 1-thread JIT's arrays, with the evaluator's
/// values, on every backend.
#[test]
fn spgemm_with_wide_rows_in_parallel_equals_serial() {
    for coord in ["", ", coord=i32"] {
        let csr = format!("Dense(SparseList(Element(0.0){coord}))");
        // A 8 x 120: rows 0 and 5 empty, row 3 full; B 120 x 6000, about 24 a row: rows of
        // C of about 120 slots over a range of 6000.
        let mut coords = vec![vec![], vec![]];
        let mut vals = vec![];
        for i in 0..8i64 {
            for k in 0..120i64 {
                let on = match i {
                    0 | 5 => false,
                    3 => true,
                    _ => (i * 7919 + k * 104_729) % 23 == 0,
                };
                if on {
                    coords[0].push(i);
                    coords[1].push(k);
                    vals.push((i - k % 7) as f64 * 0.5 + 0.25);
                }
            }
        }
        let a = Tensor::from_coo(
            &fmt(&csr),
            &[8, 120],
            &coords,
            &Buffer::F64(vals.into()),
            |_, b| b,
        )
        .unwrap();
        let mut coords = vec![vec![], vec![]];
        let mut vals = vec![];
        for k in 0..120i64 {
            for n in 0..24i64 {
                coords[0].push(k);
                coords[1].push((k * 7_333 + n * n * 4_111 + n * 97) % 6_000);
                vals.push((n % 5) as f64 - 1.5);
            }
        }
        let b = Tensor::from_coo(
            &fmt(&csr),
            &[120, 6_000],
            &coords,
            &Buffer::F64(vals.into()),
            |_, b| b,
        )
        .unwrap();
        let mut t = BTreeMap::new();
        t.insert("A".to_string(), a);
        t.insert("B".to_string(), b);
        t.insert(
            "C".to_string(),
            Tensor::empty(&fmt(&csr), &[8, 6_000]).unwrap(),
        );
        t.insert(
            "w".to_string(),
            Tensor::empty(&fmt("SparseByteMap(Element(0.0))"), &[6_000]).unwrap(),
        );
        rows_agree(GUSTAVSON, &t, "C", &format!("wide rows, {csr}"));
    }
}

/// A `g x g` grid's 5-point stencil (a mesh's short rows: delaunay_n14's, usroads'), row
/// `r`'s entries valued by `r` and the column, in `csr` (with `0` fills for integers).
fn mesh(csr: &str, g: usize, int: bool) -> Tensor {
    let n = g * g;
    let mut coords = vec![vec![], vec![]];
    let mut vals = vec![];
    for r in 0..n {
        let (y, x) = (r / g, r % g);
        let mut cols = vec![r];
        if x > 0 {
            cols.push(r - 1);
        }
        if x + 1 < g {
            cols.push(r + 1);
        }
        if y > 0 {
            cols.push(r - g);
        }
        if y + 1 < g {
            cols.push(r + g);
        }
        cols.sort();
        for c in cols {
            coords[0].push(r as i64);
            coords[1].push(c as i64);
            vals.push(((r * 13 + c * 7) % 11) as f64 * 0.375 - 1.5);
        }
    }
    let (f, values) = if int {
        let v: Vec<i64> = vals.iter().map(|v| (v * 8.0) as i64).collect();
        (csr.replace("0.0", "0"), Buffer::I64(v.into()))
    } else {
        (csr.to_string(), Buffer::F64(vals.into()))
    };
    Tensor::from_coo(&fmt(&f), &[n, n], &coords, &values, |_, b| b).unwrap()
}

/// C = A A's inputs for an `n x n` `a`, the workspace a SparseByteMap.
fn square_inputs(a: &Tensor, csr: &str, int: bool) -> BTreeMap<String, Tensor> {
    let n = a.shape[0];
    let zero = |f: &str| {
        if int {
            f.replace("0.0", "0")
        } else {
            f.to_string()
        }
    };
    let mut t = BTreeMap::new();
    t.insert("A".to_string(), a.clone());
    t.insert("B".to_string(), a.clone());
    t.insert(
        "C".to_string(),
        Tensor::empty(&fmt(&zero(csr)), &[n, n]).unwrap(),
    );
    t.insert(
        "w".to_string(),
        Tensor::empty(&fmt(&zero("SparseByteMap(Element(0.0))")), &[n]).unwrap(),
    );
    t
}

/// The stencil's square on the runner's own threshold: its 5 entries a row cost less than
/// the chunks' private workspace rows, but its 25 multiply-adds a row (the rows of `B`
/// each entry of `A` selects, `ir::Nested`) pay for them, so the range runs on 2 and 3
/// threads (before, the entries alone kept it on one) and stores exactly the 1-thread
/// arrays (each row is one thread's, summed in the serial order), for float and integer
/// sums, with 4- and 8-byte indices. JIT and C (the interpreter is too slow for a
/// 10,000-row product). (`<<max>>=` is no test here: `max(w, 0)` is not a no-op, so its
/// product walks every column of `w` densely.)
#[test]
fn short_row_spgemm_splits_by_its_multiply_adds() {
    use tessera::backend::parallel::{MIN_PARALLEL_WORK, split_ranges};
    for coord in ["", ", coord=i32"] {
        let csr = format!("Dense(SparseList(Element(0.0){coord}))");
        for (int, program) in [(false, GUSTAVSON), (true, GUSTAVSON)] {
            let t = square_inputs(&mesh(&csr, 100, int), &csr, int);
            let p = parse(program);
            let (ir, _, _) = Runner::lower(&p, &formats_of(&t)).unwrap();
            let nested = ir.body.iter().find_map(|s| match s {
                tessera::ir::Stmt::Chunked(c) => c.nested,
                _ => None,
            });
            let nested = nested.unwrap_or_else(|| panic!("no nested fibers:\n{ir}"));
            assert_eq!(ir.bufs[nested.crd.0 as usize].name, "A_idx", "{ir}");
            assert_eq!(ir.bufs[nested.ptr.0 as usize].name, "B_ptr", "{ir}");
            for (name, runner) in runners().into_iter().filter(|(n, _)| *n != "interp") {
                let c = runner.compile(&p, &formats_of(&t)).unwrap();
                runner.set_min_parallel_work(MIN_PARALLEL_WORK);
                let mut serial = t.clone();
                runner.set_threads(1);
                runner.execute(&c, &mut serial).unwrap();
                for threads in [2, 3] {
                    let what = format!("{name} x{threads} {csr} int {int}\n{program}");
                    runner.set_threads(threads);
                    let before = split_ranges();
                    let mut par = t.clone();
                    runner.execute(&c, &mut par).unwrap();
                    assert_eq!(split_ranges(), before + 1, "not split: {what}");
                    assert_eq!(par["C"].levels, serial["C"].levels, "{what}");
                }
            }
        }
    }
}

/// The same products on tiny and ragged shapes (0, 1 and 2 rows, empty rows, a small mesh)
/// split whatever their work (threshold 0) on every backend: the stored arrays equal the
/// serial ones and the values the evaluator's; on the runner's threshold they stay whole.
#[test]
fn tiny_spgemm_in_parallel_equals_serial() {
    use tessera::backend::parallel::{MIN_PARALLEL_WORK, split_ranges};
    let csr = "Dense(SparseList(Element(0.0)))";
    let e = |n: usize, entries: &[(usize, usize, f64)]| sparse(csr, n, n, entries);
    let cases = [
        ("0 rows", e(0, &[])),
        ("1 row", e(1, &[(0, 0, 2.5)])),
        ("1 empty row", e(1, &[])),
        ("2 rows", e(2, &[(0, 1, -1.5), (1, 0, 3.0), (1, 1, 0.5)])),
        ("2 rows, one empty", e(2, &[(1, 0, 3.0), (1, 1, 0.5)])),
        (
            "empty rows",
            e(6, &[(0, 5, 1.0), (2, 0, -2.0), (2, 3, 4.0), (5, 2, 0.25)]),
        ),
        ("mesh 7 x 7", mesh(csr, 7, false)),
    ];
    for (what, a) in cases {
        let t = square_inputs(&a, csr, false);
        rows_agree(GUSTAVSON, &t, "C", what);
        let runner = Runner::jit();
        runner.set_threads(2);
        runner.set_min_parallel_work(MIN_PARALLEL_WORK);
        let c = runner.compile(&parse(GUSTAVSON), &formats_of(&t)).unwrap();
        let before = split_ranges();
        let mut got = t.clone();
        runner.execute(&c, &mut got).unwrap();
        assert_eq!(split_ranges(), before, "{what}: split on the threshold");
    }
}

/// A product whose later chunks append megabytes (their join is cut between the threads,
/// `backend::parallel::stitch`), run several times through one compiled kernel on 2-4 threads
/// with products of other sizes in between (each call's chunks append into the fragments the
/// call before left, emptied): every call stores exactly the 1-thread arrays. JIT and C (the
/// interpreter runs chunks one after another, and this product is too slow for it).
#[test]
fn large_spgemm_joins_in_parallel_and_reuses_fragments() {
    let csr = "Dense(SparseList(Element(0.0)))";
    let mut rng = Rng(0x5eed_0017);
    // A 700 x 40 (about 8 in 9 stored) times B 40 x 700: C is nearly dense, 400,000-odd
    // entries, 3 MB of coordinates and values in the chunks after the first.
    let b = random_matrix("Dense(SparseList(Element(F)))", false, 40, 700, &mut rng);
    let full = random_matrix("Dense(SparseList(Element(F)))", false, 700, 40, &mut rng);
    // Fewer entries, and rows left empty: the next call's fragments start shorter than
    // the memory the previous call left them.
    let mut coords = vec![vec![], vec![]];
    let mut vals = vec![];
    full.for_each_stored(&mut |c, v| {
        if c[0] % 3 != 1 && c[1] % 2 == 0 {
            coords[0].push(c[0] as i64);
            coords[1].push(c[1] as i64);
            vals.push(v.as_f64());
        }
    });
    let thin = Tensor::from_coo(
        &fmt(csr),
        &[700, 40],
        &coords,
        &Buffer::F64(vals.into()),
        |_, b| b,
    )
    .unwrap();
    let inputs = |a: &Tensor| {
        let mut t = BTreeMap::new();
        t.insert("A".to_string(), a.clone());
        t.insert("B".to_string(), b.clone());
        t.insert(
            "C".to_string(),
            Tensor::empty(&fmt(csr), &[700, 700]).unwrap(),
        );
        t.insert(
            "w".to_string(),
            Tensor::empty(&fmt("SparseByteMap(Element(0.0))"), &[700]).unwrap(),
        );
        t
    };
    let program = parse(GUSTAVSON);
    for (name, runner) in runners().into_iter().filter(|(n, _)| *n != "interp") {
        let want: Vec<_> = [&full, &thin]
            .iter()
            .map(|a| run_stored(&runner, 1, GUSTAVSON, &inputs(a), true).unwrap())
            .collect();
        let stored = want[0]["C"].countstored();
        assert!(stored > 400_000, "{stored}");
        // The 1-thread product itself against a plain triple loop (same order of k).
        for (a, w) in [&full, &thin].iter().zip(&want) {
            let (ad, bd) = (a.to_dense(), b.to_dense());
            let (ad, bd) = (ad.as_f64().unwrap(), bd.as_f64().unwrap());
            let cd = w["C"].to_dense();
            let cd = cd.as_f64().unwrap();
            for i in (0..700).step_by(7) {
                for j in 0..700 {
                    let x: f64 = (0..40).map(|k| ad[i * 40 + k] * bd[k * 700 + j]).sum();
                    assert!(
                        (cd[i * 700 + j] - x).abs() <= 1e-9 * (1.0 + x.abs()),
                        "{name} C[{i}, {j}]"
                    );
                }
            }
        }
        for threads in [2, 3, 4] {
            runner.set_threads(threads);
            runner.set_min_parallel_work(0);
            let c = runner
                .compile(&program, &formats_of(&inputs(&full)))
                .unwrap();
            for (call, k) in [0, 1, 0, 0, 1].into_iter().enumerate() {
                let mut t = inputs([&full, &thin][k]);
                runner.execute(&c, &mut t).unwrap();
                assert_eq!(
                    t["C"].levels, want[k]["C"].levels,
                    "{name} x{threads}, call {call}"
                );
            }
        }
    }
}

#[test]
fn sparse_filters_in_parallel_equal_serial() {
    let programs = [
        "C .= 0\nfor i = parallel(_), j = _\n  if A[i, j] > 0.5\n    C[i, j] = A[i, j]\n  end\nend",
        "C .= 0\nfor i = parallel(_), j = _\n  C[i, j] += A[i, j] * 2\nend",
    ];
    for a_format in FORMATS {
        for (what, a) in row_cases(a_format) {
            for c_format in [
                "Dense(SparseList(Element(0.0)))",
                "Dense(SparseByteMap(Element(0.0)))",
            ] {
                for p in programs {
                    let mut t = BTreeMap::new();
                    t.insert(
                        "C".to_string(),
                        Tensor::empty(&fmt(c_format), &a.shape).unwrap(),
                    );
                    t.insert("A".to_string(), a.clone());
                    rows_agree(p, &t, "C", &format!("{what}: A {a_format}, C {c_format}"));
                }
            }
        }
    }
}

#[test]
fn other_sparse_outputs_stay_refused() {
    let mut t = inputs("Dense(SparseList(Element(0.0)))", false);
    for f in [
        "Dense(SparseList(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "SparseCOO{2}(Element(0.0))",
        "Dense(SparseList(Dense(Element(0.0))))",
    ] {
        let shape: &[usize] = if f.matches('(').count() == 4 && f.contains("Dense(Element") {
            &[N, N, 2]
        } else {
            &[N, N]
        };
        t.insert("B".to_string(), Tensor::empty(&fmt(f), shape).unwrap());
        // The loop's index second: several iterations append to one row.
        if shape.len() == 2 {
            let e = refused(
                "B .= 0\nfor i = parallel(_), j = _\n  B[j, i] += A[i, j]\nend",
                &t,
            );
            assert!(
                matches!(&e, Error::Race { span, .. } if (span.line, span.col) == (3, 3)),
                "{f}: {e}"
            );
            assert!(
                e.to_string().contains("parallel loop over `i` (at 2:1)"),
                "{e}"
            );
        }
    }
    // A sparse level above the Dense one, a leaf under a dense level under the sparse one.
    for f in [
        "SparseList(SparseList(Element(0.0)))",
        "SparseCOO{2}(Element(0.0))",
        "SparseList(Dense(Element(0.0)))",
    ] {
        t.insert("B".to_string(), Tensor::empty(&fmt(f), &[N, N]).unwrap());
        race_at(
            "B .= 0\nfor i = parallel(_), j = _\n  B[i, j] = A[i, j]\nend",
            &t,
            (3, 3),
            "sparse level",
            f,
        );
    }
    // Nested parallel loops.
    t.insert(
        "B".to_string(),
        Tensor::empty(&fmt("Dense(SparseList(Element(0.0)))"), &[N, N]).unwrap(),
    );
    race_at(
        "B .= 0\nfor i = parallel(_)\n  for j = parallel(_)\n    B[i, j] = A[i, j]\n  end\nend",
        &t,
        (4, 5),
        "nested",
        "",
    );
}

#[test]
fn einsum_spgemm_runs_its_rows_in_parallel() {
    // CSR times CSR: Gustavson's product, a sparse output appended row by row.
    let (serial, par) = two_runners();
    let mut rng = Rng(21);
    for (rows, inner, cols) in [(1, 3, 4), (13, 9, 11), (40, 30, 35)] {
        let a = random_matrix(EINSUM_FORMATS[1], false, rows, inner, &mut rng);
        let b = random_matrix(EINSUM_FORMATS[1], false, inner, cols, &mut rng);
        let ab = [("A", &a), ("B", &b)];
        let (p, separate) = einsum_agrees(&serial, &par, "C[i, j] += A[i, k] * B[k, j]", &ab, true);
        assert_eq!(p.as_deref(), Some("i"), "{rows}x{inner}x{cols}");
        assert!(separate);
    }
}

#[test]
fn sparse_pattern_rows_in_parallel_equal_serial() {
    let p = "P .= false\nfor i = parallel(_), j = _\n  if A[i, j] > 0.5\n    P[i, j] = true\n  end\nend";
    for a_format in FORMATS {
        for (what, a) in row_cases(a_format) {
            let mut t = BTreeMap::new();
            let f = fmt("Dense(SparseList(Pattern()))");
            t.insert("P".to_string(), Tensor::empty(&f, &a.shape).unwrap());
            t.insert("A".to_string(), a.clone());
            rows_agree(p, &t, "P", &format!("{what}: A {a_format}"));
        }
    }
}

// 1-D sparse outputs (a BFS frontier `Fnext[k] |= true` under `for k = parallel(_)`): the
// loop's index is the appending level's own, each chunk appends a sorted run of coordinates,
// and the runs concatenated in chunk order are the serial list.

/// Dense vectors whose nonzeros lie everywhere, only at the start, only at the end (chunks
/// that append nothing), nowhere, and of length 1 (fewer indices than threads).
fn vector_cases() -> Vec<(String, Tensor)> {
    let dense = |v: Vec<f64>| {
        let n = v.len();
        Tensor::from_dense(&fmt("Dense(Element(0.0))"), &[n], &Buffer::F64(v.into())).unwrap()
    };
    let mixed: Vec<f64> = (0..N).map(|k| ((k * 7) % 5) as f64 * 0.4 - 0.3).collect();
    let start: Vec<f64> = (0..N)
        .map(|k| if k < 4 { 1.0 + k as f64 } else { 0.0 })
        .collect();
    let end: Vec<f64> = (0..N).map(|k| if k + 3 >= N { 2.5 } else { 0.0 }).collect();
    vec![
        ("mixed".into(), dense(mixed)),
        ("only the first entries".into(), dense(start)),
        ("only the last entries".into(), dense(end)),
        ("no entry".into(), dense(vec![0.0; N])),
        ("length 1".into(), dense(vec![3.0])),
    ]
}

#[test]
fn sparse_vectors_in_parallel_equal_serial() {
    let programs = [
        // A filter into a declared vector.
        (
            "y",
            "y .= 0\nfor i = parallel(_)\n  if x[i] > 0.5\n    y[i] = x[i]\n  end\nend",
        ),
        // Several writes per iteration.
        (
            "y",
            "y .= 0\nfor i = parallel(_)\n  if x[i] != 0\n    y[i] += x[i]\n    y[i] *= 3\n  end\nend",
        ),
    ];
    for (what, x) in vector_cases() {
        for y_format in [
            "SparseList(Element(0.0))",
            "SparseList(Element(0.0), coord=i32)",
            "SparseByteMap(Element(0.0))",
        ] {
            for (out, p) in programs {
                let mut t = BTreeMap::new();
                t.insert("x".to_string(), x.clone());
                t.insert(
                    out.to_string(),
                    Tensor::empty(&fmt(y_format), &x.shape).unwrap(),
                );
                rows_agree(p, &t, out, &format!("{what}: y {y_format}"));
            }
        }
    }
}

#[test]
fn frontiers_in_parallel_equal_serial() {
    // One pull step of BFS over the rows of `A` (examples/bfs_pull.tess without the early
    // exit): the frontier `F` is not declared, as the driver leaves it (empty, or holding
    // entries, when the step must run as one chunk after them).
    let p = "for k = parallel(_)\n  if !V[k]\n    for j = _\n      if F[follow(j)] && A[k, j] > 0.5\n        F2[k] |= true\n        P[k] <<max>>= j\n      end\n    end\n  end\nend";
    for a_format in FORMATS {
        for (what, a) in row_cases(a_format) {
            let n = a.shape[0];
            if a.shape[1] != n {
                continue;
            }
            for f2_format in ["SparseByteMap(Pattern())", "SparseList(Pattern())"] {
                let frontier = |ks: &[usize], format: &str| {
                    let coords = vec![ks.iter().map(|&k| k as i64).collect()];
                    let vals = Buffer::Bool(vec![true; ks.len()].into());
                    Tensor::from_coo(&fmt(format), &[n], &coords, &vals, |x, _| x).unwrap()
                };
                let f: Vec<usize> = (0..n).filter(|k| k % 3 == 0).collect();
                let visited: Vec<bool> = (0..n).map(|k| k % 3 == 0 || k % 5 == 1).collect();
                // Holding entries before the step: the chunks cannot start empty fragments.
                let before: Vec<usize> = (0..n).filter(|k| k % 5 == 1).collect();
                let mut starts = vec![("empty", frontier(&[], f2_format))];
                // A SparseList cannot take entries before its stored ones: serially an error.
                if f2_format.starts_with("SparseByteMap") {
                    starts.push(("not empty", frontier(&before, f2_format)));
                }
                for (start, f2) in starts {
                    let mut t = BTreeMap::new();
                    t.insert("A".to_string(), a.clone());
                    t.insert("F".to_string(), frontier(&f, "SparseByteMap(Pattern())"));
                    t.insert("F2".to_string(), f2);
                    t.insert(
                        "V".to_string(),
                        Tensor::from_dense(
                            &fmt("Dense(Element(false))"),
                            &[n],
                            &Buffer::Bool(visited.clone().into()),
                        )
                        .unwrap(),
                    );
                    t.insert(
                        "P".to_string(),
                        Tensor::empty(&fmt("Dense(Element(-1))"), &[n]).unwrap(),
                    );
                    let what = format!("{what}: A {a_format}, F2 {f2_format} {start}");
                    rows_agree(p, &t, "F2", &what);
                    rows_agree(p, &t, "P", &what);
                }
            }
        }
    }
}

#[test]
fn other_sparse_vector_writes_stay_refused() {
    let mut t = inputs("Dense(SparseList(Element(0.0)))", false);
    // Not the loop's own coordinate: iterations append to the one fiber out of order.
    for f in ["SparseList(Element(0.0))", "SparseByteMap(Element(0.0))"] {
        t.insert("z".to_string(), Tensor::empty(&fmt(f), &[N]).unwrap());
        let e = refused(
            "z .= 0\nfor i = parallel(_), j = _\n  z[j] += A[i, j]\nend",
            &t,
        );
        assert!(
            matches!(&e, Error::Race { span, .. } if (span.line, span.col) == (3, 3)),
            "{f}: {e}"
        );
        assert!(
            e.to_string().contains("first index is not the plain `i`"),
            "{f}: {e}"
        );
    }
    // A 1-D COO vector appends with no per-fragment cursor the level can name.
    t.insert(
        "z".to_string(),
        Tensor::empty(&fmt("SparseCOO{1}(Element(0.0))"), &[N]).unwrap(),
    );
    let e = refused("z .= 0\nfor i = parallel(_)\n  z[i] = x[i]\nend", &t);
    assert!(e.to_string().contains("sparse level"), "{e}");
}

// The graph drivers on several threads: BFS's pull steps and Bellman-Ford's pull rounds run
// their loops in parallel, and every result equals the serial driver's exactly.

/// A random directed graph on `n` vertices with about `m` edges, and edges from `hub` to every
/// `step`-th vertex (vertices `n - 3..n` are unreachable), weights 1..=9 and quarters, in
/// `format`.
fn random_graph(n: usize, m: usize, format: &str, rng: &mut Rng) -> Tensor {
    hub_graph(n, m, (1, 3), format, rng)
}

fn hub_graph(
    n: usize,
    m: usize,
    (hub, step): (usize, usize),
    format: &str,
    rng: &mut Rng,
) -> Tensor {
    let mut edges = std::collections::BTreeMap::new();
    for _ in 0..m {
        let (j, i) = (
            rng.below(n as u64 - 3) as usize,
            rng.below(n as u64 - 3) as usize,
        );
        edges.insert((j, i), (1 + rng.below(36)) as f64 * 0.25);
    }
    for i in (0..n - 3).step_by(step) {
        edges.insert((hub, i), 9.0);
    }
    let coords = vec![
        edges.keys().map(|e| e.0 as i64).collect(),
        edges.keys().map(|e| e.1 as i64).collect(),
    ];
    let vals: Vec<f64> = edges.values().copied().collect();
    let (values, format) = match format.contains("Pattern") {
        true => (Buffer::Bool(vec![true; vals.len()].into()), format),
        false => (Buffer::F64(vals.into()), format),
    };
    Tensor::from_coo(&fmt(format), &[n, n], &coords, &values, |x, _| x).unwrap()
}

#[test]
fn bfs_in_parallel_equals_serial() {
    use tessera::algorithms::bfs::{self, Direction};
    let mut rng = Rng(17);
    for (n, m) in [(5, 6), (60, 150), (300, 3000)] {
        let a = random_graph(n, m, bfs::GRAPH_FORMAT, &mut rng);
        let at = bfs::transpose(&a).unwrap();
        for (name, runner) in runners() {
            runner.set_threads(1);
            let serial = bfs::search(&runner, &a, &at, 0, Direction::Push).unwrap();
            runner.set_min_parallel_work(0);
            for threads in [1, 2, 3] {
                runner.set_threads(threads);
                for dir in [Direction::Push, Direction::Pull, Direction::Auto] {
                    let s = bfs::search(&runner, &a, &at, 0, dir).unwrap();
                    let what = format!("{name} x{threads} {dir:?}, {n} vertices");
                    // Threshold 0: every push step runs split on several threads.
                    let pushes = s
                        .steps
                        .iter()
                        .filter(|(d, _)| *d == Direction::Push)
                        .count();
                    let split = if threads > 1 { pushes } else { 0 };
                    assert_eq!(s.split, split, "{what}");
                    assert_eq!(s.level, serial.level, "{what}");
                    // Pull finds each vertex's smallest frontier in-neighbour, push its first
                    // claimant in frontier order: the same vertex.
                    assert_eq!(s.parent, serial.parent, "{what}");
                }
            }
        }
    }
}

/// Levels by a plain queue and, as parent of each vertex, its least in-neighbour one level
/// nearer the source: the vertex the serial push step's `choose` keeps (it walks the frontier
/// in increasing order) and the split step's `min` picks.
fn bfs_reference(n: usize, edges: &[(usize, usize)], source: usize) -> (Vec<i64>, Vec<i64>) {
    let mut level = vec![-1i64; n];
    let mut queue = std::collections::VecDeque::from([source]);
    level[source] = 0;
    while let Some(j) = queue.pop_front() {
        for &(a, b) in edges {
            if a == j && level[b] < 0 {
                level[b] = level[j] + 1;
                queue.push_back(b);
            }
        }
    }
    let mut parent = vec![-1i64; n];
    parent[source] = source as i64;
    for k in (0..n).filter(|&k| k != source && level[k] > 0) {
        parent[k] = edges
            .iter()
            .filter(|&&(a, b)| b == k && level[a] == level[k] - 1)
            .map(|&(a, _)| a as i64)
            .min()
            .unwrap();
    }
    (level, parent)
}

#[test]
fn bfs_split_push_steps_on_shaped_graphs() {
    use tessera::algorithms::bfs::{self, Direction};
    let n = 40;
    let path: Vec<_> = (0..n - 1).map(|i| (i, i + 1)).collect();
    let star: Vec<_> = (1..n).flat_map(|i| [(0, i), (i, 0)]).collect();
    let complete: Vec<_> = (0..12)
        .flat_map(|a| (0..12).filter(move |&b| b != a).map(move |b| (a, b)))
        .collect();
    // Two components; the second is never reached.
    let disconnected = vec![(0, 1), (1, 2), (2, 0), (5, 6), (6, 7)];
    let loops: Vec<_> = (0..n)
        .flat_map(|i| [(i, i), (i, (i * 7 + 3) % n)])
        .collect();
    // Contention: the source reaches 30 vertices, all of which reach each of the last 9 in
    // one step (every one of those is claimed by 30 frontier vertices at once).
    let fan: Vec<_> = (1..31)
        .flat_map(|j| std::iter::once((0, j)).chain((31..n).map(move |k| (j, k))))
        .collect();
    let mut rng = Rng(71);
    let mut random = std::collections::BTreeSet::new();
    while random.len() < 150 {
        random.insert((rng.below(n as u64) as usize, rng.below(n as u64) as usize));
    }
    let random: Vec<_> = random.into_iter().collect();
    let cases = [
        ("path", &path),
        ("star", &star),
        ("complete", &complete),
        ("disconnected", &disconnected),
        ("self loops", &loops),
        ("fan-in", &fan),
        ("random", &random),
    ];
    for (what, edges) in cases {
        let coords = vec![
            edges.iter().map(|e| e.0 as i64).collect(),
            edges.iter().map(|e| e.1 as i64).collect(),
        ];
        let values = Buffer::Bool(vec![true; edges.len()].into());
        let a =
            Tensor::from_coo(&fmt(bfs::GRAPH_FORMAT), &[n, n], &coords, &values, |x, _| x).unwrap();
        let at = bfs::transpose(&a).unwrap();
        for source in [0, 1, n - 1] {
            let (level, parent) = bfs_reference(n, edges, source);
            for (name, runner) in runners() {
                runner.set_min_parallel_work(0);
                for threads in [1, 2, 3] {
                    runner.set_threads(threads);
                    let s = bfs::search(&runner, &a, &at, source, Direction::Push).unwrap();
                    let at_what = format!("{what} from {source}, {name} x{threads}");
                    assert_eq!(s.level, level, "{at_what}");
                    assert_eq!(s.parent, parent, "{at_what}");
                    assert_eq!(s.split > 0, threads > 1, "{at_what}");
                }
            }
        }
    }
}

#[test]
fn bellman_ford_in_parallel_equals_serial() {
    use tessera::algorithms::bellman_ford::{self as bf, Direction};
    let mut rng = Rng(29);
    // The source's out-edges are most of the 60-vertex graph's; 301 vertices do not deal
    // evenly to 2 or 3 parts.
    for (n, m, hub) in [(5, 6, (1, 3)), (60, 20, (0, 1)), (301, 4000, (1, 3))] {
        let a = hub_graph(n, m, hub, bf::WEIGHTS, &mut rng);
        for (name, runner) in runners() {
            runner.set_threads(1);
            let serial = bf::shortest_paths(&runner, &a, 0).unwrap();
            assert_eq!(
                (serial.pulled, serial.split),
                (0, 0),
                "{name}: one thread pushes"
            );
            assert_eq!(serial.dist[n - 1], f64::INFINITY);
            runner.set_min_parallel_work(0);
            for threads in [1, 2, 3] {
                runner.set_threads(threads);
                for dir in [Direction::Push, Direction::Pull, Direction::Auto] {
                    let mut graph = BTreeMap::from([("A".to_string(), a.clone())]);
                    let p = bf::shortest_paths_directed(&runner, &mut graph, 0, dir).unwrap();
                    let what = format!("{name} x{threads} {dir:?}, {n} vertices");
                    assert_eq!(p.dist, serial.dist, "{what}");
                    assert_eq!(p.pred, serial.pred, "{what}");
                    assert_eq!(p.rounds, serial.rounds, "{what}");
                    // The transpose and the dealt weights the call built are its own.
                    assert_eq!(graph.keys().collect::<Vec<_>>(), ["A"], "{what}");
                    match dir {
                        Direction::Pull => assert_eq!((p.pulled, p.split), (p.rounds, 0), "{what}"),
                        // With the threshold at 0 every round of several threads splits.
                        _ if threads > 1 => {
                            assert_eq!((p.pulled, p.split), (0, p.rounds), "{what}")
                        }
                        _ => assert_eq!((p.pulled, p.split), (0, 0), "{what}"),
                    }
                }
            }
        }
    }
}

/// A random directed graph on `n` vertices with about `m` edges of integer weights 1..=3 and
/// edges of weight 3 from vertex 0 to every fifth vertex (vertices `n - 2..n` unreachable), in
/// `format`: small integer weights make many equal path lengths, so several improved vertices
/// lower one distance to the same value in a round and many vertices have several tight
/// in-edges (the predecessor must still be the serial one).
fn tied_graph(n: usize, m: usize, format: &str, rng: &mut Rng) -> Tensor {
    let mut edges = std::collections::BTreeMap::new();
    for _ in 0..m {
        let (j, i) = (
            rng.below(n as u64 - 2) as usize,
            rng.below(n as u64 - 2) as usize,
        );
        edges.insert((j, i), (1 + rng.below(3)) as f64);
    }
    for i in (1..n - 2).step_by(5) {
        edges.insert((0, i), 3.0);
    }
    let coords = vec![
        edges.keys().map(|e| e.0 as i64).collect(),
        edges.keys().map(|e| e.1 as i64).collect(),
    ];
    let vals = Buffer::F64(edges.values().copied().collect::<Vec<_>>().into());
    Tensor::from_coo(&fmt(format), &[n, n], &coords, &vals, |x, _| x).unwrap()
}

/// The most tight in-edges (`dist[j] + w == dist[i]`, both finite) any vertex of `a` has.
fn most_tight_in_edges(a: &Tensor, dist: &[f64]) -> usize {
    let mut tight = vec![0; dist.len()];
    a.for_each_stored(&mut |c, w| {
        let (j, i) = (c[0], c[1]);
        if dist[j].is_finite() && dist[j] + w.as_f64() == dist[i] {
            tight[i] += 1;
        }
    });
    tight.into_iter().max().unwrap_or(0)
}

#[test]
fn bellman_ford_owned_rounds_equal_serial() {
    use tessera::algorithms::bellman_ford::{self as bf, Direction};
    use tessera::algorithms::owners::Owners;
    use tessera::backend::parallel::{Atomics, MIN_PARALLEL_WORK, shared_ranges};
    let mut rng = Rng(41);
    for (n, m) in [(7, 12), (80, 400), (401, 3000)] {
        let a = tied_graph(n, m, bf::WEIGHTS, &mut rng);
        for (name, runner) in runners() {
            runner.set_threads(1);
            let serial = bf::shortest_paths(&runner, &a, 0).unwrap();
            assert_eq!((serial.split, serial.pulled), (0, 0), "{name}: one thread");
            assert_eq!(serial.dist[n - 1], f64::INFINITY);
            // (The 7-vertex graph is there for parts of two or three vertices.)
            assert!(
                n < 80 || most_tight_in_edges(&a, &serial.dist) >= 2,
                "{name}, {n} vertices: no ties"
            );
            let same = |p: &bf::Paths, what: &str| {
                assert_eq!(p.dist, serial.dist, "{what}");
                assert_eq!(p.pred, serial.pred, "{what}");
                assert_eq!(p.rounds, serial.rounds, "{what}");
            };
            let paths = |dir| {
                let mut graph = BTreeMap::from([("A".to_string(), a.clone())]);
                bf::shortest_paths_directed(&runner, &mut graph, 0, dir).unwrap()
            };
            for threads in [2, 3, 4] {
                runner.set_threads(threads);
                // Every round split: each part writes only its own distances, so no fold
                // goes through an atomic update or a private copy, whatever the mode says.
                runner.set_min_parallel_work(0);
                for atomics in [Atomics::Auto, Atomics::Always, Atomics::Never] {
                    runner.set_atomics(atomics);
                    let before = shared_ranges();
                    let p = paths(Direction::Push);
                    let what = format!("{name} x{threads} {atomics:?}, {n} vertices");
                    same(&p, &what);
                    assert_eq!((p.split, p.pulled), (p.rounds, 0), "{what}");
                    assert_eq!(shared_ranges(), before, "{what}");
                    assert_eq!(runner.min_parallel_work(), 0, "{what}: threshold restored");
                }
                runner.set_atomics(Atomics::Auto);
                // At the default threshold these rounds are far too small to split.
                runner.set_min_parallel_work(MIN_PARALLEL_WORK);
                let p = paths(Direction::Auto);
                same(
                    &p,
                    &format!("{name} x{threads} default threshold, {n} vertices"),
                );
                assert_eq!(p.split, 0, "{name} x{threads}, {n} vertices");
                // A threshold between the rounds' sizes: the large rounds split, the small
                // ones run as one chunk, and the results do not change.
                if n == 401 {
                    runner.set_min_parallel_work(200);
                    let p = paths(Direction::Push);
                    let what = format!("{name} x{threads} threshold 200");
                    same(&p, &what);
                    assert!(0 < p.split && p.split < p.rounds, "{what}: {}", p.split);
                    assert_eq!(
                        runner.min_parallel_work(),
                        200,
                        "{what}: threshold restored"
                    );
                }
                // Dealt weights the caller built once (as the command line does) are used;
                // ones dealt for another thread count are replaced for the call.
                for parts in [threads, threads + 1] {
                    let ao = Owners::new(n, parts).weights(&a).unwrap();
                    let mut graph =
                        BTreeMap::from([("A".to_string(), a.clone()), ("AO".to_string(), ao)]);
                    let p = bf::shortest_paths_directed(&runner, &mut graph, 0, Direction::Push)
                        .unwrap();
                    same(
                        &p,
                        &format!("{name} x{threads}, weights dealt to {parts} parts"),
                    );
                    assert_eq!(graph["AO"].shape[0], parts, "the caller's copy stays");
                }
            }
        }
    }
    // Weights whose out-degrees the driver cannot read: every round pushes serially.
    let a = tied_graph(60, 300, "Dense(Dense(Element(Inf)))", &mut rng);
    for (name, runner) in runners() {
        runner.set_threads(1);
        let serial = bf::shortest_paths(&runner, &a, 0).unwrap();
        runner.set_threads(2);
        runner.set_min_parallel_work(0);
        let mut graph = BTreeMap::from([("A".to_string(), a.clone())]);
        let p = bf::shortest_paths_directed(&runner, &mut graph, 0, Direction::Push).unwrap();
        assert_eq!(
            (p.dist, p.pred, p.split),
            (serial.dist, serial.pred, 0),
            "{name}"
        );
    }
}

#[test]
fn graph_pull_kernels_are_split_into_chunks() {
    use tessera::algorithms::{bellman_ford as bf, bfs};
    let pattern = random_graph(40, 100, bfs::GRAPH_FORMAT, &mut Rng(3));
    let weights = random_graph(40, 100, bf::WEIGHTS, &mut Rng(3));
    let vector = |f: &str| Tensor::empty(&fmt(f), &[40]).unwrap();
    let t = BTreeMap::from([
        ("AT".to_string(), pattern),
        ("F".to_string(), vector("SparseByteMap(Pattern())")),
        ("Fnext".to_string(), vector("SparseByteMap(Pattern())")),
        ("V".to_string(), vector("Dense(Element(false))")),
        ("P".to_string(), vector("Dense(Element(-1))")),
        (
            "p".to_string(),
            Tensor::empty(&fmt("ShortCircuitScalar(-1)"), &[]).unwrap(),
        ),
    ]);
    let w = BTreeMap::from([
        ("AT".to_string(), weights),
        ("D".to_string(), vector("Dense(Element(Inf))")),
        ("Dprev".to_string(), vector("Dense(Element(Inf))")),
        ("F".to_string(), vector("SparseByteMap(Pattern())")),
        ("Fprev".to_string(), vector("SparseByteMap(Pattern())")),
        ("P".to_string(), vector("Dense(Element(-1))")),
    ]);
    let runner = Runner::jit();
    runner.set_threads(2);
    for (program, tensors, names) in [
        (bfs::PULL, &t, &["AT", "F", "Fnext", "V", "P", "p"][..]),
        (bf::ROUND_PULL, &w, &["AT", "D", "Dprev", "F", "Fprev"][..]),
        (bf::PREDECESSORS_PULL, &w, &["AT", "D", "P"][..]),
    ] {
        let formats = names
            .iter()
            .map(|n| (n.to_string(), tensors[*n].format.clone()))
            .collect();
        let c = runner.compile(&parse(program), &formats).unwrap();
        assert!(c.parallel.is_some(), "not split:\n{program}\n{}", c.ir);
    }
}

// Atomic folds (issue 17, item 2): a reduction into a Dense output that several iterations
// reach may run as indivisible updates of the shared output instead of per-chunk copies
// (`Stmt::Atomic`, `backend::parallel::Atomics`). Results must equal the serial kernel's:
// exactly for integers, `min`, `max`, `&`, `|` (NaN and -0.0 included), within rounding for
// float sums.

/// An `N`x`N` matrix of element type `elem` (`f64 f32 i64 i32 bool u8`) in `format`'s levels
/// (its `Element(..)` replaced), with a few dense rows; `special` puts NaN, -0.0 and 0.0 among
/// float values.
fn typed_matrix(levels: &str, elem: &str, special: bool) -> Tensor {
    let mut coords = vec![vec![], vec![]];
    let mut raw = vec![];
    for i in 0..N {
        for j in 0..N {
            if i % 7 == 3 || (i * 31 + j * 17) % 5 == 0 || i.abs_diff(j) <= 1 {
                coords[0].push(i as i64);
                coords[1].push(j as i64);
                raw.push((i * 13 + j * 7) % 11);
            }
        }
    }
    let float = |r: usize| match (special, r) {
        (true, 0) => f64::NAN,
        (true, 1) => -0.0,
        (true, 2) => 0.0,
        _ => r as f64 - 4.5,
    };
    let values = match elem {
        "f64" => Buffer::F64(raw.iter().map(|&r| float(r)).collect()),
        "f32" => Buffer::F32(raw.iter().map(|&r| float(r) as f32).collect()),
        "i64" => Buffer::I64(raw.iter().map(|&r| r as i64 * 3 - 14).collect()),
        "i32" => Buffer::I32(raw.iter().map(|&r| r as i32 * 3 - 14).collect()),
        "bool" => Buffer::Bool(raw.iter().map(|&r| r % 3 != 0).collect()),
        "u8" => Buffer::U8(raw.iter().map(|&r| (r * 23 % 256) as u8).collect()),
        _ => unreachable!("{elem}"),
    };
    let f = levels.replace("LEAF", leaf_of(elem));
    Tensor::from_coo(&fmt(&f), &[N, N], &coords, &values, |_, b| b).unwrap()
}

fn leaf_of(elem: &str) -> &'static str {
    match elem {
        "f64" => "Element(0.0)",
        "f32" => "Element(0.0, f32)",
        "i64" => "Element(0)",
        "i32" => "Element(0, i32)",
        "bool" => "Element(false)",
        "u8" => "Element(0, u8)",
        _ => unreachable!("{elem}"),
    }
}

/// Elements equal bit for bit (NaN payloads and -0.0 included), or within rounding for float
/// sums when `!exact`.
fn same_bits(a: &Buffer, b: &Buffer, exact: bool) -> bool {
    let floats = |x: &Buffer| match x {
        Buffer::F64(v) => Some(v.to_vec()),
        Buffer::F32(v) => Some(v.iter().map(|&f| f64::from(f)).collect()),
        _ => None,
    };
    match (floats(a), floats(b)) {
        (Some(x), Some(y)) => {
            x.len() == y.len()
                && x.iter().zip(&y).all(|(p, q)| {
                    p.to_bits() == q.to_bits()
                        || (!exact && (p - q).abs() <= 1e-5 * (1.0 + p.abs().max(q.abs())))
                })
        }
        _ => a == b,
    }
}

/// Run `program` on every backend serially and on 2 threads with every range split and its
/// reductions forced through atomic updates (`Atomics::Always`), asserting the atomic path
/// ran, and compare `y` with the serial kernel and the evaluator.
fn atomic_agree(program: &str, tensors: &BTreeMap<String, Tensor>, exact: bool) {
    use tessera::backend::parallel::{Atomics, shared_ranges};
    let want = run_eval(&parse(program), tensors).unwrap_or_else(|e| panic!("{e}\n{program}"));
    for (name, runner) in runners() {
        let serial = run(&runner, 1, program, tensors).unwrap_or_else(|e| panic!("{name}: {e}"));
        runner.set_atomics(Atomics::Always);
        let before = shared_ranges();
        let par = run(&runner, 2, program, tensors)
            .unwrap_or_else(|e| panic!("{name} x2: {e}\n{program}"));
        assert!(
            shared_ranges() > before,
            "{name}: no atomic range\n{program}"
        );
        for (what, other) in [("serial", &serial["y"]), ("evaluator", &want["y"])] {
            assert!(
                same_bits(&par["y"], other, exact),
                "{name} atomics vs {what}: {:?} vs {:?}\n{program}",
                par["y"],
                other
            );
        }
    }
}

fn atomic_inputs(levels: &str, elem: &str, special: bool) -> BTreeMap<String, Tensor> {
    let a = typed_matrix(levels, elem, special);
    let y = Tensor::empty(&fmt(&format!("Dense({})", leaf_of(elem))), &[N]).unwrap();
    BTreeMap::from([("A".to_string(), a), ("y".to_string(), y)])
}

const ATOMIC_LEVELS: &[&str] = &["Dense(SparseList(LEAF))", "Dense(Dense(LEAF))"];

#[test]
fn atomic_sums_min_and_max_equal_serial() {
    for levels in ATOMIC_LEVELS {
        for elem in ["f64", "f32", "i64", "i32"] {
            let t = atomic_inputs(levels, elem, false);
            let float = elem.starts_with('f');
            let p = "y .= 0\nfor i = parallel(_), j = _\n  y[j] += A[i, j]\nend";
            atomic_agree(p, &t, !float);
            for op in ["min", "max"] {
                let p =
                    format!("y .= 3\nfor i = parallel(_), j = _\n  y[j] <<{op}>>= A[i, j]\nend");
                atomic_agree(&p, &t, true);
            }
        }
    }
}

#[test]
fn atomic_min_and_max_keep_nan_and_signed_zeros() {
    // NaN wins `min` and `max`, and -0.0 is below 0.0, as serially (IEEE 754-2019).
    for elem in ["f64", "f32"] {
        let t = atomic_inputs("Dense(SparseList(LEAF))", elem, true);
        for (op, init) in [("min", "0.0"), ("max", "-0.0"), ("min", "Inf")] {
            let p =
                format!("y .= {init}\nfor i = parallel(_), j = _\n  y[j] <<{op}>>= A[i, j]\nend");
            atomic_agree(&p, &t, true);
        }
        // Sums with NaN among the terms stay NaN where serially NaN.
        let p = "y .= 0\nfor i = parallel(_), j = _\n  y[j] += A[i, j]\nend";
        atomic_agree(p, &t, false);
    }
}

#[test]
fn atomic_or_and_and_equal_serial() {
    for levels in ATOMIC_LEVELS {
        for elem in ["bool", "u8"] {
            let t = atomic_inputs(levels, elem, false);
            let (zero, ones) = if elem == "bool" {
                ("false", "true")
            } else {
                ("0", "255")
            };
            for (op, init) in [("|", zero), ("&", ones)] {
                let p =
                    format!("y .= {init}\nfor i = parallel(_), j = _\n  y[j] {op}= A[i, j]\nend");
                atomic_agree(&p, &t, true);
            }
        }
    }
}

/// A `rows` x `cols` CSR matrix of 3 entries per row, and `y` of `cols` elements set to 50.
fn push_inputs(rows: usize, cols: usize) -> BTreeMap<String, Tensor> {
    let (mut coords, mut vals) = (vec![vec![], vec![]], vec![]);
    for i in 0..rows {
        let mut js: Vec<usize> = (0..3).map(|k| (i * 7919 + k * cols / 3) % cols).collect();
        js.sort_unstable();
        js.dedup();
        for j in js {
            coords[0].push(i as i64);
            coords[1].push(j as i64);
            vals.push(1.0 + ((i * 3 + j) % 7) as f64);
        }
    }
    let a = Tensor::from_coo(
        &fmt("Dense(SparseList(Element(0.0)))"),
        &[rows, cols],
        &coords,
        &Buffer::F64(vals.into()),
        |_, b| b,
    )
    .unwrap();
    let y = Tensor::from_dense(
        &fmt("Dense(Element(0.0))"),
        &[cols],
        &Buffer::F64(vec![50.0; cols].into()),
    )
    .unwrap();
    BTreeMap::from([("A".to_string(), a), ("y".to_string(), y)])
}

#[test]
fn atomics_are_chosen_where_copies_would_not_pay() {
    use tessera::backend::parallel::{Atomics, shared_ranges};
    let min =
        "for i = parallel(_), j = _\n  if A[i, j] != 0\n    y[j] <<min>>= A[i, j] + i\n  end\nend";
    let sum = "for i = parallel(_), j = _\n  y[j] += A[i, j] * i\nend";
    // (program, columns, policy, whether the chunks share `y`): 400 rows of 3 entries are
    // 1200 entries of work; copies of 20 000 columns per chunk cost more than that, copies of
    // 50 do not.
    let cases = [
        (min, 20_000, Atomics::Auto, true),
        (min, 20_000, Atomics::Never, false),
        (min, 50, Atomics::Auto, false),
        (min, 50, Atomics::Always, true),
        // Every update of a sum is a locked instruction: copies or the serial loop.
        (sum, 20_000, Atomics::Auto, false),
        (sum, 20_000, Atomics::Always, true),
    ];
    for (name, runner) in runners() {
        for (program, cols, policy, shares) in cases {
            let t = push_inputs(400, cols);
            let want = run_eval(&parse(program), &t).unwrap();
            runner.set_threads(2);
            runner.set_min_parallel_work(100);
            runner.set_atomics(policy);
            let c = runner.compile(&parse(program), &formats_of(&t)).unwrap();
            let mut got = t.clone();
            let before = shared_ranges();
            runner.execute(&c, &mut got).unwrap();
            let case = format!("{name} {policy:?} {cols} columns:\n{program}");
            assert_eq!(shared_ranges() > before, shares, "{case}");
            let (got, want) = (got["y"].to_dense(), &want["y"]);
            assert!(same_bits(&got, want, program == min), "{case}");
        }
    }
}

/// `parallelize(i, atomics)` / `parallelize(i, copies)` fix a loop's folds whatever the
/// runner's policy: the same cases as above, with the schedule's choice winning.
#[test]
fn schedule_chooses_atomics_or_copies_per_loop() {
    use tessera::backend::parallel::{Atomics, shared_ranges};
    use tessera::transforms::schedule::schedule;
    let min = "for i = _, j = _\n  if A[i, j] != 0\n    y[j] <<min>>= A[i, j] + i\n  end\nend";
    let sum = "for i = _, j = _\n  y[j] += A[i, j] * i\nend";
    // (program, columns, schedule, runner policy, whether the chunks share `y`): without the
    // schedule's choice, `Auto` shares the min over 20 000 columns and not the sum.
    let cases = [
        (min, 20_000, "parallelize(i, copies)", Atomics::Auto, false),
        (
            min,
            20_000,
            "parallelize(i, copies)",
            Atomics::Always,
            false,
        ),
        (min, 20_000, "parallelize(i)", Atomics::Auto, true),
        (sum, 20_000, "parallelize(i, atomics)", Atomics::Auto, true),
        (sum, 20_000, "parallelize(i, atomics)", Atomics::Never, true),
        (sum, 20_000, "parallelize(i)", Atomics::Auto, false),
    ];
    for (name, runner) in runners() {
        for (program, cols, sched, policy, shares) in cases {
            let t = push_inputs(400, cols);
            let want = run_eval(&parse(program), &t).unwrap();
            let q = schedule(&parse(program), sched).unwrap();
            runner.set_threads(2);
            runner.set_min_parallel_work(100);
            runner.set_atomics(policy);
            let c = runner.compile(&q, &formats_of(&t)).unwrap();
            let chosen = sched.contains(", ");
            assert_eq!(
                c.ir.to_string().contains("(the schedule's choice)"),
                chosen,
                "{}",
                c.ir
            );
            let mut got = t.clone();
            let before = shared_ranges();
            runner.execute(&c, &mut got).unwrap();
            let case = format!("{name} {sched} {policy:?} {cols} columns:\n{q}");
            assert_eq!(shared_ranges() > before, shares, "{case}");
            let (got, want) = (got["y"].to_dense(), &want["y"]);
            assert!(same_bits(&got, want, program == min), "{case}");
        }
    }
}
