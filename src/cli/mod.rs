//! The `tessera` command line: `run`, `code`, `grad`, `einsum`, `graph`, `intervals`, `points`,
//! `probe`, `convert`, `info`, `demo`, and `dist` (which hands over to the MPI binary).

mod bench;
mod demo;
mod dist;
mod einsum;
mod eval;
mod exact;
mod grad;
mod graph;
mod intervals;
mod points;
mod probe;

use clap::{Args, Parser, Subcommand};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::time::Instant;
use tessera::error::{Error, Result};
use tessera::levels::Format;
use tessera::notation::ast::{Program, Stmt, StmtKind};
use tessera::run::Runner;
use tessera::tensor::Tensor;
use tessera::tensor::files::OutputFile;
use tessera::types::Scalar;

#[derive(Parser, Debug)]
#[command(
    name = "tessera",
    version,
    about = "Compiler and runtime for sparse and structured tensor programs"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Compile a program for its inputs' formats and run it.
    Run(RunArgs),
    /// Print the generated loop IR for the given formats.
    Code(CodeArgs),
    /// Gradient of a program's loss or seeded outputs w.r.t. some inputs (reverse-mode AD).
    Grad(grad::GradArgs),
    /// Compile once, then time warm-up and measured kernel runs (`--json`: one JSON line).
    Bench(bench::BenchArgs),
    /// Evaluate one index-notation statement, `OUT[i, j] += A[i, k] * B[k, j]`.
    Einsum(einsum::EinsumArgs),
    /// Run a graph algorithm (BFS with parents, Bellman-Ford) on a graph file, timed.
    Graph(graph::GraphArgs),
    /// Interval overlaps between two BED files, as `bedtools intersect -u / -c / -wa -wb`.
    Intervals(intervals::IntervalsArgs),
    /// Points of an N x 2 .npy array inside a closed box or disc.
    Points(points::PointsArgs),
    /// Probe the field IMAGE ⊛ KERNEL (values, gradients or Hessians) at the points of a .npy.
    Probe(probe::ProbeArgs),
    /// Distributed SpMV, SpGEMM or BFS under MPI: `mpirun -np P tessera dist spmv ...` (runs
    /// the `tessera-mpi` binary built by `cargo build --release -p tessera-mpi`).
    Dist(dist::DistArgs),
    /// Convert a tensor file, optionally into another storage format.
    Convert {
        /// Input file (.mtx, .npy, .tns, .png, .nrrd)
        input: String,
        /// Output file (.mtx, .npy, .tns), optionally `@FORMAT`
        output: String,
        #[command(flatten)]
        memory: MemoryArgs,
    },
    /// Show a tensor file's shape, stored count and format.
    Info {
        /// File, optionally `@FORMAT`
        path: String,
        /// Print every level's arrays
        #[arg(long)]
        storage: bool,
        #[command(flatten)]
        memory: MemoryArgs,
    },
    /// The showcase on generated data.
    Demo,
}

/// The memory limit flag of every command that loads or creates tensors.
#[derive(Args, Debug, Clone, Copy)]
pub struct MemoryArgs {
    /// Refuse, before allocating, any tensor or array larger than this (bytes, or with a
    /// binary unit: 512M, 4G); default: the memory available
    #[arg(long, value_name = "BYTES", value_parser = parse_max_memory)]
    pub max_memory: Option<u64>,
}

fn parse_max_memory(s: &str) -> std::result::Result<u64, String> {
    tessera::memory::parse_size(s)
}

/// The kernel-size flag of every command that compiles kernels (`run`, `code`, `bench`,
/// `einsum`, `graph`), as `Runner::set_max_kernel_size`.
#[derive(Args, Debug, Clone, Copy)]
pub struct KernelArgs {
    /// Refuse, before compiling, a kernel of more than N loop-IR statements (default 8000;
    /// with `--backend eval` there is no kernel and it does nothing)
    #[arg(long, value_name = "N", value_parser = parse_kernel_size)]
    pub max_kernel_size: Option<usize>,
    /// Threads that parallel loops (`for i = parallel(_)`, and einsum's outermost loop when
    /// legal) run on (default: every core; 1 runs them serially)
    #[arg(long, value_name = "N", value_parser = parse_threads)]
    pub threads: Option<usize>,
    /// How a parallel loop's reductions fold on several threads: `auto` (private copies while
    /// they pay, else atomic updates of the shared output for min, max, & and |), `always`
    /// (atomic updates for every reducer, sums included) or `never` (copies only)
    #[arg(long, value_name = "MODE", value_parser = parse_atomics, default_value = "auto")]
    pub atomics: tessera::backend::parallel::Atomics,
    /// Least work (entries, about a nanosecond each) a parallel loop splits for (default
    /// 40000; 0 splits every loop): how cut-overs are measured
    #[arg(long, value_name = "N")]
    pub min_parallel_work: Option<u64>,
}

