//! One semantics across the JIT, the C backend and the reference evaluator (README,
//! "Semantics"): each shape runs on all three, which must all succeed with the same values or
//! all fail with the same message. The C backend is skipped, with a message, without a C
//! compiler.

mod common;

use common::{fmt, parse, run_eval};
use std::collections::BTreeMap;
use tessera::backend::CBackend;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

type Tensors = BTreeMap<String, Tensor>;

fn tensors(list: Vec<(&str, Tensor)>) -> Tensors {
    list.into_iter().map(|(n, t)| (n.to_string(), t)).collect()
}

fn dense(format: &str, shape: &[usize], values: Buffer) -> Tensor {
    Tensor::from_dense(&fmt(format), shape, &values).unwrap_or_else(|e| panic!("{e}"))
}

fn vector(format: &str, values: &[f64]) -> Tensor {
    dense(format, &[values.len()], Buffer::F64(values.to_vec().into()))
}

fn ints(values: &[i64]) -> Tensor {
    dense(
        "Dense(Element(0))",
        &[values.len()],
        Buffer::I64(values.to_vec().into()),
    )
}

fn empty(format: &str, shape: &[usize]) -> Tensor {
    Tensor::empty(&fmt(format), shape).unwrap_or_else(|e| panic!("{e}"))
}

/// The compiled backends to compare: the JIT, and C when a compiler is here. Their kernel
/// budget is raised as the differential fuzz target's is: these are questions of meaning,
/// and some shapes found by fuzzing lower to large kernels.
fn compiled(test: &str) -> Vec<(&'static str, Runner)> {
    let mut out = vec![("jit", Runner::jit())];
    let c = CBackend::new().with_cache_dir(std::env::temp_dir().join("tessera-test-cache"));
    if c.compiler_available() {
        out.push(("c", Runner::new(Box::new(c))));
    } else {
        eprintln!("{test}: no C compiler (cc or $CC), the C backend is skipped");
    }
    for (_, r) in &out {
        r.set_max_kernel_size(100_000);
    }
    out
}

/// Every tensor's dense values after running `text`, per backend (`eval` last), and the
/// JIT's tensors.
type Values = BTreeMap<String, Vec<Scalar>>;

fn run_all(
    test: &str,
    text: &str,
    ts: &Tensors,
) -> (
    Vec<(&'static str, tessera::Result<Values>)>,
    Option<Tensors>,
) {
    let p = parse(text);
    let mut out = vec![];
    let mut jit = None;
    for (name, runner) in compiled(test) {
        let mut got = ts.clone();
        let r = runner
            .compile(&p, &common::formats_of(&got))
            .and_then(|k| runner.execute(&k, &mut got));
        if r.is_ok() {
            for (n, t) in &got {
                t.validate(n)
                    .unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
            }
        }
        let r = r.map(|()| got.iter().map(|(n, t)| (n.clone(), values(t))).collect());
        if name == "jit" && r.is_ok() {
            jit = Some(got);
        }
        out.push((name, r));
    }
    let eval =
        run_eval(&p, ts).map(|vs| vs.into_iter().map(|(n, v)| (n, v.to_scalars())).collect());
    out.push(("eval", eval));
    (out, jit)
}

/// Dense values as scalars.
fn values(t: &Tensor) -> Vec<Scalar> {
    t.to_dense().to_scalars()
}

/// Equal bits, or both NaN (the NaN payload is not specified).
fn same(a: &[Scalar], b: &[Scalar]) -> bool {
    let nan = |s: &Scalar| {
        matches!(s, Scalar::F64(v) if v.is_nan()) || matches!(s, Scalar::F32(v) if v.is_nan())
    };
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y || (nan(x) && nan(y)))
}

/// All backends succeed with the same values; returns the JIT's tensors.
fn agree(test: &str, text: &str, ts: Tensors) -> Tensors {
    let (results, jit) = run_all(test, text, &ts);
    let mut want: Option<Values> = None;
    for (backend, r) in results {
        let got = r.unwrap_or_else(|e| panic!("{backend}: {e}\n{text}"));
        match &want {
            None => want = Some(got),
            Some(w) => {
                for (n, v) in &got {
                    assert!(
                        same(v, &w[n]),
                        "{backend} and jit differ on `{n}`: {v:?} vs {:?}\n{text}",
                        w[n]
                    );
                }
            }
        }
    }
    jit.expect("the JIT succeeded")
}

/// All backends fail with the same message, which contains each of `parts`.
fn all_fail(test: &str, text: &str, ts: Tensors, parts: &[&str]) {
    let mut messages = vec![];
    for (backend, r) in run_all(test, text, &ts).0 {
        match r {
            Ok(got) => panic!("{backend} succeeded: {got:?}\n{text}"),
            Err(e) => messages.push((backend, e.to_string())),
        }
    }
    let (_, want) = &messages[0];
    for p in parts {
        assert!(want.contains(p), "`{want}` lacks `{p}`\n{text}");
    }
    for (backend, m) in &messages {
        assert_eq!(m, want, "{backend}'s message differs\n{text}");
    }
}

fn f64s(t: &Tensor) -> Vec<f64> {
    values(t).iter().map(Scalar::as_f64).collect()
}

// ---- item 1: an access with more indices than dimensions --------------------------------------

#[test]
fn an_access_with_too_many_indices_is_an_error_not_a_panic() {
    let t = "arity";
    for f in ["Dense(Element(0.0))", "SparseList(Element(0.0))"] {
        let ts = tensors(vec![
            ("x", vector(f, &[1.0, 2.0, 3.0])),
            ("s", empty("Element(0.0)", &[])),
        ]);
        // A repeated index is rewritten by normalisation: the check must come first.
        all_fail(
            t,
            "for i = _\n  s[] += x[i, i]\nend\n",
            ts.clone(),
            &["2:10: dimension mismatch: `x` has 1 dimension but `x[i, i]` gives 2 indices"],
        );
        all_fail(
            t,
            "for i = _, j = _\n  s[] += x[i, j]\nend\n",
            ts.clone(),
            &["`x` has 1 dimension but `x[i, j]` gives 2 indices"],
        );
        // `tessera code` lowers without running: the same error.
        let e = Runner::lower(
            &parse("for i = _\n  s[] += x[i, i]\nend\n"),
            &common::formats_of(&ts),
        )
        .expect_err("rejected");
        assert!(e.to_string().contains("gives 2 indices"), "{e}");
    }
}

// ---- item 4: loop names, multi-coordinate writes ------------------------------------------------

