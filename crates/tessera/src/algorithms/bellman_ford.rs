//! Bellman-Ford single-source shortest paths with predecessors: `examples/bellman_ford.tess`
//! is one relaxation round, repeated until no distance improves (swapping the current and
//! previous distance and flag tensors between rounds); `examples/bellman_ford_preds.tess`
//! then picks a tight in-edge per reached vertex.
//!
//! On several threads (`Runner::threads`) a push round with enough work (its improved
//! vertices' out-edges, weighed by the runner's cost rule `backend::parallel::threads_for_work`)
//! splits its scatter between the threads by source vertex (`examples/bellman_ford_parallel.tess`:
//! an indivisible `min` on the Dense distances; the improved vertices are then those whose
//! distance fell below the previous round's), and a round whose
//! improved vertices have many out-edges runs in pull form instead (`examples/bellman_ford_pull.tess`: each vertex gathers over its
//! in-edges, a parallel loop), as does the predecessor pass
//! (`examples/bellman_ford_preds_pull.tess`); both read the transposed weights `AT`. Every form gives exactly
//! the same distances, flags and predecessors (`min` and `|` of the same values in any order).
//! On one thread every round pushes serially.
//!
//! A serial or pull round writes the improved set as a Dense flag vector `F` (a SparseByteMap
//! output would sort its list every round), which the driver scans into the next round's
//! `Fprev`, a SparseByteMap that the rounds walk in order, and clears.

pub use super::bfs::Direction;
use super::{check_graph, one_hot};
use crate::backend::parallel::{Atomics, threads_for_work};
use crate::error::{Error, Result};
use crate::levels::Format;
use crate::notation::parse::parse_program;
use crate::run::Runner;
use crate::runtime::Buffer;
use crate::tensor::Tensor;
use std::collections::BTreeMap;

pub const ROUND: &str = include_str!("../../../../examples/bellman_ford.tess");
pub const PREDECESSORS: &str = include_str!("../../../../examples/bellman_ford_preds.tess");
pub const ROUND_PARALLEL: &str = include_str!("../../../../examples/bellman_ford_parallel.tess");
pub const ROUND_PULL: &str = include_str!("../../../../examples/bellman_ford_pull.tess");
pub const PREDECESSORS_PULL: &str =
    include_str!("../../../../examples/bellman_ford_preds_pull.tess");
/// With `Direction::Auto` on several threads, a round pulls when the previous round's improved
/// vertices' out-edges times the threads exceed this multiple of all edges: a pull round
/// walks every edge (split between the threads, with a random lookup of `Fprev` per edge), a
/// push round only the improved vertices' out-edges (scattering writes, split by source
/// vertex when that pays). Measured on the 2-core development machine once push rounds wrote
/// Dense flags (BENCHMARKS.md, "Parallel graph drivers", stop 37): on ca-HepPh two threads
/// took 7.1 ms pulling above a quarter of the edges (the earlier rule), 4.1 ms above half,
/// and 3.4 ms never pulling, against 3.7 ms on one thread; so on two threads a round never
/// pulls, and from four threads on it pulls above half the edges.
pub const PULL_EDGES: f64 = 2.0;
/// Missing edges weigh Inf, so they never shorten a path.
pub const WEIGHTS: &str = "Dense(SparseList(Element(Inf)))";
const DIST: &str = "Dense(Element(Inf))";
/// The previous round's improved vertices, which a round walks in order.
const FLAGS: &str = "SparseByteMap(Pattern())";
/// The vertices a round improves: flags that chunks may set at once.
pub const IMPROVED: &str = "Dense(Element(false))";
const PREDS: &str = "Dense(Element(-1))";

