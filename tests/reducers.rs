//! User reducers (`reducer f(a, b) = ... ` and `<<f>>=`): compiled kernels on several formats
//! against the reference evaluator, the declared properties at work (identities skipped,
//! runs integrated when idempotent, short-circuit exits at an annihilator), the Rust API, and
//! error messages.

mod common;

use common::{agree, fmt, parse, run_eval, run_jit};
use std::collections::BTreeMap;
use tessera::notation::ast::{Program, Reducer, ReducerDef};
use tessera::notation::build::*;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::semantics::apply_reducer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

fn vector(format: &str, values: Vec<f64>) -> Tensor {
    let n = values.len();
    Tensor::from_dense(&fmt(format), &[n], &Buffer::F64(values.into())).unwrap()
}

fn ints(format: &str, shape: &[usize], values: Vec<i64>) -> Tensor {
    Tensor::from_dense(&fmt(format), shape, &Buffer::I64(values.into())).unwrap()
}

fn scalar(format: &str) -> Tensor {
    Tensor::empty(&fmt(format), &[]).unwrap()
}

fn tensors(list: Vec<(&str, Tensor)>) -> BTreeMap<String, Tensor> {
    list.into_iter().map(|(n, t)| (n.to_string(), t)).collect()
}

fn code(program: &str, tensors: &BTreeMap<String, Tensor>) -> String {
    let (k, _, _) = Runner::lower(&parse(program), &common::formats_of(tensors)).unwrap();
    k.to_string()
}

/// The properties a definition declares hold on the reference semantics for `samples`
/// (the compiler trusts them; the tests check they are not lies).
fn check_promises(def: &ReducerDef, samples: &[Scalar]) {
    let r = Reducer::User(std::sync::Arc::new(def.clone()));
    let f = |x: Scalar, y: Scalar| apply_reducer(&r, x, y, x.ty()).unwrap();
    for &x in samples {
        if let Some(id) = def.identity {
            assert_eq!(f(x, id.cast(x.ty())), x, "{} identity at {x}", def.name);
        }
        if let Some(z) = def.annihilator {
            let z = z.cast(x.ty());
            assert_eq!(f(z, x), z, "{} annihilator at {x}", def.name);
        }
        for &y in samples {
            if def.idempotent {
                assert_eq!(
                    f(f(x, y), y),
                    f(x, y),
                    "{} idempotent at {x}, {y}",
                    def.name
                );
            }
            if def.commutative {
                assert_eq!(f(x, y), f(y, x), "{} commutative at {x}, {y}", def.name);
            }
            for &z in samples.iter().take(4) {
                if def.associative {
                    assert_eq!(f(f(x, y), z), f(x, f(y, z)), "{} associative", def.name);
                }
            }
        }
    }
}

fn definitions(text: &str) -> Vec<ReducerDef> {
    parse(text).reducers
}

const ABSMAX: &str =
    "reducer absmax(a, b) = max(abs(a), abs(b)) identity 0 commutative associative idempotent\n";
const COUNT_ZEROS: &str = "reducer zeros(a, b) = a + ifelse(b == 0, 1, 0)\n";

#[test]
fn declared_properties_hold_on_the_reference_semantics() {
    // absmax's identity 0 holds for the non-negative values it accumulates.
    let nonneg: Vec<Scalar> = [0.0, 0.5, 2.0, 7.0].map(Scalar::F64).to_vec();
    check_promises(&definitions(ABSMAX)[0], &nonneg);
    let sat = &definitions(
        "reducer sat(a, b) = min(a + b, 255) identity 0 annihilator 255 commutative associative",
    )[0];
    let small: Vec<Scalar> = [0, 1, 7, 200, 255].map(Scalar::I64).to_vec();
    check_promises(sat, &small);
    let first = &definitions("reducer first(a, b) = ifelse(a == 0, b, a) identity 0 idempotent")[0];
    check_promises(first, &[0, 3, 5].map(Scalar::I64));
}

