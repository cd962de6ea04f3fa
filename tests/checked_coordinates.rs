//! Checked coordinates (issue 18, "validated structure"): the coordinate arrays of tensors
//! Tessera builds, loads or converts carry a checked bound (`Buffer::below`), dropped by any
//! change to them; kernels gather through such arrays (`x[j]`, `j` a stored column index)
//! without bounds checks. The results must equal the reference evaluator's on the JIT, the C
//! backend and the interpreter, in every format with coordinate arrays, and an array changed
//! after its check, or a tensor whose shape was changed under it, must still fail with an
//! out-of-bounds error rather than read outside a buffer.

mod common;

use common::rows::all_foreign;
use common::{fmt, formats_of, parse, run_eval, runners};
use std::collections::BTreeMap;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

const N: usize = 37;
const M: usize = 29;

const FORMATS: [&str; 5] = [
    "Dense(SparseList(Element(0.0)))",
    "Dense(SparseList(Element(0.0), coord=i32))",
    "SparseCOO{2}(Element(0.0))",
    "SparseList(SparseList(Element(0.0)))",
    "SparseList(Dense(Element(0.0)))",
];

fn matrix(format: &str, rows: usize, cols: usize, salt: usize) -> Tensor {
    let mut coords = vec![vec![], vec![]];
    let mut vals = vec![];
    for i in 0..rows {
        // An empty row, a full one, and scattered entries elsewhere.
        if i == 3 {
            continue;
        }
        for j in 0..cols {
            if i == 5 || (i * 7 + j * 3 + salt).is_multiple_of(5) || j + 1 == cols {
                coords[0].push(i as i64);
                coords[1].push(j as i64);
                vals.push(((i * 5 + j + salt) % 9) as f64 - 3.5);
            }
        }
    }
    Tensor::from_coo(
        &fmt(format),
        &[rows, cols],
        &coords,
        &Buffer::from(vals),
        |_, b| b,
    )
    .unwrap()
}

fn dense(shape: &[usize], shift: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|k| ((k * 3 + shift) % 7) as f64 - 2.25)
        .collect();
    let f = format!(
        "{}Element(0.0){}",
        "Dense(".repeat(shape.len()),
        ")".repeat(shape.len())
    );
    Tensor::from_dense(&fmt(&f), shape, &Buffer::from(v)).unwrap()
}

/// The bounds recorded on each array of `t`.
fn bounds(t: &Tensor) -> Vec<Option<u64>> {
    t.levels.iter().flatten().map(Buffer::below).collect()
}

fn agree_everywhere(program: &str, tensors: &BTreeMap<String, Tensor>) {
    let p = parse(program);
    let want = run_eval(&p, tensors).unwrap_or_else(|e| panic!("{e}\n{program}"));
    for (name, runner) in runners() {
        let mut got = tensors.clone();
        let c = runner
            .compile(&p, &formats_of(&got))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
        // Twice: the second run reads the same checked arrays again.
        for _ in 0..2 {
            let mut run = got.clone();
            runner
                .execute(&c, &mut run)
                .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
            for (n, t) in &run {
                assert_eq!(t.to_dense(), want[n], "{name}: {n} in\n{program}");
            }
            got = run;
        }
    }
}

#[test]
fn built_tensors_record_their_coordinate_bounds_until_changed() {
    let csr = matrix(FORMATS[0], N, M, 1);
    // ptr, idx, val: the column indices are coordinates, the row pointers positions in
    // `0..=nnz`.
    let nnz = csr.levels[1][1].len() as u64;
    assert_eq!(bounds(&csr), vec![Some(nnz + 1), Some(M as u64), None]);
    let coo = matrix(FORMATS[2], N, M, 1);
    assert_eq!(
        bounds(&coo)[1..3],
        [Some(N as u64), Some(M as u64)],
        "each COO coordinate array is bounded by its own dimension"
    );
    let converted = csr.to_format(&fmt(FORMATS[1])).unwrap();
    assert_eq!(bounds(&converted)[1], Some(M as u64));

    // A clone holds the same elements, and sharing moves none.
    let mut t = csr.clone();
    t.share();
    assert_eq!(bounds(&t)[1], Some(M as u64));
    // Any change drops the bound: a write, a shortening, a push.
    let mut w = t.clone();
    w.levels[1][1].set(0, Scalar::I64(2));
    assert_eq!(bounds(&w)[1], None);
    let mut s = t.clone();
    let n = s.levels[1][1].len();
    s.levels[1][1].truncate(n - 1);
    assert_eq!(bounds(&s)[1], None);
    let mut p = t.clone();
    p.levels[1][1].push(Scalar::I64(0));
    assert_eq!(bounds(&p)[1], None);
    // An array made from raw elements has no bound until checked.
    let mut raw = csr.clone();
    raw.levels[1][1] = Buffer::from(csr.levels[1][1].as_i64().unwrap().to_vec());
    assert_eq!(bounds(&raw)[1], None);
    let mut marked = csr.clone();
    marked.unmark();
    assert_eq!(bounds(&marked)[1], None);
    marked.mark_coordinates();
    assert_eq!(bounds(&marked)[1], Some(M as u64));
}

