//! Real-valued loops end to end (issue 14): programs over tensors with `coord=f64` levels, run
//! on every backend and compared with the golden values of the continuous tensor abstraction
//! (`../shared/reference/seed-continuous.md` §5.3) and with the continuous reference evaluator.

mod common;

use common::runners;
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

/// Run `program` on every backend over copies of `tensors`; each backend's name and tensors
/// afterwards (every written tensor validated).
fn everywhere(
    program: &str,
    tensors: &[(&str, Tensor)],
) -> Vec<(String, BTreeMap<String, Tensor>)> {
    let p = parse_program(program).unwrap();
    let mut out = vec![];
    for (name, r) in runners() {
        let mut ts: BTreeMap<String, Tensor> = tensors
            .iter()
            .map(|(n, t)| (n.to_string(), t.clone()))
            .collect();
        let formats = ts
            .iter()
            .map(|(n, t)| (n.clone(), t.format.clone()))
            .collect();
        let c = r
            .compile(&p, &formats)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
        r.execute(&c, &mut ts)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}\n{}", c.ir));
        for (n, t) in &ts {
            t.validate(n).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        out.push((name.to_string(), ts));
    }
    out
}

/// Run `program` on every backend; returns the 0-d output `s` of each.
fn scalar_on_all(program: &str, inputs: &[(&str, Tensor)], elem_fill: &str) -> Vec<(String, f64)> {
    let mut all = inputs.to_vec();
    let s = Tensor::empty(&fmt(&format!("Element({elem_fill})")), &[]).unwrap();
    all.push(("s", s));
    everywhere(program, &all)
        .into_iter()
        .map(|(name, ts)| (name, ts["s"].pieces()[0].1.as_f64()))
        .collect()
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
    let mut all = inputs.to_vec();
    let z = Tensor::empty(&fmt("SparseRunList(Element(0.0), coord=f64)"), &[0]).unwrap();
    all.push(("z", z));
    everywhere(program, &all)
        .into_iter()
        .map(|(name, ts)| (name, ts["z"].pieces()))
        .collect()
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

#[test]
fn one_pinpoint_per_row_in_a_sparse_point_level() {
    let f = fmt("Dense(SparsePoint(Element(0.0), coord=f64))");
    let row = |r: i64, x: f64, v: f64| {
        (
            vec![PieceCoord::Int(r), PieceCoord::point(x)],
            Scalar::F64(v),
        )
    };
    let a = Tensor::from_pieces(
        &f,
        &[4, 0],
        &[row(0, 2.5, 1.0), row(2, 7.0, 3.0), row(3, 12.0, 5.0)],
    )
    .unwrap();
    a.validate("A").unwrap();
    assert_eq!(a.pieces().len(), 3);
    // Two points in one fiber are refused.
    assert!(Tensor::from_pieces(&f, &[4, 0], &[row(0, 1.0, 1.0), row(0, 2.0, 1.0)]).is_err());
    let y = runs(&[(PieceCoord::right_open(2.0, 8.0), 10.0)]);
    let inputs = [("A", a), ("y", y)];
    // Rows 0 and 2 have their point inside [2, 8): 1*10 + 3*10.
    assert_all(
        scalar_on_all(
            "for j = _, i = _\n  s[] += A[j, i] * y[i]\nend",
            &inputs,
            "0.0",
        ),
        40.0,
    );
    assert_all(
        scalar_on_all(
            "for j = _, i = _\n  s[] += A[j, i] * y[i] * d(i)\nend",
            &inputs,
            "0.0",
        ),
        0.0,
    );
}

/// `[start, end)` intervals, one per row of a `Dense(SparseInterval(Pattern(), coord=f64))`.
fn bed_like(list: &[(f64, f64)]) -> Tensor {
    let f = fmt("Dense(SparseInterval(Pattern(), coord=f64))");
    let p: Vec<Piece> = list
        .iter()
        .enumerate()
        .map(|(r, &(a, b))| {
            (
                vec![PieceCoord::Int(r as i64), PieceCoord::right_open(a, b)],
                Scalar::Bool(true),
            )
        })
        .collect();
    let t = Tensor::from_pieces(&f, &[list.len(), 0], &p).unwrap();
    t.validate("bed").unwrap();
    t
}

#[test]
fn interval_overlap_counts_follow_half_open_intervals() {
    // Touching intervals ([0,5) and [5,9)) do not overlap, as in bedtools.
    let a = [(0.0, 5.0), (5.0, 9.0), (20.0, 30.0), (2.0, 3.0)];
    let b = [(5.0, 6.0), (8.5, 25.0), (29.0, 40.0), (100.0, 101.0)];
    let want: Vec<i64> = a
        .iter()
        .map(|&(s, e)| b.iter().filter(|&&(t, u)| s < u && t < e).count() as i64)
        .collect();
    assert_eq!(want, vec![0, 2, 2, 0]);
    // A per-pair flag, collapsed over x by `|=`.
    let o = Tensor::empty(&fmt("Dense(Dense(Element(false)))"), &[a.len(), b.len()]).unwrap();
    let tensors = [("a", bed_like(&a)), ("b", bed_like(&b)), ("o", o)];
    let program = "for i = _, j = _, x = _\n  o[i, j] |= a[i, x] && b[j, x]\nend";
    for (name, ts) in everywhere(program, &tensors) {
        let o = ts["o"].to_dense();
        let got: Vec<i64> = (0..a.len())
            .map(|i| {
                (0..b.len())
                    .filter(|&j| o.get(i * b.len() + j) == Scalar::Bool(true))
                    .count() as i64
            })
            .collect();
        assert_eq!(got, want, "{name}");
    }
}

/// The paper's Fig. 18: the integral's own emptiness test is the phase's, so the kernel tests
/// each chunk once, and no infinitesimal is inspected at run time.
#[test]
fn integrals_test_each_chunk_once() {
    let p = parse_program("for i = _\n  s[] += x[i] * y[i] * d(i)\nend").unwrap();
    let mut formats = BTreeMap::new();
    for n in ["x", "y"] {
        formats.insert(n.to_string(), fmt("SparseRunList(Element(0.0), coord=f64)"));
    }
    formats.insert("s".to_string(), fmt("Element(0.0)"));
    let (ir, _, _) = Runner::lower(&p, &formats).unwrap();
    let text = ir.to_string();
    assert!(!text.contains("eps("), "{text}");
    assert!(!text.contains("after(before("), "{text}");
    // One test per operand's fill phase, none for the integral itself.
    let chunk_tests = text.matches(" <= i_step)").count();
    assert_eq!(chunk_tests, 2, "{text}");
}

/// Points `P[x, y, id]` (x and y pinpoint levels, id an integer level): a closed box and a
/// closed disc, against a brute force. The disc's test uses the real indices as values, which
/// is valid because the points drive both loops.
#[test]
fn box_and_radius_search_over_pinpoints() {
    let mut state = 12345u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % 1000) as f64 / 10.0
    };
    let pts: Vec<(f64, f64)> = (0..300).map(|_| (next(), next())).collect();
    let f = fmt("SparseList(SparseList(SparseList(Pattern()), coord=f64), coord=f64)");
    let pieces: Vec<Piece> = pts
        .iter()
        .enumerate()
        .map(|(k, &(x, y))| {
            (
                vec![
                    PieceCoord::point(x),
                    PieceCoord::point(y),
                    PieceCoord::Int(k as i64),
                ],
                Scalar::Bool(true),
            )
        })
        .collect();
    let p = Tensor::from_pieces(&f, &[0, 0, pts.len()], &pieces).unwrap();
    p.validate("P").unwrap();
    let (x0, y0, x1, y1) = (20.0, 30.0, 55.5, 61.0);
    let (cx, cy, r) = (50.0, 50.0, 17.5);
    let in_box: Vec<usize> = (0..pts.len())
        .filter(|&k| (x0..=x1).contains(&pts[k].0) && (y0..=y1).contains(&pts[k].1))
        .collect();
    let in_disc: Vec<usize> = (0..pts.len())
        .filter(|&k| (pts[k].0 - cx).powi(2) + (pts[k].1 - cy).powi(2) <= r * r)
        .collect();
    assert!(!in_box.is_empty() && !in_disc.is_empty());
    let programs = [
        (
            format!(
                "for x = {x0:?}:{x1:?}, y = {y0:?}:{y1:?}, id = _\n  o[id] |= P[x, y, id]\nend"
            ),
            in_box,
        ),
        (
            format!(
                "for x = {:?}:{:?}, y = {:?}:{:?}\n  if (x - {cx:?}) * (x - {cx:?}) + (y - {cy:?}) * (y - {cy:?}) <= {:?}\n    for id = _\n      o[id] |= P[x, y, id]\n    end\n  end\nend",
                cx - r,
                cx + r,
                cy - r,
                cy + r,
                r * r
            ),
            in_disc,
        ),
    ];
    let o = Tensor::empty(&fmt("Dense(Element(false))"), &[pts.len()]).unwrap();
    let tensors = [("P", p), ("o", o)];
    for (text, want) in programs {
        for (name, ts) in everywhere(&text, &tensors) {
            let o = ts["o"].to_dense();
            let got: Vec<usize> = (0..pts.len())
                .filter(|&k| o.get(k) == Scalar::Bool(true))
                .collect();
            assert_eq!(got, want, "{name}\n{text}");
        }
    }
}

