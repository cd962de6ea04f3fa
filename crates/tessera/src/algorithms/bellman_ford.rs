//! Bellman-Ford single-source shortest paths with predecessors: `examples/bellman_ford.tess`
//! is one relaxation round, repeated until no distance improves (swapping the current and
//! previous distance and flag tensors between rounds); `examples/bellman_ford_preds.tess`
//! then picks a tight in-edge per reached vertex.
//!
//! On several threads (`Runner::threads`) the vertices are dealt to one part per thread, each
//! part owning its vertices' distances (`algorithms::owners`), and a push round with enough
//! work (its improved vertices' out-edges, weighed by the runner's cost rule
//! `backend::parallel::threads_for_work`) is split by part: each thread relaxes the frontier's
//! edges into its own vertices (`examples/bellman_ford_owned.tess`, on a copy of the weights
//! dealt to the parts, `AO`), so no update is indivisible or privatised, and flags the
//! vertices it improves in its own block of `F`. With `Direction::Pull` every
//! round runs in pull form instead (`examples/bellman_ford_pull.tess`: each vertex gathers over
//! its in-edges, a parallel loop), and on several threads the predecessor pass pulls too
//! (`examples/bellman_ford_preds_pull.tess`); both read the transposed weights `AT`. Every form
//! gives exactly the same distances, rounds and predecessors (`min` of the same values in any
//! order; the predecessors are picked in vertex order after the last round). On one thread
//! every round pushes serially.
//!
//! A serial or pull round writes the improved set as a Dense flag vector `F` (a SparseByteMap
//! output would sort its list every round), which the driver scans into the next round's
//! `Fprev`, a SparseByteMap that the rounds walk in order, and clears.

pub use super::bfs::Direction;
use super::owners::{self, Owners};
use super::{check_graph, empty_frontier, one_hot};
use crate::backend::parallel::threads_for_work;
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
pub const ROUND_OWNED: &str = include_str!("../../../../examples/bellman_ford_owned.tess");
pub const PREDECESSORS_PULL: &str =
    include_str!("../../../../examples/bellman_ford_preds_pull.tess");
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
    /// Push rounds split between threads by the distances' owners.
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
/// them; the run's own tensors are removed again before returning. On several threads the
/// rounds push split by the distances' owners and the predecessor pass pulls (see the module
/// documentation): the weights dealt to the threads' parts are read from `graph` as `AO` if
/// there and dealt for this runner's thread count (`owners::Owners::new(n,
/// threads).weights(A)`, of the same `A`), and the transpose as `AT` (the command line builds
/// both once, before its timed runs); else they are built for this call.
pub fn shortest_paths_in(
    runner: &Runner,
    graph: &mut BTreeMap<String, Tensor>,
    source: usize,
) -> Result<Paths> {
    shortest_paths_directed(runner, graph, source, Direction::Auto)
}

/// [`shortest_paths_in`] with every round pushing (split by the distances' owners on several
/// threads, see the module documentation), every round pulling, or [`Direction::Auto`]: the
/// pushes, and on several threads a predecessor pass that pulls. An owned push round relaxes
/// only the improved vertices' out-edges and splits them between the threads without
/// indivisible updates, so it is never dearer than a pull round over every edge: `Auto` does
/// not pull rounds (Bellman-Ford's frontier, unlike BFS's, never needs every vertex's edges).
/// The results are the same in every direction.
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
    let threads = runner.threads();
    let pulls = match dir {
        Direction::Push => false,
        Direction::Pull => true,
        Direction::Auto => threads > 1,
    };
    // Owned pushes weigh a round by its out-degrees, read off the row pointers.
    let owned = threads > 1 && dir != Direction::Pull && super::row_pointers(a, n).is_some();
    let mut own = vec!["D", "Dparts", "Dprev", "F", "Fprev", "P"];
    if pulls && !graph.contains_key("AT") {
        let at = transpose(&graph["A"])?;
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
    // The caller's dealt weights if they fit this runner, else this call's own (the
    // caller's are put back afterwards).
    let mut callers = None;
    if owned && !graph.get("AO").is_some_and(|ao| owned_fits(ao, n, threads)) {
        let ao = Owners::new(n, threads).weights(&graph["A"])?;
        callers = graph.insert("AO".into(), ao);
        own.push("AO");
    }
    let result = match owned {
        true => run_owned_rounds(runner, graph, n, source, pulls),
        false => run_rounds(runner, graph, n, source, dir == Direction::Pull, pulls),
    };
    for name in own {
        graph.remove(name);
    }
    if let Some(ao) = callers {
        graph.insert("AO".into(), ao);
    }
    result
}

