//! Elementwise operations, reductions and matmul of `tessera::api` against a plain-Rust dense
//! computation of NumPy's semantics (broadcast the indices, apply the operation), on random
//! formats, shapes (size-1 axes and 0-d included) and fill values; the structure the fill
//! algebra promises (intersection for `*`, union for `+`, kept level kinds); a few statements
//! against the reference evaluator; and the errors.

mod common;

use common::{parse, run_eval};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tessera::Scalar;
use tessera::api::{self, Op, Reduction};
use tessera::ir::math::{Math1, Math2};
use tessera::levels::{Format, LevelKind};
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

const INF: f64 = f64::INFINITY;

/// Level kinds (without the leaf) to store a tensor of `rank` dimensions in.
fn kinds_for(rank: usize) -> Vec<Vec<LevelKind>> {
    use LevelKind::*;
    const SL: LevelKind = LevelKind::SPARSE_LIST;
    let runs = RunList {
        merge: true,
        coord: tessera::levels::format::Coord::I64,
    };
    match rank {
        0 => vec![vec![]],
        1 => vec![vec![Dense], vec![SL], vec![runs], vec![SparseCOO(1)]],
        2 => vec![
            vec![Dense, Dense],
            vec![Dense, SL],
            vec![SL, SL],
            vec![SparseCOO(2)],
            vec![Dense, runs],
        ],
        _ => vec![
            vec![Dense; 3],
            vec![Dense, SL, SL],
            vec![SparseCOO(3)],
            vec![Dense, Dense, runs],
        ],
    }
}

fn format(kinds: &[LevelKind], fill: f64) -> Format {
    let mut levels = kinds.to_vec();
    levels.push(LevelKind::Element(Scalar::F64(fill)));
    Format { levels }
}

/// A tensor of `shape` in a random format and fill (0, 1 or Inf), about half its entries the
/// fill and the others small values of both signs.
fn random(rng: &mut StdRng, shape: &[usize]) -> Tensor {
    let options = kinds_for(shape.len());
    let kinds = &options[rng.random_range(0..options.len())];
    let fill = [0.0, 1.0, INF][rng.random_range(0..3)];
    let total: usize = shape.iter().product();
    let values: Vec<f64> = (0..total)
        .map(|_| {
            if rng.random_bool(0.5) {
                fill
            } else {
                [-3.0, -1.5, 0.0, 1.0, 2.0, 7.0][rng.random_range(0..6)]
            }
        })
        .collect();
    Tensor::from_dense(&format(kinds, fill), shape, &Buffer::F64(values.into())).unwrap()
}

/// A shape of rank 0..=3, extents 1..=3 (size-1 axes are common).
fn random_shape(rng: &mut StdRng) -> Vec<usize> {
    let rank = rng.random_range(0..=3);
    (0..rank).map(|_| rng.random_range(1..=3)).collect()
}

/// A shape that broadcasts to `out`: a suffix of it with some extents turned into 1.
fn broadcasting_to(rng: &mut StdRng, out: &[usize]) -> Vec<usize> {
    let rank = rng.random_range(0..=out.len());
    out[out.len() - rank..]
        .iter()
        .map(|&n| if rng.random_bool(0.3) { 1 } else { n })
        .collect()
}

fn as_f64(b: &Buffer) -> Vec<f64> {
    b.to_scalars().iter().map(|s| s.as_f64()).collect()
}

/// The row-major flat index into an input of `shape` of the result coordinate `c`.
fn source(shape: &[usize], c: &[usize]) -> usize {
    let lead = c.len() - shape.len();
    shape
        .iter()
        .enumerate()
        .fold(0, |k, (d, &n)| k * n + if n == 1 { 0 } else { c[d + lead] })
}

fn coords(shape: &[usize]) -> Vec<Vec<usize>> {
    let total: usize = shape.iter().product();
    (0..total)
        .map(|mut k| {
            let mut c = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                c[d] = k % shape[d];
                k /= shape[d];
            }
            c
        })
        .collect()
}