#[test]
fn pinpoint_outputs_hold_the_coincident_points() {
    let x = pinpoints(&[(1.0, 1.0), (3.0, 2.0), (4.1, 3.0), (5.1, 4.0)]);
    let y = pinpoints(&[(3.0, 10.0), (5.1, 6.0), (7.0, 1.0)]);
    let z = Tensor::empty(&fmt("SparseList(Element(0.0), coord=f64)"), &[0]).unwrap();
    let tensors = [("x", x.clone()), ("y", y), ("z", z)];
    for (name, ts) in everywhere("z .= 0.0\nfor i = _\n  z[i] = x[i] * y[i]\nend", &tensors) {
        let got: Vec<(f64, f64)> = ts["z"]
            .pieces()
            .iter()
            .map(|(c, v)| (real(&c[0]).0.val, v.as_f64()))
            .collect();
        assert_eq!(got, vec![(3.0, 20.0), (5.1, 24.0)], "{name}");
    }
    // A positive-length piece with a value other than the fill cannot be a pinpoint.
    let p = parse_program("z .= 0.0\nfor i = _\n  z[i] = x[i] + 1.0\nend").unwrap();
    let mut formats = BTreeMap::new();
    formats.insert("x".to_string(), x.format.clone());
    formats.insert("z".to_string(), fmt("SparseList(Element(0.0), coord=f64)"));
    let e = Runner::jit().compile(&p, &formats).err().expect("refused");
    assert!(e.to_string().contains("real index `i`"), "{e}");
}