/// The rounds on one thread (pushing), or all pulling (`pull_rounds`); then the predecessor
/// pass, pulling when `pull_preds`.
fn run_rounds(
    runner: &Runner,
    ts: &mut BTreeMap<String, Tensor>,
    n: usize,
    source: usize,
    pull_rounds: bool,
    pull_preds: bool,
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
    let (name, text, weights) = match pull_rounds {
        true => ("bellman_ford_pull", ROUND_PULL, "AT"),
        false => ("bellman_ford", ROUND, "A"),
    };
    let round = runner.compile(
        &parse_program(text)?,
        &formats_of(ts, &[weights, "D", "Dprev", "F", "Fprev"]),
    )?;
    let ms = *runner.last_compile_ms.borrow();
    if ms > 0.0 {
        compile_ms.push((name, ms));
    }
    let mut members = vec![];
    for rounds in 1..=n + 1 {
        runner.execute(&round, ts)?;
        let improved = ts.get_mut("F").expect("inserted above");
        super::drain_flags(improved, "F", &mut members)?;
        if members.is_empty() {
            let pred = predecessors(runner, ts, n, source, pull_preds, &mut compile_ms)?;
            return Ok(Paths {
                dist: take_f64(&ts["D"], "D"),
                pred,
                rounds,
                pulled: if pull_rounds { rounds } else { 0 },
                split: 0,
                compile_ms,
            });
        }
        let d = ts.remove("D").expect("inserted above");
        let old = ts.insert("Dprev".to_string(), d).expect("inserted above");
        ts.insert("D".to_string(), old);
        super::set_frontier(ts.get_mut("Fprev").expect("inserted above"), n, &members)?;
    }
    Err(negative_cycle(n))
}

fn negative_cycle(n: usize) -> Error {
    Error::tensor(
        "A",
        format!("distances still improve after {n} rounds: the graph has a negative cycle"),
    )
}

/// Whether `ao` holds weights dealt to `threads` parts for `n` vertices (a copy the caller
/// built once, as the command line does before its timed runs).
fn owned_fits(ao: &Tensor, n: usize, threads: usize) -> bool {
    let o = Owners::new(n, threads);
    ao.shape == [o.parts, o.len(), o.block] && ao.format.to_string() == owners::WEIGHTS
}