#[test]
fn a_nested_loop_cannot_reuse_its_outer_loops_name() {
    let ts = tensors(vec![
        (
            "x",
            vector("Dense(Element(0.0))", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        ),
        ("s", empty("Element(0.0)", &[])),
    ]);
    all_fail(
        "shadowing",
        "for i = 2:5\n  for i = _\n    s[] += x[i]\n  end\nend\n",
        ts.clone(),
        &["2:3: the loop over `i` at 2:3 reuses the name bound by the loop over `i` at 1:1"],
    );
    all_fail(
        "shadowing",
        "for i = _\n  let i = 0\n    s[] += x[i]\n  end\nend\n",
        ts.clone(),
        &["`let i` at 2:3 reuses the name bound by the loop over `i` at 1:1"],
    );
    // Sibling loops may share a name.
    let got = agree(
        "shadowing",
        "for i = _\n  s[] += x[i]\nend\nfor i = 2:5\n  s[] += x[i]\nend\n",
        ts,
    );
    assert_eq!(f64s(&got["s"]), vec![21.0 + 18.0]);
}

/// Found by the differential fuzzer once it declared outputs inside loops: re-declared at each
/// iteration and filled by that loop's index, a `SparseBand` output kept every iteration's
/// entry, a `SparseDict` none, and `RunList` and `SparseInterval` failed at run time. Every
/// backend now refuses the program before it runs; a workspace filled by an inner index is
/// what loops declare.
#[test]
fn a_tensor_declared_in_a_loop_is_not_filled_by_that_loops_index() {
    for format in [
        "SparseBand(Element(0.0))",
        "SparseDict(Element(0.0))",
        "RunList(Element(0.0))",
        "SparseInterval(Element(0.0))",
        "Dense(Element(0.0))",
    ] {
        let ts = tensors(vec![
            ("x", vector("Dense(Element(0.0))", &[1.0, 2.0, 3.0, 4.0])),
            ("y", empty(format, &[4])),
        ]);
        all_fail(
            "declared in its loop",
            "for i = _\n  y .= 0\n  y[i] += x[i]\nend\n",
            ts,
            &["3:3: `y` is declared at 2:3 inside the loop over `i` at 1:1"],
        );
        let ts = tensors(vec![
            (
                "A",
                triplets(
                    "Dense(SparseList(Element(0.0)))",
                    &[3, 4],
                    &[(0, 1, 2.0), (2, 3, 5.0)],
                ),
            ),
            ("y", empty(format, &[4])),
        ]);
        let got = agree(
            "declared in its loop",
            "for i = _\n  y .= 0\n  for j = _\n    y[j] += A[i, j]\n  end\nend\n",
            ts,
        );
        assert_eq!(f64s(&got["y"]), vec![0.0, 0.0, 0.0, 5.0], "{format}");
    }
}

const OUTPUTS: [&str; 4] = [
    "SparseDict(Element(0.0))",
    "SparseByteMap(Element(0.0))",
    "Dense(Element(0.0))",
    "SparseCOO{1}(Element(0.0))",
];

#[test]
fn two_writes_in_one_body_to_a_hashed_or_coordinate_output_are_both_kept() {
    let t = "two_writes";
    let x = vector("Dense(Element(0.0))", &[0.5, 1.5, 2.5]);
    for f in OUTPUTS {
        let ts = |y: Tensor| {
            tensors(vec![
                ("x", x.clone()),
                ("I", ints(&[0, 2, 4])),
                ("J", ints(&[5, 3, 1])),
                ("K", ints(&[1, 1, 0])),
                ("y", y),
            ])
        };
        // Distinct coordinates: every format takes them.
        let got = agree(
            t,
            "y .= 0\nfor i = _\n  y[I[i]] += x[i]\n  y[J[i]] += 2.0\nend\n",
            ts(empty(f, &[6])),
        );
        assert_eq!(f64s(&got["y"]), vec![0.5, 2.0, 1.5, 2.0, 2.5, 2.0], "{f}");
        assert_eq!(got["y"].countstored(), 6, "{f}");
        // The first write skipped (its entry is given back), the second kept.
        let got = agree(
            t,
            "y .= 0\nfor i = _\n  if x[i] > 1.0\n    y[I[i]] += x[i]\n  end\n  y[J[i]] += 2.0\nend\n",
            ts(empty(f, &[6])),
        );
        assert_eq!(f64s(&got["y"]), vec![0.0, 2.0, 1.5, 2.0, 2.5, 2.0], "{f}");
        if f.starts_with("SparseDict") || f.starts_with("SparseCOO") {
            assert_eq!(got["y"].countstored(), 5, "{f}: nothing stored at 0");
        }
        // One coordinate written by both writes (the issue's program among them): accumulated,
        // except by SparseCOO, which cannot combine repeated writes and says so. In the last,
        // the first write creates entry 0 and leaves it alone where `x[i] <= 1`, and the second
        // writes it: the entry must stay.
        for (text, n, want) in [
            (
                "y .= 0\nfor i = _\n  if x[i] > 1.0\n    y[I[i]] += x[i]\n  end\n  y[K[i]] += 2.0\nend\n",
                6,
                vec![2.0, 4.0, 1.5, 0.0, 2.5, 0.0],
            ),
            (
                "y .= 0\nfor i = _\n  y[i] += 1.0\n  y[0] += 1.0\nend\n",
                3,
                vec![4.0, 1.0, 1.0],
            ),
            (
                "y .= 0\nfor i = _\n  if x[i] > 1.0\n    y[i] += 1.0\n  end\n  y[0] += 5.0\nend\n",
                3,
                vec![15.0, 1.0, 1.0],
            ),
        ] {
            if f.starts_with("SparseCOO") {
                let mut ts = ts(empty(f, &[n]));
                let e = common::run_jit(&parse(text), &mut ts)
                    .unwrap_err()
                    .to_string();
                assert!(e.contains("a SparseCOO entry was written twice"), "{e}");
            } else {
                let got = agree(t, text, ts(empty(f, &[n])));
                assert_eq!(f64s(&got["y"]), want, "{f}\n{text}");
            }
        }
    }
}

#[test]
fn two_writes_in_one_body_to_a_matrix_keep_their_own_coordinates() {
    let a = dense(
        "Dense(Dense(Element(0.0)))",
        &[3, 4],
        Buffer::F64((1..=12).map(f64::from).collect()),
    );
    for f in [
        "SparseCOO{2}(Element(0.0))",
        "SparseDict(SparseDict(Element(0.0)))",
        "Dense(SparseDict(Element(0.0)))",
        "Dense(SparseCOO{1}(Element(0.0)))",
    ] {
        for text in [
            "Y .= 0\nfor i = _, j = _\n  Y[2 * i, j] += A[i, j]\n  Y[2 * i + 1, j] += 2.0\nend\n",
            "Y .= 0\nfor i = _, j = _\n  if A[i, j] > 5\n    Y[2 * i, j] += A[i, j]\n  end\n  Y[2 * i + 1, j] += 2.0\nend\n",
        ] {
            let got = agree(
                "matrix_writes",
                text,
                tensors(vec![("A", a.clone()), ("Y", empty(f, &[6, 4]))]),
            );
            // Odd rows get 2.0; even row 2i gets row i of A (only above 5 with the `if`).
            let masked = text.contains("> 5");
            let want: Vec<f64> = (0..6)
                .flat_map(|r| (0..4).map(move |c| (r, c)))
                .map(|(r, c)| match (r % 2, (4 * (r / 2) + c + 1) as f64) {
                    (1, _) => 2.0,
                    (_, a) if masked && a <= 5.0 => 0.0,
                    (_, a) => a,
                })
                .collect();
            assert_eq!(f64s(&got["Y"]), want, "{f}\n{text}");
        }
    }
}

// ---- item 5: the compiled backends and the evaluator agree --------------------------------------

#[test]
fn choose_compares_with_equality_so_negative_zero_matches_zero() {
    let t = "choose";
    let got = agree(
        t,
        "s .= 0\ns[] = -0.0\ns[] <<choose(0)>>= 5.0\n",
        tensors(vec![("s", empty("Element(0.0)", &[]))]),
    );
    assert_eq!(f64s(&got["s"]), vec![5.0]);
    // Formats that can be updated after they were read.
    for f in ["Dense(Element(0.0))", "SparseDict(Element(0.0))"] {
        let got = agree(
            t,
            "for i = _\n  y[i] <<choose(0)>>= x[i]\nend\n",
            tensors(vec![
                ("x", vector("Dense(Element(0.0))", &[7.0, 8.0, 9.0])),
                ("y", vector(f, &[-0.0, 1.0, 0.0])),
            ]),
        );
        assert_eq!(f64s(&got["y"]), vec![7.0, 1.0, 9.0], "{f}");
    }
}

#[test]
fn float_valued_indices_and_bounds_are_errors() {
    let t = "float_indices";
    let ts = tensors(vec![
        ("x", vector("Dense(Element(0.0))", &[1.0, 2.0, 3.0])),
        ("f", vector("Dense(Element(0.0))", &[0.5, 1.5, 2.5])),
        (
            "n",
            dense("Element(0.0)", &[], Buffer::F64(vec![1.5].into())),
        ),
        ("s", empty("Element(0.0)", &[])),
    ]);
    let msg = "an index or extent must be an integer, not a float";
    all_fail(
        t,
        "for i = _\n  s[] += x[f[i]]\nend\n",
        ts.clone(),
        &["2:12: ", msg],
    );
    all_fail(t, "s[] += x[1.5]\n", ts.clone(), &["1:10: ", msg]);
    all_fail(
        t,
        "for i = 0:n\n  s[] += x[i]\nend\n",
        ts.clone(),
        &["1:11: ", msg],
    );
    // Code that never runs is checked all the same.
    all_fail(
        t,
        "for i = _\n  if i > 5\n    s[] += x[i / 2]\n  end\nend\n",
        ts,
        &["3:14: ", msg],
    );
}

#[test]
fn constant_indices_are_bounds_checked_even_where_the_value_is_folded_away() {
    let t = "constant_indices";
    let a = dense(
        "Dense(SparseList(Element(0.0)))",
        &[3, 4],
        Buffer::F64((1..=12).map(f64::from).collect()),
    );
    let ts = tensors(vec![
        ("x", vector("Dense(Element(0.0))", &[1.0, 2.0, 3.0])),
        ("A", a),
        ("s", empty("Element(0.0)", &[])),
    ]);
    let oob = "tensor `A`: 2:26: index 1 = 99 is out of bounds for dimension 1 of size 4";
    all_fail(
        t,
        "for j = _\n  s[] += x[j] * 0 * A[j, 99]\nend\n",
        ts.clone(),
        &[oob],
    );
    // In a branch that is never taken, and through `size`.
    all_fail(
        t,
        "for j = _\n  if x[j] > 100\n    s[] += A[j, size(A, 1)]\n  end\nend\n",
        ts.clone(),
        &["index 1 = 4 is out of bounds for dimension 1 of size 4"],
    );
    // In range, and permissive (`missing` outside): no error.
    let got = agree(
        t,
        "for j = _\n  s[] += x[j] * A[j, 3] + coalesce(A[j, ~99], 0)\nend\n",
        ts,
    );
    assert_eq!(f64s(&got["s"]), vec![4.0 + 16.0 + 36.0]);
}

#[test]
fn zero_annihilates_products_even_against_nan_and_infinities() {
    let t = "strong_zero";
    let x = vector("Dense(Element(0.0))", &[1.0, 2.0, 3.0]);
    // The issue's program: the scalar holds the annihilator, the compiler skips the loop.
    let got = agree(
        t,
        "s .= 0\nfor i = _\n  s[] *= log(-x[i])\nend\n",
        tensors(vec![("x", x.clone()), ("s", empty("Element(0.0)", &[]))]),
    );
    assert_eq!(f64s(&got["s"]), vec![0.0]);
    // Stored zeros (dense) and skipped ones (sparse) against NaN and infinities.
    for f in [
        "Dense(Element(0.0))",
        "SparseList(Element(0.0))",
        "Dense(Element(1.0))",
    ] {
        let got = agree(
            t,
            "for i = _\n  y[i] = a[i] * b[i]\n  z[i] = b[i] * a[i] * 0\nend\ns .= 0\nfor i = _\n  s[] += (x[i] - x[i]) * log(-x[i])\nend\n",
            tensors(vec![
                ("a", vector(f, &[0.0, 2.0, 0.0, 3.0])),
                (
                    "b",
                    vector(
                        "Dense(Element(0.0))",
                        &[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 4.0],
                    ),
                ),
                ("x", x.clone()),
                ("y", empty("Dense(Element(0.0))", &[4])),
                ("z", empty("Dense(Element(0.0))", &[4])),
                ("s", empty("Element(0.0)", &[])),
            ]),
        );
        assert_eq!(f64s(&got["y"])[..3], [0.0, f64::INFINITY, 0.0], "{f}");
        assert_eq!(f64s(&got["z"]), vec![0.0; 4], "{f}");
        assert_eq!(f64s(&got["s"]), vec![0.0], "{f}");
    }
}

#[test]
fn an_unbound_name_is_an_error_even_where_the_value_is_missing() {
    let ts = tensors(vec![
        ("x", vector("Dense(Element(0.0))", &[1.0, 2.0, 3.0])),
        ("y", empty("Dense(Element(0.0))", &[3])),
    ]);
    all_fail(
        "unbound",
        "y[j] = missing\n",
        ts.clone(),
        &["1:3: unknown name `j`"],
    );
    all_fail(
        "unbound",
        "for i = _\n  y[i] = x[~(i + 5)] + k\nend\n",
        ts,
        &["2:24: unknown name `k`"],
    );
}

// ---- item 6: min and max with NaN -----------------------------------------------------------

#[test]
fn min_and_max_are_commutative_and_propagate_nan() {
    let t = "minmax";
    let nan = f64::NAN;
    let (a, b) = (
        [nan, 1.0, 2.0, -0.0, 0.0, nan],
        [1.0, nan, 3.0, 0.0, -0.0, nan],
    );
    for f in ["Dense(Element(0.0))", "SparseList(Element(0.0))"] {
        let n = a.len();
        let got = agree(
            t,
            "for i = _\n  lo[i] = min(a[i], b[i])\n  ol[i] = min(b[i], a[i])\n  hi[i] = max(a[i], b[i])\n  ih[i] = max(b[i], a[i])\nend\n",
            tensors(vec![
                ("a", vector(f, &a)),
                ("b", vector("Dense(Element(0.0))", &b)),
                ("lo", empty("Dense(Element(0.0))", &[n])),
                ("ol", empty("Dense(Element(0.0))", &[n])),
                ("hi", empty("Dense(Element(0.0))", &[n])),
                ("ih", empty("Dense(Element(0.0))", &[n])),
            ]),
        );
        assert!(same(&values(&got["lo"]), &values(&got["ol"])), "{f}");
        assert!(same(&values(&got["hi"]), &values(&got["ih"])), "{f}");
        let lo = values(&got["lo"]);
        assert!(lo[0].as_f64().is_nan() && lo[1].as_f64().is_nan() && lo[5].as_f64().is_nan());
        assert_eq!(
            lo[2..5],
            [Scalar::F64(2.0), Scalar::F64(-0.0), Scalar::F64(-0.0)]
        );
        let hi = values(&got["hi"]);
        assert_eq!(
            hi[2..5],
            [Scalar::F64(3.0), Scalar::F64(0.0), Scalar::F64(0.0)]
        );
    }
    // Constant folding follows the same rule.
    let got = agree(
        t,
        "s[] = min(NaN, 1.0)\nu[] = min(1.0, NaN)\nv[] = max(1.0, NaN)\nw[] = min(3, -2)\n",
        tensors(vec![
            ("s", empty("Element(0.0)", &[])),
            ("u", empty("Element(0.0)", &[])),
            ("v", empty("Element(0.0)", &[])),
            ("w", empty("Element(0)", &[])),
        ]),
    );
    for n in ["s", "u", "v"] {
        assert!(f64s(&got[n])[0].is_nan(), "{n}");
    }
    assert_eq!(values(&got["w"]), vec![Scalar::I64(-2)]);
}

#[test]
fn min_and_max_reductions_propagate_nan_even_after_an_infinity() {
    let t = "minmax_reductions";
    let x = vector(
        "Dense(Element(0.0))",
        &[1.0, f64::NEG_INFINITY, f64::INFINITY, f64::NAN, 5.0],
    );
    for (init, op, f) in [
        ("Inf", "min", "Element(Inf)"),
        ("Inf", "min", "ShortCircuitScalar(Inf)"),
        ("-Inf", "max", "Element(-Inf)"),
        ("-Inf", "max", "ShortCircuitScalar(-Inf)"),
    ] {
        let text = format!("m .= {init}\nfor i = _\n  m[] <<{op}>>= x[i]\nend\n");
        let got = agree(
            t,
            &text,
            tensors(vec![("x", x.clone()), ("m", empty(f, &[]))]),
        );
        assert!(f64s(&got["m"])[0].is_nan(), "{f}: {:?}", f64s(&got["m"]));
    }
    // Integers are unaffected.
    let got = agree(
        t,
        "m .= 100\nfor i = _\n  m[] <<min>>= k[i]\nend\n",
        tensors(vec![
            ("k", ints(&[4, -7, 9])),
            ("m", empty("ShortCircuitScalar(100)", &[])),
        ]),
    );
    assert_eq!(values(&got["m"]), vec![Scalar::I64(-7)]);
}

// ---- the strong zero with IEEE products and an exact re-run (ir/ieee_mul.rs) ---------------------

/// Whether the JIT's kernel for `text` multiplies with IEEE products somewhere, i.e. whether
/// running it exercises the NaN test and the re-run.
fn uses_ieee_products(text: &str, ts: &Tensors) -> bool {
    let runner = Runner::jit();
    let k = runner
        .compile(&parse(text), &common::formats_of(ts))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    k.ir.to_string().contains("ieee_mul(")
}

/// A matrix from triplets; zeros among the values stay stored.
fn triplets(format: &str, shape: &[usize], entries: &[(i64, i64, f64)]) -> Tensor {
    let coords = vec![
        entries.iter().map(|e| e.0).collect(),
        entries.iter().map(|e| e.1).collect(),
    ];
    let values = Buffer::F64(entries.iter().map(|e| e.2).collect());
    Tensor::from_triplets(format, shape, &coords, &values).unwrap_or_else(|e| panic!("{e}"))
}

/// A vector from its stored entries; zeros among them stay stored.
fn stored(format: &str, n: usize, entries: &[(i64, f64)]) -> Tensor {
    let coords = vec![entries.iter().map(|e| e.0).collect()];
    let values = Buffer::F64(entries.iter().map(|e| e.1).collect());
    Tensor::from_triplets(format, &[n], &coords, &values).unwrap_or_else(|e| panic!("{e}"))
}

const SPMV_ROWS: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";

#[test]
fn spmv_with_stored_zeros_against_nan_and_infinities_re_runs_exactly() {
    let t = "ieee_spmv";
    let (nan, inf) = (f64::NAN, f64::INFINITY);
    // Row 0: stored 0 * NaN, row 1: stored 0 * Inf, row 2: Inf + -Inf (NaN under both
    // semantics), row 3: stored 0 * NaN and 0 * -Inf among finite products, row 4: finite.
    let entries = [
        (0, 0, 0.0),
        (0, 1, 2.0),
        (1, 1, 3.0),
        (1, 2, 0.0),
        (2, 2, 1.0),
        (2, 3, 1.0),
        (3, 0, 0.0),
        (3, 1, 5.0),
        (3, 3, 0.0),
        (4, 1, -1.5),
    ];
    let want = [4.0, 6.0, nan, 10.0, -3.0];
    let x = [nan, 2.0, inf, -inf];
    for a in [
        "Dense(SparseList(Element(0.0)))",
        "Dense(Dense(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "SparseCOO{2}(Element(0.0))",
        "Dense(SparseBlockList(Element(0.0)))",
        "Dense(SparseBand(Element(0.0)))",
        "Dense(SparseByteMap(Element(0.0)))",
        "Dense(SparseDict(Element(0.0)))",
    ] {
        for xf in ["Dense(Element(0.0))", "SparseList(Element(0.0))"] {
            let ts = tensors(vec![
                ("A", triplets(a, &[5, 4], &entries)),
                ("x", vector(xf, &x)),
                ("y", empty("Dense(Element(0.0))", &[5])),
            ]);
            if a == "Dense(SparseList(Element(0.0)))" {
                assert!(uses_ieee_products(SPMV_ROWS, &ts), "{a}, {xf}");
            }
            let got = agree(t, SPMV_ROWS, ts);
            let y = f64s(&got["y"]);
            assert!(y[2].is_nan(), "{a}, {xf}: {y:?}");
            assert_eq!(
                [y[0], y[1], y[3], y[4]],
                [want[0], want[1], want[3], want[4]],
                "{a}, {xf}"
            );
        }
    }
    // Column-major (the accumulator moves, so products keep the strong zero in the loop).
    let at: Vec<(i64, i64, f64)> = entries.iter().map(|&(i, j, v)| (j, i, v)).collect();
    let got = agree(
        t,
        "y .= 0\nfor j = _, i = _\n  y[i] += AT[j, i] * x[j]\nend\n",
        tensors(vec![
            (
                "AT",
                triplets("Dense(SparseList(Element(0.0)))", &[4, 5], &at),
            ),
            ("x", vector("Dense(Element(0.0))", &x)),
            ("y", empty("Dense(Element(0.0))", &[5])),
        ]),
    );
    let y = f64s(&got["y"]);
    assert!(
        y[2].is_nan() && y[0] == 4.0 && y[1] == 6.0 && y[3] == 10.0,
        "{y:?}"
    );
}

#[test]
fn an_accumulator_that_starts_nan_stays_nan_after_the_re_run() {
    let a = triplets(
        "Dense(SparseList(Element(0.0)))",
        &[3, 3],
        &[(0, 0, 0.0), (1, 1, 2.0), (2, 2, 0.0)],
    );
    let text = "for i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";
    let ts = tensors(vec![
        ("A", a),
        (
            "x",
            vector("Dense(Element(0.0))", &[f64::NAN, 2.0, f64::INFINITY]),
        ),
        ("y", vector("Dense(Element(0.0))", &[f64::NAN, 1.0, 2.0])),
    ]);
    assert!(uses_ieee_products(text, &ts));
    let got = agree("ieee_nan_start", text, ts);
    let y = f64s(&got["y"]);
    assert!(y[0].is_nan() && y[1] == 5.0 && y[2] == 2.0, "{y:?}");
}

#[test]
fn dot_products_and_min_max_product_reductions_re_run_exactly() {
    let t = "ieee_reductions";
    let (nan, inf) = (f64::NAN, f64::INFINITY);
    // Stored zeros meet NaN and Inf; the other products are 6 and -1.
    let a_entries = [(0, 0.0), (1, 2.0), (2, 0.0), (3, 1.0)];
    let b = [nan, 3.0, inf, -1.0];
    let cases: [(&str, &str, f64); 4] = [
        ("s .= 0", "s[] += a[i] * b[i]", 5.0),
        ("s .= Inf", "s[] <<min>>= a[i] * b[i]", -1.0),
        ("s .= -Inf", "s[] <<max>>= a[i] * b[i]", 6.0),
        ("s .= 1", "s[] *= a[i] * b[i]", 0.0),
    ];
    for af in [
        "Dense(Element(0.0))",
        "SparseList(Element(0.0))",
        "SparseCOO{1}(Element(0.0))",
        "SparseByteMap(Element(0.0))",
    ] {
        for bf in ["Dense(Element(0.0))", "SparseList(Element(0.0))"] {
            for (init, update, want) in cases {
                let text = format!("{init}\nfor i = _\n  {update}\nend\n");
                let ts = tensors(vec![
                    ("a", stored(af, 4, &a_entries)),
                    ("b", vector(bf, &b)),
                    ("s", empty("Element(0.0)", &[])),
                ]);
                if af == "Dense(Element(0.0))" && bf == af {
                    assert!(uses_ieee_products(&text, &ts), "{text}");
                }
                let got = agree(t, &text, ts);
                assert_eq!(f64s(&got["s"]), vec![want], "{af}, {bf}: {text}");
            }
        }
    }
    // Inf + -Inf is NaN under both semantics; so is a NaN factor against a nonzero one.
    for (x, y) in [([1.0, 1.0], [inf, -inf]), ([2.0, 0.0], [nan, 1.0])] {
        for f in ["Dense(Element(0.0))", "SparseList(Element(0.0))"] {
            let got = agree(
                t,
                "s .= 0\nfor i = _\n  s[] += a[i] * b[i]\nend\n",
                tensors(vec![
                    ("a", vector(f, &x)),
                    ("b", vector("Dense(Element(0.0))", &y)),
                    ("s", empty("Element(0.0)", &[])),
                ]),
            );
            assert!(f64s(&got["s"])[0].is_nan(), "{f}: {x:?} . {y:?}");
        }
    }
}

#[test]
fn float_values_reduced_into_integer_or_bool_outputs_are_errors() {
    // The fuzzer's case: `+= 2.5` three times into an `Element(0)` gave 7 on the compilers
    // (the loop folded to `3 * 2.5`) and 6 on the evaluator (truncating each step).
    let t = "float_into_integer";
    let ts = tensors(vec![
        ("x", vector("Dense(Element(0.0))", &[0.0, 2.5, 0.0])),
        ("sx", vector("SparseList(Element(0.0))", &[0.0, 2.5, 0.0])),
        ("k", ints(&[1, 2, 3])),
        ("s", empty("Element(0)", &[])),
        ("b", empty("Element(false)", &[])),
        ("y", empty("Dense(Element(0))", &[3])),
    ]);
    let msg = "reduces float values into `s`, which holds i64";
    all_fail(
        t,
        "s .= 0\nfor k = 0:2\n  s[] += 2.5\nend\n",
        ts.clone(),
        &["3:3: ", "`s[] +=`", msg],
    );
    // `+= 0.0 * x` was dropped by the compilers and rounded a large integer in the evaluator;
    // also over a sparse operand whose zeros a kernel skips, and in code that never runs.
    for text in [
        "for i = _\n  s[] += 0.0 * x[i]\nend\n",
        "for i = _\n  s[] += sx[i]\nend\n",
        "for i = _\n  if i > 5\n    s[] *= x[i]\n  end\nend\n",
        "for i = _\n  s[] <<min>>= x[i]\nend\n",
    ] {
        all_fail(t, text, ts.clone(), &[msg]);
    }
    all_fail(
        t,
        "for i = _\n  b[] += x[i]\nend\n",
        ts.clone(),
        &["2:3: ", "into `b`, which holds bool"],
    );
    all_fail(
        t,
        "for i = _\n  y[i] -= k[i] / 2\nend\n",
        ts.clone(),
        &["2:3: ", "into `y`, which holds i64"],
    );
    // Integer values reduce as before, and an overwrite converts once, as a cast.
    let got = agree(
        t,
        "s .= 0\nfor i = _\n  s[] += k[i] * 2 + floor(3)\n  y[i] = x[i]\nend\n",
        ts,
    );
    assert_eq!(values(&got["s"]), vec![Scalar::I64(21)]);
    assert_eq!(
        values(&got["y"]),
        vec![Scalar::I64(0), Scalar::I64(2), Scalar::I64(0)]
    );
}

// ---- the sign of a product with a zero factor ------------------------------------------------

#[test]
fn a_zero_factor_gives_positive_zero_so_quotients_agree() {
    let t = "zero_sign";
    let inf = f64::INFINITY;
    // Fuzz finding: `x / (c * 0)` with `c < 0` was -Inf in the evaluator (IEEE `-0.0`) and
    // +Inf in the kernels, which fold `c * 0` to `+0.0`.
    let folded = "s .= 0\nfor i = _\n  s[] += x[i] / (c[] * 0.0)\nend\n";
    let ts = tensors(vec![
        ("x", vector("Dense(Element(0.0))", &[1.0, 2.0])),
        (
            "c",
            dense("Element(0.0)", &[], Buffer::F64(vec![-2.0].into())),
        ),
        ("s", empty("Element(0.0)", &[])),
    ]);
    assert_eq!(f64s(&agree(t, folded, ts)["s"]), vec![inf]);
    // At run time: stored zeros (one of them -0.0) times negative and positive entries.
    let stored_zeros = "s .= 0\nfor i = _\n  s[] += 1 / (a[i] * x[i])\nend\n";
    for xf in ["SparseList(Element(0.0))", "Dense(Element(0.0))"] {
        let ts = tensors(vec![
            ("a", vector("Dense(Element(0.0))", &[-2.0, 3.0, -1.0])),
            ("x", stored(xf, 3, &[(0, 0.0), (1, -0.0), (2, -0.0)])),
            ("s", empty("Element(0.0)", &[])),
        ]);
        assert_eq!(f64s(&agree(t, stored_zeros, ts)["s"]), vec![inf], "{xf}");
    }
    // An accumulated sum of zero products (the kernels' IEEE fast path) ends `+0.0`, and a
    // quotient by it is +Inf everywhere.
    let sum_then_divide = "s .= 0\nfor i = _\n  s[] += a[i] * x[i]\nend\nq .= 0\nq[] = 1 / s[]\n";
    let ts = tensors(vec![
        ("a", vector("Dense(Element(0.0))", &[-2.0, 3.0])),
        (
            "x",
            stored("SparseList(Element(0.0))", 2, &[(0, 0.0), (1, -0.0)]),
        ),
        ("s", empty("Element(0.0)", &[])),
        ("q", empty("Element(0.0)", &[])),
    ]);
    let got = agree(t, sum_then_divide, ts);
    assert_eq!(f64s(&got["q"]), vec![inf]);
    assert!(f64s(&got["s"])[0].is_sign_positive());
}

/// `x + 0.0` is not `x` when `x` is `-0.0` (IEEE: `-0.0 + 0.0 = +0.0`): a sum with a sparse
/// operand's fill keeps the sign rule, so a quotient by it agrees everywhere.
#[test]
fn adding_a_fill_zero_keeps_the_ieee_sign_of_the_sum() {
    let t = "sum_zero_sign";
    let inf = f64::INFINITY;
    let program = "s .= 0\nfor i = _\n  s[] += 1 / (x[i] + y[i])\nend\n";
    for yf in ["SparseList(Element(0.0))", "Dense(Element(0.0))"] {
        let ts = tensors(vec![
            ("x", vector("Dense(Element(0.0))", &[-0.0, -0.0])),
            ("y", stored(yf, 2, &[(1, 0.0)])),
            ("s", empty("Element(0.0)", &[])),
        ]);
        assert_eq!(f64s(&agree(t, program, ts)["s"]), vec![inf], "{yf}");
    }
    // A literal zero is folded the same way.
    let literal = "s .= 0\nfor i = _\n  s[] += 1 / (x[i] + 0.0)\nend\n";
    let ts = tensors(vec![
        ("x", vector("Dense(Element(0.0))", &[-0.0])),
        ("s", empty("Element(0.0)", &[])),
    ]);
    assert_eq!(f64s(&agree(t, literal, ts)["s"]), vec![inf]);
}

/// Found by the differential fuzz target (`stable_run differential 1000000 3300 11`): the
/// kernel was large enough to be fissioned, and fission put every `y[i] = ...` of the first
/// statement before those of the second, though each `k` overwrites the same `y[i]`.
#[test]
fn fission_keeps_writes_that_several_iterations_reach_in_order() {
    let t = "fission_write_order";
    let program = "y .= 0.0
for i = _, k = _
  y[i] = u[gallop(i)] - z[k] + 10 * k
  if z[~(k + 1)] <= 0
    y[i] = coalesce(ifelse(i == k, u[walk(i)], -1.5), z[k])
    y[i] = 5.0 + k
  end
end
";
    for zf in ["SparseByteMap(Element(2))", "SparseList(Element(2))"] {
        let ts = tensors(vec![
            ("u", vector("SparseCOO{1}(Element(0.0))", &[-2.0])),
            ("z", dense(zf, &[2], Buffer::I64(vec![-1, 0].into()))),
            ("y", empty("Dense(Element(0.0))", &[1])),
        ]);
        // k = 1 runs last: y = -2 - 0 + 10; its `if` finds z[2] out of range.
        assert_eq!(f64s(&agree(t, program, ts)["y"]), vec![8.0], "{zf}");
    }
}

/// A sum of an index and outer terms in any nesting (`(j + i) - 1`, `i - (1 - j)`) is an
/// offset read like `j + c`; permissive or plain, every backend agrees with the evaluator.
#[test]
fn offsets_written_as_nested_sums_read_the_same_elements() {
    let t = "nested_sum_offsets";
    let x = [1.0, -2.0, 0.0, 4.0, 0.5];
    for xf in [
        "Dense(Element(0.0))",
        "SparseList(Element(0.0))",
        "SparseRunList(Element(0.0))",
    ] {
        for rhs in [
            "x[~((j + i) - 1)]",
            "x[~(i - (1 - j))]",
            "x[~(1 + j + i)] * x[j]",
        ] {
            let program =
                format!("s .= 0.0\nfor i = 0:2, j = 0:4\n  s[] += coalesce({rhs}, 0.5)\nend\n");
            let ts = tensors(vec![
                ("x", vector(xf, &x)),
                ("s", empty("Element(0.0)", &[])),
            ]);
            agree(t, &program, ts);
        }
    }
}

/// Permissive reads of one bounds check (the same tensor, dimension and index) are decided by
/// one split, throughout the statement and the bodies of its `let`s: a 3 x 3 stencil of
/// `~(i -+ 1)`, `~(j -+ 1)` reads takes four splits. Before, every read split the statement
/// again (a one-pass bit-packed erosion, three `let`s of three such reads each, was refused as
/// over 131,072 copied nodes). Writes through a repeated permissive index are dropped
/// together outside.
#[test]
fn permissive_reads_of_one_check_are_decided_by_one_split() {
    let t = "permissive_one_check";
    let stencil = "y .= 0.0
for i = _, j = _
  y[i, j] = coalesce(x[~(i - 1), ~(j - 1)], 0.5) + coalesce(x[~(i - 1), j], 0.25) + coalesce(x[~(i - 1), ~(j + 1)], 0.125) + coalesce(x[i, ~(j - 1)], 1.0) + x[i, j] + coalesce(x[i, ~(j + 1)], 2.0) + coalesce(x[~(i + 1), ~(j - 1)], 4.0) + coalesce(x[~(i + 1), j], 8.0) + coalesce(x[~(i + 1), ~(j + 1)], 16.0)
end
";
    let xs: Vec<f64> = (0..12)
        .map(|k| if k % 3 == 1 { 0.0 } else { k as f64 - 4.5 })
        .collect();
    let x = |i: usize, j: usize| xs[4 * i + j];
    let matrix = |f: &str| dense(f, &[3, 4], Buffer::F64(xs.clone().into()));
    // Nine reads of a sparse matrix coiterated are past the kernel budget whatever the
    // splits, so the full stencil runs on dense rows.
    let ts = tensors(vec![
        ("x", matrix("Dense(Dense(Element(0.0)))")),
        ("y", empty("Dense(Dense(Element(0.0)))", &[3, 4])),
    ]);
    let y = f64s(&agree(t, stencil, ts)["y"]);
    // The corner (0, 0): five neighbours outside give their defaults.
    let want00 = 0.5 + 0.25 + 0.125 + 1.0 + x(0, 0) + x(0, 1) + 4.0 + x(1, 0) + x(1, 1);
    assert_eq!(y[0], want00);
    // Reads that repeat (the same check twice, with other defaults), on sparse rows.
    let twice = "y .= 0.0
for i = _, j = _
  y[i, j] = coalesce(x[i, ~(j - 1)], 1.0) * coalesce(x[i, ~(j - 1)], 3.0) + x[i, j] - coalesce(x[~(i + 1), j], 5.0) + coalesce(x[~(i + 1), j], 8.0)
end
";
    for xf in [
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseRunList(Element(0.0)))",
        "Dense(SparseBand(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
    ] {
        let ts = tensors(vec![
            ("x", matrix(xf)),
            ("y", empty("Dense(Dense(Element(0.0)))", &[3, 4])),
        ]);
        let y = f64s(&agree(t, twice, ts)["y"]);
        // (2, 0): the column left and the row below are outside.
        assert_eq!(y[8], 1.0 * 3.0 + x(2, 0) - 5.0 + 8.0, "{xf}");
        assert_eq!(
            y[3],
            x(0, 2) * x(0, 2) + x(0, 3) - x(1, 3) + x(1, 3),
            "{xf}"
        );
    }
    let lets = "y .= 0.0
for i = 0:5
  let u = coalesce(x[~(i + 1)], -1.0)
    y[~(i + 1)] += u * 2.0
    y[~(i + 1)] += coalesce(x[~(i + 1)], 3.0)
    y[i] += coalesce(x[~(i - 1)], 7.0) + u
  end
end
";
    for xf in ["Dense(Element(0.0))", "SparseList(Element(0.0))"] {
        let ts = tensors(vec![
            ("x", vector(xf, &[1.0, 0.0, -2.0, 4.0, 0.5, 8.0])),
            ("y", empty("Dense(Element(0.0))", &[6])),
        ]);
        let y = f64s(&agree(t, lets, ts)["y"]);
        // y[0] gets only `y[i]` at i = 0: 7 + x[1]; i = 5 writes nothing through `~(i + 1)`.
        assert_eq!(y[0], 7.0 + 0.0, "{xf}");
        assert_eq!(y[5], 3.0 * 8.0 + 0.5 + -1.0, "{xf}");
    }
}

