//! Row jamming (`ir::jam`): rows whose inner loops run over one range, computed without
//! loads (dense levels), run eight at a time, their inner loops as one loop, each row's steps
//! in their order. Results must be bit-identical to the reference evaluator on the JIT (with
//! every pass), the IR interpreter and the C backend, for row counts that leave rows over,
//! inner lengths around the shortest that is jammed, the NaN/zero re-run of IEEE products,
//! integer and `min` reductions, and masks of several formats; a read that leaves its tensor
//! must fail alike everywhere.

mod common;

use common::rows::{bits, faults};
use common::{fmt, formats_of, parse, run_eval, runners_full};
use std::collections::BTreeMap;
use tessera::ir::{Kernel, Stmt};
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// Whether the kernel holds a jammed row loop (the pass's comment marks it).
fn jammed(k: &Kernel) -> bool {
    fn walk(stmts: &[Stmt]) -> bool {
        stmts.iter().any(|s| match s {
            Stmt::Comment(c) => c.contains("rows jammed"),
            _ => s.bodies().iter().any(|b| walk(b)),
        })
    }
    walk(&k.body)
}

/// Deterministic values in [-1, 1), with zeros, a NaN and infinities when `special`.
fn values(n: usize, seed: u64, special: bool) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|k| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let v = (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
            match (special, k % 11) {
                (true, 3) => 0.0,
                (true, 5) if k % 3 == 0 => f64::NAN,
                (true, 7) if k % 5 == 0 => f64::INFINITY,
                (true, 9) => -0.0,
                _ => v,
            }
        })
        .collect()
}

fn dense(shape: &[usize], v: Vec<f64>) -> Tensor {
    let f = fmt(if shape.len() == 1 {
        "Dense(Element(0.0))"
    } else {
        "Dense(Dense(Element(0.0)))"
    });
    Tensor::from_dense(&f, shape, &Buffer::from(v)).unwrap()
}

/// Runs `p` on every backend, each output's bits equal to the evaluator's; returns whether
/// the C kernel was jammed.
fn agree(p: &str, t: &BTreeMap<String, Tensor>, outs: &[&str], what: &str) -> bool {
    let p = parse(p);
    let want = run_eval(&p, t).unwrap();
    let mut c_jammed = false;
    for (name, runner) in runners_full() {
        let c = runner.compile(&p, &formats_of(t)).unwrap();
        if name == "c" {
            c_jammed = jammed(&c.ir);
        }
        let mut got = t.clone();
        runner
            .execute(&c, &mut got)
            .unwrap_or_else(|e| panic!("{name} {what}: {e}"));
        for o in outs {
            assert_eq!(
                bits(&got[*o].to_dense()),
                bits(&want[*o]),
                "{name} {what}: {o}"
            );
        }
    }
    c_jammed
}

const GEMV: &str = "y .= 0.0\nfor i = _, k = _\n  y[i] += A[i, k] * x[k]\nend\n";

#[test]
fn dense_matrix_vector_rows_are_jammed_and_bit_identical() {
    for rows in [1, 2, 3, 4, 5, 7, 9, 13] {
        for cols in [1, 7, 8, 9, 33] {
            for special in [false, true] {
                let seed = (rows * 100 + cols) as u64;
                let t = BTreeMap::from([
                    (
                        "A".to_string(),
                        dense(&[rows, cols], values(rows * cols, seed, special)),
                    ),
                    (
                        "x".to_string(),
                        dense(&[cols], values(cols, seed + 1, special)),
                    ),
                    ("y".to_string(), dense(&[rows], vec![0.0; rows])),
                ]);
                let what = format!("{rows} x {cols} special {special}");
                let j = agree(GEMV, &t, &["y"], &what);
                // The pass must really apply where a group is whole and the rows long,
                // or this test checks nothing of it.
                if rows >= 4 && cols >= 8 {
                    assert!(j, "{what}: not jammed");
                }
            }
        }
    }
}

