//! Compiled real loops against the continuous reference evaluator (`eval::continuous`), on
//! random piecewise tensors: pinpoints and intervals with every inclusiveness, touching and
//! separate, over integer rows, stored as sparse run lists or as run lists (whose gaps are
//! stored fill runs reaching ±Inf); every backend, shrinking to the smallest disagreement.

mod common;

use common::pieces::compare_pieces as compare;
use proptest::prelude::*;
use tessera::Scalar;
use tessera::levels::Format;
use tessera::limit::Limit;
use tessera::tensor::Tensor;
use tessera::tensor::pieces::{Piece, PieceCoord};
use tessera::types::ElemType;

/// One candidate piece: where it starts (a multiple of 3), whether it is a pinpoint, its
/// length, whether each end is open, its value, and whether it is kept.
type Candidate = (u8, bool, u8, bool, bool, u8);

/// Pieces from candidates, keeping each that starts after the previous one ends.
fn pieces(cands: &[Candidate]) -> Vec<(PieceCoord, f64)> {
    let mut starts: Vec<&Candidate> = cands.iter().collect();
    starts.sort_by_key(|c| c.0);
    let mut out = vec![];
    let mut end: Option<Limit<f64>> = None;
    for &&(at, pin, len, lo_open, hi_open, v) in &starts {
        let a = f64::from(at) * 1.5;
        let (lo, hi) = if pin {
            (Limit::exact(a), Limit::exact(a))
        } else {
            let b = a + f64::from(len) * 0.75;
            let lo = if lo_open {
                Limit::plus_eps(a)
            } else {
                Limit::exact(a)
            };
            let hi = if hi_open {
                Limit::minus_eps(b)
            } else {
                Limit::exact(b)
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

fn candidate() -> impl Strategy<Value = Candidate> {
    (
        0u8..12,
        any::<bool>(),
        1u8..5,
        any::<bool>(),
        any::<bool>(),
        1u8..5,
    )
}

/// How a random vector is stored: its pinpoints in a SparseList, or all its pieces in a
/// SparseRunList or a RunList.
#[derive(Clone, Copy, Debug)]
enum Store {
    Pinpoints,
    SparseRuns,
    Runs,
}

fn runs_or_sparse_runs() -> impl Strategy<Value = Store> {
    prop_oneof![Just(Store::SparseRuns), Just(Store::Runs)]
}

fn vector(cands: &[Candidate], pinpoints: bool) -> Tensor {
    stored(
        cands,
        match pinpoints {
            true => Store::Pinpoints,
            false => Store::SparseRuns,
        },
    )
}

fn stored(cands: &[Candidate], store: Store) -> Tensor {
    let mut list = pieces(cands);
    if let Store::Pinpoints = store {
        list.retain(|(c, _)| matches!(c, PieceCoord::Real(a, b) if a == b));
    }
    let level = match store {
        Store::Pinpoints => "SparseList",
        Store::SparseRuns => "SparseRunList",
        Store::Runs => "RunList",
    };
    let f = Format::parse(&format!("{level}(Element(0.0), coord=f64)"), None).unwrap();
    let p: Vec<Piece> = list
        .into_iter()
        .map(|(c, v)| (vec![c], Scalar::F64(v)))
        .collect();
    Tensor::from_pieces(&f, &[0], &p).unwrap()
}

fn matrix(rows: &[Vec<Candidate>], store: Store) -> Tensor {
    let level = match store {
        Store::Runs => "RunList",
        _ => "SparseRunList",
    };
    let f = Format::parse(&format!("Dense({level}(Element(0.0), coord=f64))"), None).unwrap();
    let mut p: Vec<Piece> = vec![];
    for (r, cands) in rows.iter().enumerate() {
        for (c, v) in pieces(cands) {
            p.push((vec![PieceCoord::Int(r as i64), c], Scalar::F64(v)));
        }
    }
    Tensor::from_pieces(&f, &[rows.len(), 0], &p).unwrap()
}

const SCALAR: &str = "Element(0.0)";

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn products_sums_and_extrema_of_two_vectors(
        xs in prop::collection::vec(candidate(), 0..7),
        ys in prop::collection::vec(candidate(), 0..7),
        y_pinpoints in any::<bool>(),
        x_store in runs_or_sparse_runs(),
        lo in 0u8..10, len in 0u8..12,
    ) {
        let (x, y) = (stored(&xs, x_store), vector(&ys, y_pinpoints));
        let inputs = [("x", &x), ("y", &y)];
        let (a, b) = (f64::from(lo) * 1.5, f64::from(lo) * 1.5 + f64::from(len) * 0.75);
        for body in [
            "o[] += x[i] * y[i] * d(i)",
            "o[] += x[i] * y[i]",
            "o[] += (x[i] + y[i]) * d(i)",
            "o[] += x[i] + y[i]",
            "o[] <<max>>= x[i] * y[i]",
            "o[] <<min>>= x[i] - y[i]",
            "if x[i] > 2.0\n    o[] += y[i] * d(i)\n  end",
            "let v = x[i] * 2.0\n    o[] += v * y[i]\n  end",
            "o[] += ifelse(y[i] < x[i], x[i], 0.5) * d(i)",
        ] {
            compare(&format!("for i = _\n  {body}\nend"), &inputs, SCALAR, &[]);
            compare(&format!("for i = {a:?}:{b:?}\n  {body}\nend"), &inputs, SCALAR, &[]);
        }
        // Ranges reaching past the pieces, empty and reversed ones.
        for (lo, hi) in [("-Inf", "Inf"), ("-Inf", &*format!("{a:?}")), ("Inf", "-Inf"), ("3.0", "3.0")] {
            compare(
                &format!("for i = {lo}:{hi}\n  o[] += x[i] * (y[i] + 1.0) * d(i)\nend"),
                &inputs,
                SCALAR,
                &[],
            );
            compare(&format!("for i = {lo}:{hi}\n  o[] += x[i] + y[i]\nend"), &inputs, SCALAR, &[]);
        }
        let runs = "SparseRunList(Element(0.0), coord=f64)";
        for body in ["o[i] = x[i] * y[i]", "o[i] = x[i] + y[i]", "o[i] += x[i] - 2.0 * y[i]"] {
            compare(&format!("for i = _\n  {body}\nend"), &inputs, runs, &[0]);
            compare(&format!("for i = {a:?}:{b:?}\n  {body}\nend"), &inputs, runs, &[0]);
        }
    }

    #[test]
    fn offsets_of_real_positions(
        xs in prop::collection::vec(candidate(), 0..7),
        ys in prop::collection::vec(candidate(), 0..7),
        y_pinpoints in any::<bool>(),
        x_store in runs_or_sparse_runs(),
        shift in -8i8..8,
    ) {
        // Offsets that are multiples of 0.75 make shifted ends meet the other operand's
        // ends (touching pieces, a pinpoint on an open end); exact in binary floats.
        let (x, y) = (stored(&xs, x_store), vector(&ys, y_pinpoints));
        let inputs = [("x", &x), ("y", &y)];
        let c = f64::from(shift) * 0.75;
        let runs = "SparseRunList(Element(0.0), coord=f64)";
        for body in [
            format!("o[] += x[i + {c:?}] * y[i] * d(i)"),
            format!("o[] += x[i - {c:?}] * y[i]"),
            format!("o[] += (x[i + {c:?}] + y[i]) * d(i)"),
            format!("o[] <<max>>= x[{c:?} + i] * y[i]"),
        ] {
            compare(&format!("for i = _\n  {body}\nend"), &inputs, SCALAR, &[]);
            compare(&format!("for i = 1.5:9.75\n  {body}\nend"), &inputs, SCALAR, &[]);
        }
        // The offset a `let` (fixed in the loop) and the same tensor at two offsets.
        compare(
            &format!("let c = {c:?}\n  for i = _\n    o[] += x[i + c] * x[i] * d(i)\n  end\nend"),
            &inputs,
            SCALAR,
            &[],
        );
        for body in [format!("o[i] = x[i + {c:?}] * y[i]"), format!("o[i] += x[i - {c:?}] + y[i]")] {
            compare(&format!("for i = _\n  {body}\nend"), &inputs, runs, &[0]);
        }
    }

    #[test]
    fn outer_indices_as_offsets(
        xs in prop::collection::vec(candidate(), 0..7),
        ys in prop::collection::vec(candidate(), 0..7),
        x_store in runs_or_sparse_runs(),
    ) {
        // An outer integer index and an outer real pinpoint index as offsets of the inner
        // real loop's positions.
        let (x, y) = (stored(&xs, x_store), vector(&ys, false));
        let p = vector(&ys, true);
        let inputs = [("x", &x), ("y", &y), ("p", &p)];
        compare(
            "for j = 0:3, i = _\n  o[j] += x[i - j] * y[i] * d(i)\nend",
            &inputs,
            "Dense(Element(0.0))",
            &[4],
        );
        compare(
            "for j = 0:3, i = _\n  o[j] <<max>>= x[i + j] * y[i]\nend",
            &inputs,
            "Dense(Element(0.0))",
            &[4],
        );
        compare(
            "for k = _, i = _\n  o[] += p[k] * x[i + k] * y[i] * d(i)\nend",
            &inputs,
            SCALAR,
            &[],
        );
    }

    #[test]
    fn rows_of_pieces_into_integer_outputs(
        rows in prop::collection::vec(prop::collection::vec(candidate(), 0..5), 1..4),
        ys in prop::collection::vec(candidate(), 0..6),
        a_store in runs_or_sparse_runs(),
        y_store in runs_or_sparse_runs(),
    ) {
        let a = matrix(&rows, a_store);
        let y = stored(&ys, y_store);
        let n = rows.len();
        let inputs = [("A", &a), ("y", &y)];
        compare(
            "for j = _, i = _\n  o[] += A[j, i] * y[i] * d(i)\nend",
            &inputs,
            SCALAR,
            &[],
        );
        compare(
            "for j = _, i = _\n  o[j] += A[j, i] * d(i)\nend",
            &inputs,
            "Dense(Element(0.0))",
            &[n],
        );
        compare(
            "for j = _, i = _\n  o[j] <<max>>= A[j, i] * y[i]\nend",
            &inputs,
            "Dense(Element(0.0))",
            &[n],
        );
    }
}

#[test]
fn outputs_are_scalars_of_the_right_type() {
    // The evaluator's output tensor and the compiled one agree on the element type.
    let x = vector(&[(1, false, 2, false, true, 3)], false);
    assert_eq!(x.to_piece_tensor().elem, ElemType::F64);
}
