//! The shape of generated code: work follows the stored structure, and the kernel cache.

mod common;

use common::{fmt, parse};
use std::collections::BTreeMap;
use tessera::levels::Format;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

fn code(text: &str, formats: &[(&str, &str)]) -> String {
    let formats: BTreeMap<String, Format> = formats
        .iter()
        .map(|(n, f)| (n.to_string(), fmt(f)))
        .collect();
    let (k, _, _) = Runner::lower(&parse(text), &formats).unwrap_or_else(|e| panic!("{e}"));
    k.to_string()
}

/// A loop header that walks stored positions: `while ...` or `for (q = q; ...` (a counted
/// loop over a sparse list's entries, continuing from where the level's position is).
fn is_walk(line: &str) -> bool {
    let l = line.trim_start();
    l.starts_with("while ")
        || l.strip_prefix("for (").is_some_and(|rest| {
            let var = rest.split(" = ").next().unwrap_or("");
            rest.starts_with(&format!("{var} = {var};"))
        })
}

/// (dense loops over a range of coordinates, loops that walk stored structure).
fn count_loops(code: &str) -> (usize, usize) {
    let fors = code
        .lines()
        .filter(|l| l.trim_start().starts_with("for ") && !is_walk(l))
        .count();
    let walks = code.lines().filter(|l| is_walk(l)).count();
    (fors, walks)
}

#[test]
fn csr_sum_loops_over_rows_and_stored_entries_only() {
    let c = code(
        "s .= 0\nfor i = _, j = _\n  s[] += A[i, j]\nend",
        &[
            ("A", "Dense(SparseList(Element(0.0)))"),
            ("s", "Element(0.0)"),
        ],
    );
    let (fors, whiles) = count_loops(&c);
    assert_eq!(
        fors + whiles,
        2,
        "one loop over rows, one over stored entries:\n{c}"
    );
    assert!(
        !c.contains("+ 0.0") && !c.contains("+= 0"),
        "no additions of the fill value:\n{c}"
    );
}

#[test]
fn sparse_times_sparse_is_one_coiterating_loop() {
    let c = code(
        "z .= 0\nfor i = _\n  z[i] = x[i] * y[i]\nend",
        &[
            ("x", "SparseList(Element(0.0))"),
            ("y", "SparseList(Element(0.0))"),
            ("z", "Dense(Element(0.0))"),
        ],
    );
    let (fors, whiles) = count_loops(&c);
    assert_eq!(
        (fors, whiles),
        (0, 1),
        "a single coiterating while loop:\n{c}"
    );
    assert!(
        c.contains("x_q") && c.contains("y_q"),
        "the loop advances both lists:\n{c}"
    );
}

#[test]
fn sparse_plus_sparse_visits_the_union() {
    let c = code(
        "z .= 0\nfor i = _\n  z[i] = x[i] + y[i]\nend",
        &[
            ("x", "SparseList(Element(0.0))"),
            ("y", "SparseList(Element(0.0))"),
            ("z", "SparseList(Element(0.0))"),
        ],
    );
    let (fors, _) = count_loops(&c);
    assert!(
        fors <= 2,
        "no dense loop over the whole dimension beyond leftovers:\n{c}"
    );
}

#[test]
fn kernel_cache_hits_on_same_program_and_formats() {
    let runner = Runner::jit();
    let p = parse("y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend");
    let formats: BTreeMap<String, Format> = [
        ("A", "Dense(SparseList(Element(0.0)))"),
        ("x", "Dense(Element(0.0))"),
        ("y", "Dense(Element(0.0))"),
    ]
    .iter()
    .map(|(n, f)| (n.to_string(), fmt(f)))
    .collect();
    runner.compile(&p, &formats).unwrap();
    assert_eq!(runner.cache_len(), 1);
    runner.compile(&p, &formats).unwrap();
    assert_eq!(
        runner.cache_len(),
        1,
        "same program and formats: a cache hit"
    );
    let mut other = formats.clone();
    other.insert("A".into(), fmt("Dense(Dense(Element(0.0)))"));
    runner.compile(&p, &other).unwrap();
    assert_eq!(runner.cache_len(), 2, "another format: another kernel");
    let mut ints = formats.clone();
    ints.insert("x".into(), fmt("Dense(Element(0))"));
    runner.compile(&p, &ints).unwrap();
    assert_eq!(
        runner.cache_len(),
        3,
        "another element type: another kernel"
    );
}

