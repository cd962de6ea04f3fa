//! Lazy expressions (`tessera::api::lazy`): random expression trees of elementwise operations
//! with broadcasting, reductions, permuted views and matrix products, computed fused, against
//! the same operations run one by one by the eager API (itself checked against NumPy's
//! semantics in `tests/elementwise.rs`); and how many kernels fusion leaves.

mod common;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tessera::Scalar;
use tessera::api::{self, Lazy, Op, Reduction, lazy};
use tessera::levels::{Format, LevelKind};
use tessera::runtime::Buffer;
use tessera::tensor::{Tensor, random_exact};

fn kinds_for(rank: usize) -> Vec<Vec<LevelKind>> {
    use LevelKind::*;
    const SL: LevelKind = LevelKind::SPARSE_LIST;
    match rank {
        0 => vec![vec![]],
        1 => vec![
            vec![Dense],
            vec![SL],
            vec![RunList {
                merge: true,
                coord: tessera::levels::format::Coord::I64,
            }],
        ],
        2 => vec![
            vec![Dense, Dense],
            vec![Dense, SL],
            vec![SL, SL],
            vec![SparseCOO(2)],
        ],
        _ => vec![vec![Dense; 3], vec![Dense, SL, SL], vec![SparseCOO(3)]],
    }
}

/// Integer-valued entries, so sums are exact whatever order fusion adds them in.
fn random(rng: &mut StdRng, shape: &[usize]) -> Tensor {
    let options = kinds_for(shape.len());
    let mut levels = options[rng.random_range(0..options.len())].clone();
    let fill = [0.0, 0.0, 1.0][rng.random_range(0..3)];
    levels.push(LevelKind::Element(Scalar::F64(fill)));
    let total: usize = shape.iter().product();
    let values: Vec<f64> = (0..total)
        .map(|_| {
            if rng.random_bool(0.5) {
                fill
            } else {
                [-3.0, -1.0, 0.0, 1.0, 2.0, 4.0][rng.random_range(0..6)]
            }
        })
        .collect();
    Tensor::from_dense(&Format { levels }, shape, &Buffer::F64(values.into())).unwrap()
}

/// A shape that broadcasts to `out` (a suffix, some extents 1).
fn broadcasting_to(rng: &mut StdRng, out: &[usize]) -> Vec<usize> {
    let rank = rng.random_range(0..=out.len());
    out[out.len() - rank..]
        .iter()
        .map(|&n| if rng.random_bool(0.3) { 1 } else { n })
        .collect()
}

/// A random expression of shape `shape`, built lazily and eagerly side by side.
fn expression(rng: &mut StdRng, shape: &[usize], depth: usize) -> (Lazy, Tensor, String) {
    let choice = if depth == 0 {
        0
    } else {
        rng.random_range(0..7)
    };
    match choice {
        1 | 2 => {
            let op = [Op::Add, Op::Sub, Op::Mul, Op::Min, Op::Max][rng.random_range(0..5)];
            let other = broadcasting_to(rng, shape);
            let (mut a, mut b) = (
                expression(rng, shape, depth - 1),
                expression(rng, &other, depth - 1),
            );
            if rng.random_bool(0.5) {
                std::mem::swap(&mut a, &mut b);
            }
            let e = api::map(op, &[&a.1, &b.1]).unwrap();
            (a.0.map(op, &[&b.0]), e, format!("{op:?}({}, {})", a.2, b.2))
        }
        3 => {
            let op = [Op::Neg, Op::Abs][rng.random_range(0..2)];
            let a = expression(rng, shape, depth - 1);
            let e = api::map(op, &[&a.1]).unwrap();
            (a.0.map(op, &[]), e, format!("{op:?}({})", a.2))
        }
        4 if shape.len() < 3 => {
            let how = [
                Reduction::Sum,
                Reduction::Sum,
                Reduction::Max,
                Reduction::Min,
            ][rng.random_range(0..4)];
            let axis = rng.random_range(0..=shape.len());
            let mut inner = shape.to_vec();
            inner.insert(axis, rng.random_range(1..=3));
            let a = expression(rng, &inner, depth - 1);
            let e = api::reduce(how, &a.1, &[axis]).unwrap();
            (
                a.0.reduce(how, &[axis]),
                e,
                format!("{how:?}({}, {axis})", a.2),
            )
        }
        5 if shape.len() >= 2 => {
            let r = shape.len();
            let mut perm: Vec<usize> = (0..r).collect();
            perm.swap(0, r - 1);
            let inner: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
            let a = expression(rng, &inner, depth - 1);
            let e = api::permute_dims(&a.1, &perm).unwrap();
            (a.0.permute(&perm), e, format!("permute({}, {perm:?})", a.2))
        }
        6 if shape.len() == 2 => {
            let k = rng.random_range(1..=3);
            let a = expression(rng, &[shape[0], k], depth - 1);
            let b = expression(rng, &[k, shape[1]], depth - 1);
            let e = api::matmul(&a.1, &b.1).unwrap();
            (a.0.matmul(&b.0), e, format!("matmul({}, {})", a.2, b.2))
        }
        _ => {
            let t = random(rng, shape);
            (lazy(&t), t.clone(), format!("{}{:?}", t.format, t.shape))
        }
    }
}

