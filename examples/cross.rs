//! The batched cross product written with the Levi-Civita symbol (issue 15):
//! `c[n, i] += eps[i, j, k] * a[n, j] * b[n, k]` over N vector pairs. The EIN lowering
//! (`transforms::ein`) expands ε into its six signed permutations, so the kernel is one loop
//! over `n` with the six products of a cross product and no loop over ε's 27 entries.
//!
//! ```text
//! cargo run --release --example cross -- [N] [REPEATS] [--dump DIR]
//! #   defaults 10000000 5
//! ```
//!
//! Prints one JSON line per backend (the JIT, and the C backend when a compiler is present):
//! compile time and the median kernel time; `--dump DIR` writes `a.npy`, `b.npy` (N × 3 f64)
//! and Tessera's `c.npy`, so `bench/cross.py` checks and times `numpy.cross` on the same data.

mod common;

use common::{Uniform, median};
use std::collections::BTreeMap;
use std::time::Instant;
use tessera::backend::CBackend;
use tessera::error::{Error, Result};
use tessera::io::DenseData;
use tessera::levels::Format;
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

const PROGRAM: &str = "c .= 0
for n = _, i = _, j = _, k = _
  c[n, i] += eps[i, j, k] * a[n, j] * b[n, k]
end
";

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args = common::Args::from_env();
    let (n, repeats) = (args.num(0, 10_000_000usize)?, args.num(1, 5usize)?.max(1));
    let mut rng = Uniform(7);
    let a: Vec<f64> = (0..3 * n).map(|_| rng.next() * 2.0 - 1.0).collect();
    let b: Vec<f64> = (0..3 * n).map(|_| rng.next() * 2.0 - 1.0).collect();
    let format = Format::parse("Dense(Dense(Element(0.0)))", None)?;
    let mut tensors = BTreeMap::new();
    tensors.insert(
        "a".to_string(),
        Tensor::from_dense(&format, &[n, 3], &Buffer::F64(a.clone().into()))?,
    );
    tensors.insert(
        "b".to_string(),
        Tensor::from_dense(&format, &[n, 3], &Buffer::F64(b.clone().into()))?,
    );
    tensors.insert("c".to_string(), Tensor::empty(&format, &[n, 3])?);
    let formats = tensors
        .iter()
        .map(|(k, t)| (k.clone(), t.format.clone()))
        .collect();
    let program = parse_program(PROGRAM)?;
    let mut runners = vec![("jit", Runner::jit())];
    let c = CBackend::new();
    if c.compiler_available() {
        runners.push(("c", Runner::new(Box::new(c))));
    }
    for (name, runner) in &runners {
        let t0 = Instant::now();
        let kernel = runner.compile(&program, &formats)?;
        let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
        runner.execute(&kernel, &mut tensors)?;
        let mut times = vec![];
        for _ in 0..repeats {
            let t = Instant::now();
            runner.execute(&kernel, &mut tensors)?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        // Every run starts from `c .= 0`: the result is one cross product, checked here.
        let got = tensors["c"].to_dense();
        let got = got.as_f64().expect("f64 output");
        for r in (0..n).step_by((n / 1000).max(1)) {
            let (x, y) = (&a[3 * r..3 * r + 3], &b[3 * r..3 * r + 3]);
            let want = [
                x[1] * y[2] - x[2] * y[1],
                x[2] * y[0] - x[0] * y[2],
                x[0] * y[1] - x[1] * y[0],
            ];
            for i in 0..3 {
                if (got[3 * r + i] - want[i]).abs() > 1e-12 {
                    return Err(Error::Usage(format!(
                        "{name}: c[{r}, {i}] = {} but the cross product is {}",
                        got[3 * r + i],
                        want[i]
                    )));
                }
            }
        }
        println!(
            "{{\"backend\": \"{name}\", \"n\": {n}, \"compile_ms\": {compile_ms:.3}, \"median_ms\": {:.4}}}",
            median(times)
        );
    }
    if let Some(dir) = &args.dump {
        let io = |e: std::io::Error| Error::Usage(format!("--dump {dir}: {e}"));
        std::fs::create_dir_all(dir).map_err(io)?;
        let c = tensors["c"].to_dense();
        for (file, values) in [
            ("a", Buffer::F64(a.into())),
            ("b", Buffer::F64(b.into())),
            ("c", c),
        ] {
            let mut f = std::fs::File::create(format!("{dir}/{file}.npy")).map_err(io)?;
            tessera::io::npy::write_npy(
                &mut f,
                &DenseData {
                    shape: vec![n, 3],
                    values,
                },
            )?;
        }
    }
    Ok(())
}