fn parse_atomics(s: &str) -> std::result::Result<tessera::backend::parallel::Atomics, String> {
    use tessera::backend::parallel::Atomics;
    match s.trim() {
        "auto" => Ok(Atomics::Auto),
        "always" => Ok(Atomics::Always),
        "never" => Ok(Atomics::Never),
        other => Err(format!("`{other}` is not auto, always or never")),
    }
}

fn parse_threads(s: &str) -> std::result::Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1 (1 runs parallel loops serially)".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}

impl KernelArgs {
    fn limit(&self) -> usize {
        self.max_kernel_size
            .unwrap_or(tessera::run::DEFAULT_MAX_KERNEL_SIZE)
    }
}

fn parse_kernel_size(s: &str) -> std::result::Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1 (IR statements)".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}

/// `--repeat N`: the same rule and message in every command.
pub(crate) fn parse_repeat(s: &str) -> std::result::Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1 (the number of kernel runs)".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}

/// The program and tensor flags `run`, `code` and `bench` share.
#[derive(Args, Debug)]
pub struct TensorArgs {
    /// Program file, or the program text itself (anything that is not an existing file)
    pub program: String,
    /// Input tensor: NAME=PATH[@FORMAT]
    #[arg(long = "in", value_name = "NAME=PATH[@FORMAT]")]
    pub inputs: Vec<String>,
    /// 0-d input: NAME=VALUE
    #[arg(long = "scalar", value_name = "NAME=VALUE")]
    pub scalars: Vec<String>,
    /// Output or workspace tensor: NAME[=PATH][@FORMAT] (a file holds the last run's result)
    #[arg(long = "out", value_name = "NAME[=PATH][@FORMAT]")]
    pub outputs: Vec<String>,
    /// Shape of an output or workspace no index determines: NAME=D1xD2...
    #[arg(long = "shape", value_name = "NAME=D1xD2")]
    pub shapes: Vec<String>,
    /// Schedule commands applied to the program before anything else, `;`-separated:
    /// `split(i, 64); reorder(j, i.1)` (see the README, "Schedules"); a command that does
    /// not apply or would break a dependence is an error and nothing runs
    #[arg(long, value_name = "COMMANDS")]
    pub schedule: Option<String>,
    #[command(flatten)]
    pub memory: MemoryArgs,
    #[command(flatten)]
    pub kernel: KernelArgs,
}

#[derive(Args, Debug)]
pub struct CodeArgs {
    #[command(flatten)]
    pub tensors: TensorArgs,
    /// Print the program's EIN normal form (δ and ε rules applied, see the README) instead of
    /// the kernel; it parses back as a program
    #[arg(long)]
    pub show_normal: bool,
    /// `jit` (the loop IR Cranelift compiles, default; also `tiered`'s first tier) or `c` (the C
    /// source)
    #[arg(long, default_value = "jit")]
    pub backend: String,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub tensors: TensorArgs,
    /// Run the kernel this many times, at least 1 (with --time: median and minimum)
    #[arg(long, default_value_t = 1, value_parser = parse_repeat)]
    pub repeat: usize,
    /// Print a `time:` line (kernel only)
    #[arg(long)]
    pub time: bool,
    /// `tiered` (default: Cranelift at once, C in the background once a kernel is hot), `jit`
    /// (Cranelift), `c` (C via the system compiler, cached on disk) or `eval` (reference
    /// evaluator)
    #[arg(long, default_value = "tiered")]
    pub backend: String,
}

