//! `einsum`: the planned kernels against the reference evaluator running the statement as a
//! naive dense loop nest, against NumPy/SciPy values (`scripts/einsum_golden.py`) on the real
//! matrices, the kernel cache, the plans' shape (transposes, workspaces, sparse outputs), the
//! errors, the CLI, and the README's Rust example.

mod common;

use common::{fmt, parse, run_eval};
use proptest::prelude::*;
use std::collections::BTreeMap;
use tessera::Scalar;
use tessera::api::{einsum, einsum_with, plan_einsum};
use tessera::levels::Format;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::files::load_tensor;
use tessera::tensor::{Tensor, random_exact, random_sparse};

/// The statement run by the reference evaluator as `OUT .= init; for every index ...`.
fn evaluate(
    spec: &str,
    init: &str,
    inputs: &[(&str, &Tensor)],
    out_shape: &[usize],
    elem: tessera::ElemType,
) -> Buffer {
    let s = tessera::api::spec::parse_spec(spec).unwrap();
    let loops: String = s
        .all_indices()
        .iter()
        .map(|i| format!("for {i} = _\n"))
        .collect();
    let ends = "end\n".repeat(s.all_indices().len());
    let text = format!("{} .= {init}\n{loops}{spec}\n{ends}", s.output);
    let mut tensors: BTreeMap<String, Tensor> = inputs
        .iter()
        .map(|(n, t)| (n.to_string(), (*t).clone()))
        .collect();
    let out = Format::dense(out_shape.len(), Scalar::zero(elem));
    tensors.insert(s.output.clone(), Tensor::empty(&out, out_shape).unwrap());
    run_eval(&parse(&text), &tensors)
        .unwrap()
        .remove(&s.output)
        .unwrap()
}

fn assert_close(got: &Buffer, want: &Buffer, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: sizes differ");
    for k in 0..got.len() {
        let (g, w) = (got.get(k).as_f64(), want.get(k).as_f64());
        assert!(
            g == w || (g - w).abs() <= 1e-9 * w.abs().max(1.0) || (g.is_nan() && w.is_nan()),
            "{what}: entry {k} is {g}, expected {w}"
        );
    }
}

/// Run `spec` and compare with the evaluator; returns the result.
fn check(spec: &str, init: &str, inputs: &[(&str, &Tensor)]) -> Tensor {
    let got = einsum(spec, inputs).unwrap_or_else(|e| panic!("{spec}: {e}"));
    got.validate("out").unwrap();
    let want = evaluate(spec, init, inputs, &got.shape, got.elem());
    assert_close(&got.to_dense(), &want, spec);
    got
}

fn csr() -> Format {
    fmt("Dense(SparseList(Element(0.0)))")
}

fn dense(rank: usize) -> Format {
    Format::dense(rank, Scalar::F64(0.0))
}

#[test]
fn sparse_product_is_gustavson_into_a_sparse_output() {
    let a = random_sparse(&csr(), &[7, 9], 0.3, 1).unwrap();
    let b = random_sparse(&csr(), &[9, 5], 0.3, 2).unwrap();
    let c = check(
        "C[i, j] += A[i, k] * B[k, j]",
        "0.0",
        &[("A", &a), ("B", &b)],
    );
    assert_eq!(c.format, csr());
    let p = plan_einsum(
        "C[i, j] += A[i, k] * B[k, j]",
        &[("A", &a.format), ("B", &b.format)],
        None,
    )
    .unwrap();
    assert_eq!(p.loop_order, ["i", "k", "j"]);
    assert!(p.transposes.is_empty());
    let w = p.workspace.expect("a row workspace");
    assert_eq!(w.format.to_string(), "SparseByteMap(Element(0.0))");
    assert_eq!(w.indices, ["j"]);
}

/// The program text of `spec`'s plan for these inputs.
fn planned(spec: &str, inputs: &[(&str, &Tensor)]) -> String {
    let formats: Vec<_> = inputs.iter().map(|(n, t)| (*n, &t.format)).collect();
    plan_einsum(spec, &formats, None)
        .unwrap()
        .program
        .to_string()
}

