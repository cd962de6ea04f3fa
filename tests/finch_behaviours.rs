//! Behaviours from Finch.jl's own tests (issue 13, "Finch behaviours still missing"), each run
//! compiled with the JIT and with the C backend (skipped, with a message, without a C
//! compiler) and checked against the reference evaluator and, where the Finch test has one,
//! its golden value:
//! - reopening a tensor for updates after it was read (Finch's thaw; Finch issue 358);
//! - a `let` whose value reads through a permissive `~` index (Finch PR 450);
//! - loop bounds given by scalars sizing an output in shape inference;
//! - `countstored` of SparseByteMap (Finch's representation tests).

mod common;

use common::cli::{Dir, ok, tessera};
use common::{fmt, formats_of, parse, run_eval};
use std::collections::BTreeMap;
use tessera::backend::CBackend;
use tessera::kernel_error::Order;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::{Error, KernelErrorKind};

type Tensors = BTreeMap<String, Tensor>;

fn tensors(list: Vec<(&str, Tensor)>) -> Tensors {
    list.into_iter().map(|(n, t)| (n.to_string(), t)).collect()
}

fn dense(format: &str, shape: &[usize], values: Buffer) -> Tensor {
    Tensor::from_dense(&fmt(format), shape, &values).unwrap()
}

fn empty(format: &str, shape: &[usize]) -> Tensor {
    Tensor::empty(&fmt(format), shape).unwrap()
}

/// The JIT, and the C backend when a C compiler is here (else a message says it is skipped).
fn runners(test: &str) -> Vec<(&'static str, Runner)> {
    let mut out = vec![("jit", Runner::jit())];
    let c = CBackend::new().with_cache_dir(std::env::temp_dir().join("tessera-test-cache"));
    if c.compiler_available() {
        out.push(("c", Runner::new(Box::new(c))));
    } else {
        eprintln!("{test}: no C compiler (cc or $CC), the C backend is skipped");
    }
    out
}

fn run_on(runner: &Runner, text: &str, ts: &mut Tensors) -> tessera::Result<()> {
    let k = runner.compile(&parse(text), &formats_of(ts))?;
    runner.execute(&k, ts)
}

/// Run `text` on every backend: each must succeed with valid storage, the evaluator's values
/// and the `golden` ones given. Returns each backend's tensors.
fn check(
    test: &str,
    text: &str,
    ts: &Tensors,
    golden: &[(&str, Buffer)],
) -> Vec<(&'static str, Tensors)> {
    let want = run_eval(&parse(text), ts).unwrap_or_else(|e| panic!("eval: {e}\n{text}"));
    for (n, g) in golden {
        assert_eq!(
            &want[*n], g,
            "the evaluator disagrees with Finch on `{n}`\n{text}"
        );
    }
    runners(test)
        .into_iter()
        .map(|(name, r)| {
            let mut got = ts.clone();
            run_on(&r, text, &mut got).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
            for (n, t) in &got {
                t.validate(n)
                    .unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
                assert_eq!(t.to_dense(), want[n], "{name}: `{n}`\n{text}");
            }
            (name, got)
        })
        .collect()
}