/// The rounds on several threads: every round pushes, split by the owners of the distances
/// when its work pays for the threads (`examples/bellman_ford_owned.tess`, on the weights
/// dealt to parts, `AO`). An owned round costs more CPU than a serial one (each thread walks
/// the whole frontier: 163 against 121 ms on delaunay_n17 run as one chunk), so thin rounds
/// run the serial round on the distances in vertex order, and the state moves to owned order
/// (vertices dealt round-robin to the parts) when a round's work first reaches the runner's
/// threshold, and back once it falls below a quarter of it (O(n) each way; the margin keeps
/// rounds near the threshold from moving it back and forth). The predecessor pass runs in
/// vertex order as on one thread (pulling when `pull_preds`), so the results are exactly one
/// thread's.
fn run_owned_rounds(
    runner: &Runner,
    ts: &mut BTreeMap<String, Tensor>,
    n: usize,
    source: usize,
    pull_preds: bool,
) -> Result<Paths> {
    let o = Owners::new(n, runner.threads());
    let flat = Format::parse(DIST, None)?;
    let parts = Format::parse("Dense(Dense(Element(Inf)))", None)?;
    let part_flags = Format::parse("Dense(Dense(Element(false)))", None)?;
    let flags = Format::parse(FLAGS, None)?;
    let mut compile_ms = vec![];
    let mut compile = |name: &'static str, text: &str, formats: BTreeMap<String, Format>| {
        let k = runner.compile(&parse_program(text)?, &formats)?;
        let ms = *runner.last_compile_ms.borrow();
        if ms > 0.0 {
            compile_ms.push((name, ms));
        }
        Ok::<_, Error>(k)
    };
    let serial = compile(
        "bellman_ford",
        ROUND,
        BTreeMap::from([
            ("A".to_string(), ts["A"].format.clone()),
            ("D".to_string(), flat.clone()),
            ("Dprev".to_string(), flat.clone()),
            ("F".to_string(), Format::parse(IMPROVED, None)?),
            ("Fprev".to_string(), flags.clone()),
        ]),
    )?;
    let round = compile(
        "bellman_ford_owned",
        ROUND_OWNED,
        BTreeMap::from([
            ("AO".to_string(), ts["AO"].format.clone()),
            ("D".to_string(), parts.clone()),
            ("Dparts".to_string(), parts.clone()),
            ("Dprev".to_string(), flat.clone()),
            ("F".to_string(), part_flags.clone()),
            ("Fprev".to_string(), flags.clone()),
        ]),
    )?;
    let by_vertex: Vec<i64> = {
        let ptr = super::row_pointers(&ts["A"], n).unwrap_or_else(|| vec![0; n + 1]);
        (0..n).map(|v| ptr[v + 1] - ptr[v]).collect()
    };
    let by_owner = o.deal(&by_vertex, 0);
    // The state in vertex order to start with: the source alone.
    let mut dist = vec![f64::INFINITY; n];
    dist[source] = 0.0;
    let mut members = vec![source as i64];
    let mut owned = false;
    enter_vertex_order(ts, &flat, n, dist, &members, None)?;
    // The flags of the order not in use (`F`, and `Fprev` emptied), kept for the next move:
    // vertex order, owned order.
    let mut spare: [Option<(Tensor, Tensor)>; 2] = [None, None];
    let mut split = 0;
    let user_min_work = runner.min_parallel_work();
    let threads = runner.threads();
    let mut last = None;
    for rounds in 1..=n + 1 {
        let degree = if owned { &by_owner } else { &by_vertex };
        let edges: i64 = members.iter().map(|&p| degree[p as usize]).sum();
        let work = (edges.max(0) as u64).max(members.len() as u64);
        // The loop over the parts has one iteration per thread and no weights the runner
        // could read: the driver weighs the round by its frontier's out-edges, and runs it
        // split (threshold 0) or as one chunk (a threshold no work reaches).
        let splits = threads_for_work(work, threads, 0, user_min_work) > 1;
        let stays = threads_for_work(work.saturating_mul(4), threads, 0, user_min_work) > 1;
        if !owned && splits {
            let d = o.deal(values_f64(&ts["Dprev"], "Dprev")?, f64::INFINITY);
            members = members
                .iter()
                .map(|&v| o.owned(v as usize) as i64)
                .collect();
            members.sort_unstable();
            spare[0] = Some(leave_order(ts)?);
            let flags = spare[1].take();
            enter_owned_order(ts, o, (&flat, &parts, &part_flags), d, &members, flags)?;
            owned = true;
        } else if owned && !stays {
            let d = o.gather(values_f64(&ts["Dprev"], "Dprev")?);
            members = (members.iter())
                .filter_map(|&p| o.vertex(p as usize))
                .map(|v| v as i64)
                .collect();
            members.sort_unstable();
            ts.remove("Dparts");
            spare[1] = Some(leave_order(ts)?);
            enter_vertex_order(ts, &flat, n, d, &members, spare[0].take())?;
            owned = false;
        }
        if !owned {
            runner.execute(&serial, ts)?;
            super::drain_flags(ts.get_mut("F").expect("inserted above"), "F", &mut members)?;
            if members.is_empty() {
                last = Some(rounds);
                break;
            }
            let d = ts.remove("D").expect("inserted above");
            let old = ts.insert("Dprev".to_string(), d).expect("inserted above");
            ts.insert("D".to_string(), old);
            super::set_frontier(ts.get_mut("Fprev").expect("inserted above"), n, &members)?;
            continue;
        }
        split += usize::from(splits);
        runner.set_min_parallel_work(if splits { 0 } else { u64::MAX });
        let run = runner.execute(&round, ts);
        runner.set_min_parallel_work(user_min_work);
        run?;
        // The improved vertices, part by part: in owned order, the parts' blocks in turn. A
        // flag costs ~0.35 ns to drain and handing parts to the pool ~100 µs (the worker
        // sleeps between the kernel's chunks and this), so the parts are drained on several
        // threads only from ~600,000 flags: on delaunay_n17 (131,072) the split drain took
        // 27 ms of a 2-thread run against 10 ms on one.
        let scan = threads_for_work(o.len() as u64 / 16, threads, 0, user_min_work);
        let f = ts.get_mut("F").expect("inserted above");
        super::drain_flags_by_part(f, "F", &mut members, o.block, scan)?;
        let d = owners::reshaped(ts.remove("D").expect("inserted above"), &flat, &[o.len()]);
        // `D` becomes the next round's `Dprev`, and `Dprev`, behind it only at the vertices
        // this round improved, is brought up to date there and becomes the next `D` (its
        // memory no longer shared with `Dparts`, so written in place).
        ts.remove("Dparts");
        let mut older = ts.insert("Dprev".to_string(), d).expect("inserted above");
        if members.is_empty() {
            last = Some(rounds);
            break;
        }
        older.unshare();
        copy_at(&ts["Dprev"], &mut older, &members)?;
        ts.insert(
            "D".to_string(),
            owners::reshaped(older, &parts, &[o.parts, o.block]),
        );
        share_parts(ts, &parts, o);
        super::set_frontier(
            ts.get_mut("Fprev").expect("inserted above"),
            o.len(),
            &members,
        )?;
    }
    // The last round improved nothing: its distances are final.
    let Some(rounds) = last else {
        return Err(negative_cycle(n));
    };
    // Read in place (one copy: the gather, or the result's own), not copied out and back.
    let dist = match owned {
        true => o.gather(values_f64(&ts["Dprev"], "Dprev")?),
        false => values_f64(&ts["D"], "D")?.to_vec(),
    };
    ts.insert("D".into(), vector(&flat, dist.clone()));
    let pred = predecessors(runner, ts, n, source, pull_preds, &mut compile_ms)?;
    Ok(Paths {
        dist,
        pred,
        rounds,
        pulled: 0,
        split,
        compile_ms,
    })
}