fn values(b: &Buffer) -> Vec<f64> {
    b.to_scalars().iter().map(|s| s.as_f64()).collect()
}

/// A random expression from `seed`, fused and computed eagerly: the two agree.
fn fused_equals_eager(seed: u64) -> std::result::Result<(), TestCaseError> {
    let mut rng = StdRng::seed_from_u64(seed);
    let rank = rng.random_range(0..=2);
    let shape: Vec<usize> = (0..rank).map(|_| rng.random_range(1..=3)).collect();
    let (l, eager, shown) = expression(&mut rng, &shape, 3);
    let (fused, statements) = l.compute_explained().unwrap();
    prop_assert_eq!(&fused.shape, &eager.shape, "{}", shown);
    prop_assert_eq!(l.shape().unwrap(), eager.shape.clone());
    let (x, y) = (values(&fused.to_dense()), values(&eager.to_dense()));
    let same = x
        .iter()
        .zip(&y)
        .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()));
    prop_assert!(
        same,
        "{}\nfused {:?}\neager {:?}\n{:#?}",
        shown,
        x,
        y,
        statements
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn fused_expressions_equal_the_eager_operations(seed in any::<u64>()) {
        fused_equals_eager(seed)?;
    }
}

/// A seed whose fused statement grew past the kernel size limit: the fuser computes its
/// compound operands first and the smaller statement then compiles.
#[test]
fn a_fused_statement_too_large_is_split() {
    fused_equals_eager(12710126091180886149).unwrap();
}

fn csr() -> Format {
    Format::parse("Dense(SparseList(Element(0.0)))", Some(2)).unwrap()
}

fn dense(shape: &[usize], v: Vec<f64>) -> Tensor {
    Tensor::from_slice("dense", shape, &Buffer::F64(v.into())).unwrap()
}

fn sddmm_inputs(n: usize, k: usize) -> (Tensor, Tensor, Tensor) {
    let a = random_exact(&csr(), &[n, n], n * 2, 7).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let mut factor = || {
        let v = (0..n * k)
            .map(|_| rng.random_range(-4..=4) as f64)
            .collect();
        dense(&[n, k], v)
    };
    (a, factor(), factor())
}

#[test]
fn sddmm_runs_as_one_kernel_at_the_sparse_entries() {
    let (a, b, c) = sddmm_inputs(40, 5);
    let (la, lb, lc) = (lazy(&a), lazy(&b), lazy(&c));
    let (out, statements) = (&la * &lb.matmul(&lc.transpose()))
        .compute_explained()
        .unwrap();
    assert_eq!(statements.len(), 1, "{statements:?}");
    // The product of the factors is never formed: the only loop nest is the one over A.
    let unfused = api::mul(&a, &api::matmul(&b, &api::transpose(&c).unwrap()).unwrap()).unwrap();
    assert_eq!(out.to_dense(), unfused.to_dense());
    assert_eq!(out.format.to_string(), "Dense(SparseList(Element(0.0)))");
    assert_eq!(out.countstored(), a.countstored());
}

#[test]
fn elementwise_chains_and_their_reductions_are_one_kernel() {
    let (a, b, _) = sddmm_inputs(6, 6);
    let (la, lb) = (lazy(&a), lazy(&b));
    let chain = (&(&la + &lb) * &lb).map(Op::Max, &[&la]);
    assert_eq!(chain.compute_explained().unwrap().1.len(), 1);
    let (s, st) = (&la * &lb).sum(&[1]).compute_explained().unwrap();
    assert_eq!(st.len(), 1, "{st:?}");
    let eager = api::sum(&api::mul(&a, &b).unwrap(), &[1]).unwrap();
    assert_eq!(s.to_dense(), eager.to_dense());
    // A sum of a sum is one sum over both axes.
    assert_eq!(
        la.sum(&[1]).sum(&[0]).compute_explained().unwrap().1.len(),
        1
    );
}

