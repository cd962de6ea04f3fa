//! `tessera bench PROGRAM --in ... --out ... [--warmup W] [--repeat N] [--backend B] [--json]`:
//! compile once (with `tiered`, the default, also its optimised tier: the steady state is
//! timed), run W untimed warm-up runs, then time N kernel runs (kernel only, as `run --time`);
//! the benchmark scripts read the one-line JSON report.

use super::{
    Prepared, TensorArgs, compiling_runner, prepare, time_line, with_origin, write_outputs,
};
use clap::Args;
use std::time::Instant;
use tessera::backend::CompiledKernel;
use tessera::error::Result;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub tensors: TensorArgs,
    /// Untimed runs before the timed ones (caches, page faults, branch predictors)
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Timed runs (at least 1)
    #[arg(long, default_value_t = 10, value_parser = super::parse_repeat)]
    pub repeat: usize,
    /// `tiered` (default: Cranelift at once, C in the background once a kernel is hot), `jit`
    /// (Cranelift) or `c` (C via the system compiler, cached on disk)
    #[arg(long, default_value = "tiered")]
    pub backend: String,
    /// Print one JSON line: compile_ms, median_ms, min_ms, max_ms, repeats, warmup, backend,
    /// tier (the code timed: `c` or `jit`), optimise_ms (building that tier)
    #[arg(long)]
    pub json: bool,
}

/// Which code a benchmark timed: the backend asked for, the tier its calls ran (`tiered`
/// times its optimised tier when there is one) and the time taken to build that tier.
pub(super) struct Tiers<'a> {
    pub backend: &'a str,
    pub tier: &'static str,
    pub optimise_ms: f64,
}

impl Tiers<'_> {
    /// Build the kernel's final tier now (a benchmark times the steady state) and say which
    /// it is.
    pub(super) fn settle<'a>(backend: &'a str, kernel: &dyn CompiledKernel) -> Tiers<'a> {
        let t0 = Instant::now();
        kernel.settle();
        Tiers {
            backend,
            tier: kernel.tier(),
            optimise_ms: t0.elapsed().as_secs_f64() * 1e3,
        }
    }
}

/// The one-line JSON report of `bench` (and `einsum --json`): compile time, median, minimum
/// and maximum of the timed runs, and the tiers.
pub(super) fn json_line(compile_ms: f64, times: &[f64], warmup: usize, tiers: &Tiers) -> String {
    let mut sorted = times.to_vec();
    sorted.sort_by(|x, y| x.total_cmp(y));
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    serde_json::json!({
        "compile_ms": compile_ms,
        "median_ms": median,
        "min_ms": sorted[0],
        "max_ms": sorted[n - 1],
        "repeats": n,
        "warmup": warmup,
        "backend": tiers.backend,
        "tier": tiers.tier,
        "optimise_ms": tiers.optimise_ms,
    })
    .to_string()
}

pub fn bench(a: &BenchArgs) -> Result<String> {
    // Checked before loading the inputs, which may take far longer than the kernel.
    let runner = compiling_runner(&a.backend, &a.tensors.kernel)?;
    let Prepared {
        program,
        origin,
        mut tensors,
        outs,
        formats,
        files,
        narrowed,
    } = prepare(&a.tensors, true)?;
    let compiled = runner
        .compile(&program, &formats)
        .map_err(|e| with_origin(e, &origin))?;
    let compile_ms = *runner.last_compile_ms.borrow();
    let tiers = Tiers::settle(&a.backend, compiled.kernel.as_ref());
    for _ in 0..a.warmup {
        runner.execute(&compiled, &mut tensors)?;
    }
    let mut times = Vec::with_capacity(a.repeat);
    for _ in 0..a.repeat {
        let t0 = Instant::now();
        runner.execute(&compiled, &mut tensors)?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    super::exact::narrow_back(&narrowed, &mut tensors)?;
    let mut out = write_outputs(&outs, files, &tensors)?;
    if a.json {
        // Only the JSON line on stdout, so scripts can parse it whole.
        return Ok(json_line(compile_ms, &times, a.warmup, &tiers) + "\n");
    }
    out.push_str(&time_line(compile_ms, &times));
    Ok(out)
}
