//! Golden values of the continuous tensor abstraction (seed-continuous.md §5.2–§5.3, from the
//! paper and Finch.jl's `test/suites/continuous_tests.jl` and `continuousexamples_tests.jl`),
//! rejected programs, and a brute-force property test.

use super::*;
use crate::limit::Limit;
use crate::notation::parse::parse_program;
use crate::types::{ElemType, Scalar};
use proptest::prelude::*;

type Env = BTreeMap<String, PieceTensor>;

/// A real vector of `f64`, fill 0.
fn vec1(pieces: &[(Coord, f64)]) -> PieceTensor {
    pieces.iter().fold(
        PieceTensor::new(vec![true], vec![0], ElemType::F64, Scalar::F64(0.0)),
        |t, (c, v)| t.with(vec![*c], Scalar::F64(*v)),
    )
}

/// Pinpoints of value 1 at `at`.
fn pins(at: &[f64]) -> PieceTensor {
    vec1(
        &at.iter()
            .map(|p| (Coord::point(*p), 1.0))
            .collect::<Vec<_>>(),
    )
}

/// Closed intervals `[at[2k], at[2k+1]]` of value 1.
fn closed(at: &[f64]) -> PieceTensor {
    vec1(
        &at.chunks(2)
            .map(|c| (Coord::closed(c[0], c[1]), 1.0))
            .collect::<Vec<_>>(),
    )
}

fn env(tensors: Vec<(&str, PieceTensor)>) -> Env {
    let mut e: Env = tensors
        .into_iter()
        .map(|(n, t)| (n.to_string(), t))
        .collect();
    e.entry("s".into())
        .or_insert_with(|| PieceTensor::scalar(ElemType::F64, Scalar::F64(0.0)));
    e
}

fn run_text(text: &str, e: &mut Env) -> Result<()> {
    run(&parse_program(text).unwrap(), e)
}

/// The value of `s` after running `text` on `tensors`.
fn s_after(text: &str, tensors: Vec<(&str, PieceTensor)>) -> f64 {
    let mut e = env(tensors);
    run_text(text, &mut e).unwrap_or_else(|err| panic!("{text}: {err}"));
    e["s"].get().as_f64()
}

fn err_of(text: &str, tensors: Vec<(&str, PieceTensor)>) -> String {
    let mut e = env(tensors);
    run_text(text, &mut e).expect_err(text).to_string()
}

const SUM: &str = "s .= 0\nfor i = _\n  s[] += x[i]\nend\n";
const INTEGRAL: &str = "s .= 0\nfor i = _\n  s[] += x[i] * d(i)\nend\n";
const DOT: &str = "s .= 0\nfor i = _\n  s[] += x[i] * y[i]\nend\n";
const DOT_INTEGRAL: &str = "s .= 0\nfor i = _\n  s[] += x[i] * y[i] * d(i)\nend\n";
const UNION_SUM: &str = "s .= 0\nfor i = _\n  s[] += x[i] + y[i]\nend\n";
const UNION_INTEGRAL: &str = "s .= 0\nfor i = _\n  s[] += (x[i] + y[i]) * d(i)\nend\n";

#[test]
fn item_6_a_pinpoint_dot_product_is_the_discrete_sum() {
    // Fig. 2: nonzeros of x at 1.0, 3.0, 4.1, 5.1; only coincident pinpoints contribute.
    let x = vec1(&[
        (Coord::point(1.0), 2.0),
        (Coord::point(3.0), 4.0),
        (Coord::point(4.1), 1.0),
        (Coord::point(5.1), 6.0),
    ]);
    let y = vec1(&[
        (Coord::point(0.0), 9.0),
        (Coord::point(3.0), 5.0),
        (Coord::point(5.1), 4.0),
        (Coord::point(6.0), 1.0),
    ]);
    let text = "s .= 0\nfor i = 0.0:9.0\n  s[] += x[i] * y[i]\nend\n";
    assert_eq!(
        s_after(text, vec![("x", x.clone()), ("y", y.clone())]),
        44.0
    );
    // The integral of pinpoint tensors is 0.
    assert_eq!(s_after(DOT_INTEGRAL, vec![("x", x), ("y", y)]), 0.0);
}

