//! Row interleaving (issue 18, `ir::interleave`): SpMV's rows walked two at a time, each
//! row's entries summed in their stored order. Results must be bit-identical to the reference
//! evaluator (which sums each row in column order, as the kernel did before) on the JIT, the
//! IR interpreter and the C backend, in every row-major format, for row-length patterns that
//! exercise the jammed loop, the tails, the rows that fall back to running alone (empty and
//! short rows), odd row counts, and the NaN/zero re-run of IEEE products. Coordinates nobody
//! vouches for must still fail with the error naming the tensor at the first bad access.

mod common;

use common::rows::{
    COLS, all_foreign, assert_first_bad_gather, bits, faults, foreign, marked, matrix,
    spmv_tensors as tensors, vector, y_agrees, y_agrees_marked,
};
use common::{fmt, formats_of, parse, run_eval, runners_full};
use proptest::prelude::*;
use tessera::ir::{Kernel, Stmt};
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";

/// Row-major formats of A (the first level indexes the rows).
const FORMATS: &[&str] = &[
    "Dense(SparseList(Element(0.0)))",
    "Dense(SparseList(Element(0.0), coord=i32))",
    "SparseList(SparseList(Element(0.0)))",
    "Dense(SparseBand(Element(0.0)))",
    "Dense(SparseBlockList(Element(0.0)))",
    "Dense(SparseList(Pattern()))",
];

/// Whether the kernel holds an interleaved row loop (the pass's comment marks it).
fn interleaved(k: &Kernel) -> bool {
    marked(k, "rows at a time")
}

/// Every backend gives the evaluator's bits; returns whether the CSR kernel was interleaved.
fn agree(format: &str, lengths: &[usize], seed: u64, special: bool) -> bool {
    y_agrees_marked(
        &parse(SPMV),
        (format, lengths, seed, special),
        runners_full(),
        "rows at a time",
    )
}

/// Row-length patterns: odd and even row counts (1, 2, 3, 5), empty and one-entry rows,
/// rows around the length below which rows run alone, one huge row among empty ones, and
/// pairs whose longer row is either one. All but the first three average at least
/// `ir::interleave::MIN_AVERAGE` entries a row, so the interleaved loop runs; the first
/// three take the original loop.
fn patterns() -> Vec<Vec<usize>> {
    vec![
        vec![9],
        vec![0],
        vec![1, 0, 9, 40, 7],
        vec![40],
        vec![12, 60],
        vec![60, 12],
        vec![40, 40, 40],
        vec![1, 0, 90, 40, 70],
        vec![0, 0, 211, 0, 0, 0],
        vec![211, 0, 0, 0, 0],
        vec![0, 0, 0, 0, 211],
        vec![7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 211, 211],
        vec![20, 1, 20, 0, 20, 1, 33, 50, 9, 8, 64, 200, 99],
        (0..41).map(|i| (i * 37) % 97).collect(),
    ]
}

#[test]
fn interleaved_spmv_is_bit_identical_to_the_evaluator() {
    for f in FORMATS {
        for (k, lengths) in patterns().iter().enumerate() {
            for special in [false, true] {
                let shaped = agree(f, lengths, k as u64 + 1, special);
                // The pass must really apply to CSR, or this test checks nothing of it.
                if f.starts_with("Dense(SparseList(Element") && lengths.len() >= 2 {
                    assert!(shaped, "{f}: CSR SpMV was not interleaved");
                }
            }
        }
    }
}

#[test]
fn a_sum_over_all_rows_is_not_interleaved() {
    // One accumulator for every row: interleaving would reorder its sum.
    let p = parse("s .= 0\nfor i = _, j = _\n  s[] += A[i, j] * x[j]\nend\n");
    let lengths = [20, 30, 40, 50];
    let mut t = tensors(matrix(FORMATS[0], &lengths, 3, false), vector(3, false));
    t.remove("y");
    t.insert(
        "s".to_string(),
        Tensor::empty(&fmt("Element(0.0)"), &[]).unwrap(),
    );
    let want = run_eval(&p, &t).unwrap();
    for (name, runner) in runners_full() {
        let c = runner.compile(&p, &formats_of(&t)).unwrap();
        assert!(!interleaved(&c.ir), "{name}: a shared sum was interleaved");
        let mut got = t.clone();
        runner.execute(&c, &mut got).unwrap();
        assert_eq!(bits(&got["s"].to_dense()), bits(&want["s"]), "{name}");
    }
}