/// Run the command line; returns what to print on stdout.
pub fn run_cli(cli: Cli) -> Result<String> {
    let memory = match &cli.command {
        Command::Run(a) => Some(a.tensors.memory),
        Command::Code(a) => Some(a.tensors.memory),
        Command::Bench(a) => Some(a.tensors.memory),
        Command::Grad(a) => Some(a.memory),
        Command::Einsum(a) => Some(a.memory),
        Command::Graph(a) => Some(a.memory),
        Command::Intervals(a) => Some(a.memory),
        Command::Points(a) => Some(a.memory),
        Command::Probe(a) => Some(a.memory),
        Command::Convert { memory, .. } | Command::Info { memory, .. } => Some(*memory),
        Command::Demo | Command::Dist(_) => None,
    };
    // The library checks every large allocation against this limit.
    tessera::memory::set_max_memory(memory.and_then(|m| m.max_memory));
    match cli.command {
        Command::Run(a) => run(&a),
        Command::Code(a) => code(&a),
        Command::Bench(a) => bench::bench(&a),
        Command::Grad(a) => grad::grad(&a),
        Command::Einsum(a) => einsum::einsum(&a),
        Command::Graph(a) => graph::graph(&a),
        Command::Intervals(a) => intervals::intervals(&a),
        Command::Points(a) => points::points(&a),
        Command::Probe(a) => probe::probe(&a),
        Command::Convert { input, output, .. } => convert(&input, &output),
        Command::Info { path, storage, .. } => info(&path, storage),
        Command::Demo => demo::demo(),
        Command::Dist(a) => dist::dist(&a),
    }
}

/// `PATH@FORMAT` → (PATH, FORMAT).
fn split_format(s: &str) -> (&str, Option<&str>) {
    match s.rfind('@') {
        Some(k) => (&s[..k], Some(&s[k + 1..])),
        None => (s, None),
    }
}

fn split_name<'a>(s: &'a str, flag: &str) -> Result<(&'a str, &'a str)> {
    s.split_once('=')
        .filter(|(n, _)| !n.is_empty())
        .ok_or_else(|| Error::Usage(format!("{flag} expects NAME=..., got `{s}`")))
}

/// PROGRAM is a file when one exists at that path, and program text otherwise; text that
/// does not parse either is reported both ways.
fn load_program(p: &str) -> Result<(Program, String)> {
    let path = std::path::Path::new(p);
    if path.is_file() {
        let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?;
        let prog = tessera::notation::parse::parse_program(&text).map_err(|e| with_origin(e, p))?;
        return Ok((prog, p.to_string()));
    }
    let origin = "<program>";
    match tessera::notation::parse::parse_program(p) {
        Ok(prog) => Ok((prog, origin.to_string())),
        // Text with program punctuation or several lines was surely meant as a program.
        Err(e) if p.contains(['\n', '[', ';', '=']) => Err(with_origin(e, origin)),
        Err(e) => Err(Error::Usage(format!(
            "no file `{p}`, and as program text: {}",
            with_origin(e, origin)
        ))),
    }
}

/// Prefix program-position errors with the program's file name (and no position at all when
/// the error has none).
fn with_origin(e: Error, origin: &str) -> Error {
    let text = e.to_string();
    match e {
        Error::Syntax { span, .. }
        | Error::Program { span, .. }
        | Error::DimensionMismatch { span, .. }
        | Error::Lifecycle { span, .. }
        | Error::Unsupported { span, .. } => {
            if span.line == 0 {
                let text = text.strip_prefix("0:0: ").unwrap_or(&text);
                Error::Usage(format!("{origin}: {text}"))
            } else {
                Error::Usage(format!("{origin}:{text}"))
            }
        }
        e => e,
    }
}

struct OutSpec {
    path: Option<String>,
    format: Option<String>,
}

/// `NAME[=PATH][@FORMAT]` of `--out`.
fn parse_out(spec: &str) -> Result<(String, OutSpec)> {
    // `NAME@FORMAT` may hold `=` inside the format (`merge=false`): an `@` before the first
    // `=` means there is no path.
    let at = spec.find('@');
    let eq = spec.find('=').filter(|&e| at.is_none_or(|a| e < a));
    let (name, path, format) = match eq {
        Some(e) => {
            let (p, f) = split_format(&spec[e + 1..]);
            (&spec[..e], Some(p.to_string()), f.map(str::to_string))
        }
        None => match spec.split_once('@') {
            Some((n, f)) => (n, None, Some(f.to_string())),
            None => (spec, None, None),
        },
    };
    if name.is_empty() {
        return Err(Error::Usage(format!(
            "--out expects NAME[=PATH][@FORMAT], got `{spec}`"
        )));
    }
    Ok((name.to_string(), OutSpec { path, format }))
}

