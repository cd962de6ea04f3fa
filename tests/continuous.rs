//! Real-valued loops end to end (issue 14): programs over tensors with `coord=f64` levels, run
//! on every backend and compared with the golden values of the continuous tensor abstraction
//! (`../shared/reference/seed-continuous.md` §5.3) and with the continuous reference evaluator.

use std::collections::BTreeMap;
use tessera::Scalar;
use tessera::levels::Format;
use tessera::limit::Limit;
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::tensor::Tensor;
use tessera::tensor::pieces::{Piece, PieceCoord};

fn fmt(s: &str) -> Format {
    Format::parse(s, None).unwrap()
}

fn runners() -> Vec<(&'static str, Runner)> {
    let mut out = vec![("jit", Runner::jit())];
    out.push((
        "interp",
        Runner::new(Box::new(tessera::backend::Interpreter::new())),
    ));
    let c = tessera::backend::CBackend::new();
    if c.compiler_available() {
        out.push(("c", Runner::new(Box::new(c))));
    } else {
        eprintln!("skipping the C backend: no C compiler found");
    }
    out
}

/// Run `program` on every backend; returns the 0-d output `s` of each.
fn scalar_on_all(program: &str, inputs: &[(&str, Tensor)], elem_fill: &str) -> Vec<(String, f64)> {
    let p = parse_program(program).unwrap();
    let mut out = vec![];
    for (name, r) in runners() {
        let mut ts: BTreeMap<String, Tensor> = inputs
            .iter()
            .map(|(n, t)| (n.to_string(), t.clone()))
            .collect();
        ts.insert(
            "s".to_string(),
            Tensor::empty(&fmt(&format!("Element({elem_fill})")), &[]).unwrap(),
        );
        let formats = ts
            .iter()
            .map(|(n, t)| (n.clone(), t.format.clone()))
            .collect();
        let c = r
            .compile(&p, &formats)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        r.execute(&c, &mut ts)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}\n{}", c.ir));
        let v = ts["s"].pieces()[0].1;
        out.push((name.to_string(), v.as_f64()));
    }
    out
}

fn runs(pieces: &[(PieceCoord, f64)]) -> Tensor {
    let p: Vec<Piece> = pieces
        .iter()
        .map(|&(c, v)| (vec![c], Scalar::F64(v)))
        .collect();
    Tensor::from_pieces(&fmt("SparseRunList(Element(0.0), coord=f64)"), &[0], &p).unwrap()
}

fn pinpoints(xs: &[(f64, f64)]) -> Tensor {
    let p: Vec<Piece> = xs
        .iter()
        .map(|&(x, v)| (vec![PieceCoord::point(x)], Scalar::F64(v)))
        .collect();
    Tensor::from_pieces(&fmt("SparseList(Element(0.0), coord=f64)"), &[0], &p).unwrap()
}

const X16: [(f64, f64); 10] = [
    (2., 6.),
    (9., 16.),
    (26., 30.),
    (37., 40.),
    (41., 56.),
    (68., 69.),
    (70., 78.),
    (86., 87.),
    (88., 89.),
    (92., 96.),
];
const Y16: [(f64, f64); 10] = [
    (2., 3.),
    (6., 8.),
    (12., 18.),
    (22., 27.),
    (29., 40.),
    (42., 45.),
    (47., 67.),
    (73., 79.),
    (83., 84.),
    (87., 98.),
];

fn closed(list: &[(f64, f64)]) -> Tensor {
    runs(
        &list
            .iter()
            .map(|&(a, b)| (PieceCoord::closed(a, b), 1.0))
            .collect::<Vec<_>>(),
    )
}

fn assert_all(got: Vec<(String, f64)>, want: f64) {
    for (backend, v) in got {
        assert!((v - want).abs() < 1e-9, "{backend}: {v} != {want}");
    }
}

#[test]
fn golden_16_interval_pair_integrals_and_counting_sums() {
    let inputs = [("x", closed(&X16)), ("y", closed(&Y16))];
    let go = |rhs: &str| scalar_on_all(&format!("for i = _\n  s[] += {rhs}\nend"), &inputs, "0.0");
    assert_all(go("x[i] * y[i] * d(i)"), 32.0);
    assert_all(go("x[i] * y[i]"), 2.0);
    assert_all(go("(x[i] + y[i]) * d(i)"), 114.0);
    assert_all(go("x[i] + y[i]"), 4.0);
}

