//! Software prefetches of gathered operands in the C backend (`backend::c::prefetch`, issue
//! 18): a loop over a level's positions loading `x[idx[p]]` also requests `x[idx[p + D]]`
//! when `x` is larger than the L2. The prefetch changes no value, so results must stay
//! bit-identical to the reference evaluator, in row- and column-major formats, with 8- and
//! 4-byte coordinates, for rows shorter and longer than the distance, empty rows, and long
//! last rows (where `p + D` runs past the coordinates' end and the clamp must hold). The
//! gathered vectors here are wider than the 2 MiB threshold, so the prefetching copy runs.
//! Prefetching is off by default (it did not pay on the machines measured), so the C runner
//! here asks for it (`CBackend::with_prefetch`).
//! Coordinates nobody vouches for still fail at the first bad access, naming the tensor.

mod common;

use common::rows::{Lcg, assert_first_bad_gather, bits, faults, y_agrees};
use common::{fmt, formats_of, parse, run_eval};
use std::collections::BTreeMap;
use tessera::backend::CBackend;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

/// The prefetching C backend: 32 positions ahead, above the default 2 MiB.
fn prefetching() -> CBackend {
    CBackend::new().with_prefetch(32, 2 << 20)
}

/// The JIT, the IR interpreter and the prefetching C backend (when a compiler is present).
fn runners() -> Vec<(&'static str, Runner)> {
    let mut r = vec![
        ("jit", Runner::jit()),
        (
            "interp",
            Runner::new(Box::new(tessera::backend::Interpreter::new())),
        ),
    ];
    if prefetching().compiler_available() {
        r.push(("c", Runner::new(Box::new(prefetching()))));
    }
    r
}

/// Elements of the gathered vectors: 2.4 MB of f64, past `prefetch::MIN_BYTES` (2 MiB).
const WIDE: usize = 300_007;

const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";
/// Column-major: the inner loop walks a column's stored rows and gathers (and scatters) y.
const SPMV_COLS: &str = "y .= 0\nfor j = _, i = _\n  y[i] += A[i, j] * x[j]\nend\n";

/// A matrix with `lengths[k]` entries in line `k` (a row, or a column with `by_cols`), the
/// other dimension `WIDE`, positions spread over it, values whose sums show any reordering.
fn matrix(format: &str, lengths: &[usize], seed: u64, by_cols: bool) -> Tensor {
    let mut rng = Lcg(seed);
    let (mut rows, mut cols, mut vals) = (vec![], vec![], vec![]);
    for (k, &len) in lengths.iter().enumerate() {
        // Distinct: len * 1423 < WIDE for every length used here.
        let mut at: Vec<usize> = (0..len).map(|t| (k * 7919 + t * 1423) % WIDE).collect();
        at.sort_unstable();
        for j in at {
            let (r, c) = if by_cols { (j, k) } else { (k, j) };
            rows.push(r as i64);
            cols.push(c as i64);
            vals.push(rng.value());
        }
    }
    let shape = if by_cols {
        [WIDE, lengths.len()]
    } else {
        [lengths.len(), WIDE]
    };
    Tensor::from_coo(
        &fmt(format),
        &shape,
        &[rows, cols],
        &Buffer::from(vals),
        |a, _| a,
    )
    .unwrap()
}

fn vector(n: usize, seed: u64) -> Tensor {
    let mut rng = Lcg(seed ^ 0x5eed);
    let v: Vec<f64> = (0..n).map(|_| rng.value()).collect();
    Tensor::from_dense(&fmt("Dense(Element(0.0))"), &[n], &Buffer::from(v)).unwrap()
}

fn tensors(a: Tensor) -> BTreeMap<String, Tensor> {
    let (rows, cols) = (a.shape[0], a.shape[1]);
    let y = Tensor::from_dense(
        &fmt("Dense(Element(0.0))"),
        &[rows],
        &Buffer::from(vec![-7.25; rows]),
    )
    .unwrap();
    BTreeMap::from([
        ("A".to_string(), a),
        ("x".to_string(), vector(cols, 3)),
        ("y".to_string(), y),
    ])
}

/// Every backend gives the evaluator's bits; returns whether the C kernel prefetches.
fn agree_on(program: &str, format: &str, lengths: &[usize], by_cols: bool) -> bool {
    let p = parse(program);
    let t = tensors(matrix(format, lengths, lengths.len() as u64 + 1, by_cols));
    let mut prefetches = false;
    let what = format!("{format} lines {lengths:?}");
    y_agrees(&p, &t, runners(), &what, &mut |name, c| {
        if name == "c" {
            prefetches = prefetching()
                .source_of(&c.ir)
                .contains("__builtin_prefetch");
        }
    });
    prefetches
}