#[test]
fn item_7_pinpoints_integrate_to_zero_and_sum_their_values() {
    let x = vec1(&[(Coord::point(-2.5), 3.0), (Coord::point(7.0), 4.5)]);
    assert_eq!(s_after(INTEGRAL, vec![("x", x.clone())]), 0.0);
    assert_eq!(s_after(SUM, vec![("x", x)]), 7.5);
}

#[test]
fn item_8_integrals_ignore_inclusiveness() {
    for c in [
        Coord::closed(1.0, 3.0),
        Coord::open(1.0, 3.0),
        Coord::left_open(1.0, 3.0),
        Coord::right_open(1.0, 3.0),
    ] {
        assert_eq!(s_after(INTEGRAL, vec![("x", vec1(&[(c, 2.5)]))]), 5.0);
        // A counting sum over a positive-length piece counts nothing.
        assert_eq!(s_after(SUM, vec![("x", vec1(&[(c, 2.5)]))]), 0.0);
    }
}

#[test]
fn item_9_idempotent_reductions_ignore_the_length() {
    for (op, init, want) in [("<<max>>=", "-Inf", 3.0), ("<<min>>=", "Inf", 0.0)] {
        let text = format!("s .= {init}\nfor i = _\n  s[] {op} x[i]\nend\n");
        for c in [Coord::closed(2.0, 5.0), Coord::point(2.0)] {
            assert_eq!(
                s_after(&text, vec![("x", vec1(&[(c, 3.0)]))]),
                want,
                "{text}"
            );
        }
    }
    let b = |c| {
        PieceTensor::new(vec![true], vec![0], ElemType::Bool, Scalar::Bool(false))
            .with(vec![c], Scalar::Bool(true))
    };
    for (text, want) in [
        ("t .= false\nfor i = _\n  t[] |= x[i]\nend\n", true),
        ("t .= true\nfor i = _\n  t[] &= x[i]\nend\n", false),
    ] {
        for c in [Coord::closed(2.0, 5.0), Coord::point(2.0)] {
            let mut e = env(vec![
                ("x", b(c)),
                (
                    "t",
                    PieceTensor::scalar(ElemType::Bool, Scalar::Bool(false)),
                ),
            ]);
            run_text(text, &mut e).unwrap();
            assert_eq!(e["t"].get(), Scalar::Bool(want), "{text}");
        }
    }
}

#[test]
fn item_10_an_assignment_over_an_interval_is_one_piece() {
    let mut e = env(vec![("a", vec1(&[]))]);
    run_text("for i = 1.0:4.0\n  a[i] = 2\nend\n", &mut e).unwrap();
    assert_eq!(
        e["a"].canonical().pieces,
        vec![(vec![Coord::closed(1.0, 4.0)], Scalar::F64(2.0))]
    );
    // An affine left-hand side writes the image of the interval, reversed by a negative
    // coefficient.
    let mut e = env(vec![
        ("a", vec1(&[])),
        ("m", vec1(&[(Coord::right_open(0.0, 1.0), 1.0)])),
    ]);
    run_text("for i = _\n  a[3 - 2 * i] = m[i]\nend\n", &mut e).unwrap();
    assert_eq!(
        e["a"].canonical().pieces,
        vec![(vec![Coord::left_open(1.0, 3.0)], Scalar::F64(1.0))]
    );
}

#[test]
fn item_11_non_invertible_indices_and_values_on_intervals_are_refused() {
    let x = || vec1(&[(Coord::closed(1.0, 2.0), 1.0)]);
    assert_eq!(
        err_of("for i = _\n  s[] += x[i * i]\nend\n", vec![("x", x())]),
        "2:10: index `i * i` of `x` is not invertible in the real index `i` (a real dimension \
         takes `x`, `x + c`, `c - x`, `2*x + c` or sums of real indices)"
    );
    assert!(
        err_of("for i = _\n  s[] += x[exp(i)]\nend\n", vec![("x", x())])
            .starts_with("2:10: index `exp(i)` of `x` is not invertible in the real index `i`")
    );
    assert_eq!(
        err_of("for i = 0.0:10.0\n  x[i] += i\nend\n", vec![("x", x())]),
        "2:11: `i` is used as a value on a piece of positive length of its real loop; the \
         write at 2:3 changes its output there (valid only where the loop is driven by \
         pinpoints)"
    );
    // Driven by pinpoints, the same write is fine.
    let mut e = env(vec![("x", vec1(&[])), ("m", pins(&[1.5, 4.0]))]);
    run_text(
        "for i = _\n  if m[i] > 0\n    x[i] += i\n  end\nend\n",
        &mut e,
    )
    .unwrap();
    assert_eq!(
        e["x"].canonical().pieces,
        vec![
            (vec![Coord::point(1.5)], Scalar::F64(1.5)),
            (vec![Coord::point(4.0)], Scalar::F64(4.0))
        ]
    );
}