fn parse_scalar(name: &str, v: &str) -> Result<Scalar> {
    let v = v.trim();
    let s = match v {
        "true" => Scalar::Bool(true),
        "false" => Scalar::Bool(false),
        "Inf" => Scalar::F64(f64::INFINITY),
        "-Inf" => Scalar::F64(f64::NEG_INFINITY),
        "NaN" => Scalar::F64(f64::NAN),
        _ => match v.parse::<i64>() {
            Ok(i) => Scalar::I64(i),
            Err(_) => Scalar::F64(v.parse::<f64>().map_err(|_| {
                Error::Usage(format!("--scalar {name}: `{v}` is not a number or boolean"))
            })?),
        },
    };
    Ok(s)
}

fn parse_shape(s: &str) -> Result<Vec<usize>> {
    if s.is_empty() {
        return Ok(vec![]);
    }
    s.split('x')
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .map_err(|_| Error::Usage(format!("bad shape `{s}` (expected D1xD2...)")))
        })
        .collect()
}

/// The rank each tensor is accessed with in the program.
fn ranks(p: &Program) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    tessera::notation::visit::accesses(&p.body, &mut |a| {
        out.entry(a.tensor.clone()).or_insert(a.indices.len());
    });
    out
}

fn declared_globally(p: &Program) -> HashSet<String> {
    p.body
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Declare { tensor, .. } => Some(tensor.clone()),
            _ => None,
        })
        .collect()
}

fn declared_anywhere(p: &Program) -> HashSet<String> {
    let mut out = HashSet::new();
    tessera::notation::visit::stmts(&p.body, &mut |s| {
        if let StmtKind::Declare { tensor, .. } = &s.kind {
            out.insert(tensor.clone());
        }
    });
    out
}

/// A program ready to compile: the outputs' declarations added, every tensor loaded or
/// created and every output file opened, shared by `run`, `code` and `bench`.
struct Prepared {
    program: Program,
    origin: String,
    tensors: BTreeMap<String, Tensor>,
    outs: BTreeMap<String, OutSpec>,
    formats: BTreeMap<String, Format>,
    /// The `--out` files, checked and opened before any kernel runs.
    files: Vec<(String, OutputFile)>,
    /// Integer or bool outputs computed in floats, with their requested formats.
    narrowed: Vec<(String, Format)>,
}

/// The runner of a compiling backend named on the command line (`eval` is not one: it
/// interprets the program and is handled by `run` alone), with the kernel-size budget.
fn compiling_runner(backend: &str, kernel: &KernelArgs) -> Result<Runner> {
    let runner = match backend {
        "tiered" => Runner::tiered(),
        "jit" => Runner::jit(),
        "c" => Runner::new(Box::new(tessera::backend::CBackend::new())),
        // `run` takes `eval` before it gets here; `bench`, `einsum` and `graph` time kernels.
        other => {
            return Err(Error::Usage(format!(
                "unknown backend `{other}` (tiered, jit or c{})",
                if other == "eval" {
                    "; the evaluator compiles no kernel: `tessera run --backend eval`"
                } else {
                    ""
                }
            )));
        }
    };
    runner.set_max_kernel_size(kernel.limit());
    runner.set_threads(kernel.threads.unwrap_or_else(tessera::run::default_threads));
    runner.set_atomics(kernel.atomics);
    if let Some(work) = kernel.min_parallel_work {
        runner.set_min_parallel_work(work);
    }
    Ok(runner)
}

