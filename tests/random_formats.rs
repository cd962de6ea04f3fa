//! Formats that take writes in any order (SparseByteMap, SparseDict) on the kernels they exist
//! for: Gustavson's row-by-row SpGEMM with a workspace declared inside the row loop, the
//! outer-product SpGEMM with a hash-map accumulator, and SpMV reading them. Checked against
//! plain Rust loops on real matrices and against the reference evaluator on small random ones.

mod common;

use common::{fmt, parse, run_eval, run_jit};
use std::collections::{BTreeMap, HashMap};
use tessera::KernelErrorKind;
use tessera::kernel_error::Order;
use tessera::runtime::Buffer;
use tessera::tensor::files::load_tensor;
use tessera::tensor::{Tensor, random_sparse};

const GUSTAVSON: &str = "C .= 0
for i = _
  w .= 0
  for k = _, j = _
    w[j] += A[i, k] * B[k, j]
  end
  for j = _
    C[i, j] = w[j]
  end
end
";

/// Square matrices small enough for a dense comparison.
const MATRICES: &[&str] = &["karate", "west0067", "494_bus", "1138_bus"];

fn entries(a: &Tensor) -> Vec<(usize, usize, f64)> {
    let mut out = vec![];
    a.for_each_stored(&mut |c, v| out.push((c[0], c[1], v.as_f64())));
    out
}

/// `A * B` row by row with a hash map per row: the plain Rust reference.
fn spgemm_reference(
    a: &[(usize, usize, f64)],
    b: &[(usize, usize, f64)],
    m: usize,
    n: usize,
) -> Vec<f64> {
    let mut rows: HashMap<usize, Vec<(usize, f64)>> = HashMap::new();
    for &(k, j, v) in b {
        rows.entry(k).or_default().push((j, v));
    }
    let mut c = vec![0.0; m * n];
    for &(i, k, x) in a {
        for &(j, y) in rows.get(&k).map(|r| r.as_slice()).unwrap_or(&[]) {
            c[i * n + j] += x * y;
        }
    }
    c
}

fn assert_close(got: &Buffer, want: &[f64], what: &str) {
    let got: Vec<f64> = got.to_scalars().iter().map(|v| v.as_f64()).collect();
    assert_eq!(got.len(), want.len(), "{what}: sizes differ");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-9 * w.abs().max(1.0),
            "{what}: entry {k} is {g}, expected {w}"
        );
    }
}

fn spgemm_tensors(
    a: &Tensor,
    b: &Tensor,
    w_format: &str,
    c_format: &str,
) -> BTreeMap<String, Tensor> {
    let (m, n) = (a.shape[0], b.shape[1]);
    let mut ts = BTreeMap::new();
    ts.insert("A".to_string(), a.clone());
    ts.insert("B".to_string(), b.clone());
    ts.insert(
        "w".to_string(),
        Tensor::empty(&fmt(w_format), &[n]).unwrap(),
    );
    ts.insert(
        "C".to_string(),
        Tensor::empty(&fmt(c_format), &[m, n]).unwrap(),
    );
    ts
}

#[test]
fn gustavson_spgemm_on_real_matrices() {
    let Some(dir) = common::data_dir("gustavson_spgemm_on_real_matrices") else {
        return;
    };
    let csr = "Dense(SparseList(Element(0.0)))";
    for name in MATRICES {
        let path = dir.join(format!("matrices/{name}.mtx"));
        if !path.exists() {
            eprintln!("skipping {name}: {} is absent", path.display());
            continue;
        }
        let a = load_tensor(path.to_str().unwrap(), Some(csr)).unwrap();
        let n = a.shape[0];
        assert_eq!(n, a.shape[1], "{name} is square");
        let es = entries(&a);
        let want = spgemm_reference(&es, &es, n, n);
        let mut ts = spgemm_tensors(&a, &a, "SparseByteMap(Element(0.0))", csr);
        run_jit(&parse(GUSTAVSON), &mut ts).unwrap_or_else(|e| panic!("{name}: {e}"));
        ts["C"].validate("C").unwrap();
        assert_close(&ts["C"].to_dense(), &want, &format!("{name} A*A"));
    }
}