#[test]
fn sparse_reads_inside_loops_they_do_not_depend_on_are_looked_up() {
    // A sparse `x` under the row loop: looked up at `A`'s entries (`follow`), not merged with
    // each row from its start (which made an SpMV quadratic). Values equal the evaluator's,
    // for sparse and dense `A` and for each sparse vector format that has a lookup.
    let spec = "y[i] += A[i, j] * x[j]";
    for xf in [
        "SparseList(Element(0.0))",
        "SparseCOO{1}(Element(0.0))",
        "SparseDict(Element(0.0))",
        "SparseByteMap(Element(0.0))",
        "RunList(Element(0.0))",
    ] {
        let x = random_sparse(&fmt(xf), &[40], 0.4, 11).unwrap();
        let a = random_sparse(&csr(), &[30, 40], 0.15, 12).unwrap();
        let text = planned(spec, &[("A", &a), ("x", &x)]);
        let follows = tessera::levels::registry::spec_of(&x.format.levels[0])
            .honours(tessera::notation::ast::Protocol::Follow);
        assert_eq!(text.contains("x[follow(j)]"), follows, "{xf}:\n{text}");
        check(spec, "0.0", &[("A", &a), ("x", &x)]);
        // A dense `A` does not drive `j`: `x` drives it, and its walk is the loop.
        let d = random_sparse(&dense(2), &[30, 40], 0.5, 13).unwrap();
        let text = planned(spec, &[("A", &d), ("x", &x)]);
        assert!(!text.contains("follow"), "{xf}:\n{text}");
        check(spec, "0.0", &[("A", &d), ("x", &x)]);
    }
    // A read that depends on the outer loop keeps its walk: `A` here, and both sides of a
    // sparse product whose rows are each walked once (Gustavson's `B[k, j]`, driven by `A`'s
    // row through its dense outer level).
    let a = random_sparse(&csr(), &[7, 9], 0.3, 14).unwrap();
    let b = random_sparse(&csr(), &[9, 5], 0.3, 15).unwrap();
    let text = planned("C[i, j] += A[i, k] * B[k, j]", &[("A", &a), ("B", &b)]);
    assert!(!text.contains("follow"), "{text}");
    // Whatever the plan for a doubly compressed `B`, the values stay. Inner products of two
    // sparse rows keep the merge.
    let dcsr = fmt("SparseList(SparseList(Element(0.0)))");
    let b2 = b.to_format(&dcsr).unwrap();
    check("y[i] += A[i, k] * B[k, j]", "0.0", &[("A", &a), ("B", &b2)]);
    let b3 = random_sparse(&csr(), &[5, 9], 0.3, 16).unwrap();
    let text = planned("C[i, j] += A[i, k] * B[j, k]", &[("A", &a), ("B", &b3)]);
    assert!(!text.contains("follow"), "{text}");
    check(
        "C[i, j] += A[i, k] * B[k, j]",
        "0.0",
        &[("A", &a), ("B", &b2)],
    );
}

#[test]
fn transposed_sparse_inputs_are_copied_once() {
    let a = random_sparse(&csr(), &[6, 7], 0.3, 3).unwrap();
    let b = random_sparse(&csr(), &[6, 5], 0.3, 4).unwrap();
    let spec = "C[i, j] += A[k, i] * B[k, j]";
    let c = check(spec, "0.0", &[("A", &a), ("B", &b)]);
    assert_eq!(c.format, csr());
    let p = plan_einsum(spec, &[("A", &a.format), ("B", &b.format)], None).unwrap();
    assert_eq!(p.transposes.len(), 1);
    assert_eq!(p.transposes[0].input, "A");
    assert_eq!(p.transposes[0].perm, [1, 0]);
    assert_eq!(p.loop_order, ["i", "k", "j"]);
    // Dense inputs are read in any order without a copy.
    let d = random_sparse(&dense(2), &[6, 7], 0.5, 5).unwrap();
    let p = plan_einsum(spec, &[("A", &d.format), ("B", &b.format)], None).unwrap();
    assert!(p.transposes.iter().all(|t| t.input != "A"), "{p:?}");
    check(spec, "0.0", &[("A", &d), ("B", &b)]);
}