fn numpy_op(op: Op, x: &[f64]) -> f64 {
    let b = |t: bool| if t { 1.0 } else { 0.0 };
    match op {
        Op::Add => x[0] + x[1],
        Op::Sub => x[0] - x[1],
        // Unlike NumPy, zero annihilates `*` even against an infinity (README, "Semantics").
        Op::Mul if x[0] == 0.0 || x[1] == 0.0 => 0.0,
        Op::Mul => x[0] * x[1],
        Op::Div => x[0] / x[1],
        Op::Min => x[0].min(x[1]),
        Op::Max => x[0].max(x[1]),
        Op::Lt => b(x[0] < x[1]),
        Op::Le => b(x[0] <= x[1]),
        Op::Gt => b(x[0] > x[1]),
        Op::Ge => b(x[0] >= x[1]),
        Op::Eq => b(x[0] == x[1]),
        Op::Ne => b(x[0] != x[1]),
        Op::Neg => -x[0],
        Op::Abs => x[0].abs(),
        Op::Sqrt => x[0].sqrt(),
        Op::Exp => x[0].exp(),
        Op::Log => x[0].ln(),
        Op::Floor => x[0].floor(),
        Op::Math(f) => f.eval(x[0]),
        Op::Math2(f) => f.eval(x[0], x[1]),
        Op::Where => {
            if x[0] != 0.0 {
                x[1]
            } else {
                x[2]
            }
        }
        Op::And | Op::Or | Op::Not | Op::Xor | Op::Lshift | Op::Rshift => {
            unreachable!("not generated on floats")
        }
        Op::Signbit => b(x[0].is_sign_negative()),
    }
}

/// NumPy's result of `op` on the inputs, row-major over the broadcast shape.
fn numpy_map(op: Op, inputs: &[&Tensor], out: &[usize]) -> Vec<f64> {
    let dense: Vec<Vec<f64>> = inputs.iter().map(|t| as_f64(&t.to_dense())).collect();
    coords(out)
        .iter()
        .map(|c| {
            let x: Vec<f64> = inputs
                .iter()
                .zip(&dense)
                .map(|(t, v)| v[source(&t.shape, c)])
                .collect();
            numpy_op(op, &x)
        })
        .collect()
}

fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-9 * y.abs())
}

