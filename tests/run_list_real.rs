//! `RunList(..., coord=f64)` (issue 14, storage): a piecewise-constant function of the whole
//! real line whose fill runs are stored. Its arrays for a known tensor, its validation, and
//! programs over it compared with the same pieces in `SparseRunList(coord=f64)` and with the
//! continuous reference evaluator, on every backend.

mod common;

use common::pieces::compare_pieces as compare;
use common::runners;
use proptest::prelude::*;
use tessera::Scalar;
use tessera::eval::continuous::PieceTensor;
use tessera::levels::Format;
use tessera::limit::Limit;
use tessera::notation::parse::parse_program;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::tensor::pieces::{Piece, PieceCoord};

const RUNS: &str = "RunList(Element(0.0), coord=f64)";
const SPARSE_RUNS: &str = "SparseRunList(Element(0.0), coord=f64)";
const INF: f64 = f64::INFINITY;

fn fmt(s: &str) -> Format {
    Format::parse(s, None).unwrap()
}

fn vector(format: &str, pieces: &[(PieceCoord, f64)]) -> Tensor {
    let p: Vec<Piece> = pieces
        .iter()
        .map(|&(c, v)| (vec![c], Scalar::F64(v)))
        .collect();
    let t = Tensor::from_pieces(&fmt(format), &[0], &p).unwrap();
    t.validate("t").unwrap();
    t
}

fn f64s(b: &Buffer) -> Vec<f64> {
    (0..b.len()).map(|k| b.get(k).as_f64()).collect()
}

fn ints(b: &Buffer) -> Vec<i64> {
    (0..b.len()).map(|k| b.get(k).as_i64()).collect()
}

fn known() -> Vec<(PieceCoord, f64)> {
    vec![
        (PieceCoord::right_open(1.0, 2.0), 3.0),
        (PieceCoord::point(2.5), 4.0),
        (
            PieceCoord::Real(Limit::plus_eps(4.0), Limit::exact(6.0)),
            3.0,
        ),
    ]
}

#[test]
fn stored_arrays_of_a_known_tensor() {
    let t = vector(RUNS, &known());
    assert_eq!(t.format.to_string(), RUNS);
    // The gaps are fill runs: [-Inf, 1) [1, 2) [2, 2.5) [2.5] (2.5, 4] (4, 6] (6, +Inf].
    let l = &t.levels[0];
    assert_eq!(l.len(), 3, "ptr, right, right_eps");
    assert_eq!(ints(&l[0]), [0, 7]);
    assert_eq!(f64s(&l[1]), [1.0, 2.0, 2.5, 2.5, 4.0, 6.0, INF]);
    assert_eq!(ints(&l[2]), [-1, -1, -1, 0, 0, 0, 0]);
    assert_eq!(f64s(&t.levels[1][0]), [0.0, 3.0, 0.0, 4.0, 0.0, 3.0, 0.0]);
    // Read back as pieces, each run starting just after the previous one ends.
    let back = t.pieces();
    assert_eq!(back.len(), 7);
    assert_eq!(
        back[0].0[0],
        PieceCoord::Real(Limit::exact(-INF), Limit::minus_eps(1.0))
    );
    assert_eq!(back[2].0[0], PieceCoord::right_open(2.0, 2.5));
    assert_eq!(
        back[4].0[0],
        PieceCoord::Real(Limit::plus_eps(2.5), Limit::exact(4.0))
    );
    assert_eq!(
        back[6].0[0],
        PieceCoord::Real(Limit::plus_eps(6.0), Limit::exact(INF))
    );
    // The same function as the sparse run list of the pieces.
    assert_eq!(
        t.to_piece_tensor().canonical(),
        vector(SPARSE_RUNS, &known()).to_piece_tensor().canonical()
    );
}

