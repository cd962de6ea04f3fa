//! What atomic folds cost against private copies and the serial loop (issue 17): a push
//! through a CSR matrix into an output as long as the range (`y[j] += A[i, j] * x[i]`, and
//! the relaxation `y[j] <<min>>= A[i, j] + x[i]` whose updates mostly do not improve), 2
//! entries per row, so that per-chunk copies of `y` cost more than the range's work. Times
//! per call on 1 thread, and on 2 threads with copies (`Atomics::Never`, every range split)
//! and with atomic updates (`Atomics::Always`), on the JIT and, when a C compiler is present,
//! the C backend; and which one `Atomics::Auto` with the default threshold picks.
//!
//! ```text
//! cargo run --release --example atomic_folds -- [N] [REPEATS]   # default 1000000 7
//! ```

use std::collections::BTreeMap;
use std::time::Instant;
use tessera::backend::CBackend;
use tessera::backend::parallel::{Atomics, MIN_PARALLEL_WORK, shared_ranges};
use tessera::error::{Error, Result};
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

fn inputs(n: usize, fill: f64) -> Result<BTreeMap<String, Tensor>> {
    let (mut rows, mut cols, mut vals) = (vec![], vec![], vec![]);
    for i in 0..n {
        for k in 0..2 {
            rows.push(i as i64);
            cols.push(((i * 7919 + k * (n / 2)) % n) as i64);
            vals.push(1.0 + ((i + k) % 5) as f64);
        }
    }
    let mut a = Tensor::from_triplets("csr", &[n, n], &[rows, cols], &Buffer::from(vals))?;
    // Clones per call then share the arrays: only the kernel (and y's copy) is timed.
    a.share();
    let x: Vec<f64> = (0..n).map(|k| (k % 17) as f64 * 0.25).collect();
    let x = Tensor::from_slice("dense", &[n], &Buffer::from(x))?;
    let y = Tensor::from_slice("dense", &[n], &Buffer::from(vec![fill; n]))?;
    Ok(BTreeMap::from([
        ("A".to_string(), a),
        ("x".to_string(), x),
        ("y".to_string(), y),
    ]))
}

/// Median per-call time (ms) over `repeats` calls, and whether the last one ran atomically.
fn time(
    runner: &Runner,
    program: &str,
    t: &BTreeMap<String, Tensor>,
    repeats: usize,
) -> Result<(f64, bool)> {
    let p = parse_program(program)?;
    let formats = t
        .iter()
        .map(|(k, v)| (k.clone(), v.format.clone()))
        .collect();
    let c = runner.compile(&p, &formats)?;
    let mut times = vec![];
    let mut shared = false;
    for _ in 0..repeats {
        let mut t = t.clone();
        let before = shared_ranges();
        let t0 = Instant::now();
        runner.execute(&c, &mut t)?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        shared = shared_ranges() > before;
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], shared))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |k: usize, d: usize| -> Result<usize> {
        args.get(k).map_or(Ok(d), |s| {
            s.parse()
                .map_err(|_| Error::Usage(format!("bad number `{s}`")))
        })
    };
    let (n, repeats) = (arg(1, 1_000_000)?, arg(2, 7)?);
    let mut backends: Vec<(&str, Runner)> = vec![("jit", Runner::jit())];
    let c = CBackend::new();
    if c.compiler_available() {
        backends.push(("c", Runner::new(Box::new(c))));
    }
    let cases = [
        (
            "sum",
            "for i = parallel(_), j = _\n  y[j] += A[i, j] * x[i]\nend",
            0.0,
        ),
        // The sieve keeps the loop on A's stored entries (its fill 0 would reach every j).
        (
            "min",
            "for i = parallel(_), j = _\n  if A[i, j] != 0\n    y[j] <<min>>= A[i, j] + x[i]\n  end\nend",
            2.0,
        ),
    ];
    println!("n={n} entries={} repeats={repeats}", 2 * n);
    for (name, runner) in &backends {
        for (what, program, fill) in cases {
            let t = inputs(n, fill)?;
            runner.set_threads(1);
            let (serial, _) = time(runner, program, &t, repeats)?;
            runner.set_threads(2);
            runner.set_min_parallel_work(0);
            runner.set_atomics(Atomics::Never);
            let (copies, _) = time(runner, program, &t, repeats)?;
            runner.set_atomics(Atomics::Always);
            let (atomic, _) = time(runner, program, &t, repeats)?;
            runner.set_min_parallel_work(MIN_PARALLEL_WORK);
            runner.set_atomics(Atomics::Auto);
            let (auto, shared) = time(runner, program, &t, repeats)?;
            println!(
                "{name} {what}: 1 thread {serial:.3} ms; 2 threads: copies {copies:.3} ms \
                 ({:.2}x), atomics {atomic:.3} ms ({:.2}x), auto {auto:.3} ms ({}, {:.2}x)",
                serial / copies,
                serial / atomic,
                if shared {
                    "atomics"
                } else {
                    "copies or serial"
                },
                serial / auto,
            );
        }
    }
    Ok(())
}