const OPS: [Op; 25] = [
    Op::Add,
    Op::Sub,
    Op::Mul,
    Op::Div,
    Op::Min,
    Op::Max,
    Op::Lt,
    Op::Le,
    Op::Gt,
    Op::Ge,
    Op::Eq,
    Op::Ne,
    Op::Neg,
    Op::Abs,
    Op::Sqrt,
    Op::Exp,
    Op::Log,
    Op::Floor,
    Op::Math(Math1::Cos),
    Op::Math(Math1::Round),
    Op::Math2(Math2::Atan2),
    Op::Math2(Math2::Mod),
    Op::Math2(Math2::Fld),
    Op::Math2(Math2::Copysign),
    Op::Math2(Math2::Logaddexp),
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn elementwise_ops_match_numpy(seed in any::<u64>(), k in 0..OPS.len()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let op = OPS[k];
        let out = random_shape(&mut rng);
        let tensors: Vec<Tensor> = (0..op.arity())
            .map(|_| {
                let shape = broadcasting_to(&mut rng, &out);
                random(&mut rng, &shape)
            })
            .collect();
        let inputs: Vec<&Tensor> = tensors.iter().collect();
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
        let expected_shape = api::broadcast_shape(&shapes).unwrap();
        let c = api::map(op, &inputs).unwrap();
        prop_assert_eq!(&c.shape, &expected_shape);
        let want = numpy_map(op, &inputs, &expected_shape);
        let got = as_f64(&c.to_dense());
        prop_assert!(same(&got, &want), "{:?} of {:?}\ngot  {:?}\nwant {:?}\nformat {}",
            op, inputs.iter().map(|t| (t.shape.clone(), t.format.to_string())).collect::<Vec<_>>(),
            got, want, c.format);
        // The fill is the operation on the fills (a 0-d input is a constant).
        let fills: Vec<f64> = inputs
            .iter()
            .map(|t| if t.rank() == 0 { t.to_dense().get(0) } else { t.fill() }.as_f64())
            .collect();
        prop_assert!(same(&[c.fill().as_f64()], &[numpy_op(op, &fills)]));
    }

    #[test]
    fn where_matches_numpy(seed in any::<u64>()) {
        // The condition is a comparison's bool result, itself sparse when its inputs are.
        let mut rng = StdRng::seed_from_u64(seed);
        let out = random_shape(&mut rng);
        let operand = |rng: &mut StdRng| {
            let shape = broadcasting_to(rng, &out);
            random(rng, &shape)
        };
        let (a, b, x, y) = (operand(&mut rng), operand(&mut rng), operand(&mut rng), operand(&mut rng));
        let cond = api::map(Op::Gt, &[&a, &b]).unwrap();
        let inputs = [&cond, &x, &y];
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
        let expected_shape = api::broadcast_shape(&shapes).unwrap();
        let c = api::map(Op::Where, &inputs).unwrap();
        prop_assert_eq!(&c.shape, &expected_shape);
        let want = numpy_map(Op::Where, &inputs, &expected_shape);
        let got = as_f64(&c.to_dense());
        prop_assert!(same(&got, &want), "where over {:?}\ngot  {:?}\nwant {:?}\nformat {}",
            inputs.iter().map(|t| (t.shape.clone(), t.format.to_string())).collect::<Vec<_>>(),
            got, want, c.format);
    }

    #[test]
    fn reductions_match_numpy(seed in any::<u64>(), k in 0..7usize) {
        let mut rng = StdRng::seed_from_u64(seed);
        let shape = random_shape(&mut rng);
        let a = random(&mut rng, &shape);
        let axes: Vec<usize> = (0..shape.len()).filter(|_| rng.random_bool(0.5)).collect();
        let hows = [Reduction::Sum, Reduction::Prod, Reduction::Max, Reduction::Min, Reduction::Any, Reduction::All];
        let r = match hows.get(k) {
            Some(&how) => api::reduce(how, &a, &axes).unwrap(),
            None => api::norm(&a, &axes).unwrap(),
        };
        let want = numpy_reduce(k, &a, &axes);
        let got = as_f64(&r.to_dense());
        prop_assert!(same(&got, &want), "reduction {} over {:?} of {:?} {}\ngot  {:?}\nwant {:?}",
            k, axes, shape, a.format, got, want);
    }
}

/// NumPy's `sum prod max min any all norm` (by position `k`) of `a` over `axes` (all when empty).
fn numpy_reduce(k: usize, a: &Tensor, axes: &[usize]) -> Vec<f64> {
    let reduced = |d: usize| axes.is_empty() || axes.contains(&d);
    let kept: Vec<usize> = (0..a.rank()).filter(|&d| !reduced(d)).collect();
    let out_shape: Vec<usize> = kept.iter().map(|&d| a.shape[d]).collect();
    let start = [0.0, 1.0, -INF, INF, 0.0, 1.0, 0.0][k];
    let mut out = vec![start; out_shape.iter().product()];
    let values = as_f64(&a.to_dense());
    for (c, v) in coords(&a.shape).iter().zip(values) {
        let o = kept.iter().fold(0, |s, &d| s * a.shape[d] + c[d]);
        let acc = &mut out[o];
        *acc = match k {
            0 => *acc + v,
            // Zero annihilates `*`, also against an infinity (README, "Semantics").
            1 if *acc == 0.0 || v == 0.0 => 0.0,
            1 => *acc * v,
            2 => acc.max(v),
            3 => acc.min(v),
            4 => f64::from(*acc != 0.0 || v != 0.0),
            5 => f64::from(*acc != 0.0 && v != 0.0),
            _ => *acc + v * v,
        };
    }
    if k == 6 {
        out.iter_mut().for_each(|x| *x = x.sqrt());
    }
    out
}

fn csr(values: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_slice("csr", shape, &Buffer::F64(values.to_vec().into())).unwrap()
}