#[test]
fn equal_neighbours_merge_unless_merge_is_off() {
    // [1, 2) and [2, 3] hold 3: one run. A piece holding the fill merges with its gaps.
    let t = vector(
        RUNS,
        &[
            (PieceCoord::right_open(1.0, 2.0), 3.0),
            (PieceCoord::closed(2.0, 3.0), 3.0),
            (PieceCoord::closed(5.0, 7.0), 0.0),
        ],
    );
    assert_eq!(f64s(&t.levels[0][1]), [1.0, 3.0, INF]);
    assert_eq!(ints(&t.levels[0][2]), [-1, 0, 0]);
    assert_eq!(f64s(&t.levels[1][0]), [0.0, 3.0, 0.0]);
    let nothing = vector(RUNS, &[(PieceCoord::closed(5.0, 7.0), 0.0)]);
    assert_eq!(f64s(&nothing.levels[0][1]), [INF]);
    let kept = vector(
        "RunList(Element(0.0), merge=false, coord=f64)",
        &[(PieceCoord::closed(5.0, 7.0), 0.0)],
    );
    assert_eq!(f64s(&kept.levels[0][1]), [5.0, 7.0, INF]);
    assert_eq!(ints(&kept.levels[0][2]), [-1, 0, 0]);
    // Pieces reaching the ends of the line need no fill run there.
    let whole = vector(
        RUNS,
        &[
            (PieceCoord::Real(Limit::exact(-INF), Limit::exact(0.0)), 1.0),
            (
                PieceCoord::Real(Limit::plus_eps(0.0), Limit::exact(INF)),
                2.0,
            ),
        ],
    );
    assert_eq!(f64s(&whole.levels[0][1]), [0.0, INF]);
    assert_eq!(f64s(&whole.levels[1][0]), [1.0, 2.0]);
}

#[test]
fn rows_without_pieces_are_one_fill_run_and_empty_tensors_too() {
    let f = fmt(&format!("Dense({RUNS})"));
    let p: Vec<Piece> = vec![(
        vec![PieceCoord::Int(1), PieceCoord::right_open(1.0, 2.0)],
        Scalar::F64(5.0),
    )];
    let t = Tensor::from_pieces(&f, &[3, 0], &p).unwrap();
    t.validate("t").unwrap();
    assert_eq!(ints(&t.levels[1][0]), [0, 1, 4, 5]);
    assert_eq!(f64s(&t.levels[1][1]), [INF, 1.0, 2.0, INF, INF]);
    let e = Tensor::empty(&f, &[2, 0]).unwrap();
    e.validate("e").unwrap();
    assert_eq!(f64s(&e.levels[1][1]), [INF, INF]);
    assert_eq!(e.pieces().len(), 2);
}

/// The known tensor with one stored array replaced.
fn with(k: usize, buf: Buffer) -> Tensor {
    let mut t = vector(RUNS, &known());
    t.levels[0][k] = buf;
    t
}

fn refused(t: &Tensor, words: &[&str]) {
    let e = t.validate("A").unwrap_err().to_string();
    for w in words {
        assert!(e.contains(w), "{w:?} not in {e}");
    }
}

#[test]
fn bad_arrays_are_refused_by_name_and_position() {
    let f = |v: &[f64]| Buffer::F64(v.to_vec().into());
    let e = |v: &[i8]| Buffer::I8(v.to_vec().into());
    // Unsorted ends.
    refused(
        &with(1, f(&[1.0, 2.0, 2.5, 2.5, 4.0, 3.0, INF])),
        &["right[5]", "right[4]", "increase"],
    );
    // A repeated exact end: the run after it would be empty.
    refused(
        &with(1, f(&[1.0, 2.0, 2.5, 2.5, 4.0, 4.0, INF])),
        &["right[5]", "increase"],
    );
    // Not ending at +Inf.
    refused(
        &with(1, f(&[1.0, 2.0, 2.5, 2.5, 4.0, 6.0, 9.0])),
        &["right[6]", "+Inf"],
    );
    refused(
        &with(2, e(&[-1, -1, -1, 0, 0, 0, -1])),
        &["right[6]", "+Inf"],
    );
    // Bad infinitesimal signs: +1 (not a stored end) and out of range.
    refused(&with(2, e(&[-1, 1, -1, 0, 0, 0, 0])), &["right_eps[1] = 1"]);
    refused(&with(2, e(&[-1, -1, 7, 0, 0, 0, 0])), &["right_eps[2] = 7"]);
    refused(&with(2, e(&[-1, -1, -1, 0, 0, 0])), &["right_eps"]);
    // NaN and -0.0.
    refused(
        &with(1, f(&[1.0, f64::NAN, 2.5, 2.5, 4.0, 6.0, INF])),
        &["right[1] is NaN"],
    );
    refused(
        &with(1, f(&[-0.0, 2.0, 2.5, 2.5, 4.0, 6.0, INF])),
        &["right[0]", "-0.0"],
    );
    // A fiber without runs, and ptr past the end.
    refused(&with(0, Buffer::I64(vec![0, 0].into())), &["no runs"]);
    refused(&with(0, Buffer::I64(vec![0, 9].into())), &["ptr[1] = 9"]);
}