#[test]
fn spmv_mttkrp_and_elementwise_outputs() {
    let a = random_sparse(&csr(), &[8, 6], 0.3, 6).unwrap();
    let x = random_sparse(&dense(1), &[6], 1.0, 7).unwrap();
    let y = check("y[i] += A[i, j] * x[j]", "0.0", &[("A", &a), ("x", &x)]);
    assert_eq!(y.format, dense(1));
    let csf = fmt("SparseList(SparseList(SparseList(Element(0.0))))");
    let t = random_sparse(&csf, &[4, 5, 6], 0.15, 8).unwrap();
    let b = random_sparse(&dense(2), &[5, 3], 1.0, 9).unwrap();
    let c = random_sparse(&dense(2), &[6, 3], 1.0, 10).unwrap();
    check(
        "M[i, r] += X[i, j, k] * B[j, r] * C[k, r]",
        "0.0",
        &[("X", &t), ("B", &b), ("C", &c)],
    );
    let a2 = random_sparse(&csr(), &[8, 6], 0.3, 11).unwrap();
    let sum = check(
        "T[i, j] = A[i, j] + B[i, j]",
        "0.0",
        &[("A", &a), ("B", &a2)],
    );
    assert_eq!(sum.format, csr());
    let prod = check(
        "T[i, j] = A[i, j] * B[i, j]",
        "0.0",
        &[("A", &a), ("B", &a2)],
    );
    assert_eq!(prod.format, csr());
    assert!(prod.countstored() <= a.countstored().min(a2.countstored()));
    // A right side that is not 0 where the inputs store nothing is dense.
    // Where A stores nothing the right side is 1: the output is sparse with fill 1.
    let shifted = check("T[i, j] = A[i, j] * 2 + 1", "1.0", &[("A", &a)]);
    assert_eq!(shifted.format, fmt("Dense(SparseList(Element(1.0)))"));
    // A right side that depends on a dense input where the sparse one stores nothing is dense.
    let sum = check(
        "T[i, j] = A[i, j] + D[i, j]",
        "0.0",
        &[("A", &a), ("D", &a.to_format(&dense(2)).unwrap())],
    );
    assert_eq!(sum.format, dense(2));
    let s = check("s[] += A[i, j] * B[i, j]", "0.0", &[("A", &a), ("B", &a2)]);
    assert_eq!(s.rank(), 0);
}

#[test]
fn max_and_min_reductions_see_the_fill() {
    let a = random_sparse(&csr(), &[9, 4], 0.4, 12).unwrap();
    let m = check("m[i] <<max>>= A[i, j] - 5", "-Inf", &[("A", &a)]);
    assert_eq!(m.fill(), Scalar::F64(f64::NEG_INFINITY));
    check("m[j] <<min>>= A[i, j]", "Inf", &[("A", &a)]);
    let ints = fmt("Dense(SparseList(Element(0)))");
    let b = random_sparse(&ints, &[5, 5], 0.4, 13).unwrap();
    let r = check(
        "m[i] <<max>>= A[i, k] * B[k, j]",
        "-9223372036854775808",
        &[("A", &b), ("B", &b)],
    );
    assert_eq!(r.elem(), tessera::ElemType::I64);
    let bools = fmt("Dense(SparseList(Element(false)))");
    let p = random_sparse(&bools, &[5, 5], 0.3, 14).unwrap();
    let reach = check("R[i, j] |= P[i, k] & P[k, j]", "false", &[("P", &p)]);
    assert_eq!(reach.format, bools);
}

#[test]
fn a_second_call_on_new_data_of_the_same_formats_compiles_nothing() {
    let runner = Runner::jit();
    let spec = "C[i, j] += A[i, k] * B[k, j]";
    let a = random_sparse(&csr(), &[6, 6], 0.3, 15).unwrap();
    einsum_with(&runner, spec, &[("A", &a), ("B", &a)], None).unwrap();
    assert!(*runner.last_compile_ms.borrow() > 0.0);
    let compiled = runner.cache_len();
    // Other values, other shapes, same formats.
    let a2 = random_sparse(&csr(), &[11, 8], 0.2, 16).unwrap();
    let b2 = random_sparse(&csr(), &[8, 3], 0.5, 17).unwrap();
    let c = einsum_with(&runner, spec, &[("A", &a2), ("B", &b2)], None).unwrap();
    assert_eq!(*runner.last_compile_ms.borrow(), 0.0);
    assert_eq!(runner.cache_len(), compiled);
    let want = evaluate(
        spec,
        "0.0",
        &[("A", &a2), ("B", &b2)],
        &[11, 3],
        tessera::ElemType::F64,
    );
    assert_close(&c.to_dense(), &want, "second call");
}