#[test]
fn gathers_through_checked_coordinates_agree_with_the_evaluator() {
    for format in FORMATS {
        let a = matrix(format, N, M, 2);
        // Row-major SpMV: `x[j]` gathered through A's column indices.
        let t = BTreeMap::from([
            ("A".to_string(), a.clone()),
            ("x".to_string(), dense(&[M], 1)),
            ("y".to_string(), dense(&[N], 0)),
        ]);
        agree_everywhere(
            "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n",
            &t,
        );
        // Transposed SpMV: a store through the gathered index, `y[j] += ...`.
        let t = BTreeMap::from([
            ("A".to_string(), a.clone()),
            ("x".to_string(), dense(&[N], 2)),
            ("y".to_string(), dense(&[M], 0)),
        ]);
        agree_everywhere(
            "y .= 0\nfor i = _, j = _\n  y[j] += A[i, j] * x[i]\nend\n",
            &t,
        );
        // A gather into the rows of a matrix (`Y[t, j]`, row `t`'s start kept by the loop
        // over A's entries), as Bellman-Ford's owned rounds relax into their part of `D`.
        let t = BTreeMap::from([
            ("A".to_string(), a.clone()),
            ("x".to_string(), dense(&[3], 2)),
            ("Y".to_string(), dense(&[3, M], 0)),
        ]);
        agree_everywhere(
            "Y .= 0\nfor t = _, i = _, j = _\n  Y[t, j] += A[i, j] * x[t]\nend\n",
            &t,
        );
        // SpMM with a dense right-hand side: rows of B selected by A's columns.
        let t = BTreeMap::from([
            ("A".to_string(), a),
            ("B".to_string(), dense(&[M, 4], 3)),
            ("C".to_string(), dense(&[N, 4], 0)),
        ]);
        agree_everywhere(
            "C .= 0\nfor i = _, j = _, k = _\n  C[i, k] += A[i, j] * B[j, k]\nend\n",
            &t,
        );
    }
    // Gustavson's SpGEMM: a root byte-map workspace row indexed by B's checked columns (its
    // table and values are gathers), copied out into a sparse C.
    for (fa, fb) in [(FORMATS[0], FORMATS[0]), (FORMATS[1], FORMATS[0])] {
        let t = BTreeMap::from([
            ("A".to_string(), matrix(fa, N, M, 4)),
            ("B".to_string(), matrix(fb, M, N, 5)),
            (
                "C".to_string(),
                Tensor::empty(&fmt("Dense(SparseList(Element(0.0)))"), &[N, N]).unwrap(),
            ),
            (
                "w".to_string(),
                Tensor::empty(&fmt("SparseByteMap(Element(0.0))"), &[N]).unwrap(),
            ),
        ]);
        agree_everywhere(
            "C .= 0\nfor i = _\n  w .= 0\n  for k = _, j = _\n    w[j] += A[i, k] * B[k, j]\n  \
             end\n  for j = _\n    C[i, j] = w[j]\n  end\nend\n",
            &t,
        );
    }
}

/// Run `program` on `tensors` on every backend; every run must fail with an out-of-bounds
/// error.
fn fails_everywhere(program: &str, tensors: &BTreeMap<String, Tensor>, what: &str) {
    let p = parse(program);
    for (name, runner) in runners() {
        let mut t = tensors.clone();
        let c = runner.compile(&p, &formats_of(&t)).unwrap();
        let e = runner
            .execute(&c, &mut t)
            .expect_err(&format!("{name}: {what} must fail"));
        let msg = e.to_string();
        assert!(
            msg.contains("out of bounds") || msg.contains("outside"),
            "{name}: {what}: {msg}"
        );
    }
}