/// Found by the differential fuzz target (`stable_run differential 1000000 2100 12`): GCC
/// folded `0.0 - (double)c` into `-(double)c`, so for `c = 0` the C backend divided by `-0.0`.
#[test]
fn zero_minus_an_integer_zero_is_positive_zero_on_every_backend() {
    let t = "zero_minus_int_zero";
    let program = "s .= 0.0\ns[] += true / (0.0 - c[])\n";
    let ts = tensors(vec![
        ("c", dense("Element(0)", &[], Buffer::I64(vec![0].into()))),
        ("s", empty("Element(0.0)", &[])),
    ]);
    assert_eq!(f64s(&agree(t, program, ts)["s"]), vec![f64::INFINITY]);
}

// ---- the float functions of `ir::math` -------------------------------------------------------

#[test]
fn float_functions_give_the_same_bits_everywhere_and_the_std_values() {
    // Every function on values inside and outside its domain (NaN there), on every backend
    // and the evaluator, against Rust's own functions; integer arguments are converted.
    let xs = [
        -2.5, -1.0, -0.5, -0.0, 0.0, 0.3, 0.5, 1.0, 1.5, 2.5, 3.5, 100.0,
    ];
    let ones: Vec<&str> = vec![
        "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
        "atanh", "expm1", "log1p", "log2", "log10", "round", "ceil", "trunc",
    ];
    let std1: [fn(f64) -> f64; 19] = [
        f64::sin,
        f64::cos,
        f64::tan,
        f64::asin,
        f64::acos,
        f64::atan,
        f64::sinh,
        f64::cosh,
        f64::tanh,
        f64::asinh,
        f64::acosh,
        f64::atanh,
        f64::exp_m1,
        f64::ln_1p,
        f64::log2,
        f64::log10,
        f64::round_ties_even,
        f64::ceil,
        f64::trunc,
    ];
    let mut text = String::new();
    for (k, f) in ones.iter().enumerate() {
        text.push_str(&format!("for i = _\n  y{k}[i] = {f}(x[i])\nend\n"));
    }
    let twos = ["pow", "atan2", "hypot"];
    let std2: [fn(f64, f64) -> f64; 3] = [f64::powf, f64::atan2, f64::hypot];
    for (k, f) in twos.iter().enumerate() {
        text.push_str(&format!("for i = _\n  z{k}[i] = {f}(x[i], w[i])\nend\n"));
    }
    text.push_str("for i = _\n  r[i] = round(n[i]) + pow(n[i], 2)\nend\n");
    let n = xs.len();
    let ws: Vec<f64> = xs.iter().rev().copied().collect();
    let mut list = vec![
        ("x", vector("Dense(Element(0.0))", &xs)),
        ("w", vector("Dense(Element(0.0))", &ws)),
        ("n", ints(&[3, -2, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8])),
        ("r", empty("Dense(Element(0.0))", &[n])),
    ];
    let names: Vec<String> = (0..ones.len())
        .map(|k| format!("y{k}"))
        .chain((0..twos.len()).map(|k| format!("z{k}")))
        .collect();
    for name in &names {
        list.push((name.as_str(), empty("Dense(Element(0.0))", &[n])));
    }
    let got = agree("float_functions", &text, tensors(list));
    for (k, f) in std1.iter().enumerate() {
        let want: Vec<Scalar> = xs.iter().map(|&x| Scalar::F64(f(x))).collect();
        let have = values(&got[&format!("y{k}")]);
        assert!(same(&have, &want), "{}: {have:?} vs {want:?}", ones[k]);
    }
    for (k, f) in std2.iter().enumerate() {
        let want: Vec<Scalar> = xs
            .iter()
            .zip(&ws)
            .map(|(&x, &y)| Scalar::F64(f(x, y)))
            .collect();
        let have = values(&got[&format!("z{k}")]);
        assert!(same(&have, &want), "{}: {have:?} vs {want:?}", twos[k]);
    }
    assert_eq!(f64s(&got["r"])[..3], [12.0, 2.0, 0.0]);
}