/// Rows whose entries span more than `MAX_BYTES` stream from memory, where two rows' four
/// streams ran slower than one row's two: the guard caps the entries at `MAX_BYTES` over the
/// bytes an entry reads at its position (coordinate and value: 4 + 8 with `coord=i32`, 8 + 8,
/// a pattern's coordinate alone 8), so the cap is the same size in bytes for every format.
#[test]
fn the_interleave_is_capped_by_the_bytes_its_rows_stream() {
    use tessera::ir::interleave::MAX_BYTES;
    fn constants(stmts: &[Stmt], out: &mut Vec<i64>) {
        for s in stmts {
            for e in s.own_exprs() {
                e.visit(&mut |x| {
                    if let tessera::ir::Expr::Const(Scalar::I64(v)) = x {
                        out.push(*v);
                    }
                });
            }
            for b in s.bodies() {
                constants(b, out);
            }
        }
    }
    let p = parse(SPMV);
    for (f, bytes) in [
        ("Dense(SparseList(Element(0.0), coord=i32))", 12),
        ("Dense(SparseList(Element(0.0)))", 16),
        ("Dense(SparseList(Pattern()))", 8),
    ] {
        let t = tensors(matrix(f, &[40, 40, 40], 1, false), vector(1, false));
        let full =
            tessera::run::Runner::new(Box::new(tessera::backend::Jit::new().with_full_passes()));
        let c = full.compile(&p, &formats_of(&t)).unwrap();
        assert!(interleaved(&c.ir), "{f}: not interleaved");
        let mut found = vec![];
        constants(&c.ir.body, &mut found);
        assert!(
            found.contains(&(MAX_BYTES / bytes)),
            "{f}: no cap of {} entries in {found:?}",
            MAX_BYTES / bytes
        );
    }
}

/// The error of a run on `a` (whose coordinates nobody vouches for) on every backend.
fn failures(a: &Tensor, x: &Tensor) -> Vec<String> {
    faults(&parse(SPMV), &tensors(a.clone(), x.clone()), runners_full())
}

