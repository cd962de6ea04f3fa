//! Conversion round trips: every small test array (empty fibers, all fill, all stored,
//! length 0 and 1, long runs, random) into every format and back, through the runtime builder
//! (`from_dense`) and through the compiled copy program (`to_format`), and between every pair
//! of formats.

mod common;

use common::fmt;
use rand::{Rng, SeedableRng};
use tessera::levels::{Format, level_impl};
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// The level names the 2-level formats `X(Y(Element(0.0)))` are made of. New levels join here.
const LEVELS: &[&str] = &[
    "Dense",
    "SparseList",
    "SparseCOO{1}",
    "SparseBlockList",
    "SparseBand",
    "SparseByteMap",
    "SparseDict",
    "RunList",
    "SparseRunList",
];
/// Formats that are not a chain of the levels above.
const EXTRA_2D: &[&str] = &["SparseCOO{2}(Element(0.0))"];

fn formats(rank: usize) -> Vec<Format> {
    let mut out = vec![];
    match rank {
        1 => {
            for x in LEVELS {
                out.push(fmt(&format!("{x}(Element(0.0))")));
            }
        }
        2 => {
            for x in LEVELS {
                for y in LEVELS {
                    out.push(fmt(&format!("{x}({y}(Element(0.0)))")));
                }
            }
            out.extend(EXTRA_2D.iter().map(|f| fmt(f)));
        }
        _ => unreachable!(),
    }
    out
}

/// A named array: shape and row-major values.
struct Case {
    name: String,
    shape: Vec<usize>,
    values: Vec<f64>,
}

fn case(name: &str, shape: &[usize], values: Vec<f64>) -> Case {
    assert_eq!(values.len(), shape.iter().product::<usize>(), "{name}");
    Case {
        name: name.to_string(),
        shape: shape.to_vec(),
        values,
    }
}

fn random(shape: &[usize], density: f64, seed: u64) -> Vec<f64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let n: usize = shape.iter().product();
    (0..n)
        .map(|_| {
            if rng.random_bool(density) {
                rng.random_range(1..=9) as f64
            } else {
                0.0
            }
        })
        .collect()
}

/// Runs of equal values, some of them fill, some long.
fn runs(n: usize) -> Vec<f64> {
    (0..n)
        .map(|k| match (k / 7) % 3 {
            0 => 0.0,
            1 => 2.0,
            _ => (k / 21) as f64 + 3.0,
        })
        .collect()
}

fn cases_1d() -> Vec<Case> {
    vec![
        case("length 0", &[0], vec![]),
        case("length 1 fill", &[1], vec![0.0]),
        case("length 1 stored", &[1], vec![4.0]),
        case(
            "golden",
            &[9],
            vec![0.0, 1.0, 1.0, 2.0, 2.0, 0.0, 0.0, 3.0, 0.0],
        ),
        case("all fill", &[6], vec![0.0; 6]),
        case("all stored", &[5], vec![1.0, 2.0, 3.0, 4.0, 5.0]),
        case("long runs", &[50], runs(50)),
        case("random", &[40], random(&[40], 0.3, 1)),
    ]
}

fn cases_2d() -> Vec<Case> {
    let mut empty_rows = vec![0.0; 20];
    empty_rows[5] = 1.0; // row 1
    empty_rows[7] = 2.0;
    empty_rows[19] = 3.0; // row 3; rows 0 and 2 are empty fibers
    vec![
        case("0x3", &[0, 3], vec![]),
        case("3x0", &[3, 0], vec![]),
        case("1x1 fill", &[1, 1], vec![0.0]),
        case("1x1 stored", &[1, 1], vec![7.0]),
        case("empty fibers", &[4, 5], empty_rows),
        case("all fill", &[3, 3], vec![0.0; 9]),
        case("all stored", &[3, 4], (1..=12).map(|v| v as f64).collect()),
        case("long runs", &[4, 30], runs(120)),
        case("random", &[7, 9], random(&[7, 9], 0.25, 2)),
    ]
}

/// The arrays a reader uses. A hash level's table (`key`, `htbl`, `hval`) only serves
/// writes and lookups, and its capacity depends on how the tensor was written.
fn read_storage(t: &Tensor) -> Vec<Vec<(&'static str, Buffer)>> {
    t.format
        .levels
        .iter()
        .zip(&t.levels)
        .map(|(kind, bufs)| {
            level_impl(kind)
                .buffers(kind, t.elem())
                .into_iter()
                .zip(bufs)
                .filter(|((name, _), _)| !matches!(*name, "key" | "htbl" | "hval"))
                .map(|((name, _), b)| (name, b.clone()))
                .collect()
        })
        .collect()
}

fn dense_values(t: &Tensor) -> Vec<f64> {
    t.to_dense()
        .to_scalars()
        .iter()
        .map(|v| v.as_f64())
        .collect()
}