#[test]
fn integer_builders_and_writes_are_refused() {
    let f = fmt(RUNS);
    let e = Tensor::from_dense(&f, &[3], &Buffer::F64(vec![0.0; 3].into())).unwrap_err();
    assert!(e.to_string().contains("pieces"), "{e}");
    let x = vector(RUNS, &known());
    let out = Tensor::empty(&f, &[0]).unwrap();
    let p = parse_program("o .= 0\nfor i = _\n  o[i] = x[i] * 2.0\nend\n").unwrap();
    for (name, r) in runners() {
        let formats = [("x", &x), ("o", &out)]
            .iter()
            .map(|(n, t)| (n.to_string(), t.format.clone()))
            .collect();
        let Err(e) = r.compile(&p, &formats) else {
            panic!("{name}: a write to a real RunList compiled");
        };
        let e = e.to_string();
        assert!(e.contains("not supported yet"), "{name}: {e}");
        assert!(e.contains("RunList"), "{name}: {e}");
    }
}

fn scalar(t: &PieceTensor) -> f64 {
    t.pieces.first().map_or(0.0, |p| p.1.as_f64())
}

#[test]
fn integrals_over_runs_reaching_infinity() {
    let x = vector(RUNS, &known());
    let s = "for i = _\n  o[] += x[i] * d(i)\nend";
    // Fill-0 runs to ±Inf contribute nothing: 3 * 1 + 3 * 2.
    assert_eq!(scalar(&compare(s, &[("x", &x)], "Element(0.0)", &[])), 9.0);
    let bounded = "for i = 0.5:9.0\n  o[] += x[i] * d(i)\nend";
    assert_eq!(
        scalar(&compare(bounded, &[("x", &x)], "Element(0.0)", &[])),
        9.0
    );
    // A nonzero run to +Inf (or -Inf) integrates to ±Inf, as in the evaluator.
    for (v, want) in [(2.0, INF), (-2.0, -INF)] {
        let tail = vector(
            RUNS,
            &[
                (PieceCoord::closed(0.0, 1.0), 1.0),
                (PieceCoord::Real(Limit::plus_eps(1.0), Limit::exact(INF)), v),
            ],
        );
        assert_eq!(
            scalar(&compare(s, &[("x", &tail)], "Element(0.0)", &[])),
            want
        );
        assert_eq!(
            scalar(&compare(bounded, &[("x", &tail)], "Element(0.0)", &[])),
            0.5 + 8.0 * v
        );
        let head = vector(
            RUNS,
            &[(
                PieceCoord::Real(Limit::exact(-INF), Limit::minus_eps(0.0)),
                v,
            )],
        );
        assert_eq!(
            scalar(&compare(s, &[("x", &head)], "Element(0.0)", &[])),
            want
        );
    }
}

/// One candidate piece: where it starts (a multiple of 1.5), whether it is a pinpoint, its
/// length (a multiple of 0.75), whether each end is open, its value (0 sometimes, so fill
/// pieces merge with their gaps), and whether it reaches -Inf or +Inf instead.
type Candidate = (u8, bool, u8, bool, bool, u8, u8);