#[test]
fn measure_misuse_is_refused_with_its_place() {
    // The compiler's own checks come first.
    assert_eq!(err_of("s[] += d(j)", vec![]), "1:10: unknown name `j`");
    let x = || vec1(&[(Coord::closed(1.0, 2.0), 1.0)]);
    assert_eq!(
        err_of(
            "for i = _\n  s[] += x[i] * d(i) + 1\nend\n",
            vec![("x", x())]
        ),
        "2:17: `d(i)` must be a factor of the right-hand side of `+=` inside `for i`"
    );
    assert_eq!(
        err_of("for j = 0:2\n  s[] += d(j)\nend\n", vec![("x", x())]),
        "2:12: `j` is not a real loop"
    );
    assert_eq!(
        err_of(
            "for i = _\n  s[] += x[i] * d(i, i)\nend\n",
            vec![("x", x())]
        ),
        "2:17: `d` measures `i` twice in one statement"
    );
}

#[test]
fn item_14_written_pieces_integrate_by_length() {
    // Finch: x[3] = 1 (pinpoint), x[(5, 7)] = 1 (open), x[[8, 9]] = 1; ∫ x = 3.
    let mut e = env(vec![("x", vec1(&[(Coord::open(5.0, 7.0), 1.0)]))]);
    run_text("x[3.0] = 1\nfor i = 8.0:9.0\n  x[i] = 1\nend\n", &mut e).unwrap();
    let x = e["x"].clone();
    assert_eq!(
        x.canonical().pieces,
        vec![
            (vec![Coord::point(3.0)], Scalar::F64(1.0)),
            (vec![Coord::open(5.0, 7.0)], Scalar::F64(1.0)),
            (vec![Coord::closed(8.0, 9.0)], Scalar::F64(1.0)),
        ]
    );
    assert_eq!(s_after(INTEGRAL, vec![("x", x.clone())]), 3.0);
    // The counting sum sees the pinpoint only (the implementation's sieve semantics).
    assert_eq!(s_after(SUM, vec![("x", x)]), 1.0);
}

#[test]
fn item_15_integer_rows_over_a_real_dimension() {
    // Rows 1, 4, 8 (0, 3, 7 zero-based) hold [2, 4); row 2 (1) holds (6, 10).
    let mut x = PieceTensor::new(
        vec![false, true],
        vec![10, 0],
        ElemType::F64,
        Scalar::F64(0.0),
    );
    for j in [0, 3, 7] {
        x = x.with(
            vec![Coord::Int(j), Coord::right_open(2.0, 4.0)],
            Scalar::F64(1.0),
        );
    }
    x = x.with(
        vec![Coord::Int(1), Coord::open(6.0, 10.0)],
        Scalar::F64(1.0),
    );
    let text = "s .= 0\nfor i = _\n  for j = _\n    s[] += x[j, i] * d(i)\n  end\nend\n";
    assert_eq!(s_after(text, vec![("x", x)]), 10.0);
}

const V: [f64; 20] = [
    2.0, 6.0, 9.0, 16.0, 26.0, 30.0, 37.0, 40.0, 41.0, 56.0, 68.0, 69.0, 70.0, 78.0, 86.0, 87.0,
    88.0, 89.0, 92.0, 96.0,
];
const W: [f64; 20] = [
    2.0, 3.0, 6.0, 8.0, 12.0, 18.0, 22.0, 27.0, 29.0, 40.0, 42.0, 45.0, 47.0, 67.0, 73.0, 79.0,
    83.0, 84.0, 87.0, 98.0,
];