/// Item 21: trilinear interpolation along a sampled ray as an integral over the unit cube
/// (`∫∫∫ Grid[x + i, y + j, z + k] di dj dk`). A 16³ grid of 16 channels, 1 on `[4, 12)³`;
/// samples t = 23..69 at `0.1 t + 0.1` on every axis; Σ output = 16 Σ_t L(t)³ = 528.4 with
/// `L = max(0, min(p + 1, 12) - max(p, 4))`.
#[test]
fn golden_21_trilinear_interpolation_along_a_ray() {
    let grid_fmt = fmt(
        "SparseRunList(SparseRunList(SparseRunList(Dense(Element(0.0)), coord=f64), coord=f64), coord=f64)",
    );
    let cube = PieceCoord::right_open(4.0, 12.0);
    let pieces: Vec<Piece> = (0..16)
        .map(|c| (vec![cube, cube, cube, PieceCoord::Int(c)], Scalar::F64(1.0)))
        .collect();
    let grid = Tensor::from_pieces(&grid_fmt, &[0, 0, 0, 16], &pieces).unwrap();
    let out = Tensor::empty(&fmt("Dense(Dense(Element(0.0)))"), &[70, 16]).unwrap();
    let program = "out .= 0.0
for t = 23:69
  for k = 0.0:1.0, j = 0.0:1.0, i = 0.0:1.0
    for c = _
      out[t, c] += coalesce(grid[k + 0.1 * t + 0.1, j + 0.1 * t + 0.1, i + 0.1 * t + 0.1, c], 0.0) * d(i) * d(j) * d(k)
    end
  end
end";
    for (backend, ts) in everywhere(program, &[("grid", grid), ("out", out)]) {
        let total: f64 = ts["out"].pieces().iter().map(|(_, v)| v.as_f64()).sum();
        assert!((total - 528.4).abs() < 1e-9, "{backend}: {total}");
    }
}