fn check_rank(rank: usize, cases: &[Case]) {
    let fs = formats(rank);
    let dense = Format::dense(rank, tessera::types::Scalar::F64(0.0));
    for c in cases {
        let buf = Buffer::F64(c.values.clone().into());
        let d = Tensor::from_dense(&dense, &c.shape, &buf).unwrap();
        let built: Vec<Tensor> = fs
            .iter()
            .map(|f| {
                let t = Tensor::from_dense(f, &c.shape, &buf)
                    .unwrap_or_else(|e| panic!("{}: from_dense {f}: {e}", c.name));
                t.validate("t").unwrap();
                assert_eq!(dense_values(&t), c.values, "{}: from_dense {f}", c.name);
                t
            })
            .collect();
        for (f, b) in fs.iter().zip(&built) {
            // Compiled, from an all-Dense source: fills are not stored, like the builder.
            let t = d
                .to_format(f)
                .unwrap_or_else(|e| panic!("{}: Dense -> {f}: {e}", c.name));
            t.validate("t")
                .unwrap_or_else(|e| panic!("{}: Dense -> {f}: {e}", c.name));
            assert_eq!(dense_values(&t), c.values, "{}: Dense -> {f}", c.name);
            assert_eq!(
                t.countstored(),
                b.countstored(),
                "{}: Dense -> {f} stores what from_dense stores",
                c.name
            );
            assert_eq!(
                read_storage(&t),
                read_storage(b),
                "{}: Dense -> {f} storage",
                c.name
            );
            // And back to Dense.
            let back = b.to_format(&dense).unwrap();
            assert_eq!(dense_values(&back), c.values, "{}: {f} -> Dense", c.name);
        }
        // Every format to every format for vectors; for matrices a fixed third of the pairs,
        // chosen so each format is a source and a destination of many others (all 6,561
        // pairs would dominate the test suite's time).
        for (kx, (x, tx)) in fs.iter().zip(&built).enumerate() {
            for (ky, y) in fs.iter().enumerate() {
                if rank == 2 && (kx + 2 * ky) % 3 != 0 {
                    continue;
                }
                let ty = tx
                    .to_format(y)
                    .unwrap_or_else(|e| panic!("{}: {x} -> {y}: {e}", c.name));
                ty.validate("t").unwrap();
                // Run-length levels decide what is stored from the values: a RunList stores
                // fill runs, and the run builders drop entries equal to the fill, while the
                // compiled copy keeps whatever the source stores. Their counts legitimately
                // differ; the values (checked below) may not.
                if !x.to_string().contains("RunList(") && !y.to_string().contains("RunList(") {
                    assert_eq!(
                        ty.countstored(),
                        tx.to_format_runtime(y).unwrap().countstored(),
                        "{}: {x} -> {y} keeps the stored entries",
                        c.name
                    );
                }
                let back = ty.to_format(&dense).unwrap();
                assert_eq!(
                    dense_values(&back),
                    c.values,
                    "{}: {x} -> {y} -> Dense",
                    c.name
                );
            }
        }
    }
}

#[test]
fn vectors_round_trip_through_every_format() {
    check_rank(1, &cases_1d());
}

#[test]
fn matrices_round_trip_through_every_format() {
    check_rank(2, &cases_2d());
}

#[test]
fn sparse_sources_keep_explicit_fills_and_dropfills_removes_them() {
    let sl = fmt("SparseList(Element(0.0))");
    let coo = fmt("SparseCOO{1}(Element(0.0))");
    let t = Tensor::from_coo(
        &sl,
        &[6],
        &[vec![1, 2, 4]],
        &Buffer::F64(vec![5.0, 0.0, 6.0].into()),
        |_, b| b,
    )
    .unwrap();
    assert_eq!(t.countstored(), 3);
    let u = t.to_format(&coo).unwrap();
    assert_eq!(u.countstored(), 3, "the explicit zero is kept");
    assert_eq!(u.levels[0][1], Buffer::I64(vec![1, 2, 4].into()));
    let v = t.dropfills(None).unwrap();
    assert_eq!(v.format, sl);
    assert_eq!(v.countstored(), 2);
    assert_eq!(v.levels[0][1], Buffer::I64(vec![1, 4].into()));
    assert_eq!(dense_values(&v), dense_values(&t));
    let w = t.dropfills(Some(&coo)).unwrap();
    assert_eq!(w.countstored(), 2);
    // Dense -> Dense keeps every slot.
    let d = t.to_format(&fmt("Dense(Element(0.0))")).unwrap();
    assert_eq!(d.countstored(), 6);
    assert_eq!(d.dropfills(None).unwrap().countstored(), 6);
}

#[test]
fn conversion_changes_fill_and_element_type() {
    let t = Tensor::from_dense(
        &fmt("SparseList(Element(0.0))"),
        &[5],
        &Buffer::F64(vec![0.0, 2.0, 0.0, 1.0, 0.0].into()),
    )
    .unwrap();
    // Another fill: the source's fill region must be written as 0.0.
    let u = t.to_format(&fmt("SparseList(Element(1.0))")).unwrap();
    assert_eq!(dense_values(&u), vec![0.0, 2.0, 0.0, 1.0, 0.0]);
    // Another element type.
    let v = t.to_format(&fmt("SparseList(Element(0))")).unwrap();
    assert_eq!(v.to_dense(), Buffer::I64(vec![0, 2, 0, 1, 0].into()));
    // Pattern keeps the structure.
    let p = t.to_format(&fmt("SparseList(Pattern())")).unwrap();
    assert_eq!(
        p.to_dense(),
        Buffer::Bool(vec![false, true, false, true, false].into())
    );
    // A rank mismatch is a format error, not a panic.
    assert!(t.to_format(&fmt("Dense(Dense(Element(0.0)))")).is_err());
}

#[test]
fn countstored_counts_distinct_leaf_positions() {
    let v = vec![0.0, 1.0, 1.0, 2.0, 2.0, 0.0, 0.0, 3.0, 0.0];
    let b = Buffer::F64(v.into());
    let n = |f: &str| Tensor::from_dense(&fmt(f), &[9], &b).unwrap().countstored();
    assert_eq!(n("Dense(Element(0.0))"), 9);
    assert_eq!(n("SparseList(Element(0.0))"), 5);
    assert_eq!(n("SparseCOO{1}(Element(0.0))"), 5);
    let m = Tensor::from_dense(
        &fmt("Dense(SparseList(Element(0.0)))"),
        &[3, 3],
        &Buffer::F64(vec![0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.0].into()),
    )
    .unwrap();
    assert_eq!(m.countstored(), 3);
}
