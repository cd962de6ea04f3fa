//! SDDMM through lazy fusion against the unfused dense computation (issue 5's benchmark):
//! `A * (B @ Cᵀ)` with a sparse `A` (N × N, density D) and dense N × K factors. Fused, the
//! product of the factors is computed only at `A`'s stored entries, in one kernel; unfused,
//! `B @ Cᵀ` is a dense N × N matrix first, then multiplied elementwise by `A`.
//!
//! ```text
//! cargo run --release --example sddmm -- [N] [K] [DENSITY] [REPEATS]   # defaults 5000 64 0.001 5
//! ```
//!
//! Prints the median times, their ratio and whether the two results agree, and with `--json`
//! one JSON line instead. `--dump DIR` also writes the inputs and the fused result there
//! (`A.mtx`, `B.npy`, `C.npy`, `out.mtx`), so other libraries can be run and checked on the
//! same data (`bench/studies/sddmm.py`).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;
use tessera::api::{self, lazy};
use tessera::error::{Error, Result};
use tessera::levels::Format;
use tessera::runtime::Buffer;
use tessera::tensor::files::write_tensor;
use tessera::tensor::{Tensor, random_sparse};

fn arg<T: std::str::FromStr>(args: &[String], k: usize, default: T) -> Result<T> {
    match args.get(k) {
        Some(s) => s
            .parse()
            .map_err(|_| Error::Usage(format!("argument {}: cannot read `{s}`", k + 1))),
        None => Ok(default),
    }
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    args.retain(|a| a != "--json");
    let dump = match args.iter().position(|a| a == "--dump") {
        Some(k) if k + 1 < args.len() => {
            let dir = args.remove(k + 1);
            args.remove(k);
            Some(dir)
        }
        Some(_) => return Err(Error::Usage("--dump needs a directory".into())),
        None => None,
    };
    let n: usize = arg(&args, 0, 5000)?;
    let k: usize = arg(&args, 1, 64)?;
    let density: f64 = arg(&args, 2, 0.001)?;
    let repeats: usize = arg(&args, 3, 5)?.max(1);
    let csr = Format::parse("Dense(SparseList(Element(0.0)))", Some(2))?;
    let a = random_sparse(&csr, &[n, n], density, 1)?;
    let mut rng = StdRng::seed_from_u64(2);
    let mut factor = || {
        let v: Vec<f64> = (0..n * k).map(|_| rng.random_range(-1.0..1.0)).collect();
        Tensor::from_slice("dense", &[n, k], &Buffer::F64(v.into()))
    };
    let (b, c) = (factor()?, factor()?);

    let (la, lb, lc) = (lazy(&a), lazy(&b), lazy(&c));
    let expr = &la * &lb.matmul(&lc.transpose());
    let (mut fused, statements) = expr.compute_explained()?;
    let mut fused_ms = vec![];
    for _ in 0..repeats {
        let t0 = Instant::now();
        fused = expr.compute()?;
        fused_ms.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let ct = api::transpose(&c)?;
    let mut unfused = api::mul(&a, &api::matmul(&b, &ct)?)?;
    let mut unfused_ms = vec![];
    for _ in 0..repeats {
        let t0 = Instant::now();
        let ct = api::transpose(&c)?;
        unfused = api::mul(&a, &api::matmul(&b, &ct)?)?;
        unfused_ms.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let (f, u) = (fused.to_dense(), unfused.to_dense());
    let (f, u) = (f.to_scalars(), u.to_scalars());
    let agree = f
        .iter()
        .zip(&u)
        .all(|(x, y)| (x.as_f64() - y.as_f64()).abs() <= 1e-9 * (1.0 + y.as_f64().abs()));
    let (fm, um) = (median(fused_ms), median(unfused_ms));
    if json {
        let line = serde_json::json!({
            "n": n,
            "k": k,
            "density": density,
            "nnz": a.countstored(),
            "fused_ms": fm,
            "unfused_ms": um,
            "ratio": um / fm,
            "kernels": statements.len(),
            "agree": agree,
        });
        println!("{line}");
    } else {
        println!(
            "SDDMM N={n} K={k} density={density} nnz={}",
            a.countstored()
        );
        println!(
            "fused (lazy/compute, {} kernel): {fm:.3} ms",
            statements.len()
        );
        println!("  {}", statements.join("\n  "));
        println!("unfused dense (matmul then mul): {um:.3} ms");
        println!(
            "ratio unfused/fused: {:.1}x; results agree: {agree}",
            um / fm
        );
    }
    if !agree {
        return Err(Error::Usage("fused and unfused results differ".into()));
    }
    if let Some(dir) = dump {
        let path = |f: &str| format!("{dir}/{f}");
        write_tensor(&path("A.mtx"), &a)?;
        write_tensor(&path("B.npy"), &b)?;
        write_tensor(&path("C.npy"), &c)?;
        write_tensor(&path("out.mtx"), &fused)?;
    }
    Ok(())
}