#[test]
fn absmax_agrees_with_the_evaluator_on_every_format() {
    let prog = format!("{ABSMAX}s .= 0\nfor i = _\n  s[] <<absmax>>= x[i]\nend\n");
    let values = vec![0.0, -3.0, 0.0, 0.0, 2.5, -7.5, 7.0, 0.0, 0.0, 1.0];
    for f in [
        "Dense(Element(0.0))",
        "SparseList(Element(0.0))",
        "SparseList(Element(1.0))",
        "RunList(Element(0.0))",
        "SparseRunList(Element(0.0))",
        "SparseByteMap(Element(0.0))",
    ] {
        let got = agree(
            &prog,
            tensors(vec![
                ("s", scalar("Scalar(0.0)")),
                ("x", vector(f, values.clone())),
            ]),
        );
        assert_eq!(got["s"].get(&[]).unwrap(), Scalar::F64(7.5), "{f}");
    }
}

#[test]
fn identities_are_skipped_and_runs_integrated_when_idempotent() {
    let x = vector(
        "RunList(Element(0.0))",
        [vec![2.0; 40], vec![-9.0; 30], vec![1.0; 30]].concat(),
    );
    let ts = tensors(vec![("s", scalar("Scalar(0.0)")), ("x", x)]);
    // Idempotent: one application per run, so no loop inside the loop over runs.
    let idem = format!("{ABSMAX}s .= 0\nfor i = _\n  s[] <<absmax>>= x[i]\nend\n");
    let c = code(&idem, &ts);
    assert_eq!(
        c.matches("while").count() + c.matches("for ").count(),
        1,
        "{c}"
    );
    // The same body without the promise: every coordinate of a run is visited.
    let plain = idem.replace(" idempotent", "");
    let c = code(&plain, &ts);
    assert!(
        c.matches("while").count() + c.matches("for ").count() >= 2,
        "{c}"
    );
    for p in [&idem, &plain] {
        let got = agree(p, ts.clone());
        assert_eq!(got["s"].get(&[]).unwrap(), Scalar::F64(9.0));
    }
    // A sparse input whose fill is the identity: the gaps generate no code at all, so the
    // loop is over stored entries only (one loop, no comparison against the fill).
    let sparse = tensors(vec![
        ("s", scalar("Scalar(0.0)")),
        (
            "x",
            vector("SparseList(Element(0.0))", vec![0.0, 0.0, -4.0, 0.0, 3.0]),
        ),
    ]);
    let c = code(&idem, &sparse);
    assert_eq!(
        c.matches("while").count() + c.matches("for ").count(),
        1,
        "{c}"
    );
    agree(&idem, sparse);
}

#[test]
fn reducers_without_identity_visit_the_fills() {
    // Counting zeros must see every implicit zero of a sparse or run-length input.
    let prog = format!("{COUNT_ZEROS}n .= 0\nfor i = _\n  n[] <<zeros>>= x[i]\nend\n");
    let values = vec![0.0, 1.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0];
    for f in [
        "Dense(Element(0.0))",
        "SparseList(Element(0.0))",
        "RunList(Element(0.0))",
        "SparseInterval(Element(0.0))",
    ] {
        let x = if f.starts_with("SparseInterval") {
            vector(f, vec![0.0, 0.0, 3.0, 3.0, 3.0, 0.0])
        } else {
            vector(f, values.clone())
        };
        let zeros = x.to_dense().len() as i64
            - match f {
                f if f.starts_with("SparseInterval") => 3,
                _ => 4,
            };
        let got = agree(&prog, tensors(vec![("n", scalar("Scalar(0)")), ("x", x)]));
        assert_eq!(got["n"].get(&[]).unwrap(), Scalar::I64(zeros), "{f}");
    }
}

