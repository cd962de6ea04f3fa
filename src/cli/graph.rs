//! `tessera graph bfs|bfs-pull|bfs-do|bellman-ford`: the graph algorithms of
//! `tessera::algorithms` on a graph file, timed as whole algorithms (warm-up runs first, so the
//! kernels are compiled and cached before the timed runs).

use super::{parse_out, split_format, split_name};
use clap::{Args, ValueEnum};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;
use tessera::algorithms::{bellman_ford, bfs};
use tessera::error::{Error, Result};
use tessera::levels::Format;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::tensor::files::OutputFile;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Algorithm {
    /// Breadth-first search, push (top-down) steps only
    Bfs,
    /// Breadth-first search, pull (bottom-up) steps only
    BfsPull,
    /// Direction-optimizing breadth-first search (push for small frontiers, pull for large)
    BfsDo,
    /// Bellman-Ford shortest paths with predecessors
    BellmanFord,
}

#[derive(Args, Debug)]
pub struct GraphArgs {
    pub algorithm: Algorithm,
    /// The graph: A=PATH[@FORMAT] (edge j -> k for a stored A[j, k]; its values are the
    /// weights for bellman-ford)
    #[arg(long = "in", value_name = "A=PATH[@FORMAT]")]
    pub inputs: Vec<String>,
    /// Source vertex (0-based)
    #[arg(long, default_value_t = 0)]
    pub source: usize,
    /// Result file: parents=PATH.npy (BFS parents or Bellman-Ford predecessors, -1 unreached),
    /// dist=PATH.npy (BFS levels or Bellman-Ford distances)
    #[arg(long = "out", value_name = "NAME=PATH")]
    pub outputs: Vec<String>,
    /// Untimed runs before the timed ones (the first compiles the kernels)
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Timed runs (at least 1)
    #[arg(long, default_value_t = 10, value_parser = super::parse_repeat)]
    pub repeat: usize,
    /// Print one JSON line instead of text
    #[arg(long)]
    pub json: bool,
    /// `tiered` (default: Cranelift at once, C in the background once a kernel is hot), `jit`
    /// (Cranelift) or `c` (C via the system compiler, cached on disk)
    #[arg(long, default_value = "tiered")]
    pub backend: String,
    #[command(flatten)]
    pub memory: super::MemoryArgs,
    #[command(flatten)]
    pub kernel: super::KernelArgs,
}