#[test]
fn gustavson_spgemm_matches_evaluator() {
    for seed in 0..30u64 {
        let (m, k, n) = (
            (seed % 5) as usize + 1,
            (seed % 4) as usize + 2,
            (seed % 6) as usize + 1,
        );
        let csr = fmt("Dense(SparseList(Element(0.0)))");
        let a = random_sparse(&csr, &[m, k], 0.4, seed).unwrap();
        let b = random_sparse(&csr, &[k, n], 0.4, seed + 100).unwrap();
        let ts = spgemm_tensors(
            &a,
            &b,
            "SparseByteMap(Element(0.0))",
            "Dense(SparseList(Element(0.0)))",
        );
        let program = parse(GUSTAVSON);
        let exp = run_eval(&program, &ts).unwrap();
        let mut got = ts.clone();
        run_jit(&program, &mut got).unwrap();
        assert_eq!(got["C"].to_dense(), exp["C"], "seed {seed}");
        got["C"].validate("C").unwrap();
    }
}

/// Long rows: a workspace row of 64 slots or more is ordered at its freeze by listing the
/// flags of its range (when the range is short: banded matrices), by a radix sort or by
/// comparisons (`runtime::intrinsics::sort_slots`); so are the rows of a `SparseByteMap`
/// output, whose slots of all rows are ordered at once. Random banded and scattered matrices
/// in several formats, on the JIT, the IR interpreter and C, against the reference evaluator.
#[test]
fn gustavson_spgemm_long_rows_on_every_backend() {
    use proptest::prelude::*;
    const INPUTS: &[&str] = &[
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseByteMap(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
    ];
    const OUTPUTS: &[&str] = &[
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseByteMap(Element(0.0)))",
    ];
    let runners = common::runners();
    let program = parse(GUSTAVSON);
    // (n, half bandwidth or none for scattered columns, entries per row, seed, formats)
    let strategy = (
        64usize..150,
        prop::option::of(8usize..48),
        2usize..12,
        any::<u64>(),
        0..INPUTS.len(),
        0..INPUTS.len(),
        0..OUTPUTS.len(),
    );
    common::cases::run_cases(
        "gustavson long rows",
        12,
        strategy,
        |(n, band, per_row, seed, fa, fb, fc)| {
            use rand::{Rng, SeedableRng};
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut matrix = |f: &str| {
                let (mut coords, mut vals) = ([vec![], vec![]], vec![]);
                for i in 0..n {
                    for _ in 0..per_row {
                        let j = match band {
                            Some(b) => (i + rng.random_range(0..=2 * b))
                                .saturating_sub(b)
                                .min(n - 1),
                            None => rng.random_range(0..n),
                        };
                        coords[0].push(i as i64);
                        coords[1].push(j as i64);
                        vals.push(rng.random_range(-4i32..=4) as f64 * 0.5);
                    }
                }
                // Duplicates keep the first value (a sum could cancel to a stored zero).
                let vals = Buffer::F64(vals.into());
                Tensor::from_coo(&fmt(f), &[n, n], &coords, &vals, |a, _| a).unwrap()
            };
            let (a, b) = (matrix(INPUTS[fa]), matrix(INPUTS[fb]));
            let ts = spgemm_tensors(&a, &b, "SparseByteMap(Element(0.0))", OUTPUTS[fc]);
            let want = run_eval(&program, &ts).unwrap();
            let dense = want["C"].as_f64().unwrap();
            let widest = (0..n)
                .map(|i| (0..n).filter(|&j| dense[i * n + j] != 0.0).count())
                .max();
            for (name, r) in &runners {
                let mut got = ts.clone();
                let k = r.compile(&program, &common::formats_of(&got)).unwrap();
                r.execute(&k, &mut got).unwrap();
                got["C"].validate("C").unwrap();
                prop_assert_eq!(
                    got["C"].to_dense(),
                    want["C"].clone(),
                    "{} on {} * {} into {}, n {} (widest row {:?})",
                    name,
                    INPUTS[fa],
                    INPUTS[fb],
                    OUTPUTS[fc],
                    n,
                    widest
                );
            }
            Ok(())
        },
    );
}

/// Outer products: for each k, add column k of A times row k of B into a hash-map accumulator.
const OUTER: &str = "D .= 0
for k = _, i = _, j = _
  D[i, j] += AT[k, i] * B[k, j]
end
";

