//! `tessera-mpi`: distributed SpMV, SpGEMM and BFS over MPI, each rank running
//! Tessera-compiled kernels on its blocks. Started as `mpirun -np P tessera dist ...` (the
//! `tessera` CLI execs this binary) or `mpirun -np P tessera-mpi ...`.
//!
//! Every fallible step ends in [`comm::agree`], so an error on any rank (an unreadable file, a
//! kernel fault) makes every rank exit with status 1 and rank 0 print that error; outputs are
//! written by rank 0 through temporary files renamed only once everything succeeded.

mod args;
mod bfs;
mod comm;
mod load;
mod partition;
mod spgemm;
mod spmv;
mod summa;

use args::{Args, Command};
use comm::{DistResult, agree};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use tessera::run::Runner;
use tessera::tensor::files::OutputFile;

fn runner(a: &Args) -> Runner {
    let r = match a.backend.as_str() {
        "jit" => Runner::jit(),
        "c" => Runner::new(Box::new(tessera::backend::CBackend::new())),
        _ => Runner::tiered(),
    };
    // The ranks are the parallelism: one thread each.
    r.set_threads(1);
    r
}

/// Rank 0 opens (as temporary files) the outputs it will write; a bad path fails everywhere
/// before any work.
pub fn open_outputs(
    world: &SimpleCommunicator,
    specs: &[(&str, Option<&str>, Vec<usize>, tessera::types::Scalar)],
) -> DistResult<Vec<Option<OutputFile>>> {
    let opened = if world.rank() == 0 {
        specs
            .iter()
            .map(|(_, path, shape, fill)| {
                path.map(|p| OutputFile::create(p, shape, *fill))
                    .transpose()
            })
            .collect::<tessera::error::Result<Vec<_>>>()
    } else {
        Ok(specs.iter().map(|_| None).collect())
    };
    agree(world, opened)
}

fn run(world: &SimpleCommunicator, argv: &[String]) -> DistResult<String> {
    let a = agree(world, args::parse(argv))?;
    // Per rank: ranks may be given different limits (MPMD), and a rank over its limit fails
    // like any other, every rank agreeing on its error.
    tessera::memory::set_max_memory(a.max_memory);
    let runner = runner(&a);
    match a.command {
        Command::Spmv => spmv_command(world, &runner, &a),
        Command::Spgemm => spgemm::command(world, &runner, &a),
        Command::Bfs => bfs::command(world, &runner, &a),
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn spmv_command(world: &SimpleCommunicator, runner: &Runner, a: &Args) -> DistResult<String> {
    let (me, size) = (world.rank() as usize, world.size() as usize);
    // A bad --format fails before the matrix is read.
    if let Some(text) = &a.format {
        agree(world, load::matrix_format(text))?;
    }
    let m = load::read_matrix(
        world,
        a.input("A").expect("checked by parse"),
        a.parallel_read,
    )?;
    let [rows, cols] = m.shape;
    let mut outs = open_outputs(
        world,
        &[(
            "y",
            a.output("y"),
            vec![rows],
            tessera::types::Scalar::F64(0.0),
        )],
    )?;
    let row_part = load::balanced(world, &m, size);
    // x is laid out as y when A is square (PETSc's default); else split evenly.
    let col_part = if rows == cols {
        row_part.clone()
    } else {
        partition::Partition::even(cols, size)
    };
    let local = load::scatter(world, &m, |r, _| row_part.owner(r as usize));
    drop(m);
    let own = col_part.range(me);
    let x = agree(
        world,
        match a.input("x") {
            Some(p) => load::read_vector(p, cols).map(|v| v[own.clone()].to_vec()),
            None => Ok(vec![1.0; own.len()]),
        },
    )?;
    let nnz = comm::sum_u64(world, local.len() as u64);
    let formats = agree(
        world,
        spmv::BlockFormats::choose(a.format.as_deref(), [rows, cols], nnz),
    )?;
    let mut d = spmv::DistSpmv::new(world, runner, row_part.clone(), col_part, &local, &formats)?;
    drop(local);
    agree(world, d.x_mut().map(|v| v.copy_from_slice(&x)))?;
    let mut times = vec![];
    for k in 0..a.warmup + a.repeat {
        world.barrier();
        let t = agree(world, d.multiply(world, runner))?;
        if k >= a.warmup {
            times.push(t);
        }
    }
    let y = agree(world, d.y().map(<[f64]>::to_vec))?;
    let y_all = comm::gather_to_root(world, &y);
    let written = match outs[0].take() {
        Some(f) => tessera::tensor::Tensor::from_dense(
            &tessera::levels::Format::dense(1, tessera::types::Scalar::F64(0.0)),
            &[rows],
            &tessera::runtime::Buffer::F64(y_all.into()),
        )
        .and_then(|t| tessera::tensor::files::write_outputs(vec![(f, &t)])),
        None => Ok(()),
    };
    agree(world, written)?;
    let pick = |f: fn(&spmv::Times) -> f64| median(&mut times.iter().map(f).collect::<Vec<_>>());
    let mine = [
        pick(|t| t.total),
        pick(|t| t.diag),
        pick(|t| t.off),
        pick(|t| t.exchange),
        d.ghosts.len() as f64,
        d.sent() as f64,
        d.compile_ms,
    ];
    let per_rank = comm::gather_to_root(world, &mine);
    if me != 0 {
        return Ok(String::new());
    }
    let col = |k: usize| -> Vec<f64> { per_rank.chunks(7).map(|c| c[k]).collect() };
    let maxof = |k: usize| col(k).into_iter().fold(0.0f64, f64::max);
    let ghosts: Vec<u64> = col(4).iter().map(|&g| g as u64).collect();
    if a.json {
        let line = serde_json::json!({
            "command": "spmv",
            "ranks": size,
            "rows": rows,
            "cols": cols,
            "nnz": nnz,
            "partition": row_part.bounds,
            "ghosts": ghosts,
            "ghosts_total": ghosts.iter().sum::<u64>(),
            "repeats": a.repeat,
            "warmup": a.warmup,
            "median_ms": maxof(0),
            "compute_ms": col(1).iter().zip(col(2)).map(|(x, y)| x + y).fold(0.0, f64::max),
            "diag_ms": col(1),
            "off_ms": col(2),
            "comm_ms": col(3),
            "compile_ms": maxof(6),
        });
        Ok(format!("{line}\n"))
    } else {
        Ok(format!(
            "spmv: {rows} x {cols}, {nnz} entries on {size} ranks, ghosts {ghosts:?}: {:.3} ms (slowest rank, median of {})\n",
            maxof(0),
            a.repeat
        ))
    }
}

fn main() {
    let Some(universe) = mpi::initialize() else {
        eprintln!("error: MPI could not be initialised (run under mpirun)");
        std::process::exit(2);
    };
    // A panic on one rank would leave the others waiting in a collective: abort the job.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        SimpleCommunicator::world().abort(101);
    }));
    let world = universe.world();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let status = match run(&world, &argv) {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => {
            if world.rank() == 0 {
                eprintln!("error: {e}");
            }
            // Every error is agreed by all ranks (`comm::agree`), so all are here. Wait for
            // rank 0's message: mpirun kills the job at the first non-zero exit, which could
            // otherwise cut rank 0 off before it printed.
            world.barrier();
            1
        }
    };
    drop(universe);
    std::process::exit(status);
}