#[test]
fn unvouched_coordinates_fail_at_the_first_bad_access_in_row_order() {
    // Rows long enough to be interleaved; row 0's last entry and row 2's (the partner of
    // row 0 when rows 0..4 are split in halves) first entry point past x. Row by row, the
    // first out-of-bounds access is row 0's, and so must the reported index be.
    let lengths = [40, 40, 40, 40];
    let mut a = matrix(FORMATS[0], &lengths, 5, false);
    let first = COLS as i64 + 1000;
    let second = COLS as i64 + 2000;
    a.levels[1][1].set(39, Scalar::I64(first));
    a.levels[1][1].set(80, Scalar::I64(second));
    assert_eq!(a.levels[1][1].below(), None);
    for msg in failures(&a, &vector(5, false)) {
        assert_first_bad_gather(&msg, first);
        assert!(!msg.contains(&second.to_string()), "{msg}");
    }
    // A shape narrowed under checked coordinates: x is shorter than their bound, so no row
    // is interleaved and the first column past x, in row order, is reported.
    let mut narrow = matrix(FORMATS[0], &lengths, 6, false);
    narrow.shape[1] = 100;
    let x = Tensor::from_dense(
        &fmt("Dense(Element(0.0))"),
        &[100],
        &Buffer::from(vec![1.0; 100]),
    )
    .unwrap();
    let mut first_bad = None;
    narrow.for_each_stored(&mut |c, _| {
        if first_bad.is_none() && c[1] >= 100 {
            first_bad = Some(c[1]);
        }
    });
    let first_bad = first_bad.unwrap();
    for msg in failures(&narrow, &x) {
        assert!(msg.contains(&first_bad.to_string()), "{first_bad}: {msg}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Random row-length patterns, CSR, every backend against the evaluator's bits.
    #[test]
    fn random_row_lengths_keep_every_rows_sum(
        lengths in proptest::collection::vec(
            prop_oneof![3 => 0usize..4, 4 => 4usize..24, 3 => 24usize..200],
            1..24,
        ),
        seed in 1u64..1000,
        special in any::<bool>(),
    ) {
        agree(FORMATS[0], &lengths, seed, special);
    }
}

/// Whether the kernel holds the row loop of adjacent rows with tested gathers (for
/// coordinates nobody vouches for, such as SciPy's arrays shared zero-copy).
fn checked_groups(k: &Kernel) -> bool {
    fn walk(stmts: &[Stmt]) -> bool {
        stmts.iter().any(|s| match s {
            Stmt::Comment(c) => c.contains("adjacent rows at a time"),
            _ => s.bodies().iter().any(|b| walk(b)),
        })
    }
    walk(&k.body)
}

/// A's arrays as foreign memory (`tessera.asarray` of a SciPy matrix): no bound is known for
/// its coordinates, so the groups test every gather; every backend keeps the evaluator's
/// bits, row lengths 0-211, 4- and 8-byte indices, every row-major format.
#[test]
fn foreign_coordinates_are_interleaved_bit_identically() {
    let p = parse(SPMV);
    for f in FORMATS {
        for (k, lengths) in patterns().iter().enumerate() {
            for special in [false, true] {
                let seed = k as u64 + 11;
                let a = all_foreign(&matrix(f, lengths, seed, special));
                let t = tensors(a, vector(seed, special));
                let what = format!("foreign {f} rows {lengths:?} special {special}");
                let mut shaped = false;
                y_agrees(&p, &t, runners_full(), &what, &mut |_, c| {
                    shaped |= checked_groups(&c.ir)
                });
                if f.starts_with("Dense(SparseList(Element") && lengths.len() >= 2 {
                    assert!(shaped, "{what}: no checked groups");
                }
            }
        }
    }
}

/// A row-major matrix whose rows average more than `MIN_AVERAGE` entries, so the groups run.
const LONG_ROWS: [usize; 7] = [40, 35, 0, 50, 33, 41, 60];

/// One bad coordinate at every position of every row (and with it, a second bad one in the
/// next row's first entries, which a jammed loop meets first): on every backend, the same
/// error as the original loop's (the first bad index in row order) and the same writes (the
/// rows before the bad one, nothing after), with A's coordinates foreign or owned unchecked.
#[test]
fn a_bad_coordinate_faults_as_the_original_loop() {
    let p = parse(SPMV);
    let x = vector(4, false);
    let good = matrix(FORMATS[1], &LONG_ROWS, 4, false);
    let want = run_eval(&p, &tensors(good.clone(), x.clone())).unwrap()["y"].clone();
    let starts: Vec<usize> = LONG_ROWS
        .iter()
        .scan(0, |s, &n| {
            *s += n;
            Some(*s - n)
        })
        .collect();
    let sentinel = 7.25;
    let kernels: Vec<_> = runners_full()
        .into_iter()
        .map(|(name, runner)| {
            let c = runner
                .compile(&p, &formats_of(&tensors(good.clone(), x.clone())))
                .unwrap();
            // The default JIT is a first tier, compiled without interleaving.
            assert!(name == "jit" || checked_groups(&c.ir), "{name}");
            (name, runner, c)
        })
        .collect();
    for (row, &len) in LONG_ROWS.iter().enumerate() {
        for at in 0..len {
            for second in [false, true] {
                let mut a = good.clone();
                let first = COLS as i64 + 1000 + at as i64;
                a.levels[1][1].set(starts[row] + at, Scalar::I64(first));
                let next = (row + 1..LONG_ROWS.len()).find(|&r| LONG_ROWS[r] > 0);
                if let (true, Some(r)) = (second, next) {
                    a.levels[1][1].set(starts[r], Scalar::I64(-5));
                }
                a.levels[1][1] = foreign(&a.levels[1][1]);
                let mut t = tensors(a, x.clone());
                let y = Buffer::from(vec![sentinel; LONG_ROWS.len()]);
                t.insert(
                    "y".to_string(),
                    Tensor::from_dense(&fmt("Dense(Element(0.0))"), &[LONG_ROWS.len()], &y)
                        .unwrap(),
                );
                for (name, runner, c) in &kernels {
                    let what = format!("{name} row {row} entry {at} second {second}");
                    let mut got = t.clone();
                    let e = runner.execute(c, &mut got).expect_err(&what);
                    assert_first_bad_gather(&e.to_string(), first);
                    let y = got["y"].to_dense();
                    for r in 0..LONG_ROWS.len() {
                        let v = y.get(r).as_f64();
                        if r < row {
                            assert_eq!(
                                v.to_bits(),
                                want.get(r).as_f64().to_bits(),
                                "{what} y[{r}]"
                            );
                        } else {
                            assert_eq!(v, sentinel, "{what}: y[{r}] written");
                        }
                    }
                }
            }
        }
    }
}
