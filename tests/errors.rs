//! Error messages name the tensor, the loop and the place, and say what to change: lifecycle
//! errors (a tensor read and written inside one loop) and writes a format cannot take in the
//! loop order (out-of-order writes into SparseList-like levels).

mod common;

use common::{fmt, parse, run_eval};
use std::collections::BTreeMap;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::{Error, KernelErrorKind};

fn vector(format: &str, values: &[f64]) -> Tensor {
    Tensor::from_dense(
        &fmt(format),
        &[values.len()],
        &Buffer::F64(values.to_vec().into()),
    )
    .unwrap()
}

fn matrix(format: &str, rows: usize, values: &[f64]) -> Tensor {
    let cols = values.len() / rows;
    Tensor::from_dense(
        &fmt(format),
        &[rows, cols],
        &Buffer::F64(values.to_vec().into()),
    )
    .unwrap()
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
    let p = Tensor::from_dense(
        &fmt("Dense(Element(0))"),
        &[3],
        &Buffer::I64(vec![2, 0, 1].into()),
    )
    .unwrap();
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

/// The error a run gives, as a value.
fn jit_err(program: &tessera::notation::ast::Program, tensors: &[(&str, Tensor)]) -> Error {
    let mut ts: BTreeMap<String, Tensor> = tensors
        .iter()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .collect();
    common::run_jit(program, &mut ts).expect_err("the run should fail")
}

/// API users match on the kind of a kernel error and read its tensor and place, no text.
#[test]
fn kernel_errors_are_values_to_match_on() {
    let a = matrix("Dense(Dense(Element(0.0)))", 2, &[1.0, 2.0, 3.0, 4.0]);
    let c = Tensor::empty(&fmt("Dense(SparseList(Element(0.0)))"), &[2, 2]).unwrap();
    let p = parse("C .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n");
    let err = jit_err(&p, &[("A", a), ("C", c)]);
    let Error::Kernel(e) = &err else {
        panic!("expected a kernel error: {err}");
    };
    assert!(
        matches!(
            e.kind,
            KernelErrorKind::OutOfOrder {
                level: "SparseList",
                ..
            }
        ),
        "{e}"
    );
    assert!(
        matches!(&err, Error::Kernel(e) if matches!(e.kind, KernelErrorKind::OutOfOrder { .. }))
    );
    assert_eq!(e.tensor.as_deref(), Some("C"));
    // One write of `C`: it is the failing one, with its place and loops.
    assert_eq!(e.access.as_deref(), Some("C[i, j]"));
    assert_eq!((e.span.line, e.span.col), (3, 3));
    let loops: Vec<(&str, u32)> = e.writes[0]
        .loops
        .iter()
        .map(|(i, s)| (i.as_str(), s.col))
        .collect();
    assert_eq!(loops, [("j", 1), ("i", 12)]);
    let hint = e.hint.as_ref().expect("an order error says what to change");
    assert_eq!(
        hint.loop_order,
        Some(vec!["i".to_string(), "j".to_string()])
    );
}

/// A duplicate and a second entry are their own kinds, and get the writes but no order hint.
#[test]
fn refused_writes_of_other_kinds() {
    let x = vector("Dense(Element(0.0))", &[1.0, 2.0, 3.0]);
    let p = Tensor::from_dense(
        &fmt("Dense(Element(0))"),
        &[3],
        &Buffer::I64(vec![1, 0, 1].into()),
    )
    .unwrap();
    let program = parse("y .= 0\nfor i = _\n  y[P[i]] = x[i]\nend\n");
    let y = Tensor::empty(&fmt("SparseCOO{1}(Element(0.0))"), &[3]).unwrap();
    let err = jit_err(&program, &[("x", x.clone()), ("P", p), ("y", y)]);
    match &err {
        Error::Kernel(e) => {
            assert_eq!(e.kind, KernelErrorKind::Duplicate { level: "SparseCOO" });
            assert_eq!(e.access.as_deref(), Some("y[P[i]]"));
            assert_eq!(e.hint, None);
        }
        other => panic!("expected a kernel error: {other}"),
    }
    let y = Tensor::empty(&fmt("SparsePoint(Element(0.0))"), &[3]).unwrap();
    let err = jit_err(
        &parse("y .= 0\nfor i = _\n  y[i] = x[i]\nend\n"),
        &[("x", x), ("y", y)],
    );
    assert!(
        matches!(&err, Error::Kernel(e) if matches!(e.kind, KernelErrorKind::SecondEntry { .. })),
        "{err}"
    );
}

/// An index leaving a tensor names the tensor, the dimension and the value, and its place
/// in the program text; a built program has no text, so no `0:0` is shown.
/// A kernel error: the index `value` outside dimension 0 of `tensor` (`what` names the case).
fn assert_out_of_bounds<'a>(
    err: &'a Error,
    tensor: &str,
    value: i64,
    what: &str,
) -> &'a tessera::KernelError {
    let Error::Kernel(e) = err else {
        panic!("expected a kernel error: {err}");
    };
    assert_eq!(
        e.kind,
        KernelErrorKind::OutOfBounds {
            dim: 0,
            value: Some(value)
        },
        "{what}"
    );
    assert_eq!(e.tensor.as_deref(), Some(tensor), "{what}");
    e
}