#[test]
fn item_16_an_interval_pair() {
    let (x, y) = (closed(&V), closed(&W));
    let both = || vec![("x", x.clone()), ("y", y.clone())];
    assert_eq!(s_after(DOT_INTEGRAL, both()), 32.0);
    assert_eq!(s_after(DOT, both()), 2.0);
    assert_eq!(s_after(UNION_INTEGRAL, both()), 114.0);
    assert_eq!(s_after(UNION_SUM, both()), 4.0);

    let mut e = env(vec![("x", x.clone()), ("y", y.clone()), ("z", vec1(&[]))]);
    run_text("z .= 0\nfor i = _\n  z[i] += x[i] * y[i]\nend\n", &mut e).unwrap();
    let want: Vec<(Vec<Coord>, Scalar)> = [
        (2.0, 3.0),
        (6.0, 6.0),
        (12.0, 16.0),
        (26.0, 27.0),
        (29.0, 30.0),
        (37.0, 40.0),
        (42.0, 45.0),
        (47.0, 56.0),
        (73.0, 78.0),
        (87.0, 87.0),
        (88.0, 89.0),
        (92.0, 96.0),
    ]
    .iter()
    .map(|(a, b)| (vec![Coord::closed(*a, *b)], Scalar::F64(1.0)))
    .collect();
    assert_eq!(e["z"].canonical().pieces, want);

    run_text("z .= 0\nfor i = _\n  z[i] += x[i] + y[i]\nend\n", &mut e).unwrap();
    let z = e["z"].canonical();
    assert_eq!(z.pieces.len(), 30, "{:?}", z.pieces);
    let (e_, pe, me) = (Limit::exact, Limit::plus_eps, Limit::minus_eps);
    let piece = |lo, hi, v| (vec![Coord::Real(lo, hi)], Scalar::F64(v));
    for p in [
        piece(e_(2.0), e_(3.0), 2.0),
        piece(pe(3.0), me(6.0), 1.0),
        piece(e_(6.0), e_(6.0), 2.0),
        piece(pe(6.0), e_(8.0), 1.0),
        piece(e_(9.0), me(12.0), 1.0),
        piece(e_(12.0), e_(16.0), 2.0),
        piece(e_(92.0), e_(96.0), 2.0),
        piece(pe(96.0), e_(98.0), 1.0),
    ] {
        assert!(z.pieces.contains(&p), "{p:?} in {:?}", z.pieces);
    }
    // The union is the integrand of ∫ (x + y).
    let total: f64 = z
        .pieces
        .iter()
        .map(|(c, v)| match c[0] {
            Coord::Real(lo, hi) => (hi.val - lo.val) * v.as_f64(),
            Coord::Int(_) => unreachable!(),
        })
        .sum();
    assert_eq!(total, 114.0);
}

#[test]
fn item_17_pinpoints_and_affine_indices() {
    let x = || pins(&V);
    assert_eq!(s_after(SUM, vec![("x", x())]), 20.0);
    assert_eq!(s_after(INTEGRAL, vec![("x", x())]), 0.0);
    let affine = "s .= 0\nfor i = _\n  s[] += x[2 * i + 10]\nend\n";
    assert_eq!(s_after(affine, vec![("x", x())]), 20.0);
    // x at 2i + 10 for i in [3, 15]: the pinpoints 16, 26, 30, 37, 40.
    let window = "s .= 0\nfor i = 3.0:15.0\n  s[] += coalesce(x[~(2 * i + 10)], 0)\nend\n";
    assert_eq!(s_after(window, vec![("x", x())]), 5.0);
    // A negative coefficient flips the pieces: x[40 - i] over [0, 24] meets 16 .. 40.
    let flipped = "s .= 0\nfor i = 0.0:24.0\n  s[] += x[40 - i]\nend\n";
    assert_eq!(s_after(flipped, vec![("x", x())]), 5.0);
}

#[test]
fn a_negative_coefficient_flips_open_and_closed_ends() {
    // x = (1, 2] read as x[-i] is nonzero for i in [-2, -1).
    let x = vec1(&[(Coord::left_open(1.0, 2.0), 3.0)]);
    let mut e = env(vec![("x", x), ("z", vec1(&[]))]);
    run_text("for i = _\n  z[i] = x[-i]\nend\n", &mut e).unwrap();
    assert_eq!(
        e["z"].canonical().pieces,
        vec![(vec![Coord::right_open(-2.0, -1.0)], Scalar::F64(3.0))]
    );
}

