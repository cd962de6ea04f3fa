//! Direction-optimizing breadth-first search with parents: the kernels are
//! `examples/bfs_push.tess` and `examples/bfs_pull.tess`; one of them runs per level until the
//! frontier is empty, push for small frontiers and pull for large ones (Beamer's heuristic).
//! On three threads or more a push step whose frontier has enough out-edges ([`push_splits`])
//! runs `examples/bfs_push_parallel.tess` instead, split by the frontier vertices, with the
//! same parents as the serial step (the least frontier neighbour, which `choose` keeps).

use super::{check_graph, empty_frontier, one_hot};
use crate::backend::parallel::{Atomics, threads_for_work};
use crate::error::{Error, Result};
use crate::levels::Format;
use crate::notation::parse::parse_program;
use crate::run::Runner;
use crate::runtime::Buffer;
use crate::tensor::Tensor;
use std::collections::BTreeMap;

pub const PUSH: &str = include_str!("../../../../examples/bfs_push.tess");
pub const PULL: &str = include_str!("../../../../examples/bfs_pull.tess");
/// The push step split between threads (indivisible `|` and `min` into Dense vectors).
pub const PUSH_PARALLEL: &str = include_str!("../../../../examples/bfs_push_parallel.tess");
/// After a step: the new frontier joins the visited set. A kernel of its own because a step
/// cannot read `V` and write it in the same loop.
pub const VISIT: &str = "for k = _\n  V[k] |= Fnext[k]\nend\n";

/// The adjacency format the kernels are written for (edge j -> k for a stored A[j, k]).
pub const GRAPH_FORMAT: &str = "Dense(SparseList(Pattern()))";
const FRONTIER: &str = "SparseByteMap(Pattern())";
/// The units of the runner's threshold (`backend::parallel::MIN_PARALLEL_WORK`, 40,000 by
/// default) one frontier out-edge saves when a push step splits, before [`SPLIT_PUSH_CPU`]'s
/// discount. Measured on an idle machine in session 44 (BENCHMARKS.md, "BFS push steps split
/// between threads"): a serial step cost ~6.3 ns per edge then, and splits paid from ~4,000
/// edges on delaunay_n17.
pub const PUSH_EDGE_WORK: u64 = 10;
/// The split push step's CPU (its chunks together, with the drain of `N` and the parents'
/// adoption) against the serial step's, per edge. Every edge that reaches an unvisited vertex
/// takes an indivisible `|` and a compare-and-swap `min`, where the serial step appends to a
/// sorted list and stops at the first choice; measured in session 57 (BENCHMARKS.md, "Split
/// push steps never paid on two threads"): 5.8 ns per edge split on two threads against
/// 3.5 serial on web-NotreDame's largest steps, and no cut-over, from 4,000 edges to
/// 120,000, made two threads faster than one on delaunay_n17, web-NotreDame or ca-HepPh. A
/// step on `t` threads then saves `1 - SPLIT_PUSH_CPU / t` of its serial time: nothing on
/// two threads, half on four.
pub const SPLIT_PUSH_CPU: f64 = 2.0;

/// Whether a push step of `frontier` vertices with `edges` out-edges runs split on `threads`
/// threads: always at a threshold of 0 (`--min-parallel-work 0`, how the tests force every
/// split), else when what the threads save ([`PUSH_EDGE_WORK`] per edge, discounted by
/// [`SPLIT_PUSH_CPU`]) reaches the runner's threshold.
pub fn push_splits(edges: i64, frontier: usize, threads: usize, min_work: u64) -> bool {
    if min_work == 0 || threads <= 1 {
        return threads > 1;
    }
    let saves = 1.0 - SPLIT_PUSH_CPU / threads as f64;
    if saves <= 0.0 {
        return false;
    }
    let work = (edges.max(0) as f64 * PUSH_EDGE_WORK as f64 * saves) as u64;
    threads_for_work(work.max(frontier as u64), threads, 0, min_work) > 1
}