fn code(a: &CodeArgs) -> Result<String> {
    if !matches!(a.backend.as_str(), "jit" | "tiered" | "c") {
        return Err(Error::Usage(format!(
            "unknown backend `{}` for code (jit, tiered or c)",
            a.backend
        )));
    }
    if a.show_normal {
        let (program, origin) = load_program(&a.tensors.program)?;
        let program = match &a.tensors.schedule {
            Some(text) => tessera::transforms::schedule::schedule(&program, text)
                .map_err(|e| with_origin(e, &origin))?,
            None => program,
        };
        // Fields of oriented NRRD inputs are shown in world space, as `run` compiles them.
        let mut frames = BTreeMap::new();
        for spec in &a.tensors.inputs {
            let (name, rest) = split_name(spec, "--in")?;
            let (path, _) = split_format(rest);
            if tessera::tensor::files::is_nrrd(path) {
                let n = tessera::io::nrrd::read_nrrd_file(std::path::Path::new(path))?;
                if let (Some(directions), Some(origin)) = (n.directions, n.origin) {
                    let o = tessera::fields::Orientation { directions, origin };
                    frames.insert(name.to_string(), o.frame(name)?);
                }
            }
        }
        let program = tessera::transforms::fields::with_frames(&program, &frames);
        let normal =
            tessera::transforms::ein::normalize(&program).map_err(|e| with_origin(e, &origin))?;
        return Ok(normal.to_string());
    }
    let Prepared {
        program,
        origin,
        formats,
        ..
    } = prepare(&a.tensors, false)?;
    let (mut k, _, _) = Runner::lower(&program, &formats).map_err(|e| with_origin(e, &origin))?;
    // Show what the backend compiles, and only what `run` would compile.
    tessera::ir::promote::promote_scalars(&mut k);
    tessera::run::check_kernel_size(&k, &program, a.tensors.kernel.limit())
        .map_err(|e| with_origin(e, &origin))?;
    // Reductions a parallel range's chunks may make as atomic updates of the shared output
    // (`atomic y[j] += ...`; the range lists the output as `(Add or atomic)`).
    tessera::run::late_passes(&mut k);
    Ok(match a.backend.as_str() {
        "c" => tessera::backend::CBackend::source(&k),
        _ => k.to_string(),
    })
}