include!("finch_2d_data.rs");

/// Finch's 2-D run lists: `x[j, i]` holds, for `i` in `[s[k], e[k]]`, the ten `j` intervals of
/// column `k` of `cols`.
fn runs_2d(outer: &[f64], cols: &[f64], pinpoint_outer: bool) -> PieceTensor {
    let mut t = PieceTensor::new(
        vec![true, true],
        vec![0, 0],
        ElemType::F64,
        Scalar::F64(0.0),
    );
    for (k, o) in outer.chunks(2).enumerate() {
        let i = if pinpoint_outer {
            Coord::point(o[1])
        } else {
            Coord::closed(o[0], o[1])
        };
        for c in cols[20 * k..20 * (k + 1)].chunks(2) {
            t = t.with(vec![Coord::closed(c[0], c[1]), i], Scalar::F64(1.0));
        }
    }
    t
}

#[test]
fn item_18_two_dimensional_run_lists() {
    let x = runs_2d(&V, &ENDPOINT1, false);
    let y = runs_2d(&W, &ENDPOINT2, false);
    let both = || vec![("x", x.clone()), ("y", y.clone())];
    let prog =
        |rhs: &str| format!("s .= 0\nfor i = _\n  for j = _\n    s[] += {rhs}\n  end\nend\n");
    assert_eq!(s_after(&prog("x[j, i] * y[j, i] * d(i, j)"), both()), 630.0);
    assert_eq!(
        s_after(&prog("(x[j, i] + y[j, i]) * d(i, j)"), both()),
        5238.0
    );
    assert_eq!(s_after(&prog("x[j, i] * y[j, i]"), both()), 2.0);
    assert_eq!(s_after(&prog("x[j, i] + y[j, i]"), both()), 4.0);
    let sx = s_after(&prog("x[j, i] * d(i, j)"), both());
    let sy = s_after(&prog("y[j, i] * d(i) * d(j)"), both());
    assert_eq!(sx + sy, 5238.0);
    // Pinpoints in i (SparseList over run lists) against a run list in j.
    let x1 = runs_2d(&V, &ENDPOINT1, true);
    let y1 = closed(&W);
    assert_eq!(
        s_after(
            &prog("x1[j, i] * y1[j] * d(j)"),
            vec![("x1", x1), ("y1", y1)]
        ),
        303.0
    );
}

#[test]
fn item_19_open_closed_union() {
    let a = vec1(&[
        (Coord::left_open(1.1, 3.3), 1.0),
        (Coord::left_open(6.6, 7.7), 2.0),
        (Coord::left_open(9.9, 11.11), 3.0),
    ]);
    let b = vec1(&[
        (Coord::left_open(2.2, 3.3), 1.0),
        (Coord::left_open(5.5, 8.8), 1.0),
        (Coord::left_open(8.8, 9.9), 2.0),
    ]);
    let mut e = env(vec![("A", a), ("B", b), ("C", vec1(&[]))]);
    run_text("C .= 0\nfor i = _\n  C[i] += A[i] + B[i]\nend\n", &mut e).unwrap();
    let want = vec1(&[
        (Coord::left_open(1.1, 2.2), 1.0),
        (Coord::left_open(2.2, 3.3), 2.0),
        (Coord::left_open(5.5, 6.6), 1.0),
        (Coord::left_open(6.6, 7.7), 3.0),
        (Coord::left_open(7.7, 8.8), 1.0),
        (Coord::left_open(8.8, 9.9), 2.0),
        (Coord::left_open(9.9, 11.11), 3.0),
    ]);
    assert_eq!(e["C"].canonical(), want.canonical());
}

/// `n` points uniform in `[0, 1e4)^2` shifted by 1e7 (as Finch's `Pinpoints2D`), from a fixed
/// linear congruential sequence.
fn points_2d(n: usize) -> Vec<(f64, f64)> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        // Multiples of 1/64: sums and squares below stay exact.
        ((state >> 33) % 640_000) as f64 / 64.0 + 1e7
    };
    (0..n).map(|_| (next(), next())).collect()
}