/// The value of `pieces` at the point `at` (one coordinate per dimension), or `fill`.
fn value_at(pieces: &[Piece], at: &[f64], fill: f64) -> f64 {
    let inside = |c: &PieceCoord, x: f64| match *c {
        PieceCoord::Int(i) => i as f64 == x,
        PieceCoord::Real(a, z) => a <= Limit::exact(x) && Limit::exact(x) <= z,
    };
    pieces
        .iter()
        .find(|(cs, _)| cs.iter().zip(at).all(|(c, &x)| inside(c, x)))
        .map_or(fill, |(_, v)| v.as_f64())
}

/// Building nested real run levels from pieces keeps neighbouring runs whose sub-fibers
/// differ apart: `[1, 2) × [11, 12)` and `[2, 3) × [10, 11)` were merged into `[1, 3)` with
/// the first sub-fiber (sub-fibers of real levels compared as empty), which lost voxels of
/// the trilinear study's grid. Random voxel sets round-trip through the storage, pointwise.
#[test]
fn nested_real_runs_with_different_sub_fibers_stay_apart() {
    // Also with RunLists (whose gaps are stored fill runs) at either level.
    for f in [
        "SparseRunList(SparseRunList(Element(0.0), coord=f64), coord=f64)",
        "RunList(RunList(Element(0.0), coord=f64), coord=f64)",
        "RunList(SparseRunList(Element(0.0), coord=f64), coord=f64)",
        "SparseRunList(RunList(Element(0.0), coord=f64), coord=f64)",
    ] {
        nested_round_trip(&fmt(f));
    }
}

fn nested_round_trip(f: &Format) {
    let unit = |k: i64| PieceCoord::right_open(k as f64, k as f64 + 1.0);
    let mut seed = 12345u64;
    let mut next = |m: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % m
    };
    for round in 0..40 {
        let mut pieces: Vec<Piece> = vec![];
        for y in 0..6 {
            for x in 0..6 {
                if next(3) == 0 {
                    // Few distinct values, so some neighbours are equal and do merge.
                    let v = 1.0 + next(2) as f64;
                    pieces.push((vec![unit(y), unit(x)], Scalar::F64(v)));
                }
            }
        }
        let t = Tensor::from_pieces(f, &[0, 0], &pieces).unwrap();
        t.validate("t").unwrap();
        let back = t.pieces();
        for k in 0..30 {
            let at = [k as f64 * 0.25 - 0.5, (k * 7 % 30) as f64 * 0.25 - 0.5];
            for at in [at, [at[1], at[0]]] {
                assert_eq!(
                    value_at(&back, &at, 0.0),
                    value_at(&pieces, &at, 0.0),
                    "{f}: round {round} at {at:?}"
                );
            }
        }
    }
}

/// The count index of `examples/interval_overlap.rs` over half-open data intervals `b`:
/// `S[x]`, how many start at `x`, and `C[x]`, how many hold `x` in their interior
/// (an exact value at each endpoint, one on each open gap).
fn count_index(b: &[(f64, f64)]) -> (Tensor, Tensor) {
    let mut events: Vec<(f64, i64)> = b.iter().flat_map(|&(s, e)| [(s, 1), (e, -1)]).collect();
    events.sort_by(|p, q| p.0.total_cmp(&q.0).then(p.1.cmp(&q.1)));
    let (mut starts, mut cover): (Vec<Piece>, Vec<Piece>) = (vec![], vec![]);
    let (mut open, mut k) = (0i64, 0);
    while k < events.len() {
        let at = events[k].0;
        let (mut opened, mut closed) = (0, 0);
        while k < events.len() && events[k].0 == at {
            match events[k].1 > 0 {
                true => opened += 1,
                false => closed += 1,
            }
            k += 1;
        }
        if opened > 0 {
            starts.push((vec![PieceCoord::point(at)], Scalar::I64(opened)));
        }
        if open - closed > 0 {
            cover.push((vec![PieceCoord::point(at)], Scalar::I64(open - closed)));
        }
        open += opened - closed;
        if let (true, Some(&(next, _))) = (open > 0, events.get(k)) {
            let gap = PieceCoord::Real(Limit::plus_eps(at), Limit::minus_eps(next));
            cover.push((vec![gap], Scalar::I64(open)));
        }
    }
    let s = Tensor::from_pieces(&fmt("SparseList(Element(0), coord=f64)"), &[0], &starts);
    let c = Tensor::from_pieces(&fmt("SparseRunList(Element(0), coord=f64)"), &[0], &cover);
    (s.unwrap(), c.unwrap())
}