/// SpMV on every backend must fail with an out-of-bounds error.
fn spmv_fails(a: &Tensor, x: &Tensor, what: &str) {
    let t = BTreeMap::from([
        ("A".to_string(), a.clone()),
        ("x".to_string(), x.clone()),
        ("y".to_string(), dense(&[a.shape[0]], 0)),
    ]);
    fails_everywhere(SPMV, &t, what);
}

#[test]
fn a_changed_array_or_shape_is_checked_at_every_access() {
    let csr = matrix(FORMATS[0], N, M, 3);
    // A column index changed after the check: the bound is gone, the gather is checked.
    let mut bad = csr.clone();
    bad.levels[1][1].set(4, Scalar::I64(M as i64 + 1000));
    assert_eq!(bad.levels[1][1].below(), None);
    spmv_fails(&bad, &dense(&[M], 0), "a column index past x");
    // A shape narrowed under the arrays: the recorded bound (M) exceeds x's length, so the
    // versioned test fails and the checked loop reports the first column index past x.
    let mut narrow = csr.clone();
    narrow.shape[1] = 3;
    assert_eq!(narrow.levels[1][1].below(), Some(M as u64));
    spmv_fails(&narrow, &dense(&[3], 0), "a narrowed shape");
}

/// A column index changed after its check fails at the gather into a row of `Y` on every
/// backend (the versioned test of the row's range sends the loop to its checked copy).
#[test]
fn a_changed_index_into_a_matrix_row_is_checked() {
    let mut bad = matrix(FORMATS[0], N, M, 3);
    bad.levels[1][1].set(4, Scalar::I64(3 * M as i64 + 7));
    assert_eq!(bad.levels[1][1].below(), None);
    let t = BTreeMap::from([
        ("A".to_string(), bad),
        ("x".to_string(), dense(&[3], 2)),
        ("Y".to_string(), dense(&[3, M], 0)),
    ]);
    fails_everywhere(
        "for t = _, i = _, j = _\n  Y[t, j] += A[i, j] * x[t]\nend\n",
        &t,
        "an index past Y",
    );
}

#[test]
fn a_tensor_a_kernel_writes_keeps_no_bound() {
    let a = matrix(FORMATS[0], N, M, 4);
    let p = parse("A .= 0\nfor i = _, j = _\n  A[i, j] = B[i, j] * 2\nend\n");
    for (name, runner) in runners() {
        let mut t = BTreeMap::from([("A".to_string(), a.clone()), ("B".to_string(), a.clone())]);
        let c = runner.compile(&p, &formats_of(&t)).unwrap();
        runner.execute(&c, &mut t).unwrap();
        assert_eq!(t["A"].levels[1][1].below(), None, "{name}: the output");
        assert_eq!(
            t["B"].levels[1][1].below(),
            Some(M as u64),
            "{name}: an input keeps its bound"
        );
    }
}

/// What a hostile caller may do to a tensor's arrays and shape between runs.
#[derive(Clone, Debug)]
enum Change {
    /// Overwrite one column index (any value, also far outside the shape).
    Set(usize, i64),
    /// Append a column index past the last row's entries.
    Push(i64),
    /// Drop the last column indices.
    Truncate(usize),
    /// Change the number of columns the shape claims (`x` follows it).
    Columns(usize),
    /// Replace the index array by a raw copy (which carries no bound).
    Raw,
    /// Clone the tensor and share its arrays (bounds travel with the elements).
    Share,
    /// Check the coordinates again (records a bound when they are in range).
    Mark,
    /// Overwrite one row pointer (any value: past the entries, negative, decreasing).
    SetPtr(usize, i64),
    /// Drop the last row pointers (fewer than the rows the shape claims).
    TruncatePtr(usize),
    /// Make every array foreign memory (no bounds; the row pointers read as checked copies).
    Foreign,
}

