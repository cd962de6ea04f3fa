//! Gustavson's C = A A (`examples/spgemm_gustavson.tess`) on matrices whose rows of C take
//! every shape the workspace's per-row sort of its touched slots meets
//! (`runtime::short_sort`, `runtime::intrinsics::sort_slots`): empty rows, single entries,
//! rows listing several sorted rows of B one after another (a mesh), almost sorted ones (a
//! band), random ones, rows of 8-63 slots (sorted by rank or insertion) and of 64 and more
//! (bucket, radix or the flags' scan), spans that fit 15 bits, 31 bits and neither; both
//! coordinate widths and several output formats, on every backend. Each result equals the
//! reference evaluator's bit for bit, or, where the matrix is too large for its dense copies,
//! a product computed here in the kernel's order.

mod common;

use common::{fmt, parse, run_eval, runners};
use std::collections::BTreeMap;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

const GUSTAVSON: &str = include_str!("../examples/spgemm_gustavson.tess");

/// Entries of an n x n matrix as sorted (row, column) lists per row.
type Rows = Vec<Vec<usize>>;

/// How many entries row i of A holds.
type RowLen = fn(usize) -> usize;

/// A value per entry, never zero (so every product is plain IEEE arithmetic).
fn value(i: usize, j: usize) -> f64 {
    ((i * 7 + j * 13) % 9) as f64 * 0.75 - 2.5
}

fn tensor(format: &str, n: usize, rows: &Rows) -> Tensor {
    let mut coords = vec![Vec::new(), Vec::new()];
    let mut vals = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        for &j in r {
            coords[0].push(i as i64);
            coords[1].push(j as i64);
            vals.push(value(i, j));
        }
    }
    Tensor::from_coo(
        &fmt(format),
        &[n, n],
        &coords,
        &Buffer::F64(vals.into()),
        |a, _| a,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Row shapes: `mesh` rows take a random subset of a window around the diagonal (their
/// products interleave), `band` rows a contiguous run (products almost sorted), `random` rows
/// columns anywhere; row i has `len(i)` entries, so some are empty and some single.
fn rows_of(n: usize, seed: u64, shape: &str, len: impl Fn(usize) -> usize) -> Rows {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let want = len(i).min(n);
            let mut r = std::collections::BTreeSet::new();
            let w = (want * 2).max(4);
            while r.len() < want {
                let j = match shape {
                    "mesh" => (i + n + rng.random_range(0..w) - w / 2) % n,
                    "band" => (i + r.len()) % n,
                    _ => rng.random_range(0..n),
                };
                r.insert(j);
            }
            r.into_iter().collect()
        })
        .collect()
}

/// C = A A in Gustavson's order (row i: A's entries by column k, each B row by column j),
/// with plain IEEE products (no value here is zero or special).
fn reference(n: usize, rows: &Rows) -> BTreeMap<(usize, usize), f64> {
    let mut c = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        let mut w: BTreeMap<usize, f64> = BTreeMap::new();
        for &k in r {
            for &j in &rows[k] {
                let s = w.entry(j).or_insert(0.0);
                *s += value(i, k) * value(k, j);
            }
        }
        c.extend(w.into_iter().map(|(j, v)| ((i, j), v)));
    }
    assert!(c.keys().all(|&(i, j)| i < n && j < n));
    c
}

fn stored(t: &Tensor) -> BTreeMap<(usize, usize), f64> {
    let mut m = BTreeMap::new();
    t.for_each_stored(&mut |ix, v| {
        m.insert((ix[0], ix[1]), v.as_f64());
    });
    m
}

fn inputs(format: &str, out: &str, n: usize, rows: &Rows) -> BTreeMap<String, Tensor> {
    inputs_with(format, out, "SparseByteMap(Element(0.0))", n, rows)
}

/// A = B from `rows` in `format`, an empty C in `out` and the workspace w in `workspace`.
fn inputs_with(
    format: &str,
    out: &str,
    workspace: &str,
    n: usize,
    rows: &Rows,
) -> BTreeMap<String, Tensor> {
    let a = tensor(format, n, rows);
    [
        ("A", a.clone()),
        ("B", a),
        ("C", Tensor::empty(&fmt(out), &[n, n]).unwrap()),
        ("w", Tensor::empty(&fmt(workspace), &[n]).unwrap()),
    ]
    .into_iter()
    .map(|(k, t)| (k.to_string(), t))
    .collect()
}