#[test]
fn an_explicit_output_format_is_used_or_refused() {
    let runner = Runner::jit();
    let a = random_sparse(&csr(), &[5, 5], 0.4, 18).unwrap();
    let spec = "C[i, j] += A[i, k] * A[k, j]";
    let want = evaluate(spec, "0.0", &[("A", &a)], &[5, 5], tessera::ElemType::F64);
    for f in [
        "Dense(Dense(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "Dense(SparseDict(Element(0.0)))",
    ] {
        let c = einsum_with(&runner, spec, &[("A", &a)], Some(&fmt(f))).unwrap();
        assert_eq!(c.format, fmt(f));
        assert_close(&c.to_dense(), &want, f);
    }
    let e = einsum_with(
        &runner,
        "m[i] <<max>>= A[i, j]",
        &[("A", &a)],
        Some(&fmt("SparseList(Element(0.0))")),
    )
    .unwrap_err();
    assert!(e.to_string().contains("starts from -Inf"), "{e}");
    // A dense output is filled with the identity whatever its format's fill.
    let m = einsum_with(
        &runner,
        "m[i] <<max>>= A[i, j]",
        &[("A", &a)],
        Some(&fmt("Dense(Element(0.0))")),
    )
    .unwrap();
    let want = evaluate(
        "m[i] <<max>>= A[i, j]",
        "-Inf",
        &[("A", &a)],
        &[5],
        tessera::ElemType::F64,
    );
    assert_close(&m.to_dense(), &want, "dense max");
}

#[test]
fn errors_name_the_place() {
    let a = random_sparse(&csr(), &[3, 4], 0.5, 19).unwrap();
    let b = random_sparse(&csr(), &[3, 4], 0.5, 20).unwrap();
    let msg = |s: &str, ins: &[(&str, &Tensor)]| einsum(s, ins).unwrap_err().to_string();
    assert_eq!(
        msg("C[i, j] += A[i, k] * B[k, j]", &[("A", &a), ("B", &b)]),
        "1:24: dimension mismatch: index `k` is 3 in `B` (dimension 0) but 4 in `A` (dimension 1)"
    );
    assert_eq!(
        msg("C[i] += A[i, j] * X[j]", &[("A", &a)]),
        "1:19: unknown tensor `X`: it is not among the inputs"
    );
    assert_eq!(
        msg("C[i] += A[i]", &[("A", &a)]),
        "1:9: `A` has 2 dimensions but is indexed with 1"
    );
    assert_eq!(
        msg("C[i, j] = A[i, k]", &[("A", &a)]),
        "1:1: index `k` is not on the left, so it is reduced: use a reducer such as `+=` instead of `=`"
    );
    assert_eq!(
        msg("C[i, z] += A[i, j]", &[("A", &a)]),
        "1:1: output index `z` appears in no input, so its extent is unknown"
    );
    assert_eq!(
        msg("C[i] += A[i, j]", &[("A", &a), ("B", &b)]),
        "input `B` is not read by the einsum `C[...]`"
    );
    assert!(msg("C[i] += A[i, j", &[("A", &a)]).contains("syntax error"));
}

/// (name, spgemm, spgemm nonzeros, spmv, AᵀA, AᵀA nonzeros, (A + Aᵀ) row sums, row maxima):
/// printed by `scripts/einsum_golden.py`.
type Golden = (&'static str, f64, usize, f64, f64, usize, f64, f64);
const GOLDEN: &[Golden] = &[
    (
        "west0479",
        -855175112.3337483,
        6523,
        -6375411.1641725,
        2981727960614.536,
        7099,
        -11167797.061799493,
        190916.16721667605,
    ),
    (
        "1138_bus",
        -1941897407.145648,
        11142,
        -105104.9679536997,
        -1941897407.145648,
        11142,
        2920.0461046000387,
        2917898.1633460997,
    ),
    ("lp_afiro", 0.0, 0, -18.257, 2516.837373, 375, 0.0, 82.629),
];
const MTTKRP: f64 = 3213.0;
const MTTKRP_STORED: usize = 3529;

fn weighted2(t: &Tensor) -> f64 {
    let (m, n) = (t.shape[0], t.shape[1]);
    let d = t.to_dense();
    let mut s = 0.0;
    for i in 0..m {
        for j in 0..n {
            s += d.get(i * n + j).as_f64() * (((i * 3 + j * 7) % 11) + 1) as f64;
        }
    }
    s
}

fn weighted1(t: &Tensor) -> f64 {
    let d = t.to_dense();
    (0..d.len())
        .map(|i| d.get(i).as_f64() * ((i % 5) + 1) as f64)
        .sum()
}

fn nonzeros(t: &Tensor) -> usize {
    t.stored().filter(|(_, v)| v.as_f64() != 0.0).count()
}

fn assert_rel(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "{what}: {got}, expected {want}"
    );
}