/// The serial round's state in vertex order: `Dprev` and `D` both `dist`, `Fprev` holding
/// `members` (increasing), `F` all false (`flags`, the pair [`leave_order`] kept, if any).
fn enter_vertex_order(
    ts: &mut BTreeMap<String, Tensor>,
    flat: &Format,
    n: usize,
    dist: Vec<f64>,
    members: &[i64],
    flags: Option<(Tensor, Tensor)>,
) -> Result<()> {
    let d = vector(flat, dist);
    ts.insert("D".into(), d.clone());
    ts.insert("Dprev".into(), d);
    let (f, mut frontier) = match flags {
        Some(pair) => pair,
        None => (
            Tensor::empty(&Format::parse(IMPROVED, None)?, &[n])?,
            Tensor::empty(&Format::parse(FLAGS, None)?, &[n])?,
        ),
    };
    super::set_frontier(&mut frontier, n, members)?;
    ts.insert("Fprev".into(), frontier);
    ts.insert("F".into(), f);
    Ok(())
}

/// The owned round's state: `Dprev` the distances `dist` in owned order, `D` the same by part
/// (a round starts with `D` equal to `Dprev`: the flags compare with it), `Dparts` the view of
/// `Dprev` by part, `Fprev` holding `members` (owned, increasing), `F` all false by part
/// (`flags`, the pair [`leave_order`] kept, if any).
fn enter_owned_order(
    ts: &mut BTreeMap<String, Tensor>,
    o: Owners,
    (flat, parts, part_flags): (&Format, &Format, &Format),
    dist: Vec<f64>,
    members: &[i64],
    flags: Option<(Tensor, Tensor)>,
) -> Result<()> {
    let d = vector(flat, dist);
    ts.insert(
        "D".into(),
        owners::reshaped(d.clone(), parts, &[o.parts, o.block]),
    );
    ts.insert("Dprev".into(), d);
    let (f, mut frontier) = match flags {
        Some(pair) => pair,
        None => (
            Tensor::empty(part_flags, &[o.parts, o.block])?,
            Tensor::empty(&Format::parse(FLAGS, None)?, &[o.len()])?,
        ),
    };
    super::set_frontier(&mut frontier, o.len(), members)?;
    ts.insert("Fprev".into(), frontier);
    ts.insert("F".into(), f);
    share_parts(ts, parts, o);
    Ok(())
}