const CSR: [&str; 2] = [
    "Dense(SparseList(Element(0.0)))",
    "Dense(SparseList(Element(0.0), coord=i32))",
];

/// Small matrices against the evaluator, bit for bit, on every backend, output formats
/// with sorted and run-length rows.
#[test]
fn every_row_shape_equals_the_evaluator() {
    let p = parse(GUSTAVSON);
    let outs = [
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseList(Element(0.0), coord=i32))",
        "Dense(SparseRunList(Element(0.0)))",
        "Dense(SparseByteMap(Element(0.0)))",
    ];
    let n = 160;
    // Row lengths 0, 1, 2-4 (rows of C under 16 slots), 3-7 (up to 63), 9-12 (64 and more).
    let lens: [(&str, RowLen); 3] = [
        ("short", |i| i % 5),
        ("middle", |i| [0, 1, 3, 5, 7][i % 5]),
        ("long", |i| if i % 7 == 0 { 0 } else { 9 + i % 4 }),
    ];
    // Made once, so each backend compiles each (formats) kernel once.
    let runners = runners();
    let mut slots_seen = [0usize; 3];
    for (seed, shape) in [(1, "mesh"), (2, "band"), (3, "random")] {
        for (lname, len) in lens {
            let rows = rows_of(n, seed, shape, len);
            let want_c = reference(n, &rows);
            for r in (0..n).map(|i| want_c.range((i, 0)..(i + 1, 0)).count()) {
                slots_seen[usize::from(r >= 16) + usize::from(r >= 64)] += 1;
            }
            // The evaluator's dense C does not depend on the formats: once per matrix.
            let want = run_eval(&p, &inputs(CSR[0], CSR[0], n, &rows)).unwrap();
            let want = format!("{:?}", want["C"]);
            for format in CSR {
                for out in outs {
                    let ts = inputs(format, out, n, &rows);
                    for (name, runner) in &runners {
                        let mut got = ts.clone();
                        let k = runner
                            .compile(&p, &common::formats_of(&got))
                            .unwrap_or_else(|e| panic!("{name} {out}: {e}"));
                        runner
                            .execute(&k, &mut got)
                            .unwrap_or_else(|e| panic!("{name} {out}: {e}"));
                        got["C"].validate("C").unwrap();
                        let ctx = format!("{name} {shape} {lname} {format} -> {out}");
                        assert_eq!(format!("{:?}", got["C"].to_dense()), want, "{ctx}");
                        if out.contains("SparseList") {
                            assert_eq!(stored(&got["C"]), want_c, "{ctx}");
                        }
                    }
                }
            }
        }
    }
    // Every sort path was taken: rows of C under 16 slots, 16-63, and 64 or more.
    assert!(slots_seen.iter().all(|&c| c > 50), "{slots_seen:?}");
}

/// Rows whose slots span more than 2^15 columns (ranked on 32-bit keys; a span past 2^31
/// would need that many columns, so `short_sort`'s unit tests cover it), on a matrix too
/// large for the evaluator's dense copies: against the product computed here, bit for bit.
/// B is large enough for the C backend to request its rows ahead (`backend::c::prefetch`),
/// up to A's last entries, where the position ahead is past A's coordinates.
#[test]
fn wide_rows_equal_the_reference_product() {
    let p = parse(GUSTAVSON);
    let n = 100_000;
    // Row i: itself and 2-6 columns spread over the whole range, so C's rows hold 5-40 slots
    // over spans of tens of thousands.
    let rows: Rows = (0..n)
        .map(|i| {
            let mut r: Vec<usize> = (0..2 + i % 5)
                .map(|t| (i + t * 33_331 + t * t * 7) % n)
                .collect();
            r.push(i);
            r.sort_unstable();
            r.dedup();
            r
        })
        .collect();
    let want = reference(n, &rows);
    let runners = runners();
    for format in CSR {
        let ts = inputs(format, format, n, &rows);
        let mut levels = None;
        for (name, runner) in &runners {
            if *name == "interp" {
                continue; // 10^5 rows through the IR interpreter: slow, and covered above
            }
            let mut got = ts.clone();
            let k = runner.compile(&p, &common::formats_of(&got)).unwrap();
            if *name == "c" {
                // B's arrays (2-4 MB) are past `prefetch::RANGE_MIN_BYTES`: the copy of A's
                // row loop that asks for B's rows ahead is the one that runs.
                let source = tessera::backend::CBackend::new().source_of(&k.ir);
                assert!(source.contains("pf_q"), "{format}: no range prefetch");
            }
            runner.execute(&k, &mut got).unwrap();
            got["C"].validate("C").unwrap();
            let s = stored(&got["C"]);
            assert_eq!(s.len(), want.len(), "{name} {format}");
            for (key, v) in &want {
                assert_eq!(s[key].to_bits(), v.to_bits(), "{name} {format} at {key:?}");
            }
            let l = format!("{:?}", got["C"].levels);
            assert_eq!(levels.get_or_insert(l.clone()), &l, "{name} {format}");
        }
    }
}

