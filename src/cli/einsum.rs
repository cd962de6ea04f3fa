//! `tessera einsum "C[i, j] += A[i, k] * B[k, j]" --in A=a.mtx --in B=b.mtx --out C=c.mtx`:
//! the library's einsum on files, with `run`'s input loading, atomic output writing and
//! `--time` line.

use super::{parse_out, split_format, split_name, time_line};
use clap::Args;
use std::fmt::Write as _;
use std::time::Instant;
use tessera::api::{formats_of, plan::plan, prepare};
use tessera::error::{Error, Result};
use tessera::levels::Format;
use tessera::tensor::Tensor;
use tessera::tensor::files::OutputFile;

#[derive(Args, Debug)]
pub struct EinsumArgs {
    /// The statement, `OUT[i, j] op= expression` (`op=` one of `= += -= *= &= |= <<min>>= <<max>>=`)
    pub spec: String,
    /// Input tensor: NAME=PATH[@FORMAT]
    #[arg(long = "in", value_name = "NAME=PATH[@FORMAT]")]
    pub inputs: Vec<String>,
    /// Where to write the output and in which format: NAME[=PATH][@FORMAT] (without a path,
    /// a 0-d result is printed and others are summarised)
    #[arg(long = "out", value_name = "NAME[=PATH][@FORMAT]")]
    pub output: Option<String>,
    /// Run the kernel this many times, at least 1 (with --time: median and minimum)
    #[arg(long, default_value_t = 1, value_parser = super::parse_repeat)]
    pub repeat: usize,
    /// Print a `time:` line (kernel only; transposed copies are made before it)
    #[arg(long)]
    pub time: bool,
    /// Print the plan and the generated program
    #[arg(long)]
    pub show_program: bool,
    /// `tiered` (default: Cranelift at once, C in the background once a kernel is hot), `jit`
    /// (Cranelift) or `c` (C via the system compiler, cached on disk)
    #[arg(long, default_value = "tiered")]
    pub backend: String,
    /// Untimed runs before the timed ones
    #[arg(long, default_value_t = 0)]
    pub warmup: usize,
    /// Print only `tessera bench`'s JSON line (compile_ms, median_ms, min_ms, ...)
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub memory: super::MemoryArgs,
    #[command(flatten)]
    pub kernel: super::KernelArgs,
}

pub fn einsum(a: &EinsumArgs) -> Result<String> {
    let mut names = vec![];
    for spec in &a.inputs {
        let (name, rest) = split_name(spec, "--in")?;
        if names.iter().any(|(n, _)| n == &name) {
            return Err(Error::Usage(format!("--in {name} is given twice")));
        }
        names.push((name, rest));
    }
    let mut inputs: Vec<(String, Tensor)> = vec![];
    for (name, rest) in names {
        let (path, fmt) = split_format(rest);
        let t = tessera::tensor::files::load_tensor(path, fmt)?;
        t.validate(name)?;
        inputs.push((name.to_string(), t));
    }
    let out = a.output.as_deref().map(parse_out).transpose()?;
    let borrowed: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let formats: Vec<(&str, &Format)> = inputs
        .iter()
        .map(|(n, t)| (n.as_str(), &t.format))
        .collect();
    let spec = tessera::api::spec::parse_spec(&a.spec)?;
    let out_format = match out.as_ref().and_then(|(_, o)| o.format.as_deref()) {
        Some(f) => Some(Format::parse(f, Some(spec.out_indices.len()))?),
        None => None,
    };
    if let Some((name, _)) = &out
        && *name != spec.output
    {
        return Err(Error::Usage(format!(
            "--out names `{name}` but the einsum writes `{}`",
            spec.output
        )));
    }
    let mut plan = plan(&spec, &formats, out_format.as_ref())?;
    let mut tensors = prepare(&plan, &borrowed).map_err(|e| e.named(&spec.output))?;
    let work = tessera::api::input_work(&borrowed);
    drop(borrowed);
    drop(inputs);
    let runner = super::compiling_runner(&a.backend, &a.kernel)?;
    // As `api::einsum_with`: the outermost loop runs on `--threads` when that is legal and
    // the inputs are large enough.
    if work >= runner.min_parallel_work() {
        plan.parallelize(&formats_of(&tensors), runner.threads());
    }
    let mut text = String::new();
    if a.show_program {
        let _ = writeln!(text, "# loop order: {}", plan.loop_order.join(", "));
        for t in &plan.transposes {
            let perm: Vec<String> = t.perm.iter().map(|d| d.to_string()).collect();
            let _ = writeln!(
                text,
                "# {} is {} transposed (dimensions {})",
                t.name,
                t.input,
                perm.join(", ")
            );
        }
        let _ = writeln!(text, "# {}: {}", spec.output, plan.output_format);
        if let Some(w) = &plan.workspace {
            let _ = writeln!(text, "# workspace {}: {}", w.name, w.format);
        }
        if let Some(i) = &plan.parallel {
            let _ = writeln!(
                text,
                "# parallel: the loop over {i} on {} threads",
                runner.threads()
            );
        }
        let _ = write!(text, "{}", plan.program);
    }
    let result = &tensors[&spec.output];
    // The output file is checked and opened before the kernel runs.
    let file = match out.as_ref().and_then(|(_, o)| o.path.as_deref()) {
        Some(p) => Some(OutputFile::create(p, &result.shape, result.fill())?),
        None => None,
    };
    let compiled = runner.compile(&plan.program, &formats_of(&tensors))?;
    let compile_ms = *runner.last_compile_ms.borrow();
    // A benchmark (`--json`) times the steady state: the optimised tier.
    let tiers = a
        .json
        .then(|| super::bench::Tiers::settle(&a.backend, compiled.kernel.as_ref()));
    for _ in 0..a.warmup {
        runner.execute(&compiled, &mut tensors)?;
    }
    let mut times = vec![];
    for _ in 0..a.repeat {
        let t0 = Instant::now();
        runner.execute(&compiled, &mut tensors)?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let result = &tensors[&spec.output];
    match file {
        Some(f) => tessera::tensor::files::write_outputs(vec![(f, result)])?,
        None if result.rank() == 0 => {
            let _ = writeln!(text, "{} = {}", spec.output, result.get(&[])?);
        }
        None => {
            let shape: Vec<String> = result.shape.iter().map(|d| d.to_string()).collect();
            let _ = writeln!(
                text,
                "{}: shape {} stored {} format {}",
                spec.output,
                shape.join("x"),
                result.countstored(),
                result.format
            );
        }
    }
    if let Some(tiers) = &tiers {
        return Ok(super::bench::json_line(compile_ms, &times, a.warmup, tiers) + "\n");
    }
    if a.time {
        text.push_str(&time_line(compile_ms, &times));
    }
    Ok(text)
}