/// SpMV over a 10^7 x 10^7 matrix with 10^7 entries: only possible if the work follows the
/// stored structure (a dense loop would be 10^14 iterations).
#[test]
fn huge_sparse_spmv_follows_the_structure() {
    let n = 10_000_000usize;
    let csr = fmt("Dense(SparseList(Element(0.0)))");
    let a = Tensor {
        shape: vec![n, n],
        format: csr,
        levels: vec![
            vec![],
            vec![
                Buffer::I64((0..=n as i64).collect()),
                Buffer::I64((0..n).map(|i| ((i * 7919) % n) as i64).collect()),
            ],
            vec![Buffer::F64(vec![1.5; n].into())],
        ],
    };
    a.validate("A").unwrap();
    let dense = fmt("Dense(Element(0.0))");
    let x = Tensor::from_dense(&dense, &[n], &Buffer::F64(vec![2.0; n].into())).unwrap();
    let mut tensors = BTreeMap::from([
        ("A".to_string(), a),
        ("x".to_string(), x),
        ("y".to_string(), Tensor::empty(&dense, &[n]).unwrap()),
    ]);
    common::run_jit(
        &parse("y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend"),
        &mut tensors,
    )
    .unwrap();
    let y = tensors["y"].to_dense();
    assert!(y.as_f64().unwrap().iter().all(|&v| v == 3.0));
}

/// Tensors whose shapes disagree are a typed error before any kernel runs.
#[test]
fn mismatched_shapes_are_a_dimension_error() {
    let dense = fmt("Dense(Element(0.0))");
    let csr = fmt("Dense(SparseList(Element(0.0)))");
    let mut tensors = BTreeMap::from([
        ("A".to_string(), Tensor::empty(&csr, &[3, 4]).unwrap()),
        ("x".to_string(), Tensor::empty(&dense, &[5]).unwrap()),
        ("y".to_string(), Tensor::empty(&dense, &[3]).unwrap()),
    ]);
    let p = parse("y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend");
    let e = common::run_jit(&p, &mut tensors).unwrap_err();
    assert!(matches!(e, tessera::Error::DimensionMismatch { .. }), "{e}");
}

/// The structural wins of masks and offsets, read off the generated code: the triangle sum
/// over CSR seeks to the diagonal and steps from there with no `i <= j` test left; `i == j`
/// seeks to one point per row with no inner loop; a permissive offset read is split at the
/// tensor's edges instead of testing every coordinate.
#[test]
fn masks_and_offsets_follow_the_structure() {
    let csr = "Dense(SparseList(Element(0.0)))";
    let triu = code(
        "s .= 0\nfor i = _, j = _\n  if i <= j\n    s[] += A[i, j]\n  end\nend\n",
        &[("A", csr), ("s", "Element(0.0)")],
    );
    let seek = triu
        .find("search_ge(A_idx")
        .expect("a seek to the diagonal");
    let step = triu.lines().position(is_walk).expect("a walk over the row");
    let seek_line = triu[..seek].lines().count();
    assert!(seek_line <= step, "{triu}");
    assert_eq!(count_loops(&triu).1, 1, "{triu}");
    assert!(!triu.contains("(i <= "), "no comparison left:\n{triu}");

    let diag = code(
        "d .= 0\nfor i = _, j = _\n  if i == j\n    d[i] += A[i, j]\n  end\nend\n",
        &[("A", csr), ("d", "Dense(Element(0.0))")],
    );
    assert!(diag.contains("search_ge(A_idx"), "{diag}");
    assert!(
        !diag.contains("while"),
        "one point per row, no inner loop:\n{diag}"
    );
    assert_eq!(diag.matches("for (").count(), 1, "{diag}");

    let shifted = code(
        "y .= 0\nfor i = _\n  y[i] += coalesce(x[~(i - 1)], 0) * x[i]\nend\n",
        &[("x", "Dense(Element(0.0))"), ("y", "Dense(Element(0.0))")],
    );
    // Each loop body is one store, no bounds test per coordinate.
    for body in shifted.split("for (").skip(1) {
        let inner = body.split('}').next().unwrap_or("");
        assert!(!inner.contains("if ("), "{shifted}");
    }
}