#[test]
fn saturating_row_sums_into_sparse_outputs() {
    let sat =
        "reducer sat(a, b) = min(a + b, 10) identity 0 annihilator 10 commutative associative\n";
    let a = [
        0, 3, 0, 9, 0, //
        0, 0, 0, 0, 0, //
        4, 0, 5, 0, 0, //
        0, 0, 0, 0, 0, //
        8, 8, 0, 0, 1,
    ]
    .to_vec();
    let rows = format!("{sat}y .= 0\nfor i = _, j = _\n  y[i] <<sat>>= A[i, j]\nend\n");
    let cols = format!("{sat}y .= 0\nfor i = _, j = _\n  y[j] <<sat>>= A[i, j]\nend\n");
    for af in [
        "Dense(Dense(Element(0)))",
        "Dense(SparseList(Element(0)))",
        "SparseList(SparseList(Element(0)))",
        "SparseCOO{2}(Element(0))",
    ] {
        for yf in [
            "Dense(Element(0))",
            "SparseByteMap(Element(0))",
            "SparseList(Element(0))",
        ] {
            let ts = tensors(vec![
                ("A", ints(af, &[5, 5], a.clone())),
                ("y", Tensor::empty(&fmt(yf), &[5]).unwrap()),
            ]);
            let got = agree(&rows, ts.clone());
            assert_eq!(
                got["y"].to_dense(),
                Buffer::I64(vec![10, 0, 9, 0, 10].into()),
                "{af} {yf}"
            );
            // Column sums write `y` out of order: only formats that take any order.
            if !yf.starts_with("SparseList") {
                let got = agree(&cols, ts);
                assert_eq!(
                    got["y"].to_dense(),
                    Buffer::I64(vec![10, 10, 5, 9, 1].into())
                );
            }
        }
    }
}

#[test]
fn result_class_comes_from_the_body() {
    // `/` gives a float, stored back into integers by truncation; bools join with ints.
    let prog = "reducer mean2(a, b) = (a + b) / 2\ns .= 0\nfor i = _\n  s[] <<mean2>>= x[i]\nend\n";
    let got = agree(
        prog,
        tensors(vec![
            ("s", scalar("Scalar(0)")),
            ("x", ints("Dense(Element(0))", &[4], vec![8, 3, 11, -5])),
        ]),
    );
    // 0 → 4 → 3 (3.5) → 7 → 1
    assert_eq!(got["s"].get(&[]).unwrap(), Scalar::I64(1));
    let prog = "reducer both(a, b) = a && b identity true annihilator false\nt .= true\nfor i = _\n  t[] <<both>>= x[i] > 0\nend\n";
    let got = agree(
        prog,
        tensors(vec![
            ("t", scalar("Scalar(false)")),
            ("x", ints("SparseList(Element(0))", &[4], vec![8, 0, 11, 5])),
        ]),
    );
    assert_eq!(got["t"].get(&[]).unwrap(), Scalar::Bool(false));
}

#[test]
fn short_circuit_stops_at_a_user_annihilator() {
    let prog = "reducer sat(a, b) = min(a + b, 100.0) identity 0 annihilator 100\ns .= 0\nfor i = _\n  s[] <<sat>>= x[i]\nend\n";
    // The sum saturates at position 2; the NaN after it is a poison only a loop that goes on
    // can read (min(100 + NaN, 100) is NaN).
    let poisoned = vec![30.0, 50.0, 40.0, f64::NAN, 5.0];
    let mut plain = tensors(vec![
        ("s", scalar("Scalar(0.0)")),
        ("x", vector("Dense(Element(0.0))", poisoned.clone())),
    ]);
    run_jit(&parse(prog), &mut plain).unwrap();
    assert!(plain["s"].get(&[]).unwrap().as_f64().is_nan());
    for (sf, xf) in [
        ("ShortCircuitScalar(0.0)", "Dense(Element(0.0))"),
        ("SparseShortCircuitScalar(0.0)", "SparseList(Element(0.0))"),
    ] {
        let mut ts = tensors(vec![("s", scalar(sf)), ("x", vector(xf, poisoned.clone()))]);
        assert!(code(prog, &ts).contains("break"), "{sf}");
        run_jit(&parse(prog), &mut ts).unwrap();
        assert_eq!(ts["s"].get(&[]).unwrap(), Scalar::F64(100.0), "{sf}");
    }
    // Without saturation the whole sum is computed, as the evaluator does.
    let got = agree(
        prog,
        tensors(vec![
            ("s", scalar("ShortCircuitScalar(0.0)")),
            (
                "x",
                vector("SparseList(Element(0.0))", vec![1.0, 0.0, 2.5, 0.0]),
            ),
        ]),
    );
    assert_eq!(got["s"].get(&[]).unwrap(), Scalar::F64(3.5));
}