#[test]
fn golden_6_7_pinpoint_dot_product_and_integral() {
    let x = pinpoints(&[(1.0, 1.0), (3.0, 2.0), (4.1, 3.0), (5.1, 4.0)]);
    let y = pinpoints(&[(3.0, 10.0), (5.1, 6.0), (7.0, 1.0)]);
    let inputs = [("x", x.clone()), ("y", y)];
    assert_all(
        scalar_on_all("for i = 0.0:9.0\n  s[] += x[i] * y[i]\nend", &inputs, "0.0"),
        2.0 * 10.0 + 4.0 * 6.0,
    );
    let one = [("x", x)];
    assert_all(
        scalar_on_all("for i = _\n  s[] += x[i]\nend", &one, "0.0"),
        10.0,
    );
    assert_all(
        scalar_on_all("for i = _\n  s[] += x[i] * d(i)\nend", &one, "0.0"),
        0.0,
    );
}

#[test]
fn golden_14_open_closed_and_eps_ends() {
    // x[3] = 1 (pinpoint), x[(5,7)] = 1 (open), x[[8, 9+ε]] = 1: ∫ = 3, Σ = 1.
    let x = runs(&[
        (PieceCoord::point(3.0), 1.0),
        (
            PieceCoord::Real(Limit::plus_eps(5.0), Limit::minus_eps(7.0)),
            1.0,
        ),
        (
            PieceCoord::Real(Limit::exact(8.0), Limit::plus_eps(9.0)),
            1.0,
        ),
    ]);
    let inputs = [("x", x)];
    assert_all(
        scalar_on_all("for i = _\n  s[] += x[i] * d(i)\nend", &inputs, "0.0"),
        3.0,
    );
    assert_all(
        scalar_on_all("for i = _\n  s[] += x[i]\nend", &inputs, "0.0"),
        1.0,
    );
    // Idempotent reducers see every piece once, whatever its length.
    assert_all(
        scalar_on_all("for i = _\n  s[] <<max>>= x[i]\nend", &inputs, "0.0"),
        1.0,
    );
    // A sub-range of the line: [6, 8.5] meets (5,7) over 1 and [8, 9] over 0.5.
    assert_all(
        scalar_on_all("for i = 6.0:8.5\n  s[] += x[i] * d(i)\nend", &inputs, "0.0"),
        1.5,
    );
}

#[test]
fn shifted_real_positions() {
    // x's pieces moved left by 0.5 against y: by hand, the overlaps of X16 - 0.5 with Y16
    // are 1 + 3.5 + 1.5 + 0.5 + 3 + 3 + 8.5 + 4.5 + 1 + 4.
    let inputs = [("x", closed(&X16)), ("y", closed(&Y16))];
    let go = |rhs: &str| scalar_on_all(&format!("for i = _\n  s[] += {rhs}\nend"), &inputs, "0.0");
    assert_all(go("x[i + 0.5] * y[i] * d(i)"), 30.5);
    // Shifted by a whole 1.0, x's pieces touch y's at the pinpoints 8 ([8, 15] and [6, 8]),
    // 29, 40 and 67: counted by Σ, nothing by ∫ (whose overlaps are 1 + 3 + 2 + 3 + 3 + 8 +
    // 4 + 1 + 4).
    assert_all(go("x[i + 1.0] * y[i]"), 4.0);
    assert_all(go("x[i - (-1.0)] * y[i] * d(i)"), 29.0);
    // A half-open piece keeps its open end when shifted: (5, 7) + 1 = (6, 8) misses y = 1
    // at the pinpoint 8, [8, 9] + 1 = [9, 10] meets it.
    let x = runs(&[
        (
            PieceCoord::Real(Limit::plus_eps(5.0), Limit::minus_eps(7.0)),
            2.0,
        ),
        (PieceCoord::closed(8.0, 9.0), 3.0),
    ]);
    let y = pinpoints(&[(8.0, 1.0), (10.0, 1.0)]);
    let inputs = [("x", x), ("y", y)];
    assert_all(
        scalar_on_all("for i = _\n  s[] += x[i - 1.0] * y[i]\nend", &inputs, "0.0"),
        3.0,
    );
    assert_all(
        scalar_on_all("for i = _\n  s[] += x[i - 1.0] * d(i)\nend", &inputs, "0.0"),
        2.0 * 2.0 + 3.0,
    );
}

#[test]
fn golden_17_pinpoints_at_interval_ends() {
    // Item 17's x: pinpoints (value 1) at the 20 ends of item 16's x.
    let ends: Vec<(f64, f64)> = X16
        .iter()
        .flat_map(|&(a, b)| [(a, 1.0), (b, 1.0)])
        .collect();
    let inputs = [("x", pinpoints(&ends))];
    let go = |rhs: &str| scalar_on_all(&format!("for i = _\n  s[] += {rhs}\nend"), &inputs, "0.0");
    assert_all(go("x[i]"), 20.0);
    assert_all(go("x[i] * d(i)"), 0.0);
    // Every pinpoint moved by the same offset is still counted once.
    assert_all(go("x[i + 2.5]"), 20.0);
}