// ---- NumPy's remainder, floor_divide, copysign, logaddexp, nextafter, signbit, shifts ----------

/// The named functions of `x[i]` and `w[i]` into `y0`, `y1`, ... on every backend and the
/// evaluator (which must agree bit for bit), as dense vectors of `out` (`0.0` or `0`).
fn two_argument_results(
    test: &str,
    names: &[&str],
    x: Tensor,
    w: Tensor,
    out: &str,
) -> Vec<Vec<Scalar>> {
    let n = x.shape[0];
    let mut text = String::new();
    for (k, f) in names.iter().enumerate() {
        text.push_str(&format!("for i = _\n  y{k}[i] = {f}(x[i], w[i])\nend\n"));
    }
    let outs: Vec<String> = (0..names.len()).map(|k| format!("y{k}")).collect();
    let mut list = vec![("x", x), ("w", w)];
    for name in &outs {
        list.push((
            name.as_str(),
            empty(&format!("Dense(Element({out}))"), &[n]),
        ));
    }
    let got = agree(test, &text, tensors(list));
    outs.iter().map(|o| values(&got[o])).collect()
}

#[test]
fn floored_division_copysign_logaddexp_and_nextafter_of_floats_agree_everywhere() {
    use tessera::ir::math::Math2;
    let edge = [
        -7.5,
        -2.0,
        -0.0,
        0.0,
        0.5,
        3.0,
        1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
    ];
    // Every pair of edge values.
    let xs: Vec<f64> = edge.iter().flat_map(|&a| edge.map(|_| a)).collect();
    let ws: Vec<f64> = edge.iter().flat_map(|_| edge).collect();
    let fs = [
        Math2::Mod,
        Math2::Fld,
        Math2::Copysign,
        Math2::Logaddexp,
        Math2::Nextafter,
    ];
    let names: Vec<&str> = fs.iter().map(|f| f.name()).collect();
    let d = "Dense(Element(0.0))";
    let got = two_argument_results("floored", &names, vector(d, &xs), vector(d, &ws), "0.0");
    for (f, have) in fs.iter().zip(&got) {
        let want: Vec<Scalar> = xs
            .iter()
            .zip(&ws)
            .map(|(&x, &w)| Scalar::F64(f.eval(x, w)))
            .collect();
        assert!(same(have, &want), "{}: {have:?} vs {want:?}", f.name());
    }
    // NumPy's values (numpy 2.4: `remainder`, `floor_divide`, ...) at the edges.
    let numpy: [(Math2, f64, f64, f64); 22] = [
        (Math2::Mod, -7.5, 2.0, 0.5),
        (Math2::Mod, 7.5, -2.0, -0.5),
        (Math2::Mod, -0.0, 2.0, 0.0),
        (Math2::Mod, 0.0, -2.0, -0.0),
        (Math2::Mod, 6.0, -3.0, -0.0),
        (Math2::Mod, 5.0, 0.0, f64::NAN),
        (Math2::Mod, -1.0, f64::INFINITY, f64::INFINITY),
        (Math2::Mod, 1.0, f64::INFINITY, 1.0),
        (Math2::Mod, 0.5, 0.1, 0.09999999999999998),
        (Math2::Fld, -7.5, 2.0, -4.0),
        (Math2::Fld, -0.0, 2.0, -0.0),
        (Math2::Fld, 0.0, -2.0, -0.0),
        (Math2::Fld, 5.0, 0.0, f64::INFINITY),
        (Math2::Fld, -5.0, 0.0, f64::NEG_INFINITY),
        (Math2::Fld, f64::INFINITY, 1.0, f64::NAN),
        (Math2::Fld, -1.0, f64::INFINITY, -1.0),
        (Math2::Fld, 0.5, 0.1, 4.0),
        (Math2::Copysign, 3.0, -0.0, -3.0),
        (
            Math2::Logaddexp,
            f64::INFINITY,
            f64::INFINITY,
            f64::INFINITY,
        ),
        (Math2::Logaddexp, 1000.0, 1000.0, 1000.6931471805599),
        (Math2::Nextafter, 0.0, -1.0, -5e-324),
        (Math2::Nextafter, 0.0, -0.0, -0.0),
    ];
    for (f, x, w, want) in numpy {
        let k = fs.iter().position(|g| *g == f).unwrap();
        let at = xs
            .iter()
            .zip(&ws)
            .position(|(a, b)| a.to_bits() == x.to_bits() && b.to_bits() == w.to_bits());
        let have = match at {
            Some(i) => got[k][i],
            None => Scalar::F64(f.eval(x, w)),
        };
        assert!(
            same(&[have], &[Scalar::F64(want)]),
            "{}({x}, {w}) = {have:?}, NumPy {want}",
            f.name()
        );
    }
}