#[test]
fn outer_product_spgemm_with_a_dict_accumulator() {
    let csr = fmt("Dense(SparseList(Element(0.0)))");
    let dd = "SparseDict(SparseDict(Element(0.0)))";
    let mut cases: Vec<(String, Tensor, Tensor)> = vec![];
    for seed in 0..20u64 {
        let (m, k, n) = (
            (seed % 5) as usize + 1,
            (seed % 4) as usize + 2,
            (seed % 6) as usize + 1,
        );
        let a = random_sparse(&csr, &[m, k], 0.4, seed).unwrap();
        let b = random_sparse(&csr, &[k, n], 0.4, seed + 100).unwrap();
        cases.push((format!("seed {seed}"), a, b));
    }
    if let Some(dir) = common::data_dir("outer_product_spgemm_with_a_dict_accumulator") {
        for name in ["karate", "west0067"] {
            let path = dir.join(format!("matrices/{name}.mtx"));
            if let Ok(a) = load_tensor(
                path.to_str().unwrap(),
                Some("Dense(SparseList(Element(0.0)))"),
            ) {
                cases.push((name.to_string(), a.clone(), a));
            }
        }
    }
    for (what, a, b) in cases {
        let (m, n) = (a.shape[0], b.shape[1]);
        let at = transpose(&a);
        let mut ts = BTreeMap::new();
        ts.insert("AT".to_string(), at);
        ts.insert("B".to_string(), b.clone());
        ts.insert("D".to_string(), Tensor::empty(&fmt(dd), &[m, n]).unwrap());
        run_jit(&parse(OUTER), &mut ts).unwrap_or_else(|e| panic!("{what}: {e}"));
        ts["D"].validate("D").unwrap();
        let want = spgemm_reference(&entries(&a), &entries(&b), m, n);
        assert_close(&ts["D"].to_dense(), &want, &format!("{what} outer product"));
        // Gustavson with a SparseDict workspace gives the same product.
        let mut ts = spgemm_tensors(
            &a,
            &b,
            "SparseDict(Element(0.0))",
            "Dense(SparseList(Element(0.0)))",
        );
        run_jit(&parse(GUSTAVSON), &mut ts).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_close(
            &ts["C"].to_dense(),
            &want,
            &format!("{what} Gustavson with a dict"),
        );
    }
}

fn transpose(a: &Tensor) -> Tensor {
    let es = entries(a);
    let coords = vec![
        es.iter().map(|e| e.1 as i64).collect(),
        es.iter().map(|e| e.0 as i64).collect(),
    ];
    let vals = Buffer::F64(es.iter().map(|e| e.2).collect());
    Tensor::from_coo(
        &a.format,
        &[a.shape[1], a.shape[0]],
        &coords,
        &vals,
        |x, _| x,
    )
    .unwrap()
}

#[test]
fn spmv_reads_random_formats_on_real_matrices() {
    let Some(dir) = common::data_dir("spmv_reads_random_formats_on_real_matrices") else {
        return;
    };
    for name in ["west0067", "1138_bus"] {
        let path = dir.join(format!("matrices/{name}.mtx"));
        if !path.exists() {
            eprintln!("skipping {name}: {} is absent", path.display());
            continue;
        }
        let a = load_tensor(
            path.to_str().unwrap(),
            Some("Dense(SparseList(Element(0.0)))"),
        )
        .unwrap();
        let (m, n) = (a.shape[0], a.shape[1]);
        // The plain CSR loop.
        let es = entries(&a);
        let x: Vec<f64> = (0..n).map(|j| (j % 7) as f64 - 3.0).collect();
        let mut want = vec![0.0; m];
        for &(i, j, v) in &es {
            want[i] += v * x[j];
        }
        for format in [
            "Dense(SparseByteMap(Element(0.0)))",
            "Dense(SparseDict(Element(0.0)))",
        ] {
            let af = a.to_format(&fmt(format)).unwrap();
            af.validate("A").unwrap();
            for text in [
                "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend",
                "y .= 0\nfor i = _, j = _\n  y[i] += A[i, follow(j)] * x[j]\nend",
            ] {
                let mut ts = BTreeMap::new();
                ts.insert("A".to_string(), af.clone());
                ts.insert(
                    "x".to_string(),
                    Tensor::from_dense(
                        &fmt("Dense(Element(0.0))"),
                        &[n],
                        &Buffer::F64(x.clone().into()),
                    )
                    .unwrap(),
                );
                ts.insert(
                    "y".to_string(),
                    Tensor::empty(&fmt("Dense(Element(0.0))"), &[m]).unwrap(),
                );
                run_jit(&parse(text), &mut ts).unwrap_or_else(|e| panic!("{name} {format}: {e}"));
                assert_close(
                    &ts["y"].to_dense(),
                    &want,
                    &format!("{name} {format} {text}"),
                );
            }
        }
    }
}

