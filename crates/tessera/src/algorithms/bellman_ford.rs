//! Bellman-Ford single-source shortest paths with predecessors: `examples/bellman_ford.tess`
//! is one relaxation round, repeated until no distance improves (swapping the current and
//! previous distance and flag tensors between rounds); `examples/bellman_ford_preds.tess`
//! then picks a tight in-edge per reached vertex.

use super::{check_graph, empty_frontier, one_hot};
use crate::error::{Error, Result};
use crate::levels::Format;
use crate::notation::parse::parse_program;
use crate::run::Runner;
use crate::runtime::Buffer;
use crate::tensor::Tensor;
use std::collections::BTreeMap;

pub const ROUND: &str = include_str!("../../../../examples/bellman_ford.tess");
pub const PREDECESSORS: &str = include_str!("../../../../examples/bellman_ford_preds.tess");
/// Missing edges weigh Inf, so they never shorten a path.
pub const WEIGHTS: &str = "Dense(SparseList(Element(Inf)))";
const DIST: &str = "Dense(Element(Inf))";
const FLAGS: &str = "SparseByteMap(Pattern())";
const PREDS: &str = "Dense(Element(-1))";

pub struct Paths {
    /// Distances from the source, Inf for unreachable vertices.
    pub dist: Vec<f64>,
    /// A predecessor on a shortest path: `pred[source] == source`, -1 for unreached vertices.
    pub pred: Vec<i64>,
    /// Rounds run, the last one included (it changed nothing).
    pub rounds: usize,
    /// Milliseconds spent compiling each kernel in this call (none once the runner caches them).
    pub compile_ms: Vec<(&'static str, f64)>,
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
/// them; the run's own tensors are removed again before returning.
pub fn shortest_paths_in(
    runner: &Runner,
    graph: &mut BTreeMap<String, Tensor>,
    source: usize,
) -> Result<Paths> {
    let Some(a) = graph.get("A") else {
        return Err(Error::Usage("shortest paths need the weights `A`".into()));
    };
    let n = check_graph(a, source, "weight")?;
    let result = run_rounds(runner, graph, n, source);
    for name in ["D", "Dprev", "F", "Fprev", "P"] {
        graph.remove(name);
    }
    result
}

fn run_rounds(
    runner: &Runner,
    ts: &mut BTreeMap<String, Tensor>,
    n: usize,
    source: usize,
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
        Tensor::empty(&Format::parse(FLAGS, None)?, &[n])?,
    );
    let formats = formats_of(ts, &["A", "D", "Dprev", "F", "Fprev"]);
    let mut compile_ms = vec![];
    let round = runner.compile(&parse_program(ROUND)?, &formats)?;
    let ms = *runner.last_compile_ms.borrow();
    if ms > 0.0 {
        compile_ms.push(("bellman_ford", ms));
    }
    for rounds in 1..=n + 1 {
        runner.execute(&round, ts)?;
        let mut changed = false;
        ts["F"].for_each_stored(&mut |_, v| changed |= v.as_bool());
        if !changed {
            let pred = predecessors(runner, ts, n, source, &mut compile_ms)?;
            return Ok(Paths {
                dist: take_f64(&ts["D"], "D"),
                pred,
                rounds,
                compile_ms,
            });
        }
        for (cur, prev) in [("D", "Dprev"), ("F", "Fprev")] {
            let t = ts.remove(cur).expect("inserted above");
            let mut old = ts.insert(prev.to_string(), t).expect("inserted above");
            if cur == "F" {
                empty_frontier(&mut old)?;
            }
            ts.insert(cur.to_string(), old);
        }
    }
    Err(Error::tensor(
        "A",
        format!("distances still improve after {n} rounds: the graph has a negative cycle"),
    ))
}

fn formats_of(ts: &BTreeMap<String, Tensor>, names: &[&str]) -> BTreeMap<String, Format> {
    names
        .iter()
        .map(|n| (n.to_string(), ts[*n].format.clone()))
        .collect()
}

/// Run the predecessor pass on `A` and the final distances `D` of `ts`.
fn predecessors(
    runner: &Runner,
    ts: &mut BTreeMap<String, Tensor>,
    n: usize,
    source: usize,
    compile_ms: &mut Vec<(&'static str, f64)>,
) -> Result<Vec<i64>> {
    ts.insert(
        "P".into(),
        Tensor::empty(&Format::parse(PREDS, None)?, &[n])?,
    );
    let formats = formats_of(ts, &["A", "D", "P"]);
    let k = runner.compile(&parse_program(PREDECESSORS)?, &formats)?;
    let ms = *runner.last_compile_ms.borrow();
    if ms > 0.0 {
        compile_ms.push(("bellman_ford_preds", ms));
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