#[test]
fn floored_division_of_integers_is_exact_and_never_traps() {
    let edge = [i64::MIN, i64::MIN + 1, -7, -2, -1, 0, 1, 2, 3, 7, i64::MAX];
    let xs: Vec<i64> = edge.iter().flat_map(|&a| edge.map(|_| a)).collect();
    let ws: Vec<i64> = edge.iter().flat_map(|_| edge).collect();
    let got = two_argument_results("floored_ints", &["mod", "fld"], ints(&xs), ints(&ws), "0");
    for (i, (&x, &w)) in xs.iter().zip(&ws).enumerate() {
        // Python's `//` and `%` in 128 bits; a zero divisor gives 0 (NumPy's integer result),
        // and the one overflow, `MIN // -1`, wraps to MIN as in NumPy.
        let (q, r) = if w == 0 {
            (0, 0)
        } else {
            let (a, b) = (i128::from(x), i128::from(w));
            let (mut q, mut r) = (a / b, a % b);
            if r != 0 && (r < 0) != (b < 0) {
                q -= 1;
                r += b;
            }
            (q as i64, r as i64)
        };
        assert_eq!(got[0][i], Scalar::I64(r), "mod({x}, {w})");
        assert_eq!(got[1][i], Scalar::I64(q), "fld({x}, {w})");
    }
}

