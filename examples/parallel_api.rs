//! The automatic parallel outer loop through the API (issue 17, item 3): each workload is run
//! with a runner of one thread and one of two, on the JIT and, when a C compiler is present,
//! the C backend (BENCHMARKS.md, "Automatic parallel loops"):
//!
//! - `einsum("y[i] += A[i, j] * x[j]")`: SpMV on a random CSR matrix of N rows and 10 N
//!   entries (uniform columns, 8-byte indices: 160 MB of arrays for N = 10⁶, against a 32 MiB
//!   L3);
//! - `einsum("C[i, k] += A[i, j] * B[j, k]")`: SpMM with a dense `B` of 16 columns (dense
//!   output), on a matrix of N / 10 rows and N entries;
//! - lazily, the row sums of SDDMM, `(A * (B Cᵀ)).sum(1)`: one fused kernel with a dense
//!   output (the SDDMM itself has `A`'s sparse pattern as its output, which no thread may
//!   append to in parallel, so it stays serial), on the same matrix with K = 16.
//!
//! ```text
//! cargo run --release --example parallel_api -- [N] [REPEATS]   # defaults 1000000 9
//! ```
//!
//! Each line: backend, workload, median ms per call (min-max) on 1 and 2 threads and on 2
//! threads with the range run as one chunk (the small-work path), and the ratio of the 1- and
//! 2-thread medians. Every call is a whole API call (plan, the output's allocation, the
//! cached kernel's run); the inputs' arrays are shared, so einsum's copies of them are free.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;
use tessera::api::{einsum_with, lazy};
use tessera::backend::CBackend;
use tessera::error::{Error, Result};
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

fn arg<T: std::str::FromStr>(args: &[String], k: usize, default: T) -> Result<T> {
    match args.get(k) {
        Some(s) => s
            .parse()
            .map_err(|_| Error::Usage(format!("argument {k}: cannot read `{s}`"))),
        None => Ok(default),
    }
}

fn csr(rows: usize, cols: usize, entries: usize, seed: u64) -> Result<Tensor> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut r: Vec<i64> = (0..entries)
        .map(|_| rng.random_range(0..rows as i64))
        .collect();
    r.sort_unstable();
    let c: Vec<i64> = (0..entries)
        .map(|_| rng.random_range(0..cols as i64))
        .collect();
    let v: Vec<f64> = (0..entries).map(|_| rng.random_range(-1.0..1.0)).collect();
    let mut t = Tensor::from_triplets("csr", &[rows, cols], &[r, c], &Buffer::from(v))?;
    t.share();
    Ok(t)
}

fn dense(shape: &[usize], seed: u64) -> Result<Tensor> {
    let mut rng = StdRng::seed_from_u64(seed);
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let mut t = Tensor::from_slice("dense", shape, &Buffer::from(v))?;
    t.share();
    Ok(t)
}

/// Median, minimum and maximum ms of `repeats` calls after two warm-up calls.
fn time(repeats: usize, mut f: impl FnMut() -> Result<Tensor>) -> Result<([f64; 3], Tensor)> {
    let mut out = f()?;
    out = f().map(|_| out)?;
    let mut times = vec![];
    for _ in 0..repeats {
        let t0 = Instant::now();
        let r = f()?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        drop(r);
    }
    times.sort_by(f64::total_cmp);
    Ok((
        [times[times.len() / 2], times[0], times[times.len() - 1]],
        out,
    ))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = arg(&args, 1, 1_000_000)?;
    let repeats: usize = arg(&args, 2, 9)?;
    let a = csr(n, n, 10 * n, 1)?;
    let x = dense(&[n], 2)?;
    let m = (n / 10).max(1);
    let s = csr(m, m, n, 3)?;
    let b = dense(&[m, 16], 4)?;
    let c = dense(&[m, 16], 5)?;
    type Make = Box<dyn Fn() -> Runner>;
    let mut backends: Vec<(&str, Make)> = vec![("jit", Box::new(Runner::jit) as Make)];
    if CBackend::new().compiler_available() {
        backends.push(("c", Box::new(|| Runner::new(Box::new(CBackend::new())))));
    }
    for (name, make) in &backends {
        type Work<'a> = Box<dyn Fn(&Runner) -> Result<Tensor> + 'a>;
        let work: Vec<(&str, Work)> = vec![
            (
                "einsum SpMV",
                Box::new(|r| {
                    einsum_with(r, "y[i] += A[i, j] * x[j]", &[("A", &a), ("x", &x)], None)
                }),
            ),
            (
                "einsum SpMM (16 dense columns)",
                Box::new(|r| {
                    einsum_with(
                        r,
                        "C[i, k] += A[i, j] * B[j, k]",
                        &[("A", &s), ("B", &b)],
                        None,
                    )
                }),
            ),
            (
                "lazy SDDMM row sums (K = 16)",
                Box::new(|r| {
                    let l = (&lazy(&s) * &lazy(&b).matmul(&lazy(&c).transpose())).sum(&[1]);
                    l.compute_with(r, None).map(|(t, _)| t)
                }),
            ),
        ];
        for (what, f) in &work {
            let mut medians = vec![];
            let mut outs = vec![];
            let mut line = format!("{name:4} {what:32}");
            // The third run: the parallel program on one chunk (the threshold's path), which
            // separates the split kernel's own cost from what the second thread brings.
            for (threads, label, min_work) in [
                (1, "1 thread", None),
                (2, "2 threads", None),
                (2, "one chunk", Some(u64::MAX)),
            ] {
                let runner = make();
                runner.set_threads(threads);
                if let Some(w) = min_work {
                    runner.set_min_parallel_work(w);
                }
                let (t, out) = time(repeats, || f(&runner))?;
                line += &format!("  {label} {:>7.2} ms ({:.2}-{:.2})", t[0], t[1], t[2]);
                medians.push(t[0]);
                outs.push(out.to_dense());
            }
            let agree = match (&outs[0], &outs[1]) {
                (Buffer::F64(p), Buffer::F64(q)) => p
                    .iter()
                    .zip(q.iter())
                    .all(|(u, v)| (u - v).abs() <= 1e-9 * (1.0 + u.abs())),
                (p, q) => p == q,
            };
            println!(
                "{line}  1/2 threads {:.2}x  agree {agree}",
                medians[0] / medians[1]
            );
        }
    }
    Ok(())
}