pub struct Paths {
    /// Distances from the source, Inf for unreachable vertices.
    pub dist: Vec<f64>,
    /// A predecessor on a shortest path: `pred[source] == source`, -1 for unreached vertices.
    pub pred: Vec<i64>,
    /// Rounds run, the last one included (it changed nothing).
    pub rounds: usize,
    /// Rounds run in pull form.
    pub pulled: usize,
    /// Push rounds split between threads (the parallel push kernel run; the runner may still
    /// run it as one chunk if its own rule says so).
    pub split: usize,
    /// Milliseconds spent compiling each kernel in this call (none once the runner caches them).
    pub compile_ms: Vec<(&'static str, f64)>,
}

/// The transpose of a weight matrix (`AT[i, j] = A[j, i]`, in-edges by row, for pulling), in
/// `a`'s format.
pub fn transpose(a: &Tensor) -> Result<Tensor> {
    let (mut rows, mut cols, mut vals) = (vec![], vec![], vec![]);
    a.for_each_stored(&mut |c, v| {
        rows.push(c[1] as i64);
        cols.push(c[0] as i64);
        vals.push(v.as_f64());
    });
    Tensor::from_coo(
        &a.format,
        &[a.shape[1], a.shape[0]],
        &[rows, cols],
        &Buffer::F64(vals.into()),
        |x, _| x,
    )
}

fn take_f64(t: &Tensor, name: &str) -> Vec<f64> {
    match t.to_dense() {
        Buffer::F64(v) => v.into_vec(),
        other => unreachable!(
            "{name} is declared with f64 elements, got {:?}",
            other.elem()
        ),
    }
}

/// Shortest paths from `source` over the weights `a` (edge j -> i weighs `a[j, i]`); an error
/// if distances still improve after n rounds (a negative cycle).
pub fn shortest_paths(runner: &Runner, a: &Tensor, source: usize) -> Result<Paths> {
    let mut graph = BTreeMap::from([("A".to_string(), a.clone())]);
    shortest_paths_in(runner, &mut graph, source)
}

/// [`shortest_paths`] over weights kept in `graph` as `A`, so that repeated runs do not copy
/// them; the run's own tensors are removed again before returning. Rounds pull (see the
/// module documentation) on several threads when the frontier is large; the transpose is
/// read from `graph` as `AT` if there (the command line builds it once, before its timed
/// runs), else built for this call.
pub fn shortest_paths_in(
    runner: &Runner,
    graph: &mut BTreeMap<String, Tensor>,
    source: usize,
) -> Result<Paths> {
    shortest_paths_directed(runner, graph, source, Direction::Auto)
}

/// [`shortest_paths_in`] with every round pushing, every round pulling, or the choice of
/// [`Direction::Auto`] (push on one thread; on several, pull while the improved vertices'
/// out-edges times the threads exceed [`PULL_EDGES`] times all edges). The results are the same in every direction.
pub fn shortest_paths_directed(
    runner: &Runner,
    graph: &mut BTreeMap<String, Tensor>,
    source: usize,
    dir: Direction,
) -> Result<Paths> {
    let Some(a) = graph.get("A") else {
        return Err(Error::Usage("shortest paths need the weights `A`".into()));
    };
    let n = check_graph(a, source, "weight")?;
    let pulls = match dir {
        Direction::Push => false,
        Direction::Pull => true,
        Direction::Auto => runner.threads() > 1,
    };
    let mut own = vec!["D", "Dprev", "F", "Fprev", "P"];
    if pulls && !graph.contains_key("AT") {
        let at = transpose(a)?;
        graph.insert("AT".into(), at);
        own.push("AT");
    }
    if let Some(at) = graph.get("AT").filter(|_| pulls)
        && at.shape != [n, n]
    {
        return Err(Error::tensor(
            "AT",
            format!(
                "the transpose has shape {:?}, the weights {n} x {n}",
                at.shape
            ),
        ));
    }
    let result = run_rounds(runner, graph, n, source, dir, pulls);
    for name in own {
        graph.remove(name);
    }
    result
}

fn run_rounds(
    runner: &Runner,
    ts: &mut BTreeMap<String, Tensor>,
    n: usize,
    source: usize,
    dir: Direction,
    pulls: bool,
) -> Result<Paths> {
    ts.insert(
        "Dprev".into(),
        one_hot(DIST, n, source, Buffer::F64(vec![0.0].into()))?,
    );
    ts.insert(
        "D".into(),
        Tensor::empty(&Format::parse(DIST, None)?, &[n])?,
    );
    ts.insert(
        "Fprev".into(),
        one_hot(FLAGS, n, source, Buffer::Bool(vec![true].into()))?,
    );
    ts.insert(
        "F".into(),
        Tensor::empty(&Format::parse(IMPROVED, None)?, &[n])?,
    );
    let mut compile_ms = vec![];
    let mut compile = |name: &'static str, text: &str, names: &[&str]| {
        let c = runner.compile(&parse_program(text)?, &formats_of(ts, names))?;
        let ms = *runner.last_compile_ms.borrow();
        if ms > 0.0 {
            compile_ms.push((name, ms));
        }
        Ok::<_, Error>(c)
    };
    let push = compile("bellman_ford", ROUND, &["A", "D", "Dprev", "F", "Fprev"])?;
    let push_split = match runner.threads() > 1 && dir != Direction::Pull {
        true => Some(compile(
            "bellman_ford_parallel",
            ROUND_PARALLEL,
            &["A", "D", "Dprev", "Fprev"],
        )?),
        false => None,
    };
    let pull = match pulls {
        true => Some(compile(
            "bellman_ford_pull",
            ROUND_PULL,
            &["AT", "D", "Dprev", "F", "Fprev"],
        )?),
        false => None,
    };
    // Out-degrees from the row pointers of a Dense(SparseList(..)) weight matrix, to weigh the
    // improved vertices' out-edges against all edges.
    let ptr = super::row_pointers(&ts["A"], n);
    let degree = |v: usize| ptr.as_ref().map_or(0, |p| p[v + 1] - p[v]);
    let edges = ptr.as_ref().map_or(0, |p| p[n]);
    let mut frontier_edges = degree(source);
    let mut frontier = 1;
    let (mut pulled, mut split) = (0, 0);
    let mut members = vec![];
    for rounds in 1..=n + 1 {
        let (round, atomics) = match (&pull, dir) {
            (Some(pull), Direction::Pull) => (pull, None),
            (Some(pull), Direction::Auto)
                if ptr.is_some()
                    && frontier_edges as f64 * runner.threads() as f64
                        > PULL_EDGES * edges as f64 =>
            {
                (pull, None)
            }
            _ => match &push_split {
                // Without out-degrees (another weight format) the work is unknown: push
                // serially, as before.
                Some(k) if ptr.is_some() => match split_push(runner, n, frontier, frontier_edges) {
                    Some(atomics) => (k, Some(atomics)),
                    None => (&push, None),
                },
                _ => (&push, None),
            },
        };
        pulled += usize::from(pull.as_ref().is_some_and(|p| std::ptr::eq(round, p)));
        split += usize::from(atomics.is_some());
        match atomics {
            Some(mode) => {
                // The runner weighs the range by every vertex's out-edges, not the improved
                // ones': the choice made here with the round's own work holds for this call.
                let user = runner.atomics();
                runner.set_atomics(mode);
                let run = runner.execute(round, ts);
                runner.set_atomics(user);
                run?
            }
            None => runner.execute(round, ts)?,
        }
        match atomics {
            // The split round writes no flags: the vertices it improved are those whose
            // distance fell below the previous round's (see bellman_ford_parallel.tess).
            Some(_) => super::decreased(&ts["D"], &ts["Dprev"], ("D", "Dprev"), &mut members)?,
            None => {
                let improved = ts.get_mut("F").expect("inserted above");
                super::drain_flags(improved, "F", &mut members)?;
            }
        }
        frontier = members.len();
        frontier_edges = members.iter().map(|&c| degree(c as usize)).sum();
        if members.is_empty() {
            let pred = predecessors(runner, ts, n, source, pulls, &mut compile_ms)?;
            return Ok(Paths {
                dist: take_f64(&ts["D"], "D"),
                pred,
                rounds,
                pulled,
                split,
                compile_ms,
            });
        }
        let d = ts.remove("D").expect("inserted above");
        let old = ts.insert("Dprev".to_string(), d).expect("inserted above");
        ts.insert("D".to_string(), old);
        super::set_frontier(ts.get_mut("Fprev").expect("inserted above"), n, &members)?;
    }
    Err(Error::tensor(
        "A",
        format!("distances still improve after {n} rounds: the graph has a negative cycle"),
    ))
}