/// The tropical (min, +) product through a workspace whose fill is Inf: each row resets the
/// slots the last row listed to Inf (`SparseByteMap`'s reset stores the fill; a wrong value
/// there would survive into the next row's minimum) and appends its entries to a `SparseList`
/// of Inf (the new value slot is stored once, not filled first). Against the evaluator, bit for
/// bit, on every backend, rows sharing most of their columns with the row before.
#[test]
fn min_plus_rows_reset_the_workspace_to_its_fill() {
    let p = parse(
        "C .= Inf
for i = _
  w .= Inf
  for k = _, j = _
    w[j] <<min>>= A[i, k] + B[k, j]
  end
  for j = _
    C[i, j] = w[j]
  end
end
",
    );
    let n = 120;
    let runners = runners();
    for (seed, shape) in [(4, "mesh"), (5, "band"), (6, "random")] {
        let rows = rows_of(n, seed, shape, |i| i % 6);
        for format in [
            "Dense(SparseList(Element(Inf)))",
            "Dense(SparseList(Element(Inf), coord=i32))",
        ] {
            let ts = inputs_with(format, format, "SparseByteMap(Element(Inf))", n, &rows);
            let want = format!("{:?}", run_eval(&p, &ts).unwrap()["C"]);
            for (name, runner) in &runners {
                let mut got = ts.clone();
                let k = runner.compile(&p, &common::formats_of(&got)).unwrap();
                runner.execute(&k, &mut got).unwrap();
                got["C"].validate("C").unwrap();
                let ctx = format!("{name} {shape} {format}");
                assert_eq!(format!("{:?}", got["C"].to_dense()), want, "{ctx}");
                // Not all Inf: the minima the reset could spoil are there.
                let mut finite = 0;
                got["C"].for_each_stored(&mut |_, v| finite += usize::from(v.as_f64().is_finite()));
                assert!(finite > n, "{ctx}: {finite} finite entries");
            }
        }
    }
}

/// A coordinate of A past B's rows, which the C backend's range prefetch reads four entries
/// before the product reaches it (and must skip: it is no row of B), fails where the product
/// reaches it, with the same error on every backend, and no backend reads past B_ptr.
#[test]
fn a_bad_coordinate_ahead_of_the_range_prefetch_fails_where_it_is() {
    let p = parse(GUSTAVSON);
    let n = 100_000;
    let rows: Rows = (0..n).map(|i| vec![i, (i * 7 + 3) % n]).collect();
    for format in CSR {
        let mut ts = inputs(format, format, n, &rows);
        let a = ts.get_mut("A").unwrap();
        // Position 11 (row 5, after row 5's diagonal): column n + 7.
        a.levels[1][1].set(11, tessera::types::Scalar::I64(n as i64 + 7));
        let mut errors = vec![];
        for (name, runner) in runners() {
            if name == "interp" {
                continue;
            }
            let mut got = ts.clone();
            let k = runner.compile(&p, &common::formats_of(&got)).unwrap();
            let e = runner
                .execute(&k, &mut got)
                .expect_err(&format!("{name} {format}: a bad coordinate ran"));
            errors.push((name, e.to_string()));
        }
        for (name, e) in &errors {
            assert!(e.contains("tensor `B`: index 100007"), "{name}: {e}");
            assert_eq!(e, &errors[0].1, "{name} against {}", errors[0].0);
        }
    }
}
