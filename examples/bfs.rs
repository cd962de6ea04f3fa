//! Direction-optimizing breadth-first search (Finch §6.4): the kernels are the programs
//! `bfs_push.tess` and `bfs_pull.tess`; this driver compiles them once and runs one of them per
//! level until the frontier is empty, choosing push for small frontiers and pull for large
//! ones (Beamer's heuristic).
//!
//! ```text
//! cargo run --release --example bfs -- ../shared/data/matrices/Erdos971.mtx [SOURCE]
//! ```
//!
//! The graph is read as the pattern of a square Matrix Market file (edge j -> k for a stored
//! entry (j, k)); sources are 0-based.

use std::collections::BTreeMap;
use std::time::Instant;
use tessera::error::{Error, Result};
use tessera::levels::Format;
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

pub const PUSH: &str = include_str!("bfs_push.tess");
pub const PULL: &str = include_str!("bfs_pull.tess");
/// After a step: the new frontier joins the visited set. A kernel of its own because a step
/// cannot read `V` and write it in the same loop.
const VISIT: &str = "for k = _\n  V[k] |= Fnext[k]\nend\n";

pub const GRAPH_FORMAT: &str = "Dense(SparseList(Pattern()))";
const FRONTIER: &str = "SparseByteMap(Pattern())";

/// Pull once the frontier holds more than this fraction of the vertices (the value of the
/// Finch artifact's push-pull BFS).
pub const PULL_ABOVE: f64 = 0.01;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Push,
    Pull,
    /// Push while the frontier is small, pull when it is large.
    Auto,
}

pub struct Search {
    /// The BFS tree: `parent[source] == source`, -1 for unreached vertices.
    pub parent: Vec<i64>,
    /// Hops from the source, -1 for unreached vertices.
    pub level: Vec<i64>,
    /// The direction of each step and the size of the frontier it expanded.
    pub steps: Vec<(Direction, usize)>,
}

/// The kernels, compiled once for the formats every search uses.
pub struct Bfs {
    runner: Runner,
}

fn format(text: &str) -> Result<Format> {
    Format::parse(text, None)
}

fn program(text: &str) -> Result<tessera::notation::ast::Program> {
    parse_program(text)
}

/// The transpose of a pattern graph (in-edges, for pulling).
pub fn transpose(a: &Tensor) -> Result<Tensor> {
    let (mut rows, mut cols) = (vec![], vec![]);
    a.for_each_stored(&mut |c, v| {
        if v.as_bool() {
            rows.push(c[1] as i64);
            cols.push(c[0] as i64);
        }
    });
    let n = rows.len();
    Tensor::from_coo(
        &a.format,
        &[a.shape[1], a.shape[0]],
        &[rows, cols],
        &Buffer::Bool(vec![true; n]),
        |x, _| x,
    )
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
    pub fn search(&self, a: &Tensor, at: &Tensor, source: usize, dir: Direction) -> Result<Search> {
        let n = a.shape[0];
        if a.rank() != 2 || a.shape[1] != n || at.shape != a.shape {
            return Err(Error::tensor(
                "A",
                format!(
                    "a graph needs a square adjacency matrix, got shape {:?}",
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
        let mut ts: BTreeMap<String, Tensor> = BTreeMap::new();
        let one = |f: &str, v: Buffer| -> Result<Tensor> {
            Tensor::from_coo(&format(f)?, &[n], &[vec![source as i64]], &v, |x, _| x)
        };
        ts.insert("A".into(), a.clone());
        ts.insert("AT".into(), at.clone());
        ts.insert("F".into(), one(FRONTIER, Buffer::Bool(vec![true]))?);
        ts.insert("Fnext".into(), Tensor::empty(&format(FRONTIER)?, &[n])?);
        ts.insert(
            "V".into(),
            one("Dense(Element(false))", Buffer::Bool(vec![true]))?,
        );
        ts.insert(
            "P".into(),
            one("Dense(Element(-1))", Buffer::I64(vec![source as i64]))?,
        );
        ts.insert(
            "p".into(),
            Tensor::empty(&format("ShortCircuitScalar(-1)")?, &[])?,
        );
        let formats = |names: &[&str]| -> BTreeMap<String, Format> {
            names
                .iter()
                .map(|n| (n.to_string(), ts[*n].format.clone()))
                .collect()
        };
        let push = self
            .runner
            .compile(&program(PUSH)?, &formats(&["A", "F", "Fnext", "V", "P"]))?;
        let pull = self.runner.compile(
            &program(PULL)?,
            &formats(&["AT", "F", "Fnext", "V", "P", "p"]),
        )?;
        let visit = self
            .runner
            .compile(&program(VISIT)?, &formats(&["V", "Fnext"]))?;

        let mut level = vec![-1i64; n];
        level[source] = 0;
        let mut steps = vec![];
        let mut frontier = 1;
        let mut depth = 0;
        while frontier > 0 {
            depth += 1;
            let step = match dir {
                Direction::Auto if frontier as f64 > PULL_ABOVE * n as f64 => Direction::Pull,
                Direction::Auto => Direction::Push,
                d => d,
            };
            steps.push((step, frontier));
            let kernel = if step == Direction::Pull {
                &pull
            } else {
                &push
            };
            self.runner.execute(kernel, &mut ts)?;
            self.runner.execute(&visit, &mut ts)?;
            frontier = 0;
            ts["Fnext"].for_each_stored(&mut |c, v| {
                if v.as_bool() {
                    level[c[0]] = depth;
                    frontier += 1;
                }
            });
            let next = ts.remove("Fnext").expect("inserted above");
            let old = ts.insert("F".into(), next).expect("inserted above");
            ts.insert("Fnext".into(), old);
        }
        let parent = match ts["P"].to_dense() {
            Buffer::I64(v) => v,
            other => unreachable!("P is declared with i64 elements, got {:?}", other.elem()),
        };
        Ok(Search {
            parent,
            level,
            steps,
        })
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