/// Whether a push round over `frontier` improved vertices with `frontier_edges` out-edges is
/// worth splitting between the runner's threads, by the runner's own cost rule
/// (`threads_for_work`, with the runner's threshold) applied to that work rather than to the
/// range's weights (which count every vertex's out-edges); and if so, how its chunks should
/// fold `D`: shared indivisible updates unless the runner's mode forbids them, or
/// (`Atomics::Auto`) private copies of the n distances would pay for themselves.
fn split_push(runner: &Runner, n: usize, frontier: usize, frontier_edges: i64) -> Option<Atomics> {
    let threads = runner.threads();
    // A round costs an index per improved vertex even where it has no out-edges.
    let work = (frontier_edges.max(0) as u64).max(frontier as u64);
    let min_work = runner.min_parallel_work();
    let copies = n as u64;
    let user = runner.atomics();
    let with_copies = threads_for_work(work, threads, copies, min_work) > 1;
    match user {
        Atomics::Never => with_copies.then_some(Atomics::Never),
        Atomics::Auto if with_copies => Some(Atomics::Auto),
        Atomics::Auto | Atomics::Always => {
            (threads_for_work(work, threads, 0, min_work) > 1).then_some(Atomics::Always)
        }
    }
}

fn formats_of(ts: &BTreeMap<String, Tensor>, names: &[&str]) -> BTreeMap<String, Format> {
    names
        .iter()
        .map(|n| (n.to_string(), ts[*n].format.clone()))
        .collect()
}

/// Run the predecessor pass on `A` (its transpose `AT` in pull form, a parallel loop) and the
/// final distances `D` of `ts`.
fn predecessors(
    runner: &Runner,
    ts: &mut BTreeMap<String, Tensor>,
    n: usize,
    source: usize,
    pull: bool,
    compile_ms: &mut Vec<(&'static str, f64)>,
) -> Result<Vec<i64>> {
    ts.insert(
        "P".into(),
        Tensor::empty(&Format::parse(PREDS, None)?, &[n])?,
    );
    let (name, text, weights) = match pull {
        true => ("bellman_ford_preds_pull", PREDECESSORS_PULL, "AT"),
        false => ("bellman_ford_preds", PREDECESSORS, "A"),
    };
    let formats = formats_of(ts, &[weights, "D", "P"]);
    let k = runner.compile(&parse_program(text)?, &formats)?;
    let ms = *runner.last_compile_ms.borrow();
    if ms > 0.0 {
        compile_ms.push((name, ms));
    }
    runner.execute(&k, ts)?;
    let mut pred = match ts["P"].to_dense() {
        Buffer::I64(v) => v.into_vec(),
        other => unreachable!("P is declared with i64 elements, got {:?}", other.elem()),
    };
    pred[source] = source as i64;
    Ok(pred)
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