#[test]
fn real_matrices_equal_numpy_and_scipy() {
    let Some(dir) = common::data_dir("real_matrices_equal_numpy_and_scipy") else {
        return;
    };
    for &(name, spgemm, spgemm_nz, spmv, ata, ata_nz, add_reduce, row_max) in GOLDEN {
        let path = dir.join(format!("matrices/{name}.mtx"));
        let a = load_tensor(path.to_str().unwrap(), None).unwrap();
        let (m, n) = (a.shape[0], a.shape[1]);
        let what = |s: &str| format!("{name}: {s}");
        if m == n {
            let c = einsum("C[i, j] += A[i, k] * B[k, j]", &[("A", &a), ("B", &a)]).unwrap();
            assert_eq!(c.format, csr());
            assert_rel(weighted2(&c), spgemm, &what("SpGEMM"));
            assert_eq!(nonzeros(&c), spgemm_nz, "{}", what("SpGEMM nonzeros"));
            let at = a.permute(&[1, 0]).unwrap();
            let t = einsum("T[i, j] = A[i, j] + B[i, j]", &[("A", &a), ("B", &at)]).unwrap();
            assert_eq!(t.format, csr());
            let s = einsum("s[i] += T[i, j]", &[("T", &t)]).unwrap();
            assert_rel(weighted1(&s), add_reduce, &what("add then reduce"));
        }
        let x: Vec<f64> = (0..n).map(|j| (j % 7) as f64 - 3.0).collect();
        let x = Tensor::from_dense(&dense(1), &[n], &Buffer::F64(x.into())).unwrap();
        let y = einsum("y[i] += A[i, j] * x[j]", &[("A", &a), ("x", &x)]).unwrap();
        assert_rel(weighted1(&y), spmv, &what("SpMV"));
        let ata_t = einsum("C[i, j] += A[k, i] * B[k, j]", &[("A", &a), ("B", &a)]).unwrap();
        assert_rel(weighted2(&ata_t), ata, &what("AᵀA"));
        assert_eq!(nonzeros(&ata_t), ata_nz, "{}", what("AᵀA nonzeros"));
        let mx = einsum("m[i] <<max>>= A[i, j]", &[("A", &a)]).unwrap();
        assert_rel(weighted1(&mx), row_max, &what("row maxima"));
    }
}

#[test]
fn mttkrp_on_a_generated_sparse_tensor_equals_numpy() {
    let (ni, nj, nk, nr) = (30usize, 40usize, 50usize, 8usize);
    let mut coords = vec![vec![]; 3];
    let mut vals = vec![];
    for i in 0..ni {
        for j in 0..nj {
            for k in 0..nk {
                if (7 * i + 13 * j + 29 * k) % 17 == 0 {
                    coords[0].push(i as i64);
                    coords[1].push(j as i64);
                    coords[2].push(k as i64);
                    vals.push(((i + 2 * j + 3 * k) % 5 + 1) as f64);
                }
            }
        }
    }
    let csf = fmt("SparseList(SparseList(SparseList(Element(0.0))))");
    let x = Tensor::from_coo(
        &csf,
        &[ni, nj, nk],
        &coords,
        &Buffer::F64(vals.into()),
        |a, _| a,
    )
    .unwrap();
    assert_eq!(x.countstored(), MTTKRP_STORED);
    let b: Vec<f64> = (0..nj * nr)
        .map(|q| ((q / nr + 2 * (q % nr)) % 7) as f64 - 3.0)
        .collect();
    let c: Vec<f64> = (0..nk * nr)
        .map(|q| ((3 * (q / nr) + q % nr) % 5) as f64 - 2.0)
        .collect();
    let b = Tensor::from_dense(&dense(2), &[nj, nr], &Buffer::F64(b.into())).unwrap();
    let c = Tensor::from_dense(&dense(2), &[nk, nr], &Buffer::F64(c.into())).unwrap();
    let spec = "M[i, r] += X[i, j, k] * B[j, r] * C[k, r]";
    let m = einsum(spec, &[("X", &x), ("B", &b), ("C", &c)]).unwrap();
    assert_eq!(m.shape, [ni, nr]);
    assert_rel(weighted2(&m), MTTKRP, "MTTKRP");
    let p = plan_einsum(
        spec,
        &[("X", &x.format), ("B", &b.format), ("C", &c.format)],
        None,
    )
    .unwrap();
    assert!(p.transposes.is_empty());
    assert!(p.workspace.is_none());
}