#[test]
fn item_20_box_and_radius_search_agree_with_brute_force() {
    let pts = points_2d(150);
    let n = pts.len();
    let mut points = PieceTensor::new(
        vec![false, true, true],
        vec![n, 0, 0],
        ElemType::Bool,
        Scalar::Bool(false),
    );
    for (id, (x, y)) in pts.iter().enumerate() {
        points = points.with(
            vec![Coord::Int(id as i64), Coord::point(*y), Coord::point(*x)],
            Scalar::Bool(true),
        );
    }
    let output = PieceTensor::new(vec![false], vec![n], ElemType::Bool, Scalar::Bool(false));
    let count = |t: &PieceTensor| t.canonical().pieces.len();
    let boxes = [
        (1e7 + 1000.0, 1e7 + 2000.0, 1e7 + 4000.0, 1e7 + 6500.0),
        (1e7 + 5000.0, 1e7 + 0.0, 1e7 + 9000.0, 1e7 + 3000.0),
        (1e7 + 2500.0, 1e7 + 2500.0, 1e7 + 2600.0, 1e7 + 2600.0),
    ];
    let box_text = "output .= false\nfor x = _\n  for y = _\n    for id = _\n      output[id] |= box[y, x] && points[id, y, x]\n    end\n  end\nend\n";
    let radius_text = "output .= false\nfor x = ox - r:ox + r\n  for y = oy - r:oy + r\n    if (x - ox) * (x - ox) + (y - oy) * (y - oy) <= r * r\n      for id = _\n        output[id] |= coalesce(points[id, ~y, ~x], false)\n      end\n    end\n  end\nend\n";
    let mut found_some = false;
    for (x0, y0, x1, y1) in boxes {
        let bx = PieceTensor::new(
            vec![true, true],
            vec![0, 0],
            ElemType::Bool,
            Scalar::Bool(false),
        )
        .with(
            vec![Coord::closed(y0, y1), Coord::closed(x0, x1)],
            Scalar::Bool(true),
        );
        let mut e = env(vec![
            ("points", points.clone()),
            ("box", bx),
            ("output", output.clone()),
        ]);
        run_text(box_text, &mut e).unwrap();
        let want = pts
            .iter()
            .filter(|(x, y)| x0 <= *x && *x <= x1 && y0 <= *y && *y <= y1)
            .count();
        assert_eq!(count(&e["output"]), want, "box {x0} {y0} {x1} {y1}");
        found_some |= want > 0;

        let (ox, oy) = ((x0 + x1) / 2.0, (y0 + y1) / 2.0);
        let r = ((x1 - x0) * (x1 - x0) + (y1 - y0) * (y1 - y0)).sqrt() / 2.0;
        let f = |v| PieceTensor::scalar(ElemType::F64, Scalar::F64(v));
        let mut e = env(vec![
            ("points", points.clone()),
            ("output", output.clone()),
            ("ox", f(ox)),
            ("oy", f(oy)),
            ("r", f(r)),
        ]);
        run_text(radius_text, &mut e).unwrap();
        let want = pts
            .iter()
            .filter(|(x, y)| {
                (x - ox) * (x - ox) + (y - oy) * (y - oy) <= r * r
                    && ox - r <= *x
                    && *x <= ox + r
                    && oy - r <= *y
                    && *y <= oy + r
            })
            .count();
        assert_eq!(count(&e["output"]), want, "radius {ox} {oy} {r}");
    }
    assert!(found_some, "the boxes hold points");
}