/// Pull once the frontier holds more than this fraction of the vertices (the value of the
/// Finch artifact's push-pull BFS), for graphs whose out-degrees the driver cannot read.
pub const PULL_ABOVE: f64 = 0.01;
/// Beamer's switch, used when the out-degrees are known (a `Dense(SparseList(..))` graph): pull
/// once the frontier's out-edges exceed the unexplored vertices' out-edges / ALPHA, push again
/// once a shrinking frontier holds fewer than n / BETA vertices. Beamer et al.'s values: a
/// vertex-count rule alone pulls far too early on high-diameter graphs (road networks,
/// meshes), where a pull step scans every unvisited vertex for a thin frontier.
pub const ALPHA: f64 = 14.0;
pub const BETA: f64 = 24.0;
/// A pull step also reads every vertex's visited flag: n / GAMMA is that sweep's cost in
/// pushed edges, which the frontier's out-edges must exceed besides Beamer's term (his
/// heuristic leaves the sweep out: in the long thin tail of a web graph, where few edges are
/// left unexplored, it pulled for frontiers of a few thousand vertices, and on meshes it
/// pulled the middle levels). Measured (BENCHMARKS.md, graphs): GAMMA 16, 8, 4, 2, 1 against
/// none, web-NotreDame 13.4, 13.3, 9.2, 9.4, 9.0 ms against 20.7; 4 is within noise of the
/// best on the seven graphs of the study and never pulls on the meshes.
pub const GAMMA: f64 = 4.0;

/// Whether the next step pulls (Beamer's switch with the sweep of [`GAMMA`]): after a pull,
/// pull again unless the frontier shrank below n / BETA vertices or its out-edges no longer
/// pay for the sweep; after a push, pull once the frontier's out-edges exceed the unexplored
/// vertices' out-edges / ALPHA plus the sweep. The MPI driver makes the same choice.
pub fn pulls(
    pulled: bool,
    n: usize,
    frontier: usize,
    last_frontier: usize,
    frontier_edges: i64,
    unexplored_edges: i64,
) -> bool {
    let sweep = n as f64 / GAMMA;
    let edges = frontier_edges as f64;
    if pulled {
        !(frontier < last_frontier && (frontier as f64) < n as f64 / BETA) && edges >= sweep
    } else {
        edges > unexplored_edges as f64 / ALPHA + sweep
    }
}

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
    /// How many of the push steps ran split between threads (`PUSH_PARALLEL`).
    pub split: usize,
    /// Milliseconds spent compiling each kernel in this call (none once the runner caches them).
    pub compile_ms: Vec<(&'static str, f64)>,
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
        &Buffer::Bool(vec![true; n].into()),
        |x, _| x,
    )
}

/// Search from `source` over the graph `a` (`at` is its transpose; pass `a` again for a
/// symmetric graph). The kernels compile on the first call and come from `runner`'s cache after.
pub fn search(
    runner: &Runner,
    a: &Tensor,
    at: &Tensor,
    source: usize,
    dir: Direction,
) -> Result<Search> {
    let mut graph = BTreeMap::from([("A".to_string(), a.clone()), ("AT".to_string(), at.clone())]);
    search_in(runner, &mut graph, source, dir)
}

/// [`search`] over a graph kept in `graph` as `A` and its transpose `AT`, so that repeated
/// searches do not copy it; the search's own tensors are removed again before returning.
pub fn search_in(
    runner: &Runner,
    graph: &mut BTreeMap<String, Tensor>,
    source: usize,
    dir: Direction,
) -> Result<Search> {
    let (Some(a), Some(at)) = (graph.get("A"), graph.get("AT")) else {
        return Err(Error::Usage(
            "a search needs the graph `A` and its transpose `AT`".into(),
        ));
    };
    let n = check_graph(a, source, "adjacency")?;
    if at.shape != a.shape {
        return Err(Error::tensor(
            "AT",
            format!(
                "the transpose has shape {:?}, the graph {:?}",
                at.shape, a.shape
            ),
        ));
    }
    let state = ["F", "Fnext", "V", "P", "p", "N", "Q"];
    let result = run_search(runner, graph, n, source, dir);
    for name in state {
        graph.remove(name);
    }
    result
}