#[test]
fn matrix_products_and_masked_scores_keep_every_elements_sum() {
    // C = A Bᵀ with the reduction innermost: the loop over j is jammed.
    let (n, m, d) = (6, 11, 17);
    let t = BTreeMap::from([
        ("A".to_string(), dense(&[n, d], values(n * d, 1, true))),
        ("B".to_string(), dense(&[m, d], values(m * d, 2, false))),
        ("y".to_string(), dense(&[n, m], vec![0.0; n * m])),
    ]);
    let gemm = "y .= 0.0\nfor i = _, j = _, k = _\n  y[i, j] += A[i, k] * B[j, k]\nend\n";
    assert!(agree(gemm, &t, &["y"], "gemm"));
    // C = A B: the inner loop reads B's column, one row of B (m elements) a step.
    let t = BTreeMap::from([
        ("A".to_string(), dense(&[n, d], values(n * d, 5, false))),
        ("B".to_string(), dense(&[d, m], values(d * m, 6, true))),
        ("y".to_string(), dense(&[n, m], vec![0.0; n * m])),
    ]);
    let strided = "y .= 0.0\nfor i = _, j = _, k = _\n  y[i, j] += A[i, k] * B[k, j]\nend\n";
    assert!(agree(strided, &t, &["y"], "strided gemm"));
    // Attention's scores on a mask's pattern (band, CSR, dense), written into a dense output.
    let n = 23;
    let mut mask = vec![0.0; n * n];
    for i in 0..n {
        for j in i.saturating_sub(6)..(i + 7).min(n) {
            mask[i * n + j] = 1.0 + (i % 3) as f64;
        }
    }
    for f in [
        "Dense(SparseBand(Element(0.0)))",
        "Dense(SparseList(Element(0.0)))",
        "Dense(Dense(Element(0.0)))",
    ] {
        let t = BTreeMap::from([
            (
                "M".to_string(),
                Tensor::from_dense(&fmt(f), &[n, n], &Buffer::from(mask.clone())).unwrap(),
            ),
            ("Q".to_string(), dense(&[n, d], values(n * d, 3, false))),
            ("K".to_string(), dense(&[n, d], values(n * d, 4, true))),
            ("y".to_string(), dense(&[n, n], vec![0.0; n * n])),
        ]);
        let scores =
            "y .= 0.0\nfor i = _, j = _, f = _\n  y[i, j] += M[i, j] * Q[i, f] * K[j, f]\nend\n";
        let j = agree(scores, &t, &["y"], f);
        // CSR's rows are its stored positions, whose columns are loaded: the pass does not
        // prove that they write different elements, and leaves them.
        assert_eq!(j, !f.contains("SparseList"), "{f}");
    }
}

#[test]
fn several_chains_integers_and_minimums() {
    let (n, m) = (10, 12);
    let t = BTreeMap::from([
        ("A".to_string(), dense(&[n, m], values(n * m, 7, true))),
        ("x".to_string(), dense(&[m], values(m, 8, false))),
        ("y".to_string(), dense(&[n], vec![0.0; n])),
        ("z".to_string(), dense(&[n], vec![0.0; n])),
    ]);
    let two = "y .= 0.0\nz .= 0.0\nfor i = _, k = _\n  y[i] += A[i, k] * x[k]\n  z[i] += A[i, k] - x[k]\nend\n";
    assert!(agree(two, &t, &["y", "z"], "two sums"));
    let least = "y .= Inf\nfor i = _, k = _\n  y[i] <<min>>= A[i, k] + x[k]\nend\n";
    agree(least, &t, &["y"], "min");
    let ints = |shape: &[usize], seed: u64| {
        let len = shape.iter().product();
        let v: Vec<i64> = values(len, seed, false)
            .iter()
            .map(|v| (v * 1000.0) as i64)
            .collect();
        let f = if shape.len() == 1 {
            "Dense(Element(0))"
        } else {
            "Dense(Dense(Element(0)))"
        };
        Tensor::from_dense(&fmt(f), shape, &Buffer::from(v)).unwrap()
    };
    let t = BTreeMap::from([
        ("A".to_string(), ints(&[n, m], 9)),
        ("x".to_string(), ints(&[m], 10)),
        ("y".to_string(), ints(&[n], 11)),
    ]);
    agree(
        "y .= 0\nfor i = _, k = _\n  y[i] += A[i, k] * x[k]\nend\n",
        &t,
        &["y"],
        "integers",
    );
}

