//! The blocked and singular levels (SparsePoint, SparseBlockList, SparseBand) at scale: SpMV
//! answers against CSR and plain Rust loops, and the shape of their generated code.

mod common;

use common::{fmt, parse, run_jit};
use std::collections::BTreeMap;
use tessera::levels::Format;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::tensor::files::load_tensor;

const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend";

fn code(text: &str, formats: &[(&str, &str)]) -> String {
    let formats: BTreeMap<String, Format> = formats
        .iter()
        .map(|(n, f)| (n.to_string(), fmt(f)))
        .collect();
    let (k, _, _) = Runner::lower(&parse(text), &formats).unwrap_or_else(|e| panic!("{e}"));
    k.to_string()
}

fn spmv(a: &Tensor, x: &[f64]) -> Vec<f64> {
    let m = a.shape[0];
    let mut ts = BTreeMap::new();
    ts.insert("A".to_string(), a.clone());
    ts.insert(
        "x".to_string(),
        Tensor::from_dense(
            &fmt("Dense(Element(0.0))"),
            &[x.len()],
            &Buffer::F64(x.to_vec().into()),
        )
        .unwrap(),
    );
    ts.insert(
        "y".to_string(),
        Tensor::empty(&fmt("Dense(Element(0.0))"), &[m]).unwrap(),
    );
    run_jit(&parse(SPMV), &mut ts).unwrap_or_else(|e| panic!("{e}: {}", a.format));
    ts["y"]
        .to_dense()
        .to_scalars()
        .iter()
        .map(|v| v.as_f64())
        .collect()
}

/// A plain CSR loop over the tensor's stored entries.
fn reference_spmv(a: &Tensor, x: &[f64]) -> Vec<f64> {
    let mut rows = vec![vec![]; a.shape[0]];
    a.for_each_stored(&mut |c, v| rows[c[0]].push((c[1], v.as_f64())));
    rows.iter()
        .map(|r| r.iter().map(|&(j, v)| v * x[j]).sum())
        .collect()
}

/// A 10,000 × 10,000 matrix with half bandwidth 5 (entries where |i - j| <= 5).
fn banded(n: usize, half: usize) -> (Vec<Vec<i64>>, Buffer) {
    let (mut is, mut js, mut vs) = (vec![], vec![], vec![]);
    for i in 0..n {
        for j in i.saturating_sub(half)..(i + half + 1).min(n) {
            is.push(i as i64);
            js.push(j as i64);
            vs.push(((i * 7 + j * 3) % 11) as f64 - 5.0);
        }
    }
    (vec![is, js], Buffer::F64(vs.into()))
}

#[test]
fn banded_spmv_matches_csr_and_has_no_search_in_the_band() {
    let n = 10_000;
    let (coords, vals) = banded(n, 5);
    let x: Vec<f64> = (0..n).map(|j| (j % 13) as f64 - 6.0).collect();
    let csr = Tensor::from_coo(&fmt("csr"), &[n, n], &coords, &vals, |a, _| a).unwrap();
    let want = spmv(&csr, &x);
    assert_eq!(want, reference_spmv(&csr, &x));
    for f in [
        "Dense(SparseBand(Element(0.0)))",
        "Dense(SparseBlockList(Element(0.0)))",
    ] {
        let a = Tensor::from_coo(&fmt(f), &[n, n], &coords, &vals, |a, _| a).unwrap();
        a.validate("A").unwrap();
        assert_eq!(a.countstored(), csr.countstored(), "{f}");
        assert_eq!(spmv(&a, &x), want, "{f}");
    }

    // The band's entries are reached by a counted loop whose body only loads and adds: no
    // binary search anywhere, and no comparison inside the innermost loop.
    let c = code(
        SPMV,
        &[
            ("A", "Dense(SparseBand(Element(0.0)))"),
            ("x", "Dense(Element(0.0))"),
            ("y", "Dense(Element(0.0))"),
        ],
    );
    assert!(!c.contains("search"), "no search:\n{c}");
    assert!(!c.contains("while"), "no stepping loop:\n{c}");
    let inner = innermost_loop(&c);
    for cmp in ["<", ">", "==", "!=", "if "] {
        assert!(
            !inner.contains(cmp),
            "no `{cmp}` per entry in the band:\n{inner}\n--- whole kernel:\n{c}"
        );
    }
}