/// The flags of the order the rounds leave, kept for their return: `F` (all false after its
/// drain) and `Fprev` emptied.
fn leave_order(ts: &mut BTreeMap<String, Tensor>) -> Result<(Tensor, Tensor)> {
    let f = ts.remove("F").expect("inserted by the caller");
    let mut frontier = ts.remove("Fprev").expect("inserted by the caller");
    empty_frontier(&mut frontier)?;
    Ok((f, frontier))
}

/// A `Dense(Element(..))` f64 vector of `values`, moved in.
fn vector(flat: &Format, values: Vec<f64>) -> Tensor {
    Tensor {
        shape: vec![values.len()],
        format: flat.clone(),
        levels: vec![vec![], vec![Buffer::F64(values.into())]],
    }
}

/// The values of a `Dense(Element(..))` f64 vector, read in place.
fn values_f64<'t>(t: &'t Tensor, name: &str) -> Result<&'t [f64]> {
    match (t.rank(), t.levels.last().and_then(|l| l.first())) {
        (1, Some(Buffer::F64(v))) => Ok(v),
        _ => Err(Error::tensor(
            name,
            format!("expected a Dense(Element(..)) f64 vector, got {}", t.format),
        )),
    }
}

/// `Dparts`: `Dprev`'s values part by part, the same memory (shared, not copied).
fn share_parts(ts: &mut BTreeMap<String, Tensor>, parts: &Format, o: Owners) {
    let dprev = ts.get_mut("Dprev").expect("inserted by the caller");
    dprev.share();
    let view = owners::reshaped(dprev.clone(), parts, &[o.parts, o.block]);
    ts.insert("Dparts".into(), view);
}

/// `to[p] = from[p]` at the listed positions `at` of two Dense f64 vectors of one length.
fn copy_at(from: &Tensor, to: &mut Tensor, at: &[i64]) -> Result<()> {
    match (
        from.levels.last().and_then(|l| l.first()),
        to.levels.last_mut().and_then(|l| l.first_mut()),
    ) {
        (Some(Buffer::F64(from)), Some(Buffer::F64(to))) if from.len() == to.len() => {
            let to: &mut [f64] = to;
            for &p in at {
                to[p as usize] = from[p as usize];
            }
            Ok(())
        }
        _ => Err(Error::tensor(
            "Dprev",
            format!(
                "expected two f64 vectors of one length, got {} and {}",
                from.format, to.format
            ),
        )),
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