#[test]
fn out_of_bounds_indices_name_the_tensor_index_and_place() {
    let i = Tensor::from_dense(
        &fmt("Dense(Element(0))"),
        &[3],
        &Buffer::I64(vec![1, 7, 2].into()),
    )
    .unwrap();
    let h = Tensor::empty(&fmt("Dense(Element(0))"), &[5]).unwrap();
    let text = "h .= 0\nfor i = _\n  h[I[i]] += 1\nend\n";
    let err = jit_err(&parse(text), &[("I", i.clone()), ("h", h.clone())]);
    let e = assert_out_of_bounds(&err, "h", 7, text);
    assert!(e.span.is_known(), "{e}");
    let shown = err.to_string();
    assert!(
        shown.contains(&format!(
            "{}: index 7 is outside dimension 0 of `h`",
            e.span
        )),
        "{shown}"
    );

    use tessera::notation::build::*;
    let built = program([
        declare("h", lit(0)),
        for_(
            "i",
            auto(),
            [assign(
                access("h", [idx(read(access("I", [idx("i")])))]),
                Reducer::Add,
                lit(1),
            )],
        ),
    ]);
    let err = jit_err(&built, &[("I", i), ("h", h)]);
    let shown = err.to_string();
    assert_eq!(
        shown, "kernel error: index 7 is outside dimension 0 of `h`",
        "{shown}"
    );
}

/// A fault on a tensor's arrays (storage that contradicts itself) names the tensor.
#[test]
fn inconsistent_storage_names_the_tensor() {
    let mut a = matrix("Dense(SparseList(Element(0.0)))", 2, &[1.0, 0.0, 2.0, 3.0]);
    let mut ptr = a.levels[1][0].as_i64().unwrap().to_vec();
    let last = ptr.len() - 1;
    ptr[last] += 40;
    a.levels[1][0] = Buffer::I64(ptr.into());
    let x = vector("Dense(Element(0.0))", &[1.0, 1.0]);
    let y = Tensor::empty(&fmt("Dense(Element(0.0))"), &[2]).unwrap();
    let p = parse("y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n");
    let err = jit_err(&p, &[("A", a), ("x", x), ("y", y)]);
    match &err {
        Error::Kernel(e) => {
            assert_eq!(e.tensor.as_deref(), Some("A"), "{e}");
            assert!(
                matches!(&e.kind, KernelErrorKind::Storage { array, .. } if array.starts_with("A_")),
                "{e}"
            );
            assert!(err.to_string().contains("tensor `A`: index"), "{err}");
        }
        other => panic!("expected a kernel error: {other}"),
    }
}