/// The body of the last `for` loop that contains no other loop.
fn innermost_loop(code: &str) -> String {
    let lines: Vec<&str> = code.lines().collect();
    let mut best = String::new();
    for (k, l) in lines.iter().enumerate() {
        if !l.trim_start().starts_with("for ") {
            continue;
        }
        let indent = l.len() - l.trim_start().len();
        let mut body = vec![];
        for m in &lines[k + 1..] {
            let ind = m.len() - m.trim_start().len();
            if ind <= indent && !m.trim().is_empty() {
                break;
            }
            body.push(*m);
        }
        if !body
            .iter()
            .any(|m| m.trim_start().starts_with("for ") || m.trim_start().starts_with("while "))
        {
            best = body.join("\n");
        }
    }
    assert!(!best.is_empty(), "a counted loop exists:\n{code}");
    best
}

#[test]
fn sparse_point_reads_without_a_loop() {
    let c = code(
        "s .= 0\nfor i = _\n  s[] += x[i]\nend",
        &[("x", "SparsePoint(Element(0.0))"), ("s", "Element(0.0)")],
    );
    assert!(
        !c.contains("for ") && !c.contains("while "),
        "no loop at all:\n{c}"
    );
    // A permutation matrix: one entry per row.
    let n = 1000;
    let perm: Vec<i64> = (0..n as i64).map(|i| (i * 389) % n as i64).collect();
    let coords = vec![(0..n as i64).collect::<Vec<_>>(), perm];
    let vals = Buffer::F64((0..n).map(|i| (i % 5) as f64 + 1.0).collect());
    let a = Tensor::from_coo(
        &fmt("Dense(SparsePoint(Element(0.0)))"),
        &[n, n],
        &coords,
        &vals,
        |a, _| a,
    )
    .unwrap();
    let x: Vec<f64> = (0..n).map(|j| j as f64).collect();
    assert_eq!(spmv(&a, &x), reference_spmv(&a, &x));
}

/// SpMV on real matrices, each stored in the new formats, against a plain loop.
#[test]
fn real_matrices_spmv() {
    let Some(dir) = common::data_dir("real_matrices_spmv") else {
        return;
    };
    for name in ["west0067", "1138_bus", "olm1000", "impcol_a"] {
        let path = dir.join(format!("matrices/{name}.mtx"));
        if !path.exists() {
            eprintln!("skipping {name}: {} is absent", path.display());
            continue;
        }
        let csr = load_tensor(path.to_str().unwrap(), Some("csr")).unwrap();
        let n = csr.shape[1];
        let x: Vec<f64> = (0..n).map(|j| (j % 7) as f64 - 3.0).collect();
        let want = reference_spmv(&csr, &x);
        for f in [
            "Dense(SparseBand(Element(0.0)))",
            "Dense(SparseBlockList(Element(0.0)))",
            "SparseBlockList(SparseBand(Element(0.0)))",
        ] {
            let a = csr.to_format(&fmt(f)).unwrap();
            a.validate(name).unwrap();
            let got = spmv(&a, &x);
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-9 * w.abs().max(1.0),
                    "{name} {f} row {k}: {g} vs {w}"
                );
            }
        }
        // SparsePoint keeps one entry per row: the first of each row.
        let (mut coords, mut vals) = (vec![vec![], vec![]], vec![]);
        let mut seen = vec![false; csr.shape[0]];
        csr.for_each_stored(&mut |c, v| {
            if !seen[c[0]] {
                seen[c[0]] = true;
                coords[0].push(c[0] as i64);
                coords[1].push(c[1] as i64);
                vals.push(v.as_f64());
            }
        });
        let a = Tensor::from_coo(
            &fmt("Dense(SparsePoint(Element(0.0)))"),
            &csr.shape,
            &coords,
            &Buffer::F64(vals.into()),
            |a, _| a,
        )
        .unwrap();
        let want = reference_spmv(&a, &x);
        assert_eq!(spmv(&a, &x), want, "{name} SparsePoint");
    }
}