#[test]
fn products_store_the_intersection_sums_the_union() {
    let mut rng = StdRng::seed_from_u64(7);
    let dense = |rng: &mut StdRng| -> Vec<f64> {
        (0..30)
            .map(|_| if rng.random_bool(0.3) { 2.0 } else { 0.0 })
            .collect()
    };
    let a = csr(&dense(&mut rng), &[5, 6]);
    let b = csr(&dense(&mut rng), &[5, 6]);
    let p = api::mul(&a, &b).unwrap();
    assert_eq!(p.format.to_string(), "Dense(SparseList(Element(0.0)))");
    assert!(p.countstored() <= a.countstored().min(b.countstored()));
    let s = api::add(&a, &b).unwrap();
    assert_eq!(s.format.to_string(), "Dense(SparseList(Element(0.0)))");
    let union = coords(&[5, 6])
        .iter()
        .filter(|c| a.get(c).unwrap().as_f64() != 0.0 || b.get(c).unwrap().as_f64() != 0.0)
        .count();
    assert_eq!(s.countstored(), union);
    assert!(s.countstored() < 30);
}

/// Python's `(x // y, x % y)`, wrapped to 64 bits.
fn py_divmod(x: i64, y: i64) -> (i64, i64) {
    let (a, b) = (i128::from(x), i128::from(y));
    let (q, r) = (a.div_euclid(b), a.rem_euclid(b));
    // Euclid's remainder is never negative; Python's takes the divisor's sign.
    let (q, r) = if b < 0 && r != 0 {
        (q - 1, r + b)
    } else {
        (q, r)
    };
    (q as i64, r as i64)
}

/// An integer matrix stored as CSR (fill 0).
fn int_csr(values: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(
        "Dense(SparseList(Element(0)))",
        shape,
        &Buffer::I64(values.to_vec().into()),
    )
    .unwrap()
}

#[test]
fn integer_and_bitwise_functions_keep_the_structure_where_the_fill_maps_to_itself() {
    // `mod(x, c)`, `fld(x, c)`, `x & c`, shifts of a zero fill give 0: the result keeps the
    // input's CSR structure (stored entries only); `x | c`, `xor(x, c)` with `c != 0` and
    // `mod(c, x)` (whose value at the fill is `mod(c, 0) == 0` but whose other values are
    // not) follow the fill algebra too. Values against Rust's on every entry.
    let vals = [0, -7, 0, 9, i64::MIN, 0, 5, -1, 0, 0, i64::MAX, 3];
    let a = int_csr(&vals, &[3, 4]);
    let c = |v: i64| api::scalar(Scalar::I64(v));
    // (operation, right operand, value of each entry, whether the result stays sparse)
    type Case = (Op, Tensor, Box<dyn Fn(i64) -> i64>, bool);
    let cases: Vec<Case> = vec![
        (
            Op::Math2(Math2::Mod),
            c(3),
            Box::new(|x| py_divmod(x, 3).1),
            true,
        ),
        (
            Op::Math2(Math2::Mod),
            c(-3),
            Box::new(|x| py_divmod(x, -3).1),
            true,
        ),
        (
            Op::Math2(Math2::Fld),
            c(-2),
            Box::new(|x| py_divmod(x, -2).0),
            true,
        ),
        (Op::And, c(6), Box::new(|x| x & 6), true),
        (Op::Or, c(6), Box::new(|x| x | 6), false),
        (Op::Xor, c(-1), Box::new(|x| x ^ -1), false),
        (Op::Lshift, c(3), Box::new(|x: i64| x.wrapping_shl(3)), true),
        (Op::Lshift, c(64), Box::new(|_| 0), true),
        (Op::Rshift, c(-1), Box::new(|x: i64| x >> 63), true),
    ];
    for (op, rhs, f, sparse) in cases {
        let r = api::map(op, &[&a, &rhs]).unwrap();
        let want: Vec<i64> = vals.iter().map(|&x| f(x)).collect();
        assert_eq!(r.to_dense(), Buffer::I64(want.into()), "{op:?}");
        if sparse {
            assert_eq!(
                r.format.to_string(),
                "Dense(SparseList(Element(0)))",
                "{op:?}"
            );
            assert!(r.countstored() <= a.countstored(), "{op:?}");
        }
    }
    // Bitwise not of integers and logical operators of bools.
    let n = api::map(Op::Not, &[&a]).unwrap();
    let want: Vec<i64> = vals.iter().map(|x| !x).collect();
    assert_eq!(n.to_dense(), Buffer::I64(want.into()));
    let p = api::map(Op::Gt, &[&a, &c(0)]).unwrap();
    let q = api::map(Op::Lt, &[&a, &c(6)]).unwrap();
    let x = api::map(Op::Xor, &[&p, &q]).unwrap();
    let want: Vec<bool> = vals.iter().map(|&v| (v > 0) ^ (v < 6)).collect();
    assert_eq!(x.to_dense(), Buffer::Bool(want.into()));
    // `signbit` of a float CSR with fill 0.0 keeps its structure (fill `false`).
    let f = csr(&[0.0, -0.0, -2.0, 3.0, 0.0, f64::NAN], &[2, 3]);
    let s = api::map(Op::Signbit, &[&f]).unwrap();
    assert_eq!(
        s.to_dense(),
        Buffer::Bool(vec![false, true, true, false, false, false].into())
    );
    assert!(!s.format.is_dense());
}

