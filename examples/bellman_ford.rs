//! Bellman-Ford single-source shortest paths (Finch §6.4): `bellman_ford.tess` is one
//! relaxation round, repeated by `tessera::algorithms::bellman_ford` until no distance
//! improves, then `bellman_ford_preds.tess` picks predecessors; `tessera graph bellman-ford`
//! runs the same with timing.
//!
//! ```text
//! cargo run --release --example bellman_ford -- ../shared/data/matrices/1138_bus.mtx [SOURCE]
//! ```
//!
//! The graph is a square Matrix Market file, edge j -> i of weight |A[j, i]| for each stored
//! entry (absolute values, so no cycle is negative); sources are 0-based.

use std::time::Instant;
use tessera::error::{Error, Result};
use tessera::run::Runner;

pub use tessera::algorithms::bellman_ford::{
    PREDECESSORS, ROUND, WEIGHTS, absolute, shortest_paths,
};

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