#[test]
fn nested_real_loops_shift_the_inner_breakpoints() {
    // Z[x] = ∫ A[x + y] B[y] dy at the pinpoints of M: A = [0, 2], B = [0, 3] of value 2.
    let tensors = || {
        vec![
            ("A", vec1(&[(Coord::closed(0.0, 2.0), 1.0)])),
            ("B", vec1(&[(Coord::closed(0.0, 3.0), 2.0)])),
            ("M", pins(&[1.0, 2.0, -1.0])),
            ("Z", vec1(&[])),
        ]
    };
    let mut e = env(tensors());
    let text = "for x = _\n  if M[x] > 0\n    for y = _\n      Z[x] += A[x + y] * B[y] * d(y)\n    end\n  end\nend\n";
    run_text(text, &mut e).unwrap();
    // x = 1: y in [-1, 1] ∩ [0, 3] has length 1; x = 2: [0, 0]; x = -1: [1, 3], length 2.
    assert_eq!(
        e["Z"].canonical().pieces,
        vec![
            (vec![Coord::point(-1.0)], Scalar::F64(4.0)),
            (vec![Coord::point(1.0)], Scalar::F64(2.0))
        ]
    );
    // Without the mask, x's pieces of positive length meet an integrand moving with x.
    let mut e = env(tensors());
    let text = "for x = _\n  for y = _\n    Z[x] += A[x + y] * B[y] * d(y)\n  end\nend\n";
    assert_eq!(
        run_text(text, &mut e).unwrap_err().to_string(),
        "3:13: `A[x + y]` mixes the real index `x` with `y`, bound inside its loop: not \
         piecewise constant on a piece of positive length of `x`; the write at 3:5 changes its \
         output there (valid only where the loop is driven by pinpoints)"
    );
}

#[test]
fn offsets_read_inside_the_loop_count_as_varying() {
    // `B[j]` is bound inside `x`'s loop, so `A`'s pieces cannot cut `x` where it starts.
    let b = PieceTensor::new(vec![false], vec![1], ElemType::F64, Scalar::F64(0.0))
        .with(vec![Coord::Int(0)], Scalar::F64(0.5));
    let a = vec1(&[(Coord::closed(0.0, 2.0), 1.0)]);
    let mut e = env(vec![("A", a), ("B", b), ("Z", vec1(&[]))]);
    let text = "for x = _\n  for j = 0:0\n    Z[x] = A[x + B[j]]\n  end\nend\n";
    assert_eq!(
        run_text(text, &mut e).unwrap_err().to_string(),
        "3:12: `A[x + B[j]]` mixes the real index `x` with `j`, bound inside its loop: not \
         piecewise constant on a piece of positive length of `x`; the write at 3:5 changes its \
         output there (valid only where the loop is driven by pinpoints)"
    );
}

#[test]
fn inputs_with_overlapping_pieces_are_refused() {
    let x = vec1(&[(Coord::closed(1.0, 3.0), 1.0), (Coord::point(3.0), 2.0)]);
    assert_eq!(
        err_of(SUM, vec![("x", x)]),
        Error::tensor("x", "pieces 0 and 1 overlap").to_string()
    );
}

// ---- property test: the evaluator against a brute force over the sorted endpoints ----

/// A random 1-D tensor on the integer points of 0..=12 (and sometimes ±Inf ends): pinpoints,
/// intervals with random inclusiveness, touching where an end is open, values 1..=4.
fn random_tensor(seed: u64) -> PieceTensor {
    let mut state = seed | 1;
    let mut next = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut ends: Vec<f64> = (0..=12).filter(|_| next(3) == 0).map(f64::from).collect();
    if next(4) == 0 {
        ends.insert(0, f64::NEG_INFINITY);
    }
    if next(4) == 0 {
        ends.push(f64::INFINITY);
    }
    let mut claimed = vec![false; ends.len()];
    let mut pieces = vec![];
    for (k, e) in ends.iter().enumerate() {
        if e.is_finite() && next(3) == 0 {
            claimed[k] = true;
            pieces.push((Coord::point(*e), (1 + next(4)) as f64));
        }
    }
    for k in 0..ends.len().saturating_sub(1) {
        if next(2) == 0 {
            continue;
        }
        let (a, b) = (ends[k], ends[k + 1]);
        let lo = if a.is_finite() && !claimed[k] && next(2) == 0 {
            claimed[k] = true;
            Limit::exact(a)
        } else if a.is_finite() {
            Limit::plus_eps(a)
        } else {
            Limit::exact(a)
        };
        let hi = if b.is_finite() && !claimed[k + 1] && next(2) == 0 {
            claimed[k + 1] = true;
            Limit::exact(b)
        } else if b.is_finite() {
            Limit::minus_eps(b)
        } else {
            Limit::exact(b)
        };
        pieces.push((Coord::Real(lo, hi), (1 + next(4)) as f64));
    }
    vec1(&pieces)
}