#[test]
fn random_exact_counts_feed_einsum() {
    let a = random_exact(&csr(), &[20, 30], 45, 21).unwrap();
    assert_eq!(nonzeros(&a), 45);
    let s = check("s[] += A[i, j]", "0.0", &[("A", &a)]);
    let total: f64 = a.stored().map(|(_, v)| v.as_f64()).sum();
    assert_eq!(s.get(&[]).unwrap(), Scalar::F64(total));
}

const TEMPLATES: &[(&str, &str)] = &[
    ("C[i, j] += A[i, k] * B[k, j]", "0.0"),
    ("C[i, j] += A[k, i] * B[k, j]", "0.0"),
    ("C[i, j] += A[i, k] * B[j, k]", "0.0"),
    ("C[j, i] += A[i, k] * B[k, j]", "0.0"),
    ("C[i, j] = A[i, j] + B[i, j]", "0.0"),
    ("C[i, j] = A[i, j] * B[j, i]", "0.0"),
    ("C[i, j] = A[i, j] - 2 * B[i, j]", "0.0"),
    ("c[i] <<max>>= A[i, j] * B[i, j]", "-Inf"),
    ("c[j] <<min>>= A[i, j] + B[i, j]", "Inf"),
    ("c[] += A[i, j] * B[j, i]", "0.0"),
    ("c[k] *= A[i, k] + B[k, i]", "1.0"),
];

const FORMATS: &[&str] = &[
    "Dense(SparseList(Element(F)))",
    "Dense(Dense(Element(F)))",
    "SparseList(SparseList(Element(F)))",
    "SparseList(Dense(Element(F)))",
    "SparseCOO{2}(Element(F))",
    "Dense(SparseByteMap(Element(F)))",
    "Dense(RunList(Element(F)))",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_statements_formats_and_fills_match_the_evaluator(
        t in 0..TEMPLATES.len(),
        fa in 0..FORMATS.len(),
        fb in 0..FORMATS.len(),
        fill_a in prop::sample::select(vec!["0.0", "0.0", "1.0"]),
        fill_b in prop::sample::select(vec!["0.0", "0.0", "2.0"]),
        sizes in prop::collection::vec(1usize..5, 3),
        density in 0.0f64..1.0,
        seed in 0u64..1000,
    ) {
        let (spec, init) = TEMPLATES[t];
        let s = tessera::api::spec::parse_spec(spec).unwrap();
        let size = |v: &str| sizes[["i", "j", "k"].iter().position(|x| *x == v).unwrap()];
        let shape = |k: usize| -> Vec<usize> {
            s.read_indices(k).iter().map(|v| size(v)).collect()
        };
        let a = random_sparse(&fmt(&FORMATS[fa].replace('F', fill_a)), &shape(0), density, seed).unwrap();
        let b = random_sparse(&fmt(&FORMATS[fb].replace('F', fill_b)), &shape(1), density, seed + 1).unwrap();
        check(spec, init, &[("A", &a), ("B", &b)]);
    }
}

#[test]
fn cli_einsum_writes_the_output_and_times_the_kernel() {
    let Some(dir) = common::data_dir("cli_einsum_writes_the_output_and_times_the_kernel") else {
        return;
    };
    let a = dir.join("matrices/west0479.mtx");
    let out = std::env::temp_dir().join(format!("tessera-einsum-{}.mtx", std::process::id()));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "einsum",
            "C[i, j] += A[i, k] * A[k, j]",
            "--in",
            &format!("A={}", a.display()),
            "--out",
            &format!("C={}", out.display()),
            "--time",
            "--repeat",
            "3",
            "--show-program",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("# workspace w: SparseByteMap(Element(0.0))"),
        "{text}"
    );
    assert!(text.contains("w[j] += A[i, k] * A[k, j]"), "{text}");
    let time = text.lines().last().unwrap();
    assert!(time.starts_with("time: compile_ms="), "{time}");
    assert!(time.ends_with("repeats=3"), "{time}");
    let c = load_tensor(out.to_str().unwrap(), None).unwrap();
    let _ = std::fs::remove_file(&out);
    assert_rel(weighted2(&c), GOLDEN[0].1, "CLI SpGEMM");
    // Bad input: one line naming the place, and nothing written.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "einsum",
            "C[i, j] += A[i, k] * B[k, j]",
            "--in",
            &format!("A={}", a.display()),
            "--out",
            &format!("C={}", out.display()),
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        "error: 1:22: unknown tensor `B`: it is not among the inputs"
    );
    assert!(!out.exists());
}