#[test]
fn a_nan_constant_keeps_its_sign() {
    // A 0-d NaN operand is read from its tensor, not written into the statement as the
    // literal `NaN` (which has no sign).
    for (nan, negative) in [(-f64::NAN, true), (f64::NAN, false)] {
        let t = api::scalar(Scalar::F64(nan));
        let s = api::map(Op::Signbit, &[&t]).unwrap();
        assert_eq!(s.to_dense(), Buffer::Bool(vec![negative].into()));
        // Beside a tensor too: the result is NaN everywhere, and stays NaN.
        let a = csr(&[0.0, 3.0], &[1, 2]);
        let sum = api::add(&a, &t).unwrap();
        assert!(as_f64(&sum.to_dense()).iter().all(|x| x.is_nan()));
    }
}

#[test]
fn constants_keep_the_structure_and_move_the_fill() {
    let a = csr(&[0.0, 3.0, 0.0, 0.0, 0.0, -2.0], &[2, 3]);
    let shifted = api::add(&a, &api::scalar(Scalar::F64(1.0))).unwrap();
    assert_eq!(
        shifted.format.to_string(),
        "Dense(SparseList(Element(1.0)))"
    );
    assert_eq!(shifted.countstored(), 2);
    assert_eq!(
        shifted.to_dense(),
        Buffer::F64(vec![1.0, 4.0, 1.0, 1.0, 1.0, -1.0].into())
    );
    // min(b, 0) over a fill-Inf b: the fill becomes 0, the stored structure stays.
    let b = Tensor::from_slice(
        "Dense(SparseList(Element(Inf)))",
        &[2, 3],
        &Buffer::F64(vec![INF, 3.0, INF, INF, INF, -2.0].into()),
    )
    .unwrap();
    let low = api::minimum(&b, &api::scalar(Scalar::F64(0.0))).unwrap();
    assert_eq!(low.fill(), Scalar::F64(0.0));
    assert_eq!(low.format.to_string(), "Dense(SparseList(Element(0.0)))");
    assert_eq!(low.countstored(), 2);
    assert_eq!(
        low.to_dense(),
        Buffer::F64(vec![0.0, 0.0, 0.0, 0.0, 0.0, -2.0].into())
    );
}

#[test]
fn coordinate_inputs_keep_their_format() {
    let a = Tensor::from_slice(
        "SparseCOO{2}(Element(0.0))",
        &[2, 2],
        &Buffer::F64(vec![0.0, 3.0, 4.0, 0.0].into()),
    )
    .unwrap();
    let d = api::mul(&a, &a).unwrap();
    assert_eq!(d.format.to_string(), "SparseCOO{2}(Element(0.0))");
    assert_eq!(d.to_dense(), Buffer::F64(vec![0.0, 9.0, 16.0, 0.0].into()));
}

#[test]
fn comparisons_give_bools() {
    let a = csr(&[0.0, 3.0, -1.0, 0.0], &[2, 2]);
    let lt = api::lt(&a, &api::scalar(Scalar::F64(1.0))).unwrap();
    assert_eq!(lt.elem(), tessera::ElemType::Bool);
    assert_eq!(
        lt.to_dense(),
        Buffer::Bool(vec![true, false, true, true].into())
    );
}

