//! Where a parallel loop starts to pay: einsum SpMV (`y[i] += A[i, j] * x[j]`, CSR, 8 entries
//! per row, weighted chunks) and a dense elementwise sum (`y[i] = a[i] + b[i]`, chunks of
//! indices) at growing sizes, on one thread and on two with every range split
//! (`Runner::set_min_parallel_work(0)`), on the JIT and, when a C compiler is present, the C
//! backend. The sizes where the two-thread time drops below the one-thread time bound
//! `backend::parallel::MIN_PARALLEL_WORK` (BENCHMARKS.md, "Automatic parallel loops").
//!
//! ```text
//! cargo run --release --example parallel_threshold -- [REPEATS]   # default 7
//! ```
//!
//! Each line: the backend, the statement, the work (entries or indices), the median time per
//! call in µs with the spread (min-max) of the repeats on 1 thread, on 2 threads splitting
//! every range, and on 2 threads with the default threshold, and the ratios to 1 thread.

use std::time::Instant;
use tessera::api::einsum_with;
use tessera::backend::CBackend;
use tessera::backend::parallel::MIN_PARALLEL_WORK;
use tessera::error::{Error, Result};
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

fn csr(n: usize, per_row: usize) -> Result<Tensor> {
    let mut rows = Vec::with_capacity(n * per_row);
    let mut cols = Vec::with_capacity(n * per_row);
    let mut vals = Vec::with_capacity(n * per_row);
    for i in 0..n {
        for k in 0..per_row {
            rows.push(i as i64);
            // Spread over the row, distinct columns.
            cols.push(((i * 7919 + k * (n / per_row).max(1)) % n) as i64);
            vals.push(1.0 + (k % 3) as f64);
        }
    }
    let mut t = Tensor::from_triplets("csr", &[n, n], &[rows, cols], &Buffer::from(vals))?;
    // einsum clones its inputs: shared arrays make that free, so only the kernel is timed.
    t.share();
    Ok(t)
}

fn dense(n: usize, shift: f64) -> Result<Tensor> {
    let v: Vec<f64> = (0..n).map(|k| k as f64 * 0.5 + shift).collect();
    let mut t = Tensor::from_slice("dense", &[n], &Buffer::from(v))?;
    t.share();
    Ok(t)
}

/// Median, minimum and maximum of per-call times (µs) over `repeats` batches of calls, each
/// batch long enough (about 20 ms) for the clock.
fn time(
    runner: &Runner,
    spec: &str,
    inputs: &[(&str, &Tensor)],
    repeats: usize,
) -> Result<[f64; 3]> {
    let t0 = Instant::now();
    einsum_with(runner, spec, inputs, None)?;
    let once = t0.elapsed().as_secs_f64().max(1e-7);
    let calls = ((0.02 / once) as usize).clamp(1, 100_000);
    let mut times = vec![];
    for _ in 0..repeats {
        let t0 = Instant::now();
        for _ in 0..calls {
            einsum_with(runner, spec, inputs, None)?;
        }
        times.push(t0.elapsed().as_secs_f64() * 1e6 / calls as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok([times[times.len() / 2], times[0], times[times.len() - 1]])
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let repeats: usize = match args.get(1) {
        Some(s) => s
            .parse()
            .map_err(|_| Error::Usage(format!("cannot read the repeat count `{s}`")))?,
        None => 7,
    };
    let mut backends = vec![("jit", Runner::jit())];
    let c = CBackend::new();
    if c.compiler_available() {
        backends.push(("c", Runner::new(Box::new(c))));
    }
    let sizes = [16usize, 256, 1024, 2048, 4096, 8192, 16384, 65536, 262_144];
    for (name, runner) in &backends {
        for &n in &sizes {
            let a = csr(n, 8)?;
            let x = dense(n, 1.0)?;
            let inputs = [("A", &a), ("x", &x)];
            let spec = "y[i] += A[i, j] * x[j]";
            report(runner, name, spec, &inputs, n * 8, repeats)?;
        }
        for &n in &sizes {
            let (a, b) = (dense(n * 8, 1.0)?, dense(n * 8, 2.0)?);
            let inputs = [("a", &a), ("b", &b)];
            report(runner, name, "y[i] = a[i] + b[i]", &inputs, n * 8, repeats)?;
        }
    }
    Ok(())
}

fn report(
    runner: &Runner,
    backend: &str,
    spec: &str,
    inputs: &[(&str, &Tensor)],
    work: usize,
    repeats: usize,
) -> Result<()> {
    runner.set_threads(1);
    let one = time(runner, spec, inputs, repeats)?;
    runner.set_threads(2);
    runner.set_min_parallel_work(0);
    let two = time(runner, spec, inputs, repeats)?;
    runner.set_min_parallel_work(MIN_PARALLEL_WORK);
    let auto = time(runner, spec, inputs, repeats)?;
    let show = |t: [f64; 3]| format!("{:>9.2} µs ({:.2}-{:.2})", t[0], t[1], t[2]);
    println!(
        "{backend:4} {spec:24} work {work:>8}  1 thread {}  2 threads split {}  2 threads, threshold {}  split/1 {:.2}  threshold/1 {:.2}",
        show(one),
        show(two),
        show(auto),
        two[0] / one[0],
        auto[0] / one[0]
    );
    Ok(())
}
