//! `tessera demo`: the showcase on generated data, no arguments needed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;
use tessera::error::Result;
use tessera::levels::Format;
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::{Tensor, random_sparse};

const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";
const DOT: &str = "s .= 0\nfor i = _\n  s[] += a[i] * b[i]\nend\n";

pub fn demo() -> Result<String> {
    let mut out = String::new();
    let runner = Runner::jit();
    let csr = Format::parse("csr", None)?;
    let dense1 = Format::parse("Dense(Element(0.0))", None)?;
    let sparse1 = Format::parse("SparseList(Element(0.0))", None)?;

    // 1. SpMV on a random 20,000 x 20,000 matrix with 0.05% density, checked against plain Rust.
    let n = 20_000;
    let a = random_sparse(&csr, &[n, n], 0.0005, 1)?;
    let x = Tensor::from_dense(
        &dense1,
        &[n],
        &Buffer::F64((0..n).map(|k| (k % 7) as f64 - 3.0).collect()),
    )?;
    let program = parse_program(SPMV)?;
    let mut tensors = BTreeMap::from([
        ("A".to_string(), a),
        ("x".to_string(), x),
        ("y".to_string(), Tensor::empty(&dense1, &[n])?),
    ]);
    let formats = tensors
        .iter()
        .map(|(k, t)| (k.clone(), t.format.clone()))
        .collect();
    let c = runner.compile(&program, &formats)?;
    let compile_ms = *runner.last_compile_ms.borrow();
    let t0 = Instant::now();
    runner.execute(&c, &mut tensors)?;
    let run_ms = t0.elapsed().as_secs_f64() * 1e3;
    let expected = reference_spmv(&tensors["A"], &tensors["x"]);
    let got = tensors["y"].to_dense();
    let max_err = expected
        .iter()
        .zip(got.as_f64().unwrap_or(&[]))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let _ = writeln!(
        out,
        "== SpMV, A: {n}x{n} CSR with {} stored entries",
        tensors["A"].countstored()
    );
    let _ = writeln!(out, "{SPMV}");
    let _ = writeln!(out, "generated loop IR:\n{}", c.ir);
    let _ = writeln!(
        out,
        "compile {compile_ms:.2} ms, run {run_ms:.3} ms, max |error| vs plain Rust CSR: {max_err:e}"
    );

    // 2. A second call with new data of the same formats compiles nothing.
    let _ = runner.compile(&program, &formats)?;
    let _ = writeln!(
        out,
        "second compile (cache hit): {:.3} ms, kernels cached: {}\n",
        *runner.last_compile_ms.borrow(),
        runner.cache_len()
    );

    // 3. Sparse dot product: one coiterating loop over two lists.
    let m = 1_000_000;
    let a = random_sparse(&sparse1, &[m], 0.01, 2)?;
    let b = random_sparse(&sparse1, &[m], 0.01, 3)?;
    let dot = parse_program(DOT)?;
    let scalar = Format::parse("Element(0.0)", None)?;
    let mut ts = BTreeMap::from([
        ("a".to_string(), a),
        ("b".to_string(), b),
        ("s".to_string(), Tensor::empty(&scalar, &[])?),
    ]);
    let formats = ts
        .iter()
        .map(|(k, t)| (k.clone(), t.format.clone()))
        .collect();
    let c = runner.compile(&dot, &formats)?;
    let t0 = Instant::now();
    runner.execute(&c, &mut ts)?;
    let _ = writeln!(
        out,
        "== sparse dot of two {m}-vectors ({} and {} stored): s = {} in {:.3} ms",
        ts["a"].countstored(),
        ts["b"].countstored(),
        ts["s"].get(&[])?,
        t0.elapsed().as_secs_f64() * 1e3
    );
    let _ = writeln!(out, "{}", c.ir);

    // 4. The work follows the structure: SpMV on 10^7 x 10^7 with 10^7 entries.
    let big = 10_000_000usize;
    let a = Tensor {
        shape: vec![big, big],
        format: csr.clone(),
        levels: vec![
            vec![],
            vec![
                Buffer::I64((0..=big as i64).collect()),
                Buffer::I64((0..big).map(|i| ((i * 7919) % big) as i64).collect()),
            ],
            vec![Buffer::F64(vec![1.0; big].into())],
        ],
    };
    let x = Tensor {
        shape: vec![big],
        format: dense1.clone(),
        levels: vec![vec![], vec![Buffer::F64(vec![2.0; big].into())]],
    };
    let mut tensors = BTreeMap::from([
        ("A".to_string(), a),
        ("x".to_string(), x),
        ("y".to_string(), Tensor::empty(&dense1, &[big])?),
    ]);
    let formats = tensors
        .iter()
        .map(|(k, t)| (k.clone(), t.format.clone()))
        .collect();
    let c = runner.compile(&program, &formats)?;
    let t0 = Instant::now();
    runner.execute(&c, &mut tensors)?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let sum: f64 = tensors["y"]
        .to_dense()
        .as_f64()
        .map(|v| v.iter().sum())
        .unwrap_or(0.0);
    let _ = writeln!(
        out,
        "== SpMV on {big}x{big} with {big} entries: {ms:.1} ms (sum of y = {sum})"
    );
    Ok(out)
}

fn reference_spmv(a: &Tensor, x: &Tensor) -> Vec<f64> {
    let mut y = vec![0.0; a.shape[0]];
    let xs = x.to_dense();
    let xs = xs.as_f64().unwrap_or(&[]);
    a.for_each_stored(&mut |c, v| y[c[0]] += v.as_f64() * xs[c[1]]);
    y
}