/// The fill takes part in a reduction: a sum over a fill-1 matrix counts every fill.
#[test]
fn reductions_count_the_fills_on_every_axis_set_of_a_3d_tensor() {
    let f = Format::parse("Dense(SparseList(SparseList(Element(1.0))))", Some(3)).unwrap();
    let values: Vec<f64> = (0..24)
        .map(|k| if k % 5 == 0 { k as f64 } else { 1.0 })
        .collect();
    let a = Tensor::from_dense(&f, &[2, 3, 4], &Buffer::F64(values.into())).unwrap();
    assert!(a.countstored() < 24);
    let sets: [&[usize]; 8] = [&[], &[0], &[1], &[2], &[0, 1], &[0, 2], &[1, 2], &[0, 1, 2]];
    for axes in sets {
        for k in 0..7 {
            let r = match k {
                6 => api::norm(&a, axes).unwrap(),
                _ => {
                    let hows = [
                        Reduction::Sum,
                        Reduction::Prod,
                        Reduction::Max,
                        Reduction::Min,
                        Reduction::Any,
                        Reduction::All,
                    ];
                    api::reduce(hows[k], &a, axes).unwrap()
                }
            };
            let want = numpy_reduce(k, &a, axes);
            assert!(same(&as_f64(&r.to_dense()), &want), "{k} over {axes:?}");
        }
    }
    assert_eq!(
        api::sum(&a, &[]).unwrap().to_dense(),
        Buffer::F64(vec![19.0 + 0.0 + 5.0 + 10.0 + 15.0 + 20.0].into())
    );
}

/// The statements `map` writes, run by the reference evaluator on the same inputs.
#[test]
fn broadcasting_agrees_with_the_reference_evaluator() {
    let a = csr(&[0.0, 3.0, 0.0, 1.0, 0.0, -2.0], &[2, 3]);
    let row = Tensor::from_slice(
        "SparseList(Element(0.0))",
        &[3],
        &Buffer::F64(vec![5.0, 0.0, 2.0].into()),
    )
    .unwrap();
    let col = Tensor::from_slice("dense", &[2, 1], &Buffer::F64(vec![1.0, -1.0].into())).unwrap();
    let col_vec = Tensor::from_slice("dense", &[2], &Buffer::F64(vec![1.0, -1.0].into())).unwrap();
    for (op, text) in [(Op::Mul, "*"), (Op::Add, "+"), (Op::Sub, "-")] {
        let got = api::map(op, &[&a, &row]).unwrap();
        let program = format!("C .= 0.0\nfor i = _, j = _\nC[i, j] = A[i, j] {text} r[j]\nend\n");
        let tensors = BTreeMap::from([
            ("A".to_string(), a.clone()),
            ("r".to_string(), row.clone()),
            (
                "C".to_string(),
                Tensor::with_format("dense", &[2, 3]).unwrap(),
            ),
        ]);
        assert_eq!(
            got.to_dense(),
            run_eval(&parse(&program), &tensors).unwrap()["C"]
        );
        let got = api::map(op, &[&col, &a]).unwrap();
        let program = format!("C .= 0.0\nfor i = _, j = _\nC[i, j] = c[i] {text} A[i, j]\nend\n");
        let tensors = BTreeMap::from([
            ("A".to_string(), a.clone()),
            ("c".to_string(), col_vec.clone()),
            (
                "C".to_string(),
                Tensor::with_format("dense", &[2, 3]).unwrap(),
            ),
        ]);
        assert_eq!(
            got.to_dense(),
            run_eval(&parse(&program), &tensors).unwrap()["C"]
        );
    }
}

#[test]
fn zero_dimensional_operands() {
    let two = api::scalar(Scalar::F64(2.0));
    let three = api::scalar(Scalar::F64(3.0));
    let p = api::mul(&two, &three).unwrap();
    assert!(p.shape.is_empty());
    assert_eq!(p.to_dense(), Buffer::F64(vec![6.0].into()));
    let v = Tensor::from_slice(
        "SparseList(Element(0.0))",
        &[3],
        &Buffer::F64(vec![0.0, 4.0, 0.0].into()),
    )
    .unwrap();
    assert_eq!(
        api::sub(&two, &v).unwrap().to_dense(),
        Buffer::F64(vec![2.0, -2.0, 2.0].into())
    );
    assert_eq!(
        api::sum(&p, &[]).unwrap().to_dense(),
        Buffer::F64(vec![6.0].into())
    );
}

