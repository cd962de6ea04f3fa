//! Direction-optimizing breadth-first search (Finch §6.4): the kernels are the programs
//! `bfs_push.tess` and `bfs_pull.tess`, driven by `tessera::algorithms::bfs` (push for small
//! frontiers, pull for large ones); `tessera graph bfs-do` runs the same with timing.
//!
//! ```text
//! cargo run --release --example bfs -- ../shared/data/matrices/Erdos971.mtx [SOURCE]
//! ```
//!
//! The graph is read as the pattern of a square Matrix Market file (edge j -> k for a stored
//! entry (j, k)); sources are 0-based.

use std::time::Instant;
use tessera::error::{Error, Result};
use tessera::run::Runner;

pub use tessera::algorithms::bfs::{
    ALPHA, BETA, Direction, GAMMA, GRAPH_FORMAT, PULL, PUSH, Search, transpose,
};

/// The kernels, compiled once for the formats every search uses.
pub struct Bfs {
    runner: Runner,
}

impl Default for Bfs {
    fn default() -> Bfs {
        Bfs {
            runner: Runner::jit(),
        }
    }
}

impl Bfs {
    /// Search from `source` over the graph `a` (`at` is its transpose; pass `a` again for a
    /// symmetric graph).
    pub fn search(
        &self,
        a: &tessera::tensor::Tensor,
        at: &tessera::tensor::Tensor,
        source: usize,
        dir: Direction,
    ) -> Result<Search> {
        tessera::algorithms::bfs::search(&self.runner, a, at, source, dir)
    }
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
            "usage: cargo run --release --example bfs -- GRAPH.mtx [SOURCE]".into(),
        ));
    };
    let source = match args.get(1) {
        Some(s) => s
            .parse::<usize>()
            .map_err(|_| Error::Usage(format!("SOURCE must be a vertex number, got `{s}`")))?,
        None => 0,
    };
    let a = tessera::tensor::files::load_tensor(path, Some(GRAPH_FORMAT))?;
    let at = transpose(&a)?;
    let bfs = Bfs::default();
    let t0 = Instant::now();
    let s = bfs.search(&a, &at, source, Direction::Auto)?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    println!("graph: {path}, {} vertices, source {source}", a.shape[0]);
    for (k, (dir, size)) in s.steps.iter().enumerate() {
        println!("level {k}: frontier {size:>8}  {dir:?}");
    }
    let reached = s.level.iter().filter(|&&l| l >= 0).count();
    let depth = s.level.iter().max().copied().unwrap_or(0);
    println!("reached {reached} vertices, depth {depth}, {ms:.2} ms (compilation included)");
    Ok(())
}
