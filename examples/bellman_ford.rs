//! Bellman-Ford single-source shortest paths (Finch §6.4): `bellman_ford.tess` is one
//! relaxation round; this driver repeats it until no distance improves, swapping the
//! current and previous distance and flag tensors between rounds.
//!
//! ```text
//! cargo run --release --example bellman_ford -- ../shared/data/matrices/1138_bus.mtx [SOURCE]
//! ```
//!
//! The graph is a square Matrix Market file, edge j -> i of weight |A[j, i]| for each stored
//! entry (absolute values, so no cycle is negative); sources are 0-based.

use std::collections::BTreeMap;
use std::time::Instant;
use tessera::error::{Error, Result};
use tessera::levels::Format;
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

pub const ROUND: &str = include_str!("bellman_ford.tess");
/// Missing edges weigh Inf, so they never shorten a path.
pub const WEIGHTS: &str = "Dense(SparseList(Element(Inf)))";
const DIST: &str = "Dense(Element(Inf))";
const FLAGS: &str = "SparseByteMap(Pattern())";

pub struct Paths {
    /// Distances from the source, Inf for unreachable vertices.
    pub dist: Vec<f64>,
    /// Rounds run, the last one included (it changed nothing).
    pub rounds: usize,
}

/// Shortest paths from `source` over the weights `a`; an error if distances still improve after
/// n rounds (a negative cycle).
pub fn shortest_paths(runner: &Runner, a: &Tensor, source: usize) -> Result<Paths> {
    let n = a.shape[0];
    if a.rank() != 2 || a.shape[1] != n {
        return Err(Error::tensor(
            "A",
            format!(
                "a graph needs a square weight matrix, got shape {:?}",
                a.shape
            ),
        ));
    }
    if source >= n {
        return Err(Error::tensor(
            "A",
            format!("source {source} is outside the graph's 0..{n} vertices"),
        ));
    }
    let one = |f: &str, v: Buffer| -> Result<Tensor> {
        Tensor::from_coo(
            &Format::parse(f, None)?,
            &[n],
            &[vec![source as i64]],
            &v,
            |x, _| x,
        )
    };
    let mut ts: BTreeMap<String, Tensor> = BTreeMap::new();
    ts.insert("A".into(), a.clone());
    ts.insert("Dprev".into(), one(DIST, Buffer::F64(vec![0.0]))?);
    ts.insert(
        "D".into(),
        Tensor::empty(&Format::parse(DIST, None)?, &[n])?,
    );
    ts.insert("Fprev".into(), one(FLAGS, Buffer::Bool(vec![true]))?);
    ts.insert(
        "F".into(),
        Tensor::empty(&Format::parse(FLAGS, None)?, &[n])?,
    );
    let formats = ts
        .iter()
        .map(|(k, t)| (k.clone(), t.format.clone()))
        .collect();
    let round = runner.compile(&parse_program(ROUND)?, &formats)?;
    for rounds in 1..=n + 1 {
        runner.execute(&round, &mut ts)?;
        let mut changed = false;
        ts["F"].for_each_stored(&mut |_, v| changed |= v.as_bool());
        if !changed {
            let dist = match ts["D"].to_dense() {
                Buffer::F64(v) => v,
                other => unreachable!("D is declared with f64 elements, got {:?}", other.elem()),
            };
            return Ok(Paths { dist, rounds });
        }
        for (cur, prev) in [("D", "Dprev"), ("F", "Fprev")] {
            let t = ts.remove(cur).expect("inserted above");
            let old = ts.insert(prev.to_string(), t).expect("inserted above");
            ts.insert(cur.to_string(), old);
        }
    }
    Err(Error::Kernel {
        msg: format!("distances still improve after {n} rounds: the graph has a negative cycle"),
    })
}

/// Absolute values of a weight matrix's stored entries.
pub fn absolute(mut a: Tensor) -> Tensor {
    for level in &mut a.levels {
        for buf in level.iter_mut() {
            if let Buffer::F64(v) = buf {
                v.iter_mut().for_each(|x| *x = x.abs());
            }
        }
    }
    a
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        return Err(Error::Usage(
            "usage: cargo run --release --example bellman_ford -- GRAPH.mtx [SOURCE]".into(),
        ));
    };
    let source = match args.get(1) {
        Some(s) => s
            .parse::<usize>()
            .map_err(|_| Error::Usage(format!("SOURCE must be a vertex number, got `{s}`")))?,
        None => 0,
    };
    let a = absolute(tessera::tensor::files::load_tensor(path, Some(WEIGHTS))?);
    let t0 = Instant::now();
    let p = shortest_paths(&Runner::jit(), &a, source)?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let reached: Vec<f64> = p.dist.iter().copied().filter(|d| d.is_finite()).collect();
    let far = reached.iter().copied().fold(0.0, f64::max);
    println!("graph: {path}, {} vertices, source {source}", a.shape[0]);
    println!(
        "reached {} vertices in {} rounds, farthest at {far}, {ms:.2} ms (compilation included)",
        reached.len(),
        p.rounds
    );
    Ok(())
}