#[test]
fn matmul_and_permutations() {
    let a = csr(&[1.0, 0.0, 2.0, 0.0, 3.0, 0.0], &[2, 3]);
    let t = api::transpose(&a).unwrap();
    assert_eq!(t.shape, vec![3, 2]);
    assert_eq!(t.format, a.format);
    assert_eq!(
        t.to_dense(),
        Buffer::F64(vec![1.0, 0.0, 0.0, 3.0, 2.0, 0.0].into())
    );
    let g = api::matmul(&a, &t).unwrap();
    assert_eq!(g.to_dense(), Buffer::F64(vec![5.0, 0.0, 0.0, 9.0].into()));
    let x = Tensor::from_slice("dense", &[3], &Buffer::F64(vec![1.0, 1.0, 1.0].into())).unwrap();
    assert_eq!(
        api::matmul(&a, &x).unwrap().to_dense(),
        Buffer::F64(vec![3.0, 3.0].into())
    );
    assert_eq!(
        api::matmul(&x, &x).unwrap().to_dense(),
        Buffer::F64(vec![3.0].into())
    );
    let cube = Tensor::from_slice(
        "dense",
        &[1, 2, 3],
        &Buffer::F64((0..6).map(f64::from).collect()),
    )
    .unwrap();
    let p = api::permute_dims(&cube, &[2, 0, 1]).unwrap();
    assert_eq!(p.shape, vec![3, 1, 2]);
    assert_eq!(p.get(&[2, 0, 1]).unwrap(), Scalar::F64(5.0));
}

#[test]
fn bad_shapes_and_axes_are_errors() {
    let a = csr(&[1.0; 6], &[2, 3]);
    let b = csr(&[1.0; 8], &[2, 4]);
    let e = api::add(&a, &b).unwrap_err();
    assert!(matches!(e, tessera::Error::DimensionMismatch { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("[2, 3]") && msg.contains("[2, 4]"), "{msg}");
    assert!(api::sum(&a, &[2]).is_err());
    assert!(api::sum(&a, &[1, 1]).is_err());
    assert!(api::map(Op::Add, &[&a]).is_err());
    assert!(matches!(
        api::matmul(&a, &a).unwrap_err(),
        tessera::Error::DimensionMismatch { .. }
    ));
    assert!(api::permute_dims(&a, &[0, 0]).is_err());
}

/// The README's elementwise example, verbatim between the markers (checked below).
#[test]
fn readme_example() -> tessera::Result<()> {
    // README example start
    use tessera::Scalar;
    use tessera::api::{add, mul, scalar, sum};
    use tessera::runtime::Buffer;
    use tessera::tensor::Tensor;

    let v = Buffer::from(vec![1.0, 0.0, 2.0, 0.0, 3.0, 0.0]);
    let a = Tensor::from_slice("csr", &[2, 3], &v)?;
    let row = Tensor::from_slice("dense", &[1, 3], &Buffer::from(vec![1.0, 2.0, 3.0]))?;
    // Broadcast over the rows; stored only where `a` is, still CSR.
    let p = mul(&a, &row)?;
    assert_eq!(p.format.to_string(), "Dense(SparseList(Element(0.0)))");
    assert_eq!(p.countstored(), 3);
    // `a + 1` keeps the structure with fill 1; a sum over axis 1 counts the fills.
    let shifted = add(&a, &scalar(Scalar::F64(1.0)))?;
    assert_eq!(shifted.fill(), Scalar::F64(1.0));
    assert_eq!(
        sum(&shifted, &[1])?.to_dense(),
        Buffer::from(vec![6.0, 6.0])
    );
    // README example end
    Ok(())
}

#[test]
fn readme_shows_the_tested_example() {
    common::assert_readme_shows(include_str!("elementwise.rs"), "elementwise.rs");
}