#[test]
fn shifts_out_of_range_give_numpys_results_on_every_backend() {
    let xs_edge = [1, -1, 5, -5, i64::MIN, i64::MAX];
    let ns_edge = [
        i64::MIN,
        -65,
        -64,
        -1,
        0,
        1,
        7,
        8,
        62,
        63,
        64,
        65,
        1000,
        i64::MAX,
    ];
    let xs: Vec<i64> = xs_edge.iter().flat_map(|&a| ns_edge.map(|_| a)).collect();
    let ns: Vec<i64> = xs_edge.iter().flat_map(|_| ns_edge).collect();
    let got = two_argument_results("shifts", &["lshift", "rshift"], ints(&xs), ints(&ns), "0");
    for (i, (&x, &n)) in xs.iter().zip(&ns).enumerate() {
        let inside = (0..64).contains(&n);
        let left = if inside {
            ((i128::from(x)) << n) as i64
        } else {
            0
        };
        let right = if inside {
            x >> n
        } else if x < 0 {
            -1
        } else {
            0
        };
        assert_eq!(got[0][i], Scalar::I64(left), "lshift({x}, {n})");
        assert_eq!(got[1][i], Scalar::I64(right), "rshift({x}, {n})");
    }
    // Narrow element types: computed in i64, stored wrapping as NumPy's int8 and uint8 do
    // (`1 << 7 == -128`, `1 << 8 == 0` in int8; `200 >> 7 == 1` in uint8).
    let text = "for i = _\n  a[i] = lshift(p[i], q[i])\n  b[i] = rshift(u[i], q[i])\nend\n";
    let (i8s, u8s) = ("Dense(Element(0, i8))", "Dense(Element(0, u8))");
    let p = dense(i8s, &[4], Buffer::I8(vec![1, 1, -128, 3].into()));
    let u = dense(u8s, &[4], Buffer::U8(vec![200, 200, 255, 3].into()));
    let q = ints(&[7, 8, 1, -1]);
    let (a, b) = (empty(i8s, &[4]), empty(u8s, &[4]));
    let got = agree(
        "narrow_shifts",
        text,
        tensors(vec![("p", p), ("u", u), ("q", q), ("a", a), ("b", b)]),
    );
    assert_eq!(got["a"].to_dense(), Buffer::I8(vec![-128, 0, 0, 0].into()));
    assert_eq!(got["b"].to_dense(), Buffer::U8(vec![1, 0, 127, 0].into()));
}

#[test]
fn signbit_and_bitwise_operators_agree_everywhere() {
    let xs = [
        -0.0,
        0.0,
        -1.5,
        2.0,
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    let n = xs.len();
    let text = "for i = _\n  s[i] = signbit(x[i])\n  t[i] = signbit(k[i])\nend\n";
    let ks = ints(&[0, -1, 3, i64::MIN, 5, -5, 1, 2]);
    let bools = "Dense(Element(false))";
    let got = agree(
        "signbit",
        text,
        tensors(vec![
            ("x", vector("Dense(Element(0.0))", &xs)),
            ("k", ks),
            ("s", empty(bools, &[n])),
            ("t", empty(bools, &[n])),
        ]),
    );
    let want: Vec<bool> = xs.iter().map(|x| x.is_sign_negative()).collect();
    assert_eq!(got["s"].to_dense(), Buffer::Bool(want.into()));
    // An integer argument is converted to float first (`-0` is `+0.0`).
    let ints_want = vec![false, true, false, true, false, true, false, false];
    assert_eq!(got["t"].to_dense(), Buffer::Bool(ints_want.into()));
}