#[test]
fn reducers_registered_from_rust() {
    let body = |name: &str, scale: i64| {
        let sum = program([
            declare("s", lit(0)),
            for_(
                "i",
                auto(),
                [assign(
                    access("s", []),
                    user(name),
                    read(access("x", [idx("i")])),
                )],
            ),
        ]);
        sum.with_reducer(reducer(name, add("a", mul("b", lit(scale)))).identity(0))
    };
    let (double, triple) = (body("acc", 2), body("acc", 3));
    let mut third = body("acc", 1);
    third.reducers.clear();
    third.add_reducer(
        reducer("acc", add("old", "new"))
            .params("old", "new")
            .identity(0),
    );
    // Same name, different bodies: different kernels, each with its own answer.
    let runner = Runner::jit();
    let x = ints("SparseList(Element(0))", &[5], vec![1, 0, 2, 0, 4]);
    let mut answers = vec![];
    for p in [&double, &triple, &third] {
        let mut ts = tensors(vec![("s", scalar("Scalar(0)")), ("x", x.clone())]);
        let c = runner.compile(p, &common::formats_of(&ts)).unwrap();
        runner.execute(&c, &mut ts).unwrap();
        answers.push(ts["s"].get(&[]).unwrap());
    }
    assert_eq!(answers, [14, 21, 7].map(Scalar::I64));
    assert_eq!(runner.cache_len(), 3);
    // The builder's program prints as text that parses back to it.
    assert_eq!(parse(&third.to_string()), third);
}

#[test]
fn reducer_errors_name_the_place() {
    let ts = tensors(vec![
        ("s", scalar("Scalar(0.0)")),
        ("x", vector("Dense(Element(0.0))", vec![1.0, 2.0])),
    ]);
    let cases = [
        (
            "s .= 0\nfor i = _\n  s[] <<nope>>= x[i]\nend",
            "3:3: unknown reducer `nope`",
        ),
        (
            "reducer f(a, b) = a + q\ns .= 0",
            "1:23: `q` is not a parameter of `f` (`a`, `b`)",
        ),
        (
            "reducer f(a, b) = a\nreducer g(a, b) = b\nreducer f(a, b) = b\ns .= 0",
            "3:1: reducer `f` is defined twice (first at 1:1)",
        ),
        (
            "reducer max(a, b) = b\ns .= 0",
            "1:1: `max` is a built-in reducer (`<<max>>=`); a user reducer needs another name",
        ),
        (
            "reducer f(a, b) = a && b\ns .= 0\nfor i = _\n  s[] <<f>>= x[i]\nend",
            "4:3: in the body of reducer `f`: `&&` needs bool operands",
        ),
    ];
    for (text, want) in cases {
        let p = parse(text);
        let mut got = ts.clone();
        let compiled = run_jit(&p, &mut got).unwrap_err().to_string();
        assert_eq!(compiled, want, "compiled: {text}");
        let evaluated = run_eval(&p, &ts).unwrap_err().to_string();
        // The evaluator reports type errors where the reduction runs, the rest identically.
        assert_eq!(evaluated, want, "evaluated: {text}");
    }
    // A nested definition is a syntax error.
    let e = tessera::notation::parse::parse_program("for i = _\n  reducer f(a, b) = a\nend")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("2:3: syntax error"), "{e}");
    // Builder programs get the same checks (built nodes have no position, so none is shown).
    let p: Program = program([assign(access("s", []), user("g"), lit(1.0))]);
    let mut got = ts.clone();
    assert_eq!(
        run_jit(&p, &mut got).unwrap_err().to_string(),
        "unknown reducer `g`"
    );
}