const COUNT: &str = "o .= 0\nfor i = _, x = _\n  o[i] += A1[i, x] * S[x]\nend\nfor i = _, x = _\n  o[i] += As[i, gallop(x)] * C[gallop(x)]\nend";

/// Counting overlaps by the starts inside each query plus the coverage at its start (the
/// example's `count`), on every backend and in the evaluator, against pair enumeration. The
/// phases around a query's piece multiply `S` by A1's zero, so the kernel positions `S` for
/// the piece only: one search of `S` per query, not one more for the phase after it.
#[test]
fn interval_count_searches_only_where_the_query_is() {
    let a = [
        (0.0, 5.0),
        (5.0, 9.0),
        (20.0, 30.0),
        (2.0, 3.0),
        (8.5, 8.75),
        (40.0, 99.0),
    ];
    let b = [
        (5.0, 6.0),
        (8.5, 25.0),
        (29.0, 40.0),
        (100.0, 101.0),
        (0.0, 3.0),
        (5.0, 9.0),
        (30.0, 41.0),
    ];
    let want: Vec<i64> = a
        .iter()
        .map(|&(s, e)| b.iter().filter(|&&(t, u)| s < u && t < e).count() as i64)
        .collect();
    let rows = |format: &str, at: &dyn Fn(f64, f64) -> PieceCoord| {
        let p: Vec<Piece> = a
            .iter()
            .enumerate()
            .map(|(i, &(s, e))| (vec![PieceCoord::Int(i as i64), at(s, e)], Scalar::I64(1)))
            .collect();
        Tensor::from_pieces(&fmt(format), &[a.len(), 0], &p).unwrap()
    };
    let starts = rows("Dense(SparseList(Element(0), coord=f64))", &|s, _| {
        PieceCoord::point(s)
    });
    let (s, c) = count_index(&b);
    // The queries as general intervals (signs in arrays) and as `halfopen=true` ones.
    for half_open in [false, true] {
        let a1 = rows(
            &format!(
                "Dense(SparseInterval(Element(0), coord=f64{}))",
                if half_open { ", halfopen=true" } else { "" }
            ),
            &PieceCoord::right_open,
        );
        let inputs = [("A1", &a1), ("As", &starts), ("S", &s), ("C", &c)];
        let got = common::pieces::compare_pieces(COUNT, &inputs, "Dense(Element(0))", &[a.len()]);
        let mut counts = vec![0i64; a.len()];
        for (at, v) in got.pieces {
            if let tessera::eval::continuous::Coord::Int(i) = at[0] {
                counts[i as usize] += v.as_i64();
            }
        }
        assert_eq!(counts, want);

        let formats: BTreeMap<String, Format> = inputs
            .iter()
            .map(|(n, t)| (n.to_string(), t.format.clone()))
            .chain([("o".to_string(), fmt("Dense(Element(0))"))])
            .collect();
        // The kernel as the backends get it, after `ir::exact_points`.
        let compiled = Runner::jit().compile(&parse_program(COUNT).unwrap(), &formats);
        let text = compiled.unwrap().ir.to_string();
        assert_eq!(text.matches("S_search_lo = S_q;").count(), 1, "{text}");
        // Half-open queries carry no signs: the search for the query's start compares floats.
        let search = "if (S_idx[S_search_mid] < x_phase_start";
        assert_eq!(text.contains(search), half_open, "{text}");
        assert_eq!(!text.contains("A1_left_eps["), half_open, "{text}");
    }
}