/// The error every backend gives for `text`.
fn errors(test: &str, text: &str, ts: &Tensors) -> Vec<(&'static str, Error)> {
    runners(test)
        .into_iter()
        .map(|(name, r)| {
            let mut got = ts.clone();
            let e = run_on(&r, text, &mut got).expect_err(name);
            (name, e)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Thaw: updating a tensor again after it was read

/// Finch issue 358 (`test/suites/issue_tests.jl`), transposed to row-major: `E` is updated
/// twice, read into `D`, then updated again; Finch checks `D == A + B` and `E == A + B + C`.
const ISSUE_358: &str = "D .= 0
E .= 0
for i = _, j = _
  E[i, j] += A[i, j]
end
for i = _, j = _
  E[i, j] += B[i, j]
end
for i = _, j = _
  D[i, j] += E[i, j]
end
for i = _, j = _
  E[i, j] += C[i, j]
end
";

#[test]
fn issue_358_update_read_update_on_every_reopening_format() {
    let m = |cells: &[(usize, usize)]| {
        let mut v = vec![0i64; 15];
        for &(i, j) in cells {
            v[i * 3 + j] = 1;
        }
        v
    };
    let (a, b, c) = (m(&[(0, 1)]), m(&[(2, 1), (0, 2)]), m(&[(3, 1)]));
    let sum = |x: &[i64], y: &[i64]| -> Vec<i64> { x.iter().zip(y).map(|(p, q)| p + q).collect() };
    let d_ref = sum(&a, &b);
    let e_ref = sum(&d_ref, &c);
    let csr = "Dense(SparseList(Element(0)))";
    // Finch's four formats, then the append-only ones this issue adds.
    for f in [
        "Dense(SparseList(Element(0)))",
        "Dense(SparseDict(Element(0)))",
        "Dense(SparseByteMap(Element(0)))",
        "Dense(Dense(Element(0)))",
        "Dense(SparseBlockList(Element(0)))",
        "Dense(SparseRunList(Element(0)))",
        "Dense(SparseCOO{1}(Element(0)))",
        "SparseCOO{2}(Element(0))",
    ] {
        let ts = tensors(vec![
            ("A", dense(csr, &[5, 3], Buffer::I64(a.clone().into()))),
            ("B", dense(csr, &[5, 3], Buffer::I64(b.clone().into()))),
            ("C", dense(csr, &[5, 3], Buffer::I64(c.clone().into()))),
            ("D", empty(f, &[5, 3])),
            ("E", empty(f, &[5, 3])),
        ]);
        let golden = [
            ("D", Buffer::I64(d_ref.clone().into())),
            ("E", Buffer::I64(e_ref.clone().into())),
        ];
        check("issue_358", ISSUE_358, &ts, &golden);
    }
}

/// Update `E`, read it into `s`, update it again, read it into `t`.
const REOPEN: &str = "E .= 0
for i = _
  E[i] += x[i]
end
s .= 0
for i = _
  s[] += E[i]
end
for i = _
  E[i] += y[i]
end
t .= 0
for i = _
  t[] += E[i]
end
";

fn vector(format: &str, values: Vec<f64>) -> Tensor {
    let n = values.len();
    dense(format, &[n], Buffer::F64(values.into()))
}

fn reopen_tensors(e: &str, x: Vec<f64>, y: Vec<f64>) -> Tensors {
    tensors(vec![
        ("x", vector("SparseList(Element(0.0))", x)),
        ("y", vector("SparseList(Element(0.0))", y)),
        ("E", empty(e, &[8])),
        ("s", empty("Element(0.0)", &[])),
        ("t", empty("Element(0.0)", &[])),
    ])
}

#[test]
fn append_only_levels_reopen_after_their_stored_entries() {
    let x = vec![0.0, 1.5, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0];
    // Entries after the last stored one; 4 continues the block that ends at 3.
    let y = vec![0.0, 0.0, 0.0, 0.0, 3.0, 4.0, 0.0, 1.0];
    let e: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    for f in [
        "SparseList(Element(0.0))",
        "SparseBlockList(Element(0.0))",
        "SparseRunList(Element(0.0))",
        "SparseCOO{1}(Element(0.0))",
        "SparseDict(Element(0.0))",
        "SparseByteMap(Element(0.0))",
        "Dense(Element(0.0))",
    ] {
        let golden = [
            ("E", Buffer::F64(e.clone().into())),
            ("s", Buffer::F64(vec![3.5].into())),
            ("t", Buffer::F64(vec![11.5].into())),
        ];
        let ts = reopen_tensors(f, x.clone(), y.clone());
        for (backend, got) in check("append_only_reopen", REOPEN, &ts, &golden) {
            // Appended storage is what building the same values directly gives (one block
            // 3..=5 for SparseBlockList, not a new block at 4). Hash tables may differ.
            if !f.contains("Dict") {
                let built = vector(f, e.clone());
                assert_eq!(got["E"].levels, built.levels, "{backend}: {f}");
            }
        }
    }
}

#[test]
fn formats_taking_any_order_reopen_for_entries_before_the_stored_ones() {
    let x = vec![0.0, 0.0, 0.0, 2.0, 0.0, 5.0, 0.0, 0.0];
    let y = vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 4.0];
    let e: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    for f in [
        "SparseCOO{1}(Element(0.0))",
        "SparseDict(Element(0.0))",
        "SparseByteMap(Element(0.0))",
    ] {
        let golden = [
            ("E", Buffer::F64(e.clone().into())),
            ("t", Buffer::F64(vec![12.0].into())),
        ];
        check(
            "any_order_reopen",
            REOPEN,
            &reopen_tensors(f, x.clone(), y.clone()),
            &golden,
        );
    }
}

#[test]
fn an_input_is_reopened_by_its_first_update() {
    // `E` comes in with entries and is never declared: the update appends to it.
    let text = "for i = _\n  E[i] += y[i]\nend\nt .= 0\nfor i = _\n  t[] += E[i]\nend\n";
    let stored = vec![0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0];
    let y = vec![0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 4.0];
    for f in [
        "SparseList(Element(0.0))",
        "SparseBlockList(Element(0.0))",
        "SparseRunList(Element(0.0))",
        "SparseCOO{1}(Element(0.0))",
    ] {
        let ts = tensors(vec![
            ("E", vector(f, stored.clone())),
            ("y", vector("SparseList(Element(0.0))", y.clone())),
            ("t", empty("Element(0.0)", &[])),
        ]);
        let e = vec![0.0, 1.0, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0];
        check(
            "input_reopen",
            text,
            &ts,
            &[
                ("E", Buffer::F64(e.into())),
                ("t", Buffer::F64(vec![10.0].into())),
            ],
        );
    }
}

#[test]
fn a_fiber_before_the_last_stored_one_cannot_take_more() {
    // Rows 0 and 1 are stored; the second pass passes over them and may write row 2, but
    // not row 0 (even after its stored entry).
    let text = "E .= 0
for i = _, j = _
  E[i, j] += X[i, j]
end
s .= 0
for i = _, j = _
  s[] += E[i, j]
end
for i = _, j = _
  E[i, j] += Y[i, j]
end
";
    let csr = "Dense(SparseList(Element(0.0)))";
    let m = |v: Vec<f64>| dense(csr, &[3, 2], Buffer::F64(v.into()));
    let x = m(vec![1.0, 0.0, 2.0, 0.0, 0.0, 0.0]);
    let later = m(vec![0.0, 0.0, 0.0, 0.0, 3.0, 0.0]);
    let earlier = m(vec![0.0, 3.0, 0.0, 0.0, 0.0, 0.0]);
    for f in [
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseBlockList(Element(0.0)))",
        "Dense(SparseRunList(Element(0.0)))",
    ] {
        let ts = |y: &Tensor| {
            tensors(vec![
                ("X", x.clone()),
                ("Y", y.clone()),
                ("E", empty(f, &[3, 2])),
                ("s", empty("Element(0.0)", &[])),
            ])
        };
        let e = Buffer::F64(vec![1.0, 0.0, 2.0, 0.0, 3.0, 0.0].into());
        check("fiber_order", text, &ts(&later), &[("E", e)]);
        for (backend, e) in errors("fiber_order", text, &ts(&earlier)) {
            let Error::Kernel(k) = &e else {
                panic!("{backend}: {f}: expected a kernel error, got {e}");
            };
            let msg = k.to_string();
            assert!(
                matches!(
                    k.kind,
                    KernelErrorKind::OutOfOrder {
                        order: Order::Fibers,
                        ..
                    }
                ) && k.hint.as_ref().is_some_and(|h| h.reopened_at.is_some()),
                "{backend}: {f}: {k:?}"
            );
            assert!(
                msg.contains("fibers must be written in increasing position order")
                    && msg.contains("`E` is updated again at 10:3 after it was read"),
                "{backend}: {f}: {msg}"
            );
        }
    }
}

#[test]
fn an_entry_before_the_last_stored_one_is_an_error_naming_the_reopening() {
    let x = vec![0.0, 1.5, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0];
    let y = vec![0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0, 4.0];
    for f in [
        "SparseList(Element(0.0))",
        "SparseBlockList(Element(0.0))",
        "SparseRunList(Element(0.0))",
    ] {
        let ts = reopen_tensors(f, x.clone(), y.clone());
        for (backend, e) in errors("entry_order", REOPEN, &ts) {
            let Error::Kernel(k) = &e else {
                panic!("{backend}: {f}: expected a kernel error, got {e}");
            };
            assert!(
                matches!(k.kind, KernelErrorKind::OutOfOrder { .. }),
                "{backend}: {f}: {k:?}"
            );
            let msg = k.to_string();
            assert!(
                msg.starts_with("tensor `E`: ")
                    && msg.contains("increasing")
                    && msg.contains("`E` is updated again at 10:3 after it was read")
                    && msg.contains("appends the new ones after them"),
                "{backend}: {f}: {msg}"
            );
        }
    }
}

#[test]
fn formats_that_cannot_reopen_name_the_read_and_the_update() {
    // Finch cannot reopen these either.
    for (f, why) in [
        (
            "RunList(Element(0.0))",
            "a RunList level cannot be reopened",
        ),
        (
            "SparseBand(Element(0.0))",
            "a SparseBand level cannot be reopened",
        ),
    ] {
        let ts = reopen_tensors(f, vec![0.0; 8], vec![0.0; 8]);
        for (backend, e) in errors("cannot_reopen", REOPEN, &ts) {
            let text = e.to_string();
            assert!(matches!(e, Error::Lifecycle { .. }), "{backend}: {text}");
            assert!(
                text.starts_with("10:3: lifecycle error: `E` is updated again here after it was read at 7:10, but ")
                    && text.contains(why)
                    && text.contains("Declare it again (`E .= ...`)"),
                "{backend}: {text}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// `let` with a permissive value

fn image(format: &str) -> Tensor {
    // 3 x 4: [5 0 2 0; 0 7 0 0; 0 0 0 1]
    let v = vec![5, 0, 2, 0, 0, 7, 0, 0, 0, 0, 0, 1];
    dense(format, &[3, 4], Buffer::I64(v.into()))
}

const IMAGE_FORMATS: [&str; 3] = [
    "Dense(Dense(Element(0)))",
    "Dense(SparseList(Element(0)))",
    "Dense(SparseRunList(Element(0)))",
];

#[test]
fn let_reads_a_left_neighbour_through_a_permissive_index() {
    let text = "for y = _, x = _
  let t = coalesce(w[y, ~(x - 1)], -1)
    out[y, x] = t * 10 + w[y, x]
  end
end
";
    let golden = vec![-5, 50, 2, 20, -10, 7, 70, 0, -10, 0, 0, 1];
    for f in IMAGE_FORMATS {
        let ts = tensors(vec![
            ("w", image(f)),
            ("out", empty("Dense(Dense(Element(0)))", &[3, 4])),
        ]);
        check(
            "let_left",
            text,
            &ts,
            &[("out", Buffer::I64(golden.clone().into()))],
        );
    }
}

#[test]
fn a_let_variable_is_missing_where_its_value_is() {
    // `t` itself may be `missing`: `coalesce` in the body replaces it, a test of it is false.
    let text = "for y = _, x = _
  let t = w[y, ~(x + 1)]
    out[y, x] = coalesce(t, 100) + w[y, x]
    if t > 1
      c[] += 1
    end
  end
end
";
    let golden = vec![5, 2, 2, 100, 7, 7, 0, 100, 0, 0, 1, 101];
    for f in IMAGE_FORMATS {
        let ts = tensors(vec![
            ("w", image(f)),
            ("out", empty("Dense(SparseList(Element(0)))", &[3, 4])),
            ("c", empty("Element(0)", &[])),
        ]);
        let golden = [
            ("out", Buffer::I64(golden.clone().into())),
            ("c", Buffer::I64(vec![2].into())),
        ];
        check("let_missing", text, &ts, &golden);
    }
}

#[test]
fn let_values_with_random_access_permissive_indices() {
    // Not offsets: `2 * x` and an index read from `I` (one of them negative) go through a
    // bounds-checked `let`; several names bound by one `let`.
    let text = "for y = _, x = _
  let t = w[y, ~(2 * x)], u = I[x]
    out[y, x] = coalesce(t, 100) + coalesce(w[y, ~u], 50)
  end
end
";
    for f in IMAGE_FORMATS {
        let ts = tensors(vec![
            ("w", image(f)),
            (
                "I",
                dense(
                    "Dense(Element(0))",
                    &[4],
                    Buffer::I64(vec![2, -1, 9, 0].into()),
                ),
            ),
            ("out", empty("Dense(Dense(Element(0)))", &[3, 4])),
        ]);
        check("let_random", text, &ts, &[]);
    }
}

// ---------------------------------------------------------------------------------------------
// Loop bounds from scalars in shape inference

const SCALAR_BOUND: &str = "C .= 0
for i = 0:m - 1, j = _, k = _
  C[i, j] += A[i, k] * B[k, j]
end
";

#[test]
fn a_loop_bound_given_by_a_scalar_sizes_the_output() {
    let d = Dir::new("finch-scalar-bound");
    let prog = d.file("mm.tess", SCALAR_BOUND);
    let a = d.file("A.tns", "# shape: 3x4\n1 1 1\n2 3 2\n3 2 3\n");
    let b = d.file("B.tns", "# shape: 4x3\n1 1 1\n2 2 2\n3 3 3\n4 1 4\n");
    for backend in ["jit", "c", "eval"] {
        if backend == "c" && !CBackend::new().compiler_available() {
            eprintln!("scalar bound: no C compiler, the C backend is skipped");
            continue;
        }
        let out = d.path(&format!("C_{backend}.tns"));
        ok(&[
            "run",
            &prog,
            "--in",
            &format!("A={a}@csr"),
            "--in",
            &format!("B={b}@csr"),
            "--scalar",
            "m=3",
            "--out",
            &format!("C={out}@csr"),
            "--backend",
            backend,
        ]);
        let written = std::fs::read_to_string(&out).unwrap();
        assert_eq!(
            written.trim_end(),
            "# shape: 3x3\n1 1 1.0\n2 3 6.0\n3 2 6.0",
            "{backend}"
        );
    }
    // The range must agree with what `i` indexes, as a literal range must.
    let a5 = d.file("A5.tns", "# shape: 5x4\n1 1 1\n");
    let o = tessera(&[
        "run",
        &prog,
        "--in",
        &format!("A={a5}@csr"),
        "--in",
        &format!("B={b}@csr"),
        "--scalar",
        "m=3",
        "--out",
        &format!("C={}", d.path("C5.tns")),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("3:14: dimension mismatch: index `i` ranges over the range 0:m - 1 = 0:2 but also over dimension 0 of `A` (size 5)"),
        "{err}"
    );
}

#[test]
fn the_runner_checks_outputs_against_scalar_loop_bounds() {
    let a = dense(
        "Dense(SparseList(Element(0.0)))",
        &[3, 4],
        Buffer::F64((0..12).map(f64::from).collect()),
    );
    let b = dense(
        "Dense(Dense(Element(0.0)))",
        &[4, 3],
        Buffer::F64((0..12).map(|v| f64::from(v % 5)).collect()),
    );
    let ts = |c_rows: usize| {
        tensors(vec![
            ("A", a.clone()),
            ("B", b.clone()),
            ("m", empty("Element(3)", &[])),
            ("C", empty("Dense(Dense(Element(0.0)))", &[c_rows, 3])),
        ])
    };
    check("runner_scalar_bound", SCALAR_BOUND, &ts(3), &[]);
    for (backend, e) in errors("runner_scalar_bound", SCALAR_BOUND, &ts(4)) {
        assert!(
            matches!(&e, Error::DimensionMismatch { msg, .. } if msg.contains("0:m - 1 = 0:2") && msg.contains("`C` (size 4)")),
            "{backend}: {e}"
        );
    }
    // A scalar the program writes is not a constant: nothing is inferred from it.
    let text = "m[] = 3\nfor i = 0:m - 1\n  y[i] = x[i]\nend\n";
    let shapes = [
        ("m".to_string(), Some(vec![])),
        ("x".to_string(), Some(vec![3])),
        ("y".to_string(), None),
    ]
    .into_iter()
    .collect();
    let values = [("m".to_string(), 3)].into_iter().collect();
    let written = tessera::run::scalar_values(
        &parse(text),
        &tensors(vec![("m", empty("Element(3)", &[]))]),
    );
    assert!(written.is_empty(), "{written:?}");
    let inferred = tessera::transforms::infer_shapes_with(&parse(text), &shapes, &values);
    assert_eq!(inferred.unwrap()["y"], vec![3]);
}

// ---------------------------------------------------------------------------------------------
// countstored of SparseByteMap

fn bools(format: &str, shape: &[usize], rows: &[&[u8]]) -> Tensor {
    let v: Vec<bool> = rows
        .iter()
        .flat_map(|r| r.iter().map(|&b| b == 1))
        .collect();
    dense(format, shape, Buffer::Bool(v.into()))
}

#[test]
fn countstored_of_a_byte_map_counts_every_slot_of_its_fibers() {
    // Finch's `test/reference64/representation/*SparseByteMap*` goldens; Finch is
    // column-major, so its matrices appear here transposed (its outer level is our first).
    let falses: [&[u8]; 5] = [&[0; 5]; 5];
    let one_bool: [&[u8]; 4] = [&[0, 0, 1, 0], &[0, 0, 0, 1], &[0, 0, 0, 0], &[1, 0, 0, 0]];
    let mix: [&[u8]; 4] = [
        &[0, 0, 1, 1, 0],
        &[1, 0, 1, 1, 1],
        &[0, 0, 1, 1, 0],
        &[1, 0, 1, 1, 1],
    ];
    type Case<'a> = (&'a str, &'a [usize], &'a [&'a [u8]], usize);
    let cases: [Case; 9] = [
        ("Dense(SparseByteMap(Element(false)))", &[5, 5], &falses, 25),
        (
            "Dense(SparseByteMap(Element(false)))",
            &[4, 4],
            &one_bool,
            16,
        ),
        ("Dense(SparseByteMap(Element(false)))", &[4, 5], &mix, 20),
        (
            "SparseList(SparseByteMap(Element(false)))",
            &[5, 5],
            &falses,
            0,
        ),
        (
            "SparseList(SparseByteMap(Element(false)))",
            &[4, 4],
            &one_bool,
            12,
        ),
        (
            "SparseList(SparseByteMap(Element(false)))",
            &[4, 5],
            &mix,
            20,
        ),
        ("SparseByteMap(Dense(Element(false)))", &[5, 5], &falses, 25),
        (
            "SparseByteMap(Dense(Element(false)))",
            &[4, 4],
            &one_bool,
            16,
        ),
        (
            "SparseByteMap(Element(false))",
            &[6],
            &[&[0, 0, 1, 0, 0, 0]],
            6,
        ),
    ];
    for (f, shape, rows, want) in cases {
        let t = bools(f, shape, rows);
        assert_eq!(t.countstored(), want, "{f} {shape:?}");
    }
    // A byte map a kernel wrote counts the same.
    let text = "y .= false\nfor i = _\n  y[i] |= x[i]\nend\n";
    let ts = tensors(vec![
        (
            "x",
            bools("SparseList(Element(false))", &[6], &[&[0, 1, 0, 0, 1, 0]]),
        ),
        ("y", empty("SparseByteMap(Element(false))", &[6])),
    ]);
    for (backend, got) in check("countstored", text, &ts, &[]) {
        assert_eq!(got["y"].countstored(), 6, "{backend}");
    }
    // An empty one holds every slot too.
    assert_eq!(
        empty("Dense(SparseByteMap(Element(0.0)))", &[2, 3]).countstored(),
        6
    );
}