#[test]
fn what_cannot_be_one_statement_is_materialized_first() {
    let (a, b, c) = sddmm_inputs(6, 6);
    let (la, lb, lc) = (lazy(&a), lazy(&b), lazy(&c));
    // sqrt does not distribute over a sum.
    let (_, st) = la.sum(&[1]).map(Op::Sqrt, &[]).compute_explained().unwrap();
    assert_eq!(st.len(), 2, "{st:?}");
    // A chain of products: fusing would multiply the work, so each product is a kernel.
    let (out, st) = la.matmul(&lb).matmul(&lc).compute_explained().unwrap();
    assert_eq!(st.len(), 2, "{st:?}");
    let eager = api::matmul(&api::matmul(&a, &b).unwrap(), &c).unwrap();
    assert_eq!(out.to_dense(), eager.to_dense());
    // A max of a sum.
    let (_, st) = la
        .sum(&[1])
        .reduce(Reduction::Max, &[])
        .compute_explained()
        .unwrap();
    assert_eq!(st.len(), 2, "{st:?}");
}

#[test]
fn the_cache_compiles_a_fused_kernel_once() {
    let runner = tessera::run::Runner::jit();
    for seed in 0..2 {
        let a = random_exact(&csr(), &[30, 30], 50, seed).unwrap();
        let b = dense(&[30, 4], vec![1.0; 120]);
        let (la, lb) = (lazy(&a), lazy(&b));
        (&la * &lb.matmul(&lb.transpose()))
            .compute_with(&runner, None)
            .unwrap();
        if seed == 1 {
            assert_eq!(*runner.last_compile_ms.borrow(), 0.0);
        }
    }
    assert_eq!(runner.cache_len(), 1);
}

#[test]
fn bad_shapes_are_errors_at_compute() {
    let a = lazy(&dense(&[2, 3], vec![0.0; 6]));
    let b = lazy(&dense(&[2, 2], vec![0.0; 4]));
    let e = (&a + &b).compute().unwrap_err().to_string();
    assert!(e.contains("do not broadcast"), "{e}");
    let e = a.matmul(&a).compute().unwrap_err().to_string();
    assert!(e.contains("3 columns but the right one 2 rows"), "{e}");
    let e = a.sum(&[2]).compute().unwrap_err().to_string();
    assert!(e.contains("axis 2 is outside"), "{e}");
    let e = a.permute(&[0, 0]).compute().unwrap_err().to_string();
    assert!(e.contains("does not reorder"), "{e}");
}

/// The README's lazy example, verbatim between the markers (checked below).
#[test]
fn readme_example() -> tessera::Result<()> {
    // README example start
    use tessera::api::lazy;
    use tessera::runtime::Buffer;
    use tessera::tensor::Tensor;

    let (i, j) = (vec![0, 2], vec![1, 0]);
    let a = Tensor::from_triplets("csr", &[3, 3], &[i, j], &Buffer::from(vec![2.0, 3.0]))?;
    let v: Vec<f64> = (1..=6).map(f64::from).collect();
    let b = Tensor::from_slice("dense", &[3, 2], &Buffer::from(v))?;
    let (a, b) = (lazy(&a), lazy(&b));
    // SDDMM: (B Bᵀ)[i, j] is computed only where A stores an entry, in one kernel.
    let sddmm = &a * &b.matmul(&b.transpose());
    let (out, kernels) = sddmm.compute_explained()?;
    assert_eq!(kernels.len(), 1);
    assert_eq!(out.countstored(), 2);
    assert_eq!(out.get(&[0, 1])?, tessera::Scalar::F64(2.0 * 11.0));
    // Row sums of the result fuse into the same single kernel.
    assert_eq!(sddmm.sum(&[1]).compute_explained()?.1.len(), 1);
    // README example end
    Ok(())
}

#[test]
fn readme_shows_the_tested_example() {
    common::assert_readme_shows(include_str!("lazy.rs"), "lazy.rs");
}