fn run_search(
    runner: &Runner,
    ts: &mut BTreeMap<String, Tensor>,
    n: usize,
    source: usize,
    dir: Direction,
) -> Result<Search> {
    ts.insert(
        "F".into(),
        one_hot(FRONTIER, n, source, Buffer::Bool(vec![true].into()))?,
    );
    ts.insert(
        "Fnext".into(),
        Tensor::empty(&Format::parse(FRONTIER, None)?, &[n])?,
    );
    ts.insert(
        "V".into(),
        one_hot(
            "Dense(Element(false))",
            n,
            source,
            Buffer::Bool(vec![true].into()),
        )?,
    );
    ts.insert(
        "P".into(),
        one_hot(
            "Dense(Element(-1))",
            n,
            source,
            Buffer::I64(vec![source as i64].into()),
        )?,
    );
    ts.insert(
        "p".into(),
        Tensor::empty(&Format::parse("ShortCircuitScalar(-1)", None)?, &[])?,
    );
    let threads = runner.threads();
    if threads > 1 {
        // The split push step's outputs (see PUSH_PARALLEL): no vertex reached yet.
        ts.insert(
            "N".into(),
            Tensor::from_dense(
                &Format::parse("Dense(Element(false))", None)?,
                &[n],
                &Buffer::Bool(vec![false; n].into()),
            )?,
        );
        ts.insert(
            "Q".into(),
            Tensor::from_dense(
                &Format::parse("Dense(Element(-1))", None)?,
                &[n],
                &Buffer::I64(vec![n as i64; n].into()),
            )?,
        );
    }
    let formats = |names: &[&str]| -> BTreeMap<String, Format> {
        names
            .iter()
            .map(|n| (n.to_string(), ts[*n].format.clone()))
            .collect()
    };
    let mut compile_ms = vec![];
    let mut compile = |name: &'static str, text: &str, names: &[&str]| {
        let c = runner.compile(&parse_program(text)?, &formats(names))?;
        let ms = *runner.last_compile_ms.borrow();
        if ms > 0.0 {
            compile_ms.push((name, ms));
        }
        Ok::<_, crate::error::Error>(c)
    };
    let push = compile("bfs_push", PUSH, &["A", "F", "Fnext", "V", "P"])?;
    let pull = compile("bfs_pull", PULL, &["AT", "F", "Fnext", "V", "P", "p"])?;
    let visit = compile("bfs_visit", VISIT, &["V", "Fnext"])?;
    let push_split = if threads > 1 {
        Some(compile(
            "bfs_push_parallel",
            PUSH_PARALLEL,
            &["A", "F", "V", "N", "Q"],
        )?)
    } else {
        None
    };
    let user_min_work = runner.min_parallel_work();
    let mut split = 0;
    let mut members = vec![];

    let mut level = vec![-1i64; n];
    level[source] = 0;
    let mut steps = vec![];
    // Out-degrees from the row pointers of a Dense(SparseList(..)) graph.
    let ptr = super::row_pointers(&ts["A"], n);
    let degree = |v: usize| ptr.as_ref().map_or(0, |p| p[v + 1] - p[v]);
    let mut frontier_edges = degree(source);
    let mut unexplored_edges = ptr.as_ref().map_or(0, |p| p[n]) - frontier_edges;
    let mut previous = Direction::Push;
    let mut last_frontier = 0;
    let mut frontier = 1;
    let mut depth = 0;
    while frontier > 0 {
        depth += 1;
        let step = match dir {
            Direction::Auto if ptr.is_none() => {
                if frontier as f64 > PULL_ABOVE * n as f64 {
                    Direction::Pull
                } else {
                    Direction::Push
                }
            }
            Direction::Auto => {
                let pulled = previous == Direction::Pull;
                if pulls(
                    pulled,
                    n,
                    frontier,
                    last_frontier,
                    frontier_edges,
                    unexplored_edges,
                ) {
                    Direction::Pull
                } else {
                    Direction::Push
                }
            }
            d => d,
        };
        previous = step;
        last_frontier = frontier;
        steps.push((step, frontier));
        // The push kernel's range (all n rows) weighs every vertex's out-edges: the driver
        // weighs the step by its frontier's own and runs it split (threshold 0) or serially.
        let splits = step != Direction::Pull
            && push_splits(frontier_edges, frontier, threads, user_min_work);
        match &push_split {
            Some(kernel) if splits => {
                split += 1;
                // At threshold 0 the runner would give each chunk private copies of N and
                // Q (n elements each, filled and folded per step, far more than a step's
                // edges): the step updates them in place unless the caller asked for copies.
                let atomics = runner.atomics();
                if atomics == Atomics::Auto {
                    runner.set_atomics(Atomics::Always);
                }
                runner.set_min_parallel_work(0);
                let run = runner.execute(kernel, ts);
                runner.set_min_parallel_work(user_min_work);
                runner.set_atomics(atomics);
                run?;
                adopt_reached(ts, n, &mut members)?;
            }
            _ => {
                let kernel = if step == Direction::Pull {
                    &pull
                } else {
                    &push
                };
                runner.execute(kernel, ts)?;
                runner.execute(&visit, ts)?;
            }
        }
        frontier = 0;
        frontier_edges = 0;
        super::for_each_member(&ts["Fnext"], &mut |c| {
            level[c] = depth;
            frontier += 1;
            frontier_edges += degree(c);
        });
        unexplored_edges -= frontier_edges;
        let next = ts.remove("Fnext").expect("inserted above");
        let mut old = ts.insert("F".into(), next).expect("inserted above");
        empty_frontier(&mut old)?;
        ts.insert("Fnext".into(), old);
    }
    let parent = match ts["P"].to_dense() {
        Buffer::I64(v) => v.into_vec(),
        other => unreachable!("P is declared with i64 elements, got {:?}", other.elem()),
    };
    Ok(Search {
        parent,
        level,
        steps,
        split,
        compile_ms,
    })
}