/// A compiled kernel checks the shapes of every run: a run whose shapes or integer scalars
/// differ from the last accepted ones is checked again (the check is skipped only for a
/// repeat of the same shapes).
#[test]
fn every_run_of_a_compiled_kernel_checks_its_shapes() {
    let runner = tessera::run::Runner::jit();
    let program = parse(
        "y .= 0\nfor i = _\n  y[i] += x[i] * z[i]\nend\ns .= 0\nfor k = 0:m - 1\n  s[] += w[k]\nend\n",
    );
    let scalar =
        |v: i64| Tensor::from_dense(&fmt("Element(0)"), &[], &Buffer::I64(vec![v].into())).unwrap();
    let make = |n: usize, m: i64, w: usize| -> BTreeMap<String, Tensor> {
        BTreeMap::from([
            (
                "x".to_string(),
                vector("Dense(Element(0.0))", &vec![1.0; n]),
            ),
            (
                "z".to_string(),
                vector("Dense(Element(0.0))", &vec![2.0; n]),
            ),
            (
                "y".to_string(),
                vector("Dense(Element(0.0))", &vec![0.0; n]),
            ),
            (
                "w".to_string(),
                vector("Dense(Element(0.0))", &vec![1.0; w]),
            ),
            ("m".to_string(), scalar(m)),
            (
                "s".to_string(),
                Tensor::empty(&fmt("Element(0.0)"), &[]).unwrap(),
            ),
        ])
    };
    let mut ts = make(3, 4, 4);
    let formats = common::formats_of(&ts);
    let c = runner.compile(&program, &formats).unwrap();
    runner.execute(&c, &mut ts).unwrap();
    runner.execute(&c, &mut ts).unwrap();
    assert_eq!(ts["s"].get(&[]).unwrap().as_f64(), 4.0);
    let mut bad = make(3, 4, 4);
    bad.insert("z".into(), vector("Dense(Element(0.0))", &[1.0; 5]));
    let e = runner.execute(&c, &mut bad).unwrap_err();
    assert!(matches!(e, Error::DimensionMismatch { .. }), "{e}");
    // A changed scalar sizes the `k` loop differently from `w`.
    let e = runner.execute(&c, &mut make(3, 5, 4)).unwrap_err();
    assert!(e.to_string().contains("`k`"), "{e}");
    // Consistent new shapes are accepted, and the first ones again.
    runner.execute(&c, &mut make(7, 2, 2)).unwrap();
    runner.execute(&c, &mut ts).unwrap();
    let e = runner.execute(&c, &mut bad).unwrap_err();
    assert!(matches!(e, Error::DimensionMismatch { .. }), "{e}");
}

/// A copy of a loop index used as a single-iteration loop (`for k = v:v` with `let v = i`,
/// what concordization makes of an index out of order) skips its bounds check only against
/// dimensions of the very size the loop over `i` runs through; any other dimension is still
/// checked, so an index past it is a kernel error, not a read outside the buffer.
#[test]
fn copies_of_an_index_are_still_checked_against_other_dimensions() {
    let a = Tensor::from_dense(
        &fmt("Dense(Element(0.0))"),
        &[3],
        &tessera::runtime::Buffer::F64(vec![1.0, 2.0, 3.0].into()),
    )
    .unwrap();
    let b = Tensor::from_dense(
        &fmt("Dense(Element(0.0))"),
        &[5],
        &tessera::runtime::Buffer::F64(vec![1.0; 5].into()),
    )
    .unwrap();
    let s = Tensor::empty(&fmt("Element(0.0)"), &[]).unwrap();
    let text = "s .= 0.0\nfor i = 0:size(B, 0) - 1\n  let v = i\n    for k = v:v\n      s[] += A[k] * B[i]\n    end\n  end\nend\n";
    let err = jit_err(&parse(text), &[("A", a), ("B", b), ("s", s)]);
    assert!(
        err.to_string().contains("outside dimension 0 of `A`"),
        "{err}"
    );
}

/// A bin index whose value range the kernel knows (`backend::ranges`: a byte `/ 16` is in
/// `[0, 15]`, `% 7` in `[0, 6]`) is tested once before the loop; an output smaller than the
/// range takes the checked loop and still fails at the first pixel outside, naming the
/// tensor and the index, with nothing written past it.
#[test]
fn a_ranged_index_past_a_small_output_names_it() {
    let img = Tensor::from_dense(
        &fmt("Dense(Element(0x00))"),
        &[4],
        &Buffer::U8(vec![3, 250, 17, 100].into()),
    )
    .unwrap();
    for (text, value) in [
        ("h .= 0\nfor i = _\n  h[div(img[i], 16)] += 1\nend\n", 15),
        ("h .= 0\nfor i = _\n  h[img[i] % 7] += 1\nend\n", 5),
        ("h .= 0\nfor i = _\n  h[img[i] & 12] += 1\nend\n", 8),
    ] {
        let h = Tensor::empty(&fmt("Dense(Element(0))"), &[4]).unwrap();
        let err = jit_err(&parse(text), &[("img", img.clone()), ("h", h)]);
        assert_out_of_bounds(&err, "h", value, text);
    }
}