/// The separable erosion passes on run-length images (Finch Fig. 26) stay small: the edges a
/// permissive access `~(j - 1)` cuts are single coordinates, lowered without loops, so the
/// horizontal pass over a row coiterates its three shifted readers in one loop, and the
/// vertical pass has one loop per kind of row (first, only, interior, last). The line bounds
/// (about 30% above today's sizes) catch a regression that multiplies the code again.
#[test]
fn run_length_erosion_passes_stay_small() {
    let horizontal = "u .= false\nfor j = _\n  u[j] = coalesce(t[~(j - 1)], true) & t[j] & coalesce(t[~(j + 1)], true)\nend\n";
    let vertical = "C .= false\nfor i = _, j = _\n  C[i, j] = coalesce(A[~(i - 1), j], true) & A[i, j] & coalesce(A[~(i + 1), j], true)\nend\n";
    for (row, image, h_max, v_max) in [
        (
            "SparseRunList(Pattern())",
            "Dense(SparseRunList(Pattern()))",
            280,
            430,
        ),
        (
            "RunList(Element(false))",
            "Dense(RunList(Element(false)))",
            290,
            460,
        ),
    ] {
        let c = code(horizontal, &[("t", row), ("u", row)]);
        let (_, whiles) = count_loops(&c);
        assert_eq!(whiles, 1, "one coiterating loop over the row:\n{c}");
        let lines = c.lines().count();
        assert!(lines < h_max, "{row}: {lines} lines\n{c}");
        let c = code(vertical, &[("A", image), ("C", image)]);
        let (_, whiles) = count_loops(&c);
        assert_eq!(whiles, 4, "one loop per kind of row:\n{c}");
        let lines = c.lines().count();
        assert!(lines < v_max, "{image}: {lines} lines\n{c}");
    }
    // The whole two-pass kernel with a run-length row workspace declared per row.
    let c = code(
        include_str!("../examples/erosion.tess"),
        &[
            ("input", "Dense(SparseRunList(Pattern()))"),
            ("output", "Dense(SparseRunList(Pattern()))"),
            ("tmp", "SparseRunList(Pattern(), merge=false)"),
        ],
    );
    let lines = c.lines().count();
    assert!(lines < 1500, "{lines} lines");
}

#[test]
fn pattern_spmv_skips_the_fill_like_csr() {
    // `Pattern()`'s fill is `false`, a zero of `*`: the fill regions between stored entries
    // must vanish as they do for `Element(0.0)`, or SpMV walks all m x n coordinates.
    let c = code(
        "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend",
        &[
            ("A", "Dense(SparseList(Pattern()))"),
            ("x", "Dense(Element(0.0))"),
            ("y", "Dense(Element(0.0))"),
        ],
    );
    let (fors, whiles) = count_loops(&c);
    assert_eq!(
        fors + whiles,
        2,
        "one loop over rows, one over stored entries:\n{c}"
    );
    assert!(!c.contains("0.0 *"), "no products with the fill:\n{c}");
}

/// A CSR row walked over its whole dimension needs neither its last stored coordinate (a
/// dependent load at each row's end, about 12% of a SpMV on a random matrix) nor a search
/// for where the walk ends: a valid tensor stores no coordinate beyond the dimension. A
/// walk over part of the dimension still cuts at the extent.
#[test]
fn full_row_walks_load_no_last_coordinate() {
    let spmv = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend";
    let formats = [
        ("A", "Dense(SparseList(Element(0.0), coord=i32))"),
        ("x", "Dense(Element(0.0))"),
        ("y", "Dense(Element(0.0))"),
    ];
    let c = code(spmv, &formats);
    assert!(
        !c.contains("A_last"),
        "no load of the last coordinate:\n{c}"
    );
    assert!(!c.contains("search"), "no search for the walk's end:\n{c}");
    let dict = code(
        spmv,
        &[
            ("A", "Dense(SparseDict(Element(0.0)))"),
            ("x", "Dense(Element(0.0))"),
            ("y", "Dense(Element(0.0))"),
        ],
    );
    assert!(!dict.contains("A_last"), "{dict}");
    let part = code(
        "y .= 0\nfor i = _, j = 0:2\n  y[i] += A[i, j] * x[j]\nend",
        &formats,
    );
    assert!(
        part.contains("A_last") && part.contains("search"),
        "a walk over part of the row ends by the last coordinate or a search:\n{part}"
    );
}
