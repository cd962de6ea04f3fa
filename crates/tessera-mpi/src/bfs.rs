//! Distributed direction-optimizing BFS over a 1-D vertex partition (balanced by out-edges):
//! rank r owns vertices `range(r)`, their out-edges (rows of A) and in-edges (rows of Aᵀ).
//! Each level runs one of the serial kernels (`examples/bfs_push.tess`,
//! `examples/bfs_pull.tess`) on the rank's rows:
//! - push: the rank's frontier vertices claim unvisited out-neighbours anywhere in the graph;
//!   each claim `(k, j)` goes to k's owner, which keeps the smallest j;
//! - pull: each unvisited owned vertex looks for its first in-neighbour in the whole frontier
//!   (the frontier is known to every rank).
//!
//! Both pick the smallest frontier neighbour as parent, as the serial kernels do (push walks
//! the frontier in order and `<<choose>>=` keeps the first claim; pull stops at the first
//! in-neighbour in the frontier), so parents and levels equal `tessera graph bfs-do`'s. The
//! new frontier is then gathered on every rank (MPI_Allgatherv), and the direction of the
//! next level is chosen from global counts with the serial rule (Beamer's α and β).

use crate::args::Args;
use crate::comm::{DistResult, agree, all_gather, exchange, gather_to_root, sum_u64};
use crate::load;
use crate::partition::Partition;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::collections::BTreeMap;
use std::time::Instant;
use tessera::algorithms::bfs::{GRAPH_FORMAT, PULL, PUSH, pulls};
use tessera::error::{Error, Result};
use tessera::levels::Format;
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

const FRONTIER: &str = "SparseByteMap(Pattern())";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Push,
    Pull,
}

struct Graph {
    lo: usize,
    n: usize,
    part: Partition,
    out_edges: Tensor,
    in_edges: Tensor,
    /// Out-degree of each owned vertex (stored entries of its row).
    degree: Vec<u64>,
    total_edges: u64,
}

struct Found {
    parent: Vec<i64>,
    level: Vec<i64>,
    steps: Vec<(Dir, usize)>,
    comm_ms: f64,
    compute_ms: f64,
}

fn vector(format: &str, n: usize, at: &[i64], value: Buffer) -> Result<Tensor> {
    let f = Format::parse(format, None)?;
    Tensor::from_coo(&f, &[n], &[at.to_vec()], &value, |x, _| x)
}

fn buffer_mut(t: &mut Tensor) -> &mut Buffer {
    t.levels
        .last_mut()
        .and_then(|l| l.first_mut())
        .expect("a dense vector has its values as the leaf's first buffer")
}

fn formats(m: &BTreeMap<String, Tensor>) -> BTreeMap<String, Format> {
    m.iter()
        .map(|(k, t)| (k.clone(), t.format.clone()))
        .collect()
}