#[test]
fn writes_after_the_inner_loop_keep_their_order() {
    // z[I[i]] (duplicates in I) is written after each row's chain and read by nothing
    // before it: the rows are jammed, and the scattered sums keep their row order (the
    // language itself refuses a loop that reads what it scatters into).
    let (n, m) = (11, 9);
    let idx: Vec<i64> = (0..n as i64).map(|i| (i * 3) % 4).collect();
    let t = BTreeMap::from([
        ("A".to_string(), dense(&[n, m], values(n * m, 21, true))),
        ("x".to_string(), dense(&[m], values(m, 22, false))),
        (
            "I".to_string(),
            Tensor::from_dense(&fmt("Dense(Element(0))"), &[n], &Buffer::from(idx)).unwrap(),
        ),
        ("y".to_string(), dense(&[n], vec![0.0; n])),
        ("z".to_string(), dense(&[4], vec![0.0; 4])),
    ]);
    let p = "y .= 0.0\nz .= 0.0\nfor i = _\n  for k = _\n    y[i] += A[i, k] * x[k]\n  end\n  z[I[i]] += A[i, 0] * 0.5\nend\n";
    assert!(agree(p, &t, &["y", "z"], "scatter after the chain"));
    // A bad scatter index in row 6 (a jammed group's third row) fails as row by row.
    let mut bad = t.clone();
    let mut idx: Vec<i64> = (0..n as i64).map(|i| (i * 3) % 4).collect();
    idx[6] = 9;
    bad.insert(
        "I".to_string(),
        Tensor::from_dense(&fmt("Dense(Element(0))"), &[n], &Buffer::from(idx)).unwrap(),
    );
    let msgs = faults(&parse(p), &bad, runners_full());
    for m in &msgs {
        assert!(m.contains("`z`"), "{m}");
        assert_eq!(
            m.split_once(": ").unwrap().1,
            msgs[0].split_once(": ").unwrap().1
        );
    }
}

#[test]
fn gathers_and_shared_sums_are_not_jammed() {
    let (n, m) = (8, 16);
    let idx: Vec<i64> = (0..m as i64).map(|k| (k * 5) % m as i64).collect();
    let t = BTreeMap::from([
        ("A".to_string(), dense(&[n, m], values(n * m, 12, false))),
        ("x".to_string(), dense(&[m], values(m, 13, false))),
        (
            "I".to_string(),
            Tensor::from_dense(&fmt("Dense(Element(0))"), &[m], &Buffer::from(idx)).unwrap(),
        ),
        ("y".to_string(), dense(&[n], vec![0.0; n])),
        (
            "s".to_string(),
            Tensor::empty(&fmt("Element(0.0)"), &[]).unwrap(),
        ),
    ]);
    // A gather through a loaded index: its bounds cannot be tested before the group.
    let gather = "y .= 0.0\nfor i = _, k = _\n  y[i] += A[i, k] * x[I[k]]\nend\n";
    assert!(!agree(gather, &t, &["y"], "gather"));
    // One accumulator for every row: jamming would reorder its sum.
    let shared = "s .= 0.0\nfor i = _, k = _\n  s[] += A[i, k] * x[k]\nend\n";
    assert!(!agree(shared, &t, &["s"], "shared sum"));
}

#[test]
fn a_shifted_read_past_its_buffer_fails_alike_everywhere() {
    // x[i + k] leaves x (length 20) from row 4 on (k runs to 16): every backend reports
    // the same error, naming `x`, as the evaluator does.
    let (n, m) = (9, 17);
    let t = BTreeMap::from([
        ("A".to_string(), dense(&[n, m], values(n * m, 14, false))),
        ("x".to_string(), dense(&[20], values(20, 15, false))),
        ("y".to_string(), dense(&[n], vec![0.0; n])),
    ]);
    let p = parse("y .= 0.0\nfor i = _, k = _\n  y[i] += A[i, k] * x[i + k]\nend\n");
    let want = run_eval(&p, &t)
        .expect_err("the evaluator must fail")
        .to_string();
    assert!(want.contains("`x`"), "{want}");
    let msgs = faults(&p, &t, runners_full());
    let first = msgs[0].split_once(": ").unwrap().1;
    for m in &msgs {
        assert!(m.contains("`x`"), "{m}");
        assert_eq!(m.split_once(": ").unwrap().1, first, "{msgs:?}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

    /// Random shapes of C = A B (rows left over, short and long inner loops), every
    /// backend against the evaluator's bits.
    #[test]
    fn random_products_keep_every_elements_sum(
        n in 0usize..9,
        m in 1usize..14,
        d in 0usize..20,
        seed in 1u64..1000,
        special in proptest::prelude::any::<bool>(),
    ) {
        let t = BTreeMap::from([
            ("A".to_string(), dense(&[n, d], values(n * d, seed, special))),
            ("B".to_string(), dense(&[d, m], values(d * m, seed + 1, false))),
            ("y".to_string(), dense(&[n, m], vec![0.0; n * m])),
        ]);
        let p = "y .= 0.0\nfor i = _, j = _, k = _\n  y[i, j] += A[i, k] * B[k, j]\nend\n";
        agree(p, &t, &["y"], &format!("{n} x {d} x {m} seed {seed}"));
    }
}