/// After a split push step: the vertices it flagged in `N` (cleared on the way) become the
/// next frontier `Fnext` (empty on entry), take their least frontier neighbour `Q[k]` as
/// parent (`Q[k]` back to n for the next step), and are marked visited, all in
/// O(n / 64 + reached): what `VISIT` and the serial step's `choose` do for a serial step.
fn adopt_reached(
    ts: &mut BTreeMap<String, Tensor>,
    n: usize,
    members: &mut Vec<i64>,
) -> Result<()> {
    super::drain_flags(ts.get_mut("N").expect("inserted above"), "N", members)?;
    let mut parents = Vec::with_capacity(members.len());
    let q = values_i64(ts, "Q")?;
    for &k in members.iter() {
        parents.push(std::mem::replace(&mut q[k as usize], n as i64));
    }
    let p = values_i64(ts, "P")?;
    for (&k, &j) in members.iter().zip(&parents) {
        p[k as usize] = j;
    }
    let Some(Buffer::Bool(v)) = ts
        .get_mut("V")
        .and_then(|t| t.levels.last_mut())
        .and_then(|l| l.first_mut())
    else {
        return Err(Error::tensor(
            "V",
            "expected a Dense(Element(false)) vector",
        ));
    };
    let v: &mut [bool] = v;
    for &k in members.iter() {
        v[k as usize] = true;
    }
    super::set_frontier(ts.get_mut("Fnext").expect("inserted above"), n, members)
}

/// The values of the `Dense(Element(..))` i64 vector `name`, to update in place.
fn values_i64<'a>(ts: &'a mut BTreeMap<String, Tensor>, name: &str) -> Result<&'a mut [i64]> {
    match ts
        .get_mut(name)
        .and_then(|t| t.levels.last_mut())
        .and_then(|l| l.first_mut())
    {
        Some(Buffer::I64(v)) => Ok(v),
        _ => Err(Error::tensor(
            name,
            "expected a Dense(Element(-1)) vector of i64",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_steps_split_where_the_threads_save_time() {
        let min = crate::backend::parallel::MIN_PARALLEL_WORK;
        // On two threads the split step's CPU eats what the second thread saves.
        assert!(!push_splits(10_000_000, 100_000, 2, min));
        assert!(!push_splits(10_000_000, 100_000, 1, min));
        // On four, half the serial time is saved: from 8,000 edges at the default threshold.
        assert!(!push_splits(7_999, 10, 4, min));
        assert!(push_splits(8_000, 10, 4, min));
        // A threshold of 0 splits every step on several threads (how the tests force it).
        assert!(push_splits(0, 0, 2, 0));
        assert!(!push_splits(100, 1, 1, 0));
    }
}