/// Which piece (or which stretch of fill) holds `p`: equal ids mean one cell of the partition.
fn piece_id(t: &PieceTensor, p: Limit<f64>) -> (Option<usize>, usize) {
    let inside = t.pieces.iter().position(|(c, _)| match c[0] {
        Coord::Real(lo, hi) => lo <= p && p <= hi,
        Coord::Int(_) => false,
    });
    let before = t
        .pieces
        .iter()
        .filter(|(c, _)| matches!(c[0], Coord::Real(_, hi) if hi < p))
        .count();
    (inside, before)
}

struct Brute {
    integral: f64,
    sum: f64,
    max: f64,
}

/// ∫ x*y, Σ x*y (over the points that are cells of their own: some partition changes just
/// before and some just after) and max x*y, from the sorted endpoints of both.
fn brute(x: &PieceTensor, y: &PieceTensor) -> Brute {
    let mut ends: Vec<f64> = [x, y]
        .iter()
        .flat_map(|t| t.pieces.iter())
        .flat_map(|(c, _)| match c[0] {
            Coord::Real(lo, hi) => vec![lo.val, hi.val],
            Coord::Int(_) => vec![],
        })
        .filter(|v| v.is_finite())
        .collect();
    ends.sort_by(f64::total_cmp);
    ends.dedup();
    let at =
        |p: f64| x.value_at(&[Point::Real(p)]).as_f64() * y.value_at(&[Point::Real(p)]).as_f64();
    let mut b = Brute {
        integral: 0.0,
        sum: 0.0,
        max: f64::NEG_INFINITY,
    };
    for p in samples(&ends) {
        let Point::Real(p) = p else { unreachable!() };
        b.max = b.max.max(at(p));
    }
    for e in &ends {
        let changes =
            |t: &PieceTensor, q: Limit<f64>| piece_id(t, q) != piece_id(t, Limit::exact(*e));
        let before = changes(x, Limit::minus_eps(*e)) || changes(y, Limit::minus_eps(*e));
        let after = changes(x, Limit::plus_eps(*e)) || changes(y, Limit::plus_eps(*e));
        if before && after {
            b.sum += at(*e);
        }
    }
    let mut gaps: Vec<(f64, f64)> = ends.windows(2).map(|w| (w[0], w[1])).collect();
    match (ends.first(), ends.last()) {
        (Some(f), Some(l)) => {
            gaps.push((f64::NEG_INFINITY, *f));
            gaps.push((*l, f64::INFINITY));
        }
        _ => gaps.push((f64::NEG_INFINITY, f64::INFINITY)),
    }
    for (lo, hi) in gaps {
        let mid = Cell {
            lo: Limit::exact(lo),
            hi: Limit::exact(hi),
        }
        .sample();
        let v = at(mid);
        if v != 0.0 {
            b.integral += v * (hi - lo);
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn random_interval_tensors_agree_with_brute_force(sx in any::<u64>(), sy in any::<u64>()) {
        let (x, y) = (random_tensor(sx), random_tensor(sy));
        prop_assert!(x.validate("x").is_ok() && y.validate("y").is_ok());
        let b = brute(&x, &y);
        let both = || vec![("x", x.clone()), ("y", y.clone())];
        prop_assert_eq!(s_after(DOT_INTEGRAL, both()), b.integral);
        prop_assert_eq!(s_after(DOT, both()), b.sum);
        let max = "s .= -Inf\nfor i = _\n  s[] <<max>>= x[i] * y[i]\nend\n";
        prop_assert_eq!(s_after(max, both()), b.max);
        // The pointwise product, written piece by piece, is the same function.
        let mut e = env(vec![("x", x.clone()), ("y", y.clone()), ("z", vec1(&[]))]);
        run_text("for i = _\n  z[i] = x[i] * y[i]\nend\n", &mut e).unwrap();
        let ends: Vec<f64> = (0..=12).map(f64::from).collect();
        for p in samples(&ends) {
            let Point::Real(q) = p else { unreachable!() };
            let want = x.value_at(&[p]).as_f64() * y.value_at(&[p]).as_f64();
            prop_assert_eq!(e["z"].value_at(&[p]).as_f64(), want, "at {}", q);
        }
    }
}