fn change() -> impl proptest::strategy::Strategy<Value = Change> {
    use proptest::prelude::*;
    let index = prop_oneof![
        -3i64..(M as i64 + 3),
        Just(i64::MAX),
        Just(i64::MIN),
        Just(1 << 40),
        Just(-(1 << 40))
    ];
    let ptr = prop_oneof![
        -3i64..(N as i64 * M as i64 + 3),
        Just(i64::MAX),
        Just(i64::MIN),
        Just(1 << 40)
    ];
    prop_oneof![
        (0usize..64, index.clone()).prop_map(|(k, v)| Change::Set(k, v)),
        index.prop_map(Change::Push),
        (1usize..4).prop_map(Change::Truncate),
        (1usize..(M + 8)).prop_map(Change::Columns),
        Just(Change::Raw),
        Just(Change::Share),
        Just(Change::Mark),
        (0usize..64, ptr).prop_map(|(k, v)| Change::SetPtr(k, v)),
        (1usize..4).prop_map(Change::TruncatePtr),
        Just(Change::Foreign),
    ]
}

fn apply(a: &mut Tensor, c: &Change) {
    if let Change::Foreign = c {
        *a = all_foreign(a);
        return;
    }
    let [ptr, idx, ..] = &mut a.levels[1][..] else {
        panic!("a CSR matrix has ptr, idx and val")
    };
    match *c {
        Change::Set(k, v) => {
            if !idx.is_empty() {
                let k = k % idx.len();
                idx.set(k, Scalar::I64(v));
            }
        }
        Change::Push(v) => idx.push(Scalar::I64(v)),
        Change::Truncate(k) => {
            let n = idx.len().saturating_sub(k);
            idx.truncate(n);
        }
        Change::SetPtr(k, v) => {
            let k = k % ptr.len();
            ptr.set(k, Scalar::I64(v));
        }
        Change::TruncatePtr(k) => {
            let n = ptr.len().saturating_sub(k);
            ptr.truncate(n);
        }
        Change::Columns(n) => a.shape[1] = n,
        Change::Raw => {
            let raw: Vec<i64> = (0..idx.len()).map(|k| idx.get(k).as_i64()).collect();
            *idx = Buffer::from(raw);
        }
        Change::Share => {
            let mut b = a.clone();
            b.share();
            *a = b;
        }
        Change::Mark => a.mark_coordinates(),
        Change::Foreign => unreachable!("applied above"),
    }
}

/// Hostile changes between runs never make a kernel read outside a buffer: every run either
/// fails with an error or, when the changed tensor is still valid, equals the evaluator. (An
/// unchecked gather through an index far outside `x` would crash the test process.)
#[test]
fn hostile_changes_never_escape_the_checks() {
    use proptest::test_runner::{Config, TestRunner};
    let program = parse("y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n");
    let backends = runners();
    let mut runner = TestRunner::new(Config {
        cases: 96,
        ..Config::default()
    });
    let strategy = proptest::collection::vec(change(), 1..6);
    runner
        .run(&strategy, |changes| {
            let mut a = matrix(FORMATS[0], N, M, 5);
            for c in &changes {
                apply(&mut a, c);
            }
            let cols = a.shape[1];
            let tensors = BTreeMap::from([
                ("A".to_string(), a.clone()),
                ("x".to_string(), dense(&[cols], 1)),
                ("y".to_string(), dense(&[N], 0)),
            ]);
            let want = match a.validate("A") {
                Ok(()) => Some(run_eval(&program, &tensors).unwrap()),
                Err(_) => None,
            };
            for (name, backend) in &backends {
                let mut got = tensors.clone();
                let ran = backend
                    .compile(&program, &formats_of(&got))
                    .and_then(|c| backend.execute(&c, &mut got));
                if let (Some(want), true) = (&want, ran.is_ok()) {
                    assert_eq!(got["y"].to_dense(), want["y"], "{name}: {changes:?}");
                }
                assert!(
                    want.is_none() || ran.is_ok(),
                    "{name}: a valid tensor failed: {:?} after {changes:?}",
                    ran.err()
                );
            }
            Ok(())
        })
        .unwrap();
}

const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";