/// Run `program` writing the real-indexed output `z` (a SparseRunList(coord=f64)); its pieces
/// on every backend.
fn pieces_on_all(program: &str, inputs: &[(&str, Tensor)]) -> Vec<(String, Vec<Piece>)> {
    let p = parse_program(program).unwrap();
    let mut out = vec![];
    for (name, r) in runners() {
        let mut ts: BTreeMap<String, Tensor> = inputs
            .iter()
            .map(|(n, t)| (n.to_string(), t.clone()))
            .collect();
        ts.insert(
            "z".to_string(),
            Tensor::empty(&fmt("SparseRunList(Element(0.0), coord=f64)"), &[0]).unwrap(),
        );
        let formats = ts
            .iter()
            .map(|(n, t)| (n.clone(), t.format.clone()))
            .collect();
        let c = r
            .compile(&p, &formats)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        r.execute(&c, &mut ts)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        ts["z"].validate("z").unwrap();
        out.push((name.to_string(), ts["z"].pieces()));
    }
    out
}

fn real(c: &PieceCoord) -> (Limit<f64>, Limit<f64>) {
    match c {
        PieceCoord::Real(a, z) => (*a, *z),
        PieceCoord::Int(_) => panic!("a real coordinate"),
    }
}

#[test]
fn golden_16_products_and_sums_of_interval_pairs_as_pieces() {
    let inputs = [("x", closed(&X16)), ("y", closed(&Y16))];
    let want: Vec<(f64, f64)> = vec![
        (2., 3.),
        (6., 6.),
        (12., 16.),
        (26., 27.),
        (29., 30.),
        (37., 40.),
        (42., 45.),
        (47., 56.),
        (73., 78.),
        (87., 87.),
        (88., 89.),
        (92., 96.),
    ];
    for (backend, got) in pieces_on_all("for i = _\n  z[i] = x[i] * y[i]\nend", &inputs) {
        let ends: Vec<(f64, f64)> = got
            .iter()
            .map(|(c, v)| {
                assert_eq!(*v, Scalar::F64(1.0), "{backend}");
                let (a, z) = real(&c[0]);
                assert_eq!(
                    (a.eps, z.eps),
                    (Limit::exact(0.0).eps, Limit::exact(0.0).eps)
                );
                (a.val, z.val)
            })
            .collect();
        assert_eq!(ends, want, "{backend}");
    }
    // x + y: 30 pieces with ε ends (equal-valued neighbours do not occur here).
    for (backend, got) in pieces_on_all("for i = _\n  z[i] = x[i] + y[i]\nend", &inputs) {
        assert_eq!(got.len(), 30, "{backend}: {got:?}");
        assert_eq!(real(&got[0].0[0]), (Limit::exact(2.0), Limit::exact(3.0)));
        assert_eq!(got[0].1, Scalar::F64(2.0));
        assert_eq!(
            real(&got[1].0[0]),
            (Limit::plus_eps(3.0), Limit::minus_eps(6.0))
        );
        assert_eq!(got[1].1, Scalar::F64(1.0));
        let last = got.last().unwrap();
        assert_eq!(
            real(&last.0[0]),
            (Limit::plus_eps(96.0), Limit::exact(98.0))
        );
    }
}

#[test]
fn golden_19_union_of_left_open_pieces() {
    let lo = |a: f64, b: f64, v: f64| (PieceCoord::left_open(a, b), v);
    let a = runs(&[lo(1.1, 3.3, 1.0), lo(6.6, 7.7, 2.0), lo(9.9, 11.11, 3.0)]);
    let b = runs(&[lo(2.2, 3.3, 1.0), lo(5.5, 8.8, 1.0), lo(8.8, 9.9, 2.0)]);
    let want = [
        (1.1, 2.2, 1.0),
        (2.2, 3.3, 2.0),
        (5.5, 6.6, 1.0),
        (6.6, 7.7, 3.0),
        (7.7, 8.8, 1.0),
        (8.8, 9.9, 2.0),
        (9.9, 11.11, 3.0),
    ];
    for (backend, got) in pieces_on_all(
        "for i = _\n  z[i] = x[i] + y[i]\nend",
        &[("x", a.clone()), ("y", b.clone())],
    ) {
        let got: Vec<(f64, f64, f64)> = got
            .iter()
            .map(|(c, v)| {
                let (p, q) = real(&c[0]);
                assert_eq!(
                    (p, q),
                    (Limit::plus_eps(p.val), Limit::exact(q.val)),
                    "{backend}"
                );
                (p.val, q.val, v.as_f64())
            })
            .collect();
        assert_eq!(got, want, "{backend}");
    }
}