fn search(
    world: &SimpleCommunicator,
    runner: &Runner,
    g: &Graph,
    source: usize,
    direction: &str,
) -> DistResult<Found> {
    let me = world.rank() as usize;
    let (lo, n) = (g.lo, g.n);
    let nloc = g.part.len(me);
    let owns_source = g.part.owner(source) == me;
    let src_local: Vec<i64> = if owns_source {
        vec![(source - lo) as i64]
    } else {
        vec![]
    };
    let setup = (|| -> Result<_> {
        let mut push = BTreeMap::new();
        push.insert("A".to_string(), g.out_edges.clone());
        push.insert(
            "F".into(),
            vector(FRONTIER, nloc, &[], Buffer::Bool(vec![].into()))?,
        );
        push.insert(
            "Fnext".into(),
            vector(FRONTIER, n, &[], Buffer::Bool(vec![].into()))?,
        );
        push.insert(
            "V".into(),
            vector(
                "Dense(Element(false))",
                n,
                &[source as i64],
                Buffer::Bool(vec![true].into()),
            )?,
        );
        push.insert(
            "P".into(),
            vector("Dense(Element(-1))", n, &[], Buffer::I64(vec![].into()))?,
        );
        let mut pull = BTreeMap::new();
        pull.insert("AT".to_string(), g.in_edges.clone());
        pull.insert(
            "F".into(),
            vector(FRONTIER, n, &[], Buffer::Bool(vec![].into()))?,
        );
        pull.insert(
            "Fnext".into(),
            vector(FRONTIER, nloc, &[], Buffer::Bool(vec![].into()))?,
        );
        let trues = Buffer::Bool(vec![true; src_local.len()].into());
        pull.insert(
            "V".into(),
            vector("Dense(Element(false))", nloc, &src_local, trues)?,
        );
        pull.insert(
            "P".into(),
            vector("Dense(Element(-1))", nloc, &[], Buffer::I64(vec![].into()))?,
        );
        pull.insert(
            "p".into(),
            Tensor::empty(&Format::parse("ShortCircuitScalar(-1)", None)?, &[])?,
        );
        let push_k = runner.compile(&parse_program(PUSH)?, &formats(&push))?;
        let pull_k = runner.compile(&parse_program(PULL)?, &formats(&pull))?;
        Ok((push, pull, push_k, pull_k))
    })();
    let (mut push, mut pull, push_k, pull_k) = agree(world, setup)?;
    let mut parent = vec![-1i64; nloc];
    let mut level = vec![-1i64; nloc];
    if owns_source {
        parent[source - lo] = source as i64;
        level[source - lo] = 0;
    }
    let mut front: Vec<i64> = vec![source as i64];
    let deg = |v: usize| {
        if g.part.owner(v) == me {
            g.degree[v - lo]
        } else {
            0
        }
    };
    let mut frontier_edges = sum_u64(world, deg(source));
    let mut unexplored_edges = g.total_edges - frontier_edges;
    let (mut previous, mut last_frontier, mut depth) = (Dir::Push, 0usize, 0i64);
    let mut steps = vec![];
    let (mut comm_ms, mut compute_ms) = (0.0, 0.0);
    while !front.is_empty() {
        depth += 1;
        let frontier = front.len();
        let step = match direction {
            "push" => Dir::Push,
            "pull" => Dir::Pull,
            _ => {
                let pulled = previous == Dir::Pull;
                let (fe, ue) = (frontier_edges as i64, unexplored_edges as i64);
                if pulls(pulled, n, frontier, last_frontier, fe, ue) {
                    Dir::Pull
                } else {
                    Dir::Push
                }
            }
        };
        previous = step;
        last_frontier = frontier;
        steps.push((step, frontier));
        let t = Instant::now();
        // This rank's new vertices (global) with their parents.
        let found: Result<Vec<(i64, i64)>> = match step {
            Dir::Push => (|| {
                let mine: Vec<i64> = front
                    .iter()
                    .filter(|&&v| g.part.owner(v as usize) == me)
                    .map(|&v| v - lo as i64)
                    .collect();
                let t = Buffer::Bool(vec![true; mine.len()].into());
                push.insert("F".into(), vector(FRONTIER, nloc, &mine, t)?);
                push.insert(
                    "Fnext".into(),
                    vector(FRONTIER, n, &[], Buffer::Bool(vec![].into()))?,
                );
                runner.execute(&push_k, &mut push)?;
                let mut claimed = vec![];
                push["Fnext"].for_each_stored(&mut |c, v| {
                    if v.as_bool() {
                        claimed.push(c[0]);
                    }
                });
                let Buffer::I64(p) = buffer_mut(push.get_mut("P").expect("inserted")) else {
                    return Err(Error::Usage("P is not an i64 vector".into()));
                };
                Ok(claimed
                    .into_iter()
                    .map(|k| (k as i64, p[k] + lo as i64))
                    .collect())
            })(),
            Dir::Pull => (|| {
                let t = Buffer::Bool(vec![true; front.len()].into());
                pull.insert("F".into(), vector(FRONTIER, n, &front, t)?);
                pull.insert(
                    "Fnext".into(),
                    vector(FRONTIER, nloc, &[], Buffer::Bool(vec![].into()))?,
                );
                runner.execute(&pull_k, &mut pull)?;
                let mut got = vec![];
                pull["Fnext"].for_each_stored(&mut |c, v| {
                    if v.as_bool() {
                        got.push(c[0]);
                    }
                });
                let Buffer::I64(p) = buffer_mut(pull.get_mut("P").expect("inserted")) else {
                    return Err(Error::Usage("P is not an i64 vector".into()));
                };
                Ok(got.into_iter().map(|k| ((k + lo) as i64, p[k])).collect())
            })(),
        };
        let found = agree(world, found)?;
        compute_ms += t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        // Claims go to the owners, which keep the smallest claimant of each unvisited vertex.
        let mut best: BTreeMap<usize, i64> = BTreeMap::new();
        match step {
            Dir::Push => {
                let mut to: Vec<Vec<i64>> = vec![vec![]; g.part.parts()];
                for (k, j) in found {
                    to[g.part.owner(k as usize)].extend([k, j]);
                }
                for from in exchange(world, &to) {
                    for kj in from.chunks(2) {
                        let k = kj[0] as usize - lo;
                        if level[k] < 0 {
                            let e = best.entry(k).or_insert(kj[1]);
                            *e = (*e).min(kj[1]);
                        }
                    }
                }
            }
            Dir::Pull => best.extend(found.into_iter().map(|(k, j)| (k as usize - lo, j))),
        }
        let Buffer::Bool(vl) = buffer_mut(pull.get_mut("V").expect("inserted")) else {
            unreachable!("V is declared bool")
        };
        let mut new_local = vec![];
        let mut new_edges = 0;
        for (&k, &j) in &best {
            parent[k] = j;
            level[k] = depth;
            vl[k] = true;
            new_local.push((k + lo) as i64);
            new_edges += g.degree[k];
        }
        front = all_gather(world, &new_local);
        let Buffer::Bool(vg) = buffer_mut(push.get_mut("V").expect("inserted")) else {
            unreachable!("V is declared bool")
        };
        for &v in &front {
            vg[v as usize] = true;
        }
        frontier_edges = sum_u64(world, new_edges);
        unexplored_edges -= frontier_edges;
        comm_ms += t.elapsed().as_secs_f64() * 1e3;
    }
    Ok(Found {
        parent,
        level,
        steps,
        comm_ms,
        compute_ms,
    })
}