/// `halfopen=true` is a promise about every stored run: a piece with other ends is refused
/// when the tensor is built, and the flag needs real coordinates.
#[test]
fn half_open_intervals_refuse_other_ends() {
    let f = fmt("Dense(SparseInterval(Pattern(), coord=f64, halfopen=true))");
    assert_eq!(
        f.to_string(),
        "Dense(SparseInterval(Pattern(), coord=f64, halfopen=true))"
    );
    let piece = |c: PieceCoord| (vec![PieceCoord::Int(0), c], Scalar::Bool(true));
    assert!(Tensor::from_pieces(&f, &[1, 0], &[piece(PieceCoord::right_open(1.0, 2.0))]).is_ok());
    for other in [PieceCoord::closed(1.0, 2.0), PieceCoord::point(1.0)] {
        let e = Tensor::from_pieces(&f, &[1, 0], &[piece(other)]).unwrap_err();
        assert!(e.to_string().contains("halfopen=true"), "{e}");
    }
    let e = Format::parse("SparseInterval(Pattern(), halfopen=true)", None).unwrap_err();
    assert!(e.to_string().contains("coord=f64"), "{e}");
}

/// A boolean output stops its `|=` (`&=`) reductions once true (false): the walk over a
/// query's segments and ids breaks, and the results still agree with the evaluator on every
/// backend, for dense and sparse outputs and for the interval overlap of the example.
#[test]
fn boolean_reductions_stop_at_their_annihilator() {
    let bits = [
        true, false, true, true, false, //
        false, false, false, false, false, //
        false, true, true, true, true, //
        true, true, true, true, true,
    ];
    let values = tessera::runtime::Buffer::from(bits.to_vec());
    let a = Tensor::from_slice("Dense(SparseList(Element(false)))", &[4, 5], &values).unwrap();
    for (out, op, init, annihilator) in [
        ("Dense(Element(false))", "|=", "false", "true"),
        ("SparseList(Element(false))", "|=", "false", "true"),
        ("Dense(Element(true))", "&=", "true", "false"),
    ] {
        let program = format!("o .= {init}\nfor i = _, j = _\n  o[i] {op} A[i, j]\nend");
        let o = Tensor::empty(&fmt(out), &[4]).unwrap();
        let tensors = [("A", a.clone()), ("o", o)];
        let want = common::run_eval(
            &parse_program(&program).unwrap(),
            &tensors
                .iter()
                .map(|(n, t)| (n.to_string(), t.clone()))
                .collect(),
        )
        .unwrap();
        for (name, ts) in everywhere(&program, &tensors) {
            assert_eq!(ts["o"].to_dense(), want["o"], "{name}: {program}");
        }
        let formats = tensors
            .iter()
            .map(|(n, t)| (n.to_string(), t.format.clone()))
            .collect();
        let (ir, _, _) = Runner::lower(&parse_program(&program).unwrap(), &formats).unwrap();
        let text = ir.to_string();
        // The test of the accumulator against the annihilator, which only the early exit
        // emits, then `break`.
        let test = format!(" == {annihilator}) {{");
        assert!(text.contains(&test), "no early exit for {out}:\n{text}");
    }

    // The example's overlap: segments `G[x, j]` listing the ids covering them.
    let q = [
        (0.0, 5.0),
        (5.0, 9.0),
        (20.0, 30.0),
        (2.0, 3.0),
        (40.0, 99.0),
    ];
    let segs: Vec<Piece> = [
        (0.0, 3.0, &[4, 5][..]),
        (5.0, 6.0, &[0, 5, 6]),
        (8.5, 9.0, &[1, 5]),
    ]
    .iter()
    .flat_map(|&(s, e, ids)| {
        ids.iter().map(move |&j| {
            let at = vec![PieceCoord::right_open(s, e), PieceCoord::Int(j)];
            (at, Scalar::Bool(true))
        })
    })
    .collect();
    let g = Tensor::from_pieces(
        &fmt("SparseRunList(SparseList(Pattern()), coord=f64)"),
        &[0, 7],
        &segs,
    )
    .unwrap();
    let o = Tensor::empty(&fmt("Dense(Element(false))"), &[q.len()]).unwrap();
    let program = "o .= false\nfor i = _, x = _, j = _\n  o[i] |= A[i, x] && G[x, j]\nend";
    let tensors = [("A", bed_like(&q)), ("G", g), ("o", o)];
    for (name, ts) in everywhere(program, &tensors) {
        let got: Vec<Scalar> = (0..q.len()).map(|i| ts["o"].to_dense().get(i)).collect();
        let want = [true, true, false, true, false].map(Scalar::Bool);
        assert_eq!(got, want, "{name}");
    }
}