/// One run's results, as written to files.
struct Outcome {
    parents: Vec<i64>,
    /// BFS levels (as f64 so both algorithms share one output) or distances.
    dist: Vec<f64>,
    iterations: usize,
    /// The last run's steps by kind (`push`, `push_split`, `pull`): what a timing depends on
    /// (a push step runs on one thread, a split push or a pull on the runner's threads).
    steps: [(&'static str, usize); 3],
    compile_ms: Vec<(&'static str, f64)>,
}

fn load_graph(a: &GraphArgs) -> Result<(String, Tensor)> {
    let [spec] = a.inputs.as_slice() else {
        return Err(Error::Usage(
            "tessera graph needs exactly one --in A=PATH[@FORMAT]".into(),
        ));
    };
    let (name, rest) = split_name(spec, "--in")?;
    if name != "A" {
        return Err(Error::Usage(format!(
            "--in {name}: the graph is called A (--in A=PATH[@FORMAT])"
        )));
    }
    let (path, fmt) = split_format(rest);
    let default = match a.algorithm {
        Algorithm::BellmanFord => bellman_ford::WEIGHTS,
        _ => bfs::GRAPH_FORMAT,
    };
    let t = tessera::tensor::files::load_tensor(path, Some(fmt.unwrap_or(default)))?;
    Ok((path.to_string(), t))
}

fn run_once(
    runner: &Runner,
    alg: Algorithm,
    graph: &mut BTreeMap<String, Tensor>,
    source: usize,
) -> Result<Outcome> {
    let dir = match alg {
        Algorithm::Bfs => bfs::Direction::Push,
        Algorithm::BfsPull => bfs::Direction::Pull,
        Algorithm::BfsDo => bfs::Direction::Auto,
        Algorithm::BellmanFord => {
            let p = bellman_ford::shortest_paths_in(runner, graph, source)?;
            let pushed = p.rounds - p.pulled - p.split;
            return Ok(Outcome {
                parents: p.pred,
                dist: p.dist,
                iterations: p.rounds,
                steps: [
                    ("push", pushed),
                    ("push_split", p.split),
                    ("pull", p.pulled),
                ],
                compile_ms: p.compile_ms,
            });
        }
    };
    let s = bfs::search_in(runner, graph, source, dir)?;
    let count = |d: bfs::Direction| s.steps.iter().filter(|(x, _)| *x == d).count();
    let steps = [
        ("push", count(bfs::Direction::Push) - s.split),
        ("push_split", s.split),
        ("pull", count(bfs::Direction::Pull)),
    ];
    Ok(Outcome {
        steps,
        parents: s.parent,
        dist: s.level.iter().map(|&l| l as f64).collect(),
        iterations: s.steps.len(),
        compile_ms: s.compile_ms,
    })
}

fn vector(values: Buffer) -> Result<Tensor> {
    let n = values.len();
    let fill = tessera::types::Scalar::zero(values.elem());
    Tensor::from_dense(&Format::dense(1, fill), &[n], &values)
}

pub fn graph(a: &GraphArgs) -> Result<String> {
    let mut specs: Vec<(String, String)> = vec![];
    for spec in &a.outputs {
        let (name, o) = parse_out(spec)?;
        let path = o
            .path
            .ok_or_else(|| Error::Usage(format!("--out {name}: give a file, {name}=PATH.npy")))?;
        if !matches!(name.as_str(), "parents" | "dist") {
            return Err(Error::Usage(format!(
                "--out {name}: tessera graph writes `parents` and `dist`"
            )));
        }
        if specs.iter().any(|(n, _)| *n == name) {
            return Err(Error::Usage(format!("--out {name} is given twice")));
        }
        tessera::tensor::files::check_output_type(&path)?;
        specs.push((name, path));
    }
    let (path, a_tensor) = load_graph(a)?;
    let n = a_tensor.shape.first().copied().unwrap_or(0);
    // The output files are opened before the runs: a bad path fails now, not after them.
    let mut files = vec![];
    for (name, p) in specs {
        let fill = if name == "parents" {
            tessera::types::Scalar::I64(0)
        } else {
            tessera::types::Scalar::F64(0.0)
        };
        files.push((name, OutputFile::create(&p, &[n], fill)?));
    }
    let runner = super::compiling_runner(&a.backend, &a.kernel)?;
    // The transpose (in-edges, for pull steps) is built once, before the timed runs:
    // Bellman-Ford pulls only on several threads.
    let mut graph = BTreeMap::new();
    if a.algorithm != Algorithm::BellmanFord {
        graph.insert("AT".to_string(), bfs::transpose(&a_tensor)?);
    } else if runner.threads() > 1 {
        graph.insert("AT".to_string(), bellman_ford::transpose(&a_tensor)?);
        // The weights dealt to the threads' parts (the rounds' owned pushes).
        let owners = tessera::algorithms::owners::Owners::new(n, runner.threads());
        graph.insert("AO".to_string(), owners.weights(&a_tensor)?);
    }
    graph.insert("A".to_string(), a_tensor);
    // The first run compiles; it counts as a warm-up run.
    let mut last = run_once(&runner, a.algorithm, &mut graph, a.source)?;
    let compile_ms = std::mem::take(&mut last.compile_ms);
    for _ in 1..a.warmup {
        last = run_once(&runner, a.algorithm, &mut graph, a.source)?;
    }
    let mut times = vec![];
    for _ in 0..a.repeat {
        let t0 = Instant::now();
        last = run_once(&runner, a.algorithm, &mut graph, a.source)?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let parents = vector(Buffer::I64(last.parents.clone().into()))?;
    let dist = vector(Buffer::F64(last.dist.clone().into()))?;
    let files = files
        .into_iter()
        .map(|(name, f)| (f, if name == "parents" { &parents } else { &dist }))
        .collect();
    tessera::tensor::files::write_outputs(files)?;
    let reached = last.parents.iter().filter(|&&p| p >= 0).count();
    let total_compile: f64 = compile_ms.iter().map(|(_, ms)| ms).sum();
    let mut sorted = times.clone();
    sorted.sort_by(|x, y| x.total_cmp(y));
    let (median, min) = match sorted.as_slice() {
        [] => (f64::NAN, f64::NAN),
        s => (s[s.len() / 2], s[0]),
    };
    let mut out = String::new();
    if a.json {
        let kernels: serde_json::Map<String, serde_json::Value> = compile_ms
            .iter()
            .map(|(k, ms)| (k.to_string(), serde_json::json!(ms)))
            .collect();
        // NaN is not JSON: no timed runs give nulls (serde_json writes non-finite as null).
        let line = serde_json::json!({
            "compile_ms": total_compile,
            "median_ms": median,
            "min_ms": min,
            "repeats": a.repeat,
            "warmup": a.warmup.max(1),
            "iterations": last.iterations,
            "vertices": n,
            "reached": reached,
            "kernels_compile_ms": kernels,
            "steps": serde_json::Map::from_iter(
                last.steps.iter().map(|(k, c)| (k.to_string(), serde_json::json!(c)))
            ),
        });
        let _ = writeln!(out, "{line}");
    } else {
        let _ = writeln!(
            out,
            "graph: {path}, {n} vertices, source {}: reached {reached} in {} iterations",
            a.source, last.iterations
        );
        let steps: Vec<String> = last.steps.iter().map(|(k, c)| format!("{k}={c}")).collect();
        let _ = writeln!(out, "steps: {}", steps.join(" "));
        let _ = writeln!(
            out,
            "time: compile_ms={total_compile:.3} run_ms_median={median:.3} run_ms_min={min:.3} repeats={}",
            a.repeat
        );
    }
    Ok(out)
}