fn run(a: &RunArgs) -> Result<String> {
    // Checked before loading the inputs, which may take far longer than the kernel.
    let runner = match a.backend.as_str() {
        "eval" => None,
        b => Some(compiling_runner(b, &a.tensors.kernel).map_err(|_| {
            Error::Usage(format!("unknown backend `{b}` (tiered, jit, c or eval)"))
        })?),
    };
    let Prepared {
        program,
        origin,
        mut tensors,
        outs,
        formats: all_formats,
        files,
        narrowed,
    } = prepare(&a.tensors, true)?;
    let mut times = vec![];
    let mut compile_ms = 0.0;
    match runner {
        None => {
            for _ in 0..a.repeat {
                let t0 = Instant::now();
                eval::run_eval(&program, &mut tensors).map_err(|e| with_origin(e, &origin))?;
                times.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        Some(runner) => {
            let c = runner
                .compile(&program, &all_formats)
                .map_err(|e| with_origin(e, &origin))?;
            compile_ms = *runner.last_compile_ms.borrow();
            for _ in 0..a.repeat {
                let t0 = Instant::now();
                runner.execute(&c, &mut tensors)?;
                times.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    exact::narrow_back(&narrowed, &mut tensors)?;
    let mut out = write_outputs(&outs, files, &tensors)?;
    if a.time {
        out.push_str(&time_line(compile_ms, &times));
    }
    Ok(out)
}

/// Write every `--out` file, all or none, only after everything succeeded; 0-d outputs
/// without a path are returned as `name = value` lines.
fn write_outputs(
    outs: &BTreeMap<String, OutSpec>,
    files: Vec<(String, OutputFile)>,
    tensors: &BTreeMap<String, Tensor>,
) -> Result<String> {
    let mut out = String::new();
    for (n, o) in outs {
        let t = &tensors[n];
        if o.path.is_none() && t.rank() == 0 {
            let _ = writeln!(out, "{n} = {}", t.get(&[])?);
        }
    }
    let files = files.into_iter().map(|(n, f)| (f, &tensors[&n])).collect();
    tessera::tensor::files::write_outputs(files)?;
    Ok(out)
}

/// A `NAME=...` flag given twice for the same name is a mistake, not an override.
fn once(seen: &mut HashMap<String, &'static str>, name: &str, flag: &'static str) -> Result<()> {
    if tessera::transforms::ein::is_reserved(name) {
        return Err(tessera::transforms::ein::reserved_error(name));
    }
    match seen.insert(name.to_string(), flag) {
        Some(first) if first == flag => Err(Error::Usage(format!("{flag} {name} is given twice"))),
        Some(first) => Err(Error::Usage(format!(
            "`{name}` is given with both {first} and {flag}"
        ))),
        None => Ok(()),
    }
}

/// Load the inputs, create the outputs and workspaces, and (with `open_files`) open the
/// output files, so that every mistake in the command line is found before a kernel runs.
fn prepare(a: &TensorArgs, open_files: bool) -> Result<Prepared> {
    let (program, origin) = load_program(&a.program)?;
    let program = match &a.schedule {
        Some(text) => tessera::transforms::schedule::schedule(&program, text)
            .map_err(|e| with_origin(e, &origin))?,
        None => program,
    };
    let mut tensors: BTreeMap<String, Tensor> = BTreeMap::new();
    let mut seen = HashMap::new();
    // Names and flags first, so a repeated name is reported before any file is read.
    let mut inputs = vec![];
    for spec in &a.inputs {
        let (name, rest) = split_name(spec, "--in")?;
        once(&mut seen, name, "--in")?;
        inputs.push((name, rest));
    }
    let mut scalars = vec![];
    for spec in &a.scalars {
        let (name, v) = split_name(spec, "--scalar")?;
        once(&mut seen, name, "--scalar")?;
        scalars.push((name, parse_scalar(name, v)?));
    }
    let mut outs: BTreeMap<String, OutSpec> = BTreeMap::new();
    for spec in &a.outputs {
        let (name, o) = parse_out(spec)?;
        if tessera::transforms::ein::is_reserved(&name) {
            return Err(tessera::transforms::ein::reserved_error(&name));
        }
        if outs.insert(name.clone(), o).is_some() {
            return Err(Error::Usage(format!("--out {name} is given twice")));
        }
    }
    let mut given_shapes: HashMap<String, Vec<usize>> = HashMap::new();
    for spec in &a.shapes {
        let (name, s) = split_name(spec, "--shape")?;
        if given_shapes
            .insert(
                name.to_string(),
                parse_shape(s).map_err(|e| Error::Usage(format!("--shape {name}: {e}")))?,
            )
            .is_some()
        {
            return Err(Error::Usage(format!("--shape {name} is given twice")));
        }
    }
    // Loaded together, so BED inputs share one numbering of chromosomes.
    let files: Vec<(&str, Option<&str>)> =
        inputs.iter().map(|(_, rest)| split_format(rest)).collect();
    let loaded = tessera::tensor::files::load_inputs(&files)?;
    let mut frames = BTreeMap::new();
    for ((name, _), (t, orientation)) in inputs.iter().zip(loaded) {
        if let Some(o) = orientation {
            frames.insert(name.to_string(), o.frame(name)?);
        }
        tensors.insert(name.to_string(), t);
    }
    // Fields of oriented images probe in world space; then δ and ε (structured tensors, never
    // given) are lowered away before the tensors are matched.
    let program = tessera::transforms::fields::with_frames(&program, &frames);
    let mut program =
        tessera::transforms::ein::lower(&program).map_err(|e| with_origin(e, &origin))?;
    let ranks = ranks(&program);
    for (name, v) in scalars {
        let f = Format::new(vec![tessera::levels::LevelKind::Element(v)])?;
        tensors.insert(name.to_string(), Tensor::empty(&f, &[])?);
    }
    // Tensors the program creates: outputs not given as inputs, and undeclared workspaces.
    let declared = declared_anywhere(&program);
    let mut created: Vec<String> = outs
        .keys()
        .filter(|n| !tensors.contains_key(*n))
        .cloned()
        .collect();
    for n in &declared {
        if !tensors.contains_key(n) && !outs.contains_key(n) {
            created.push(n.clone());
        }
    }
    for n in given_shapes.keys() {
        if tensors.contains_key(n) {
            return Err(Error::Usage(format!(
                "--shape {n}: `{n}` is an input, its shape comes from its file or value"
            )));
        }
        if !created.contains(n) {
            return Err(Error::Usage(format!(
                "--shape {n}: the program has no output or workspace `{n}`"
            )));
        }
    }
    let mut unknown = None;
    tessera::notation::visit::accesses(
        &program.body,
        &mut |acc: &tessera::notation::ast::Access| {
            if unknown.is_none()
                && !tensors.contains_key(&acc.tensor)
                && !created.contains(&acc.tensor)
            {
                unknown = Some(Error::program(
                    acc.span,
                    format!(
                        "unknown tensor `{}`: give it with --in {}=PATH, --scalar or --out",
                        acc.tensor, acc.tensor
                    ),
                ));
            }
        },
    );
    if let Some(e) = unknown {
        return Err(with_origin(e, &origin));
    }
    let mut formats: BTreeMap<String, Format> = BTreeMap::new();
    for n in &created {
        // A tensor only declared (`x .= 5`) has the rank of its --shape, or none: it is 0-d.
        let rank = ranks
            .get(n)
            .copied()
            .or_else(|| given_shapes.get(n).map(|s| s.len()))
            .or_else(|| declared.contains(n).then_some(0))
            .ok_or_else(|| Error::Usage(format!("--out {n}: the program never uses `{n}`")))?;
        let f = match outs.get(n).and_then(|o| o.format.as_deref()) {
            Some(f) => Format::parse(f, Some(rank))?,
            None => Format::dense(rank, Scalar::F64(0.0)),
        };
        formats.insert(n.clone(), f);
    }
    let mut shapes: HashMap<String, Option<Vec<usize>>> = HashMap::new();
    for (n, t) in &tensors {
        shapes.insert(n.clone(), Some(t.shape.clone()));
    }
    for n in &created {
        let shape = match given_shapes.get(n) {
            Some(s) => Some(s.clone()),
            None if !ranks.contains_key(n) => Some(vec![]),
            None => None,
        };
        shapes.insert(n.clone(), shape);
    }
    let values = tessera::run::scalar_values(&program, &tensors);
    let shapes = tessera::transforms::infer_shapes_with(&program, &shapes, &values)
        .map_err(|e| with_origin(e, &origin))?;
    for n in &created {
        let f = &formats[n];
        tensors.insert(
            n.clone(),
            Tensor::empty(f, &shapes[n]).map_err(|e| e.named(n))?,
        );
    }
    // Outputs the program does not declare start from their fill value.
    let global = declared_globally(&program);
    for n in outs.keys() {
        if !global.contains(n) && created.contains(n) {
            let fill = tensors[n].fill();
            program.body.insert(
                0,
                Stmt::new(
                    StmtKind::Declare {
                        tensor: n.clone(),
                        init: tessera::notation::ast::Expr::lit(fill),
                    },
                    Default::default(),
                ),
            );
        }
    }
    for (n, t) in &tensors {
        t.validate(n)?;
    }
    let mut files = vec![];
    let mut narrowed = vec![];
    if open_files {
        for (n, o) in &outs {
            if let Some(p) = &o.path {
                let t = &tensors[n];
                files.push((n.clone(), OutputFile::create(p, &t.shape, t.fill())?));
            }
        }
        let names: Vec<String> = outs.keys().cloned().collect();
        narrowed = exact::widen_float_outputs(&program, &names, &mut tensors)?;
    }
    let formats: BTreeMap<String, Format> = tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.format.clone()))
        .collect();
    Ok(Prepared {
        program,
        origin,
        tensors,
        outs,
        formats,
        files,
        narrowed,
    })
}

/// The `time:` line of `run` and `einsum`: kernel compile time (0 on a cache hit) and the
/// median and minimum of the kernel runs.
fn time_line(compile_ms: f64, times: &[f64]) -> String {
    let mut sorted = times.to_vec();
    sorted.sort_by(|x, y| x.total_cmp(y));
    format!(
        "time: compile_ms={compile_ms:.3} run_ms_median={:.3} run_ms_min={:.3} repeats={}\n",
        sorted[sorted.len() / 2],
        sorted[0],
        sorted.len()
    )
}

fn convert(input: &str, output: &str) -> Result<String> {
    let (ipath, ifmt) = split_format(input);
    let (opath, ofmt) = split_format(output);
    // The output's type is checked before the input is read.
    tessera::tensor::files::check_output_type(opath)?;
    let t = tessera::tensor::files::load_tensor(ipath, ifmt)?;
    // Errors about the output format name the output file, as `load_tensor`'s name the input.
    let format = ofmt
        .map(|f| Format::parse(f, Some(t.rank())))
        .transpose()
        .map_err(|e| Error::Usage(format!("{opath}: {e}")))?;
    let fill = format.as_ref().map_or(t.fill(), |f| f.fill());
    let file = OutputFile::create(opath, &t.shape, fill)?;
    let t = match format {
        Some(f) => t.to_format(&f).map_err(|e| e.named(opath))?,
        None => t,
    };
    tessera::tensor::files::write_outputs(vec![(file, &t)])?;
    Ok(String::new())
}

fn info(path: &str, storage: bool) -> Result<String> {
    let (p, fmt) = split_format(path);
    let t = tessera::tensor::files::load_tensor(p, fmt)?;
    let mut out = String::new();
    // A real-valued dimension is the whole line, not a count.
    let real = t.format.real_dims();
    let shape: Vec<String> = t
        .shape
        .iter()
        .enumerate()
        .map(|(k, d)| match real.get(k) {
            Some(true) => "R".to_string(),
            _ => d.to_string(),
        })
        .collect();
    let _ = writeln!(
        out,
        "shape: {}",
        if shape.is_empty() {
            "()".to_string()
        } else {
            shape.join("x")
        }
    );
    let _ = writeln!(out, "stored: {}", t.countstored());
    let _ = writeln!(out, "format: {}", t.format);
    let _ = writeln!(out, "element: {}", t.elem());
    if storage {
        for (k, kind) in t.format.levels.iter().enumerate() {
            let imp = tessera::levels::level_impl(kind);
            let names = imp.buffers(kind, t.elem());
            // Levels are numbered from 1 (the root), as in Finch's printed trees.
            let _ = write!(out, "level {} {}:", k + 1, kind.name());
            for ((name, _), buf) in names.iter().zip(&t.levels[k]) {
                if !imp.scratch().contains(name) {
                    let _ = write!(out, " {name} {}", show_array(buf));
                }
            }
            if names.is_empty() {
                let _ = write!(out, " (no arrays)");
            }
            let _ = writeln!(out);
        }
        if t.format.is_real() {
            show_pieces(&mut out, &t);
        }
    }
    Ok(out)
}

/// The stored pieces of a tensor with real-valued dimensions, a line each: integer
/// coordinates as numbers, real ones as intervals whose brackets tell open ends from closed
/// ones (`[1, 3)`; a pinpoint is `[2.5]`), then the value. The first and last ones when many.
fn show_pieces(out: &mut String, t: &tessera::tensor::Tensor) {
    use tessera::limit::Eps;
    use tessera::tensor::pieces::PieceCoord;
    let pieces = t.pieces();
    let _ = writeln!(out, "pieces: {}", pieces.len());
    let show = |(coords, v): &(Vec<PieceCoord>, tessera::Scalar)| {
        let cs: Vec<String> = coords
            .iter()
            .map(|c| match *c {
                PieceCoord::Int(i) => i.to_string(),
                PieceCoord::Real(a, z) if a == z => format!("[{}]", a.val),
                PieceCoord::Real(a, z) => format!(
                    "{}{}, {}{}",
                    if a.eps == Eps::Plus { "(" } else { "[" },
                    a.val,
                    z.val,
                    if z.eps == Eps::Minus { ")" } else { "]" },
                ),
            })
            .collect();
        format!("  ({}) = {v}", cs.join(", "))
    };
    let n = pieces.len();
    for (k, p) in pieces.iter().enumerate() {
        if n > SHOW_MAX && k == 10 {
            let _ = writeln!(out, "  ...");
        }
        if n <= SHOW_MAX || !(10..n - 5).contains(&k) {
            let _ = writeln!(out, "{}", show(p));
        }
    }
}

/// Longest array `info --storage` prints in full; longer ones show their ends and length.
const SHOW_MAX: usize = 20;

fn show_array(buf: &tessera::runtime::Buffer) -> String {
    let n = buf.len();
    let item = |k: usize| buf.get(k).to_string();
    if n <= SHOW_MAX {
        let vals: Vec<String> = (0..n).map(item).collect();
        return format!("[{}]", vals.join(", "));
    }
    let head: Vec<String> = (0..10).map(item).collect();
    let tail: Vec<String> = (n - 5..n).map(item).collect();
    format!(
        "[{}, ..., {}] ({n} entries)",
        head.join(", "),
        tail.join(", ")
    )
}