fn candidate() -> impl Strategy<Value = Candidate> {
    (
        0u8..12,
        any::<bool>(),
        1u8..5,
        any::<bool>(),
        any::<bool>(),
        0u8..5,
        0u8..8,
    )
}

/// Pieces from candidates, keeping each that starts after the previous one ends.
fn pieces(cands: &[Candidate]) -> Vec<(PieceCoord, f64)> {
    let mut starts: Vec<&Candidate> = cands.iter().collect();
    starts.sort_by_key(|c| c.0);
    let mut out = vec![];
    let mut end: Option<Limit<f64>> = None;
    for (k, &&(at, pin, len, lo_open, hi_open, v, inf)) in starts.iter().enumerate() {
        let a = f64::from(at) * 1.5;
        let (lo, hi) = if pin {
            (Limit::exact(a), Limit::exact(a))
        } else {
            let b = a + f64::from(len) * 0.75;
            let lo = match (lo_open, inf == 1 && k == 0) {
                (_, true) => Limit::exact(-INF),
                (true, _) => Limit::plus_eps(a),
                _ => Limit::exact(a),
            };
            let hi = match (hi_open, inf == 2 && k + 1 == starts.len()) {
                (_, true) => Limit::exact(INF),
                (true, _) => Limit::minus_eps(b),
                _ => Limit::exact(b),
            };
            (lo, hi)
        };
        if end.is_some_and(|e| lo <= e) {
            continue;
        }
        end = Some(hi);
        out.push((PieceCoord::Real(lo, hi), f64::from(v)));
    }
    out
}

fn matrix(format: &str, rows: &[Vec<Candidate>]) -> Tensor {
    let mut p: Vec<Piece> = vec![];
    for (r, cands) in rows.iter().enumerate() {
        for (c, v) in pieces(cands) {
            p.push((vec![PieceCoord::Int(r as i64), c], Scalar::F64(v)));
        }
    }
    let t = Tensor::from_pieces(&fmt(&format!("Dense({format})")), &[rows.len(), 0], &p).unwrap();
    t.validate("A").unwrap();
    t
}

fn mask(cands: &[Candidate]) -> Tensor {
    let mut p: Vec<Piece> = pieces(cands)
        .into_iter()
        .filter_map(|(c, _)| match c {
            PieceCoord::Real(a, _) if a.val.is_finite() => {
                Some((vec![PieceCoord::point(a.val)], Scalar::Bool(true)))
            }
            _ => None,
        })
        .collect();
    p.dedup();
    let t = Tensor::from_pieces(&fmt("SparseList(Pattern(), coord=f64)"), &[0], &p).unwrap();
    t.validate("m").unwrap();
    t
}