/// Line lengths around the distance (32): empty lines, 1, D - 1, D, D + 1, long ones (which
/// also take the row-interleaving pass), long last lines, a single line.
fn patterns() -> Vec<Vec<usize>> {
    vec![
        vec![0],
        vec![7],
        vec![100],
        vec![0, 0, 0, 0],
        vec![1, 0, 31, 32, 33, 0, 2],
        vec![5, 0, 3, 0, 0, 9, 40],
        vec![0, 64, 0, 65, 1, 150],
        vec![200, 180, 190, 170, 160, 150],
        (0..37).map(|i| (i * 37) % 13).collect(),
        (0..37).map(|i| (i * 37) % 97).collect(),
    ]
}

#[test]
fn spmv_prefetches_and_stays_bit_identical() {
    if prefetching().compiler_available() {
        for f in [
            "Dense(SparseList(Element(0.0)))",
            "Dense(SparseList(Element(0.0), coord=i32))",
        ] {
            assert!(
                agree_on(SPMV, f, &[3, 0, 40], false),
                "{f}: the C kernel has no prefetch"
            );
        }
    }
    for f in [
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseList(Element(0.0), coord=i32))",
        "Dense(SparseList(Pattern()))",
        "SparseList(SparseList(Element(0.0)))",
        "Dense(SparseBlockList(Element(0.0)))",
    ] {
        for lengths in patterns() {
            agree_on(SPMV, f, &lengths, false);
        }
    }
}

#[test]
fn column_major_spmv_stays_bit_identical() {
    for f in [
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseList(Element(0.0), coord=i32))",
    ] {
        for lengths in patterns() {
            agree_on(SPMV_COLS, f, &lengths, true);
        }
    }
}

#[test]
fn prefetching_is_off_by_default() {
    let p = parse(SPMV);
    let t = tensors(matrix(
        "Dense(SparseList(Element(0.0)))",
        &[3, 0, 40],
        1,
        false,
    ));
    let c = Runner::jit().compile(&p, &formats_of(&t)).unwrap();
    let plain = CBackend::new().with_prefetch(0, 0).source_of(&c.ir);
    assert!(!plain.contains("__builtin_prefetch"));
    assert!(
        prefetching()
            .source_of(&c.ir)
            .contains("__builtin_prefetch")
    );
}

#[test]
fn dense_loops_do_not_prefetch() {
    let n = 64;
    let dense = |shape: &[usize], f: &str| {
        let len: usize = shape.iter().product();
        let v: Vec<f64> = (0..len).map(|k| k as f64 * 0.5 - 3.0).collect();
        Tensor::from_dense(&fmt(f), shape, &Buffer::from(v)).unwrap()
    };
    let cases = [
        (
            "y .= 0\nfor i = _\n  y[i] = a[i] * x[i]\nend\n",
            BTreeMap::from([
                ("a".to_string(), dense(&[n], "Dense(Element(0.0))")),
                ("x".to_string(), dense(&[n], "Dense(Element(0.0))")),
                ("y".to_string(), dense(&[n], "Dense(Element(0.0))")),
            ]),
        ),
        (
            SPMV,
            BTreeMap::from([
                (
                    "A".to_string(),
                    dense(&[n, n], "Dense(Dense(Element(0.0)))"),
                ),
                ("x".to_string(), dense(&[n], "Dense(Element(0.0))")),
                ("y".to_string(), dense(&[n], "Dense(Element(0.0))")),
            ]),
        ),
    ];
    for (program, t) in cases {
        let p = parse(program);
        let want = run_eval(&p, &t).unwrap();
        for (name, runner) in runners() {
            let c = runner.compile(&p, &formats_of(&t)).unwrap();
            assert!(
                !prefetching()
                    .source_of(&c.ir)
                    .contains("__builtin_prefetch"),
                "{name}: a dense loop prefetches:\n{program}"
            );
            let mut got = t.clone();
            runner.execute(&c, &mut got).unwrap();
            assert_eq!(bits(&got["y"].to_dense()), bits(&want["y"]), "{name}");
        }
    }
}

#[test]
fn unvouched_coordinates_still_fail_at_the_first_bad_access() {
    // Row 1 holds a column past x, row 4 a negative one, 40 positions later: the prefetch
    // reads both as addresses ahead of time, but the first bad gather is still the one
    // reported, on every backend.
    let lengths = [2, 3, 0, 1, 45, 0, 2];
    for f in [
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseList(Element(0.0), coord=i32))",
    ] {
        let mut a = matrix(f, &lengths, 5, false);
        let first = WIDE as i64 + 1000;
        a.levels[1][1].set(3, Scalar::I64(first));
        a.levels[1][1].set(40, Scalar::I64(-5));
        assert_eq!(a.levels[1][1].below(), None);
        let p = parse(SPMV);
        let t = tensors(a);
        for msg in faults(&p, &t, runners()) {
            let msg = format!("{f}: {msg}");
            assert_first_bad_gather(&msg, first);
        }
    }
}