/// The README's "Rust API" example, verbatim between the markers (checked below).
#[test]
fn readme_example() -> tessera::Result<()> {
    // README example start
    use tessera::api::einsum;
    use tessera::runtime::Buffer;
    use tessera::tensor::{Tensor, parse_format};

    // COO triplets (the two entries at (1, 2) are added), stored as CSR.
    let rows = vec![0, 1, 1, 2];
    let cols = vec![0, 2, 2, 1];
    let vals = Buffer::from(vec![1.0, 2.0, 3.0, 4.0]);
    let a = Tensor::from_triplets("csr", &[3, 3], &[rows, cols], &vals)?;
    let x = Tensor::from_slice("dense", &[3], &Buffer::from(vec![1.0, 1.0, 2.0]))?;
    let y = einsum("y[i] += A[i, j] * x[j]", &[("A", &a), ("x", &x)])?;
    assert_eq!(y.to_dense(), Buffer::from(vec![1.0, 10.0, 4.0]));
    // A sparse product stays sparse (a Gustavson kernel with a SparseByteMap row workspace).
    let c = einsum("C[i, j] += A[i, k] * A[k, j]", &[("A", &a)])?;
    assert_eq!(c.format.to_string(), "Dense(SparseList(Element(0.0)))");
    let dcsr = c.to_format(&parse_format("dcsr", 2)?)?;
    assert_eq!(dcsr.stored().collect::<Vec<_>>().len(), 3);
    assert_eq!(dcsr.get(&[1, 1])?, tessera::Scalar::F64(20.0));
    // README example end
    Ok(())
}

#[test]
fn readme_shows_the_tested_example() {
    common::assert_readme_shows(include_str!("einsum.rs"), "einsum.rs");
}

#[test]
fn cli_einsum_shows_the_parallel_outer_loop() {
    let dir = std::env::temp_dir().join(format!("tessera-einsum-par-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = dir.join("A.mtx");
    let x = dir.join("x.tns");
    // Over the default threshold of work (40 000 entries), so that the loop is worth it.
    let n = 50_000;
    let mut mtx = format!("%%MatrixMarket matrix coordinate real general\n{n} {n} {n}\n");
    let mut tns = String::new();
    for k in 1..=n {
        mtx += &format!("{k} {} 2.0\n", n + 1 - k);
        tns += &format!("{k} 1.0\n");
    }
    std::fs::write(&a, mtx).unwrap();
    std::fs::write(&x, tns).unwrap();
    let run = |spec: &str, threads: &str, a: &std::path::Path, x: &std::path::Path| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "einsum",
                spec,
                "--in",
                &format!("A={}", a.display()),
                "--in",
                // Dense: a sparse list `x` is walked from its start in each row.
                &format!("x={}@Dense(Element(0.0))", x.display()),
                "--show-program",
                "--backend",
                "jit",
                "--threads",
                threads,
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let spmv = "y[i] += A[i, j] * x[j]";
    let text = run(spmv, "2", &a, &x);
    assert!(
        text.contains("# parallel: the loop over i on 2 threads"),
        "{text}"
    );
    assert!(text.contains("for i = parallel(_)"), "{text}");
    assert!(text.contains("y: shape 50000 stored 50000"), "{text}");
    // One thread: the serial program.
    let text = run(spmv, "1", &a, &x);
    assert!(!text.contains("parallel"), "{text}");
    // A sparse output whose rows the loop appends runs in parallel too (each chunk appends
    // its own rows; issue 17).
    let text = run("C[i, j] = A[i, j] * x[j]", "2", &a, &x);
    assert!(
        text.contains("# parallel: the loop over i on 2 threads"),
        "{text}"
    );
    // Small inputs: the serial program (the split would cost more than it saves).
    let (small_a, small_x) = (dir.join("small.mtx"), dir.join("small.tns"));
    std::fs::write(
        &small_a,
        "%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 2.0\n",
    )
    .unwrap();
    std::fs::write(&small_x, "1 1.0\n").unwrap();
    let text = run(spmv, "2", &small_a, &small_x);
    assert!(!text.contains("parallel"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