/// Writes in any order into SparseCOO: transposed loops and scatters are sorted at freeze,
/// and give the evaluator's answer; a repeated entry is a clear error.
#[test]
fn sparse_coo_takes_writes_in_any_order() {
    let programs = [
        (
            "C .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j] * 2\nend\n",
            "SparseCOO{2}(Element(0.0))",
        ),
        (
            "C .= 0\nfor j = _, i = _\n  C[i, j] += A[i, j]\nend\n",
            "Dense(SparseCOO{1}(Element(0.0)))",
        ),
        (
            "C .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j] > 3\nend\n",
            "SparseCOO{2}(Pattern())",
        ),
        (
            "C .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n",
            "SparseCOO{1}(Dense(Element(0.0)))",
        ),
    ];
    for (text, out) in programs {
        for seed in 0..20u64 {
            let (m, n) = (1 + seed as usize % 6, 1 + (seed as usize * 7) % 5);
            let mut tensors = BTreeMap::new();
            tensors.insert(
                "A".to_string(),
                random_sparse(&fmt("Dense(SparseList(Element(0.0)))"), &[m, n], 0.5, seed).unwrap(),
            );
            tensors.insert("C".to_string(), Tensor::empty(&fmt(out), &[m, n]).unwrap());
            let program = parse(text);
            let want = run_eval(&program, &tensors).unwrap();
            match run_jit(&program, &mut tensors) {
                Ok(()) => {
                    tensors["C"].validate("C").unwrap();
                    assert_eq!(tensors["C"].to_dense(), want["C"], "{text} into {out}");
                }
                // A sub-level below the COO level cannot be sorted; it says so.
                Err(e) => assert!(
                    out.starts_with("SparseCOO{1}(Dense")
                        && matches!(&e, tessera::Error::Kernel(k) if matches!(k.kind, KernelErrorKind::OutOfOrder { order: Order::Sorted, .. })),
                    "{text} into {out}: {e}"
                ),
            }
        }
    }
    // A scatter: y[P[k]] = x[k] with a permutation P.
    let n = 50;
    let p: Vec<f64> = (0..n).map(|k| ((k * 17 + 3) % n) as f64).collect();
    let mut tensors = BTreeMap::new();
    tensors.insert(
        "P".to_string(),
        Tensor::from_dense(
            &fmt("Dense(Element(0))"),
            &[n],
            &Buffer::F64(p.clone().into()),
        )
        .unwrap(),
    );
    let x: Vec<f64> = (0..n).map(|k| k as f64 + 1.0).collect();
    tensors.insert(
        "x".to_string(),
        Tensor::from_dense(
            &fmt("Dense(Element(0.0))"),
            &[n],
            &Buffer::F64(x.clone().into()),
        )
        .unwrap(),
    );
    tensors.insert(
        "y".to_string(),
        Tensor::empty(&fmt("SparseCOO{1}(Element(0.0))"), &[n]).unwrap(),
    );
    let scatter = parse("y .= 0\nfor k = _\n  y[P[k]] = x[k]\nend\n");
    run_jit(&scatter, &mut tensors).unwrap();
    tensors["y"].validate("y").unwrap();
    let mut want = vec![0.0; n];
    for k in 0..n {
        want[p[k] as usize] = x[k];
    }
    assert_eq!(tensors["y"].to_dense(), Buffer::F64(want.into()));
    // The same scatter with a repeated target cannot be stored.
    let mut dup = p.clone();
    dup[7] = dup[3];
    tensors.insert(
        "P".to_string(),
        Tensor::from_dense(&fmt("Dense(Element(0))"), &[n], &Buffer::F64(dup.into())).unwrap(),
    );
    let e = run_jit(&scatter, &mut tensors).unwrap_err();
    assert!(
        matches!(&e, tessera::Error::Kernel(k) if k.kind == KernelErrorKind::Duplicate { level: "SparseCOO" } && k.tensor.as_deref() == Some("y")),
        "{e}"
    );
    assert!(e.to_string().contains("written twice"), "{e}");
}