/// A pinpoint read against a real run list (`As[i, gallop(x)] * C[gallop(x)]`, the coverage
/// half of `count`) reads the run list at each point: one search of `C` per point, starting
/// from where the previous point's search ended when that is still valid, then one test of the
/// run's start, instead of the leapfrog loop of two jumpers around each point. The points
/// sit exactly on closed, open and half-open ends, and on pinpoint runs; the rows visit them
/// in sorted, reversed and mixed order (the kept position must not skip a run for a point
/// that lies before it) and some rows are empty; `C` is also empty. Every backend agrees with
/// the evaluator and with the value of `C` at each point.
#[test]
fn pinpoints_read_run_lists_at_each_point() {
    let p = |a: Limit<f64>, z: Limit<f64>| PieceCoord::Real(a, z);
    let cover = [
        (PieceCoord::closed(1.0, 2.0), 3.0),
        (p(Limit::plus_eps(3.0), Limit::minus_eps(4.0)), 5.0),
        (PieceCoord::right_open(5.0, 6.0), 7.0),
        (p(Limit::plus_eps(6.0), Limit::exact(7.0)), 11.0),
        (PieceCoord::point(8.0), 13.0),
        (p(Limit::plus_eps(8.0), Limit::minus_eps(9.5)), 17.0),
    ];
    let value = |x: f64| -> f64 {
        let at = Limit::exact(x);
        cover
            .iter()
            .find(|(c, _)| {
                let (a, z) = real(c);
                a <= at && at <= z
            })
            .map_or(0.0, |c| c.1)
    };
    let rows: [&[f64]; 6] = [
        &[
            0.5, 1.0, 2.0, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 9.5, 10.0,
        ],
        &[],
        &[9.5, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0],
        &[6.5],
        &[1.5, 8.25, 2.0, 7.0, 3.25, 6.0],
        &[],
    ];
    let mut pieces: Vec<Piece> = vec![];
    for (i, row) in rows.iter().enumerate() {
        let mut row = row.to_vec();
        // A row's points are stored sorted; the rows themselves come in any order.
        row.sort_by(f64::total_cmp);
        for x in row {
            pieces.push((
                vec![PieceCoord::Int(i as i64), PieceCoord::point(x)],
                Scalar::F64(1.0),
            ));
        }
    }
    let a = Tensor::from_pieces(
        &fmt("Dense(SparseList(Element(0.0), coord=f64))"),
        &[rows.len(), 0],
        &pieces,
    )
    .unwrap();
    let c = runs(&cover);
    let empty = runs(&[]);
    let program = "o .= 0.0\nfor i = _, x = _\n  o[i] += As[i, gallop(x)] * C[gallop(x)]\nend";
    for (c, nonempty) in [(&c, true), (&empty, false)] {
        let inputs = [("As", &a), ("C", c)];
        let got =
            common::pieces::compare_pieces(program, &inputs, "Dense(Element(0.0))", &[rows.len()]);
        let mut sums = vec![0.0; rows.len()];
        for (at, v) in got.pieces {
            if let tessera::eval::continuous::Coord::Int(i) = at[0] {
                sums[i as usize] += v.as_f64();
            }
        }
        let want: Vec<f64> = rows
            .iter()
            .map(|r| match nonempty {
                true => r.iter().map(|&x| value(x)).sum(),
                false => 0.0,
            })
            .collect();
        assert_eq!(sums, want);
    }
    let formats: BTreeMap<String, Format> = [("As", &a), ("C", &c)]
        .iter()
        .map(|(n, t)| (n.to_string(), t.format.clone()))
        .chain([("o".to_string(), fmt("Dense(Element(0.0))"))])
        .collect();
    let text = Runner::jit()
        .compile(&parse_program(program).unwrap(), &formats)
        .unwrap()
        .ir
        .to_string();
    // One search of `C` per point, no leapfrog chunk, no search of `As`.
    assert_eq!(text.matches("C_search_lo = C_q;").count(), 1, "{text}");
    assert!(!text.contains("x_jump"), "{text}");
    assert!(!text.contains("As_search_lo"), "{text}");
    // The search starts from the last one's position when every run before it ends earlier.
    assert!(text.contains("C_search_lo = C_hint;"), "{text}");
}