/// `program`'s output with `x` stored as a RunList and as a SparseRunList of the same pieces:
/// both agree with the evaluator on every backend, and so with each other.
fn both_formats(program: &str, xs: &[Candidate], others: &[(&str, &Tensor)]) {
    let list = pieces(xs);
    let (runs, sparse) = (vector(RUNS, &list), vector(SPARSE_RUNS, &list));
    let mut with_runs: Vec<(&str, &Tensor)> = vec![("x", &runs)];
    with_runs.extend_from_slice(others);
    let mut with_sparse: Vec<(&str, &Tensor)> = vec![("x", &sparse)];
    with_sparse.extend_from_slice(others);
    let (a, b) = (
        scalar(&compare(program, &with_runs, "Element(0.0)", &[])),
        scalar(&compare(program, &with_sparse, "Element(0.0)", &[])),
    );
    assert!(
        a == b || (a.is_nan() && b.is_nan()),
        "{a} != {b}: {program}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn run_lists_agree_with_sparse_run_lists_and_the_evaluator(
        xs in prop::collection::vec(candidate(), 0..7),
        ys in prop::collection::vec(candidate(), 0..7),
        ms in prop::collection::vec(candidate(), 0..7),
        y_runs in any::<bool>(),
    ) {
        // The second operand in the other format (or the same), a pinpoint mask.
        let y = vector(if y_runs { RUNS } else { SPARSE_RUNS }, &pieces(&ys));
        let m = mask(&ms);
        let others = [("y", &y), ("m", &m)];
        for body in [
            "o[] += x[i] * d(i)",
            "o[] += x[i] * y[i] * d(i)",
            "o[] += (x[i] + y[i]) * d(i)",
            "o[] += x[i] * m[i]",
            "o[] += x[i] * y[i] * m[i]",
            "o[] <<max>>= x[i]",
            "o[] <<max>>= x[i] * y[i]",
            "o[] <<min>>= x[i] - y[i]",
            "o[] += x[i]",
        ] {
            both_formats(&format!("for i = _\n  {body}\nend"), &xs, &others);
            both_formats(&format!("for i = 0.5:9.0\n  {body}\nend"), &xs, &others);
        }
    }

    #[test]
    fn rows_of_runs_agree_with_rows_of_sparse_runs(
        rows in prop::collection::vec(prop::collection::vec(candidate(), 0..5), 1..4),
        ys in prop::collection::vec(candidate(), 0..6),
    ) {
        let y = vector(RUNS, &pieces(&ys));
        let n = rows.len();
        for format in [RUNS, SPARSE_RUNS] {
            let a = matrix(format, &rows);
            let inputs = [("A", &a), ("y", &y)];
            compare("for j = _, i = _\n  o[] += A[j, i] * y[i] * d(i)\nend", &inputs, "Element(0.0)", &[]);
            compare("for j = _, i = 0.5:9.0\n  o[j] += A[j, i] * d(i)\nend", &inputs, "Dense(Element(0.0))", &[n]);
            compare("for j = _, i = _\n  o[j] <<max>>= A[j, i] * y[i]\nend", &inputs, "Dense(Element(0.0))", &[n]);
        }
    }
}

/// Two real levels: unit squares with a few values, stored as nested RunLists (fill runs to
/// ±Inf at both levels) and as nested SparseRunLists; integrals, extrema and pinpoint sums.
#[test]
fn nested_real_run_lists_agree_with_the_evaluator() {
    let unit = |k: i64| PieceCoord::right_open(k as f64, k as f64 + 1.0);
    let mut seed = 777u64;
    let mut next = |m: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % m
    };
    let m = mask(&[
        (1, true, 1, false, false, 1, 0),
        (3, true, 1, false, false, 1, 0),
    ]);
    for _ in 0..6 {
        let mut pieces: Vec<Piece> = vec![];
        for y in 0..4 {
            for x in 0..4 {
                if next(3) == 0 {
                    pieces.push((vec![unit(y), unit(x)], Scalar::F64(1.0 + next(2) as f64)));
                }
            }
        }
        let mut totals = vec![];
        for inner in ["RunList", "SparseRunList"] {
            for outer in ["RunList", "SparseRunList"] {
                let f = format!("{outer}({inner}(Element(0.0), coord=f64), coord=f64)");
                let a = Tensor::from_pieces(&fmt(&f), &[0, 0], &pieces).unwrap();
                a.validate("A").unwrap();
                let inputs = [("A", &a), ("m", &m)];
                let mut got = vec![];
                for program in [
                    "for y = _, x = _\n  o[] += A[y, x] * d(x) * d(y)\nend",
                    "for y = 0.5:3.0, x = 1.0:9.0\n  o[] += A[y, x] * d(x, y)\nend",
                    "for y = _, x = _\n  o[] <<max>>= A[y, x]\nend",
                    "for y = _, x = _\n  o[] += A[y, x] * m[x] * d(y)\nend",
                ] {
                    got.push(scalar(&compare(program, &inputs, "Element(0.0)", &[])));
                }
                totals.push(got);
            }
        }
        assert!(totals.windows(2).all(|w| w[0] == w[1]), "{totals:?}");
    }
}