pub fn command(world: &SimpleCommunicator, runner: &Runner, a: &Args) -> DistResult<String> {
    let (me, size) = (world.rank() as usize, world.size() as usize);
    let format = agree(
        world,
        load::matrix_format(a.format.as_deref().unwrap_or(GRAPH_FORMAT)),
    )?;
    let m = load::read_matrix(
        world,
        a.input("A").expect("checked by parse"),
        a.parallel_read,
    )?;
    let n = m.shape[0];
    agree(
        world,
        if m.shape[1] != n {
            Err(Error::tensor(
                "A",
                format!(
                    "a graph needs a square adjacency matrix, got shape {:?}",
                    m.shape
                ),
            ))
        } else if a.source >= n {
            Err(Error::tensor(
                "A",
                format!("source {} is outside the graph's 0..{n} vertices", a.source),
            ))
        } else {
            Ok(())
        },
    )?;
    let mut outs = crate::open_outputs(
        world,
        &[
            ("parents", a.output("parents"), vec![n], Scalar::I64(0)),
            ("dist", a.output("dist"), vec![n], Scalar::F64(0.0)),
        ],
    )?;
    let part = load::balanced(world, &m, size);
    let out_e = load::scatter(world, &m, |r, _| part.owner(r as usize));
    let mut in_e = load::scatter(world, &m, |_, c| part.owner(c as usize));
    drop(m);
    std::mem::swap(&mut in_e.rows, &mut in_e.cols);
    let lo = part.bounds[me];
    let nloc = part.len(me);
    let built = (|| -> Result<_> {
        let out_edges = load::block(&format, [nloc, n], &out_e, lo, Some)?;
        let in_edges = load::block(&format, [nloc, n], &in_e, lo, Some)?;
        let mut degree = vec![0u64; nloc];
        out_edges.for_each_stored(&mut |c, _| degree[c[0]] += 1);
        Ok((out_edges, in_edges, degree))
    })();
    let (out_edges, in_edges, degree) = agree(world, built)?;
    let total_edges = sum_u64(world, degree.iter().sum());
    let g = Graph {
        lo,
        n,
        part: part.clone(),
        out_edges,
        in_edges,
        degree,
        total_edges,
    };
    let mut times = vec![];
    let mut last = None;
    for k in 0..a.warmup + a.repeat {
        world.barrier();
        let t = Instant::now();
        let f = search(world, runner, &g, a.source, &a.direction)?;
        if k >= a.warmup {
            times.push((t.elapsed().as_secs_f64() * 1e3, f.compute_ms, f.comm_ms));
        }
        last = Some(f);
    }
    let f = last.expect("at least one run");
    let parents = gather_to_root(world, &f.parent);
    let levels = gather_to_root(world, &f.level);
    let written = if me == 0 {
        (|| -> Result<()> {
            let p = Tensor::from_dense(
                &Format::dense(1, Scalar::I64(0)),
                &[n],
                &Buffer::I64(parents.clone().into()),
            )?;
            let d = Tensor::from_dense(
                &Format::dense(1, Scalar::F64(0.0)),
                &[n],
                &Buffer::F64(levels.iter().map(|&l| l as f64).collect()),
            )?;
            let mut files = vec![];
            if let Some(o) = outs[0].take() {
                files.push((o, &p));
            }
            if let Some(o) = outs[1].take() {
                files.push((o, &d));
            }
            tessera::tensor::files::write_outputs(files)
        })()
    } else {
        Ok(())
    };
    agree(world, written)?;
    let mut tot: Vec<f64> = times.iter().map(|t| t.0).collect();
    let median = crate::median(&mut tot);
    let mine = [
        median,
        times.last().map_or(0.0, |t| t.1),
        times.last().map_or(0.0, |t| t.2),
    ];
    let per_rank = gather_to_root(world, &mine);
    if me != 0 {
        return Ok(String::new());
    }
    let reached = parents.iter().filter(|&&p| p >= 0).count();
    let col = |k: usize| -> Vec<f64> { per_rank.chunks(3).map(|c| c[k]).collect() };
    if a.json {
        let dirs: Vec<&str> = f
            .steps
            .iter()
            .map(|(d, _)| if *d == Dir::Push { "push" } else { "pull" })
            .collect();
        let line = serde_json::json!({
            "command": "bfs",
            "ranks": size,
            "vertices": n,
            "edges": g.total_edges,
            "partition": part.bounds,
            "reached": reached,
            "iterations": f.steps.len(),
            "directions": dirs,
            "median_ms": col(0).into_iter().fold(0.0, f64::max),
            "compute_ms": col(1),
            "comm_ms": col(2),
        });
        Ok(format!("{line}\n"))
    } else {
        Ok(format!(
            "bfs: {n} vertices on {size} ranks, source {}: reached {reached} in {} iterations\n",
            a.source,
            f.steps.len()
        ))
    }
}