/// Foreign position arrays (no bound of their own) are read as a private copy checked at each
/// run: the kernel's loops over a row's entries then run unchecked, on the JIT and the C
/// backend alike, with the evaluator's results, and the tensor keeps its foreign arrays.
#[test]
fn foreign_row_pointers_run_as_checked_copies() {
    let program = parse(SPMV);
    for format in [FORMATS[0], FORMATS[1], FORMATS[3]] {
        let owned = matrix(format, N, M, 6);
        let a = all_foreign(&owned);
        assert!(
            bounds(&a).iter().all(Option::is_none),
            "foreign memory carries no bound"
        );
        let tensors = BTreeMap::from([
            ("A".to_string(), a.clone()),
            ("x".to_string(), dense(&[M], 2)),
            ("y".to_string(), dense(&[N], 0)),
        ]);
        let want = run_eval(&program, &tensors).unwrap();
        let addresses: Vec<*const u8> = a.levels.iter().flatten().map(Buffer::as_ptr).collect();
        for (name, runner) in runners() {
            let c = runner.compile(&program, &formats_of(&tensors)).unwrap();
            // The printed kernel states the fact its versioned loops rest on.
            assert!(
                c.ir.to_string().contains("(checked positions)"),
                "{name} {format}:\n{}",
                c.ir
            );
            let mut got = tensors.clone();
            for round in 0..2 {
                runner.execute(&c, &mut got).unwrap();
                assert_eq!(
                    got["y"].to_dense(),
                    want["y"],
                    "{name} {format} run {round}"
                );
                // The kernel read checked copies of the row pointers: positive bounds, one
                // past the largest position, so the test of its versioned loops passes.
                let copied = runner.last_snapshots().copied;
                assert!(!copied.is_empty(), "{name} {format}: no snapshot");
                for (tensor, level, buf, below) in &copied {
                    let ptr = got["A"].levels[*level][*buf].to_scalars();
                    let largest = ptr.iter().map(|s| s.as_i64()).max().unwrap();
                    assert_eq!(tensor, "A");
                    assert_eq!(*below, Some(largest as u64 + 1), "{name} {format}");
                }
                if format == FORMATS[0] {
                    let nnz = owned.levels[1][1].len() as u64;
                    assert_eq!(copied, vec![("A".to_string(), 1, 0, Some(nnz + 1))]);
                }
                // Zero-copy kept: the tensor holds the same foreign memory, still unbounded.
                let after: Vec<*const u8> = got["A"]
                    .levels
                    .iter()
                    .flatten()
                    .map(Buffer::as_ptr)
                    .collect();
                assert_eq!(after, addresses, "{name} {format}");
                assert!(got["A"].levels.iter().flatten().all(Buffer::is_foreign));
                assert!(bounds(&got["A"]).iter().all(Option::is_none));
            }
            // Arrays with a bound of their own, or owned ones, are never copied.
            let mut mine = tensors.clone();
            mine.insert("A".to_string(), owned.clone());
            runner.execute(&c, &mut mine).unwrap();
            assert_eq!(mine["y"].to_dense(), want["y"], "{name} {format}");
            assert_eq!(runner.last_snapshots().copied, vec![], "{name} {format}");
        }
    }
}

/// A kernel that writes the matrix takes no snapshot of its row pointers: they change as it
/// runs (and its output is never foreign memory).
#[test]
fn a_written_tensor_is_never_snapshotted() {
    let b = all_foreign(&matrix(FORMATS[0], N, M, 7));
    let p = parse("A .= 0\nfor i = _, j = _\n  A[i, j] = B[i, j] * 2\nend\n");
    for (name, runner) in runners() {
        let mut t = BTreeMap::from([
            (
                "A".to_string(),
                Tensor::empty(&fmt(FORMATS[0]), &[N, M]).unwrap(),
            ),
            ("B".to_string(), b.clone()),
        ]);
        let c = runner.compile(&p, &formats_of(&t)).unwrap();
        runner.execute(&c, &mut t).unwrap();
        let copied = runner.last_snapshots().copied;
        assert!(copied.iter().all(|(t, ..)| t == "B"), "{name}: {copied:?}");
        assert_eq!(
            t["A"].to_dense(),
            run_eval(
                &p,
                &BTreeMap::from([
                    (
                        "A".to_string(),
                        Tensor::empty(&fmt(FORMATS[0]), &[N, M]).unwrap()
                    ),
                    ("B".to_string(), b.clone()),
                ])
            )
            .unwrap()["A"],
            "{name}"
        );
    }
}

/// Hostile foreign row pointers (past the entries, decreasing, negative, huge) give what the
/// same pointers gave before snapshots, when every access was checked: the same error, or
/// the same result; never a read outside a buffer.
#[test]
fn hostile_foreign_row_pointers_fail_as_before() {
    let program = parse(SPMV);
    for format in [FORMATS[0], FORMATS[1]] {
        let a = matrix(format, N, M, 8);
        let nnz = a.levels[1][1].len() as i64;
        let hostile: [(&str, usize, i64); 7] = [
            ("the last past the entries", N, nnz + 1000),
            ("a middle one past the entries", N / 2, nnz + 5),
            ("decreasing", 7, 0),
            ("decreasing at the end", N, 1),
            ("negative", 4, -7),
            ("the first negative", 0, -1),
            ("huge", 9, i32::MAX as i64),
        ];
        for (what, k, v) in hostile {
            let mut bad = a.clone();
            bad.levels[1][0].set(k, Scalar::I64(v));
            // Before: no bound anywhere, every access checked (owned arrays, unmarked).
            bad.unmark();
            let now = all_foreign(&bad);
            for (name, runner) in runners() {
                let run = |t: &Tensor| {
                    let mut ts = BTreeMap::from([
                        ("A".to_string(), t.clone()),
                        ("x".to_string(), dense(&[M], 1)),
                        ("y".to_string(), dense(&[N], 0)),
                    ]);
                    runner
                        .compile(&program, &formats_of(&ts))
                        .and_then(|c| runner.execute(&c, &mut ts))
                        .map(|()| ts["y"].to_dense())
                        .map_err(|e| e.to_string())
                };
                let before = run(&bad);
                assert_eq!(runner.last_snapshots().copied, vec![]);
                let after = run(&now);
                assert_eq!(after, before, "{name} {format}: {what}");
                assert!(
                    after.is_err() || v >= 0,
                    "{name} {format}: {what}: {after:?}"
                );
                let copied = runner.last_snapshots().copied;
                assert_eq!(copied.len(), 1, "{name} {format}: {what}");
                assert_eq!(copied[0].3.is_none(), v < 0, "{name}: {what}: {copied:?}");
            }
        }
    }
}

/// The C source of SpMV over a CSR matrix has the copy a foreign matrix takes: after the
/// fully unchecked copy, one tested without the gather `x[j]`'s test, whose row-pointer and
/// entry reads are unchecked while the gather keeps its check.
#[test]
fn spmv_has_a_copy_with_only_its_gathers_checked() {
    let t = BTreeMap::from([
        ("A".to_string(), matrix(FORMATS[1], N, M, 9)),
        ("x".to_string(), dense(&[M], 1)),
        ("y".to_string(), dense(&[N], 0)),
    ]);
    let (ir, _, _) = tessera::run::Runner::lower(&parse(SPMV), &formats_of(&t)).unwrap();
    let src = tessera::backend::CBackend::source(&ir);
    let lines: Vec<&str> = src.lines().map(str::trim).collect();
    // `... const int64_t n4 = views[4].len; /* x_val */`: x's length variable.
    let x_len = lines
        .iter()
        .find(|l| l.ends_with("/* x_val */"))
        .and_then(|l| l.split("const int64_t ").nth(1)?.split(' ').next())
        .unwrap_or_else(|| panic!("no x_val buffer in\n{src}"));
    let middle = lines
        .iter()
        .position(|l| l.starts_with("} else if ("))
        .unwrap_or_else(|| panic!("no middle copy in\n{src}"));
    let end = middle
        + lines[middle..]
            .iter()
            .position(|l| *l == "} else {")
            .unwrap_or_else(|| panic!("no checked copy in\n{src}"));
    let test = lines[middle];
    assert!(
        !test.contains("(uint64_t)g") && test.contains(" > 0"),
        "the middle copy tests the positions' bound, not the gather's: {test}"
    );
    let checks: Vec<&str> = lines[middle + 1..end]
        .iter()
        .copied()
        .filter(|l| l.contains("UNLIKELY("))
        .collect();
    assert_eq!(
        checks.len(),
        1,
        "only the gather is checked in the middle copy: {checks:?}\n{src}"
    );
    assert!(
        checks[0].contains(&format!(">= (uint64_t){x_len})")),
        "{checks:?}"
    );
    // And the checked copy after it checks the row pointers and entries as well.
    let rest = lines[end..]
        .iter()
        .filter(|l| l.contains("UNLIKELY("))
        .count();
    assert!(rest >= 4, "{src}");
}
