//! Distributed C = A B by rows (the 1-D algorithm PETSc's MatMatMult uses): rank r owns a
//! block of A's rows (balanced by stored entries) and a block of B's rows; it fetches the rows
//! of B its block of A references (one request and one reply per rank pair, MPI_Alltoallv),
//! then multiplies with the serial SpGEMM, the Tessera kernel `tessera einsum
//! 'C[i, j] += A[i, k] * B[k, j]'` builds (Gustavson's row-by-row product). Each C[i, j] is
//! then summed over the same k in the same order as the serial command, so C equals its
//! result exactly. Rank 0 gathers C's rows in order and writes the file.
//!
//! This layout serves rank counts that are not squares (2, 3, ...); on a square count (1, 4,
//! 9, ...) the command runs 2-D Sparse SUMMA ([`crate::summa`]), which moves less data at
//! scale: per rank O(nnz / √P) instead of up to O(nnz(B)). BENCHMARKS.md models both.

use crate::args::Args;
use crate::comm::{DistResult, agree, exchange, gather_to_root, sum_u64};
use crate::load::{self, Entries};
use crate::partition::Grid;
use crate::partition::Partition;
use crate::summa::Block;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::time::Instant;
use tessera::error::Result;
use tessera::levels::Format;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

pub const SPEC: &str = "C[i, j] += A[i, k] * B[k, j]";

fn partition(world: &SimpleCommunicator, m: &load::RootMatrix, parts: usize) -> Partition {
    load::balanced(world, m, parts)
}

/// The 1-D row algorithm: this rank's rows of C.
fn by_rows(
    world: &SimpleCommunicator,
    runner: &Runner,
    am: &load::RootMatrix,
    bm: Option<&load::RootMatrix>,
    a_part: &Partition,
    format: &Format,
) -> DistResult<Block> {
    let (me, size) = (world.rank() as usize, world.size() as usize);
    let [_, k_dim] = am.shape;
    let n = bm.map_or(am.shape, |b| b.shape)[1];
    let a_local = load::scatter(world, am, |r, _| a_part.owner(r as usize));
    let (b_part, b_local) = match bm {
        Some(bm) => {
            let p = partition(world, bm, size);
            let e = load::scatter(world, bm, |r, _| p.owner(r as usize));
            (p, e)
        }
        // B = A: the rows of B are those of A, already distributed.
        None => (a_part.clone(), a_local.clone()),
    };
    // Request the rows of B this rank's A references, from their owners.
    let mut need: Vec<u64> = a_local.cols.iter().map(|&c| c as u64).collect();
    need.sort_unstable();
    need.dedup();
    let mut ask: Vec<Vec<u64>> = vec![vec![]; size];
    for &k in &need {
        ask[b_part.owner(k as usize)].push(k);
    }
    let t = Instant::now();
    let asked = exchange(world, &ask);
    // Reply with those rows' entries: (row, col) pairs and values.
    let mut by_row: std::collections::BTreeMap<i64, Vec<usize>> = Default::default();
    for (e, &r) in b_local.rows.iter().enumerate() {
        by_row.entry(r).or_default().push(e);
    }
    let mut idx_out: Vec<Vec<i64>> = vec![vec![]; size];
    let mut val_out: Vec<Vec<f64>> = vec![vec![]; size];
    for (r, rows) in asked.iter().enumerate() {
        for &k in rows {
            for &e in by_row.get(&(k as i64)).map_or(&[][..], Vec::as_slice) {
                idx_out[r].extend([k as i64, b_local.cols[e]]);
                val_out[r].push(b_local.vals[e]);
            }
        }
    }
    let idx_in = exchange(world, &idx_out);
    let val_in = exchange(world, &val_out);
    let comm_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut b_rows = Entries::default();
    for (ij, v) in idx_in.iter().zip(&val_in) {
        for (p, &x) in ij.chunks(2).zip(v) {
            b_rows.push(p[0], p[1], x);
        }
    }
    let lo = a_part.bounds[me];
    let nloc = a_part.len(me);
    let t = Instant::now();
    let product = (|| -> Result<Block> {
        let al = load::block(format, [nloc, k_dim], &a_local, lo, Some)?;
        let bl = load::block(format, [k_dim, n], &b_rows, 0, Some)?;
        let c = tessera::api::einsum_with(runner, SPEC, &[("A", &al), ("B", &bl)], None)?;
        let mut entries = vec![];
        c.for_each_stored(&mut |ij, v| {
            entries.push(((ij[0] + lo) as i64, ij[1] as i64, v.as_f64()))
        });
        Ok(Block {
            entries,
            format: c.format,
            comm_ms,
            compute_ms: 0.0,
            received: b_rows.len(),
        })
    })();
    let mut block = agree(world, product)?;
    block.compute_ms = t.elapsed().as_secs_f64() * 1e3;
    Ok(block)
}

pub fn command(world: &SimpleCommunicator, runner: &Runner, a: &Args) -> DistResult<String> {
    let (me, size) = (world.rank() as usize, world.size() as usize);
    let am = load::read_matrix(
        world,
        a.input("A").expect("checked by parse"),
        a.parallel_read,
    )?;
    // By default the blocks hold the file's values as the serial command loads them
    // (a pattern file multiplies as counts, in integers).
    let default = format!("Dense(SparseList({}))", am.leaf);
    let format = agree(
        world,
        load::matrix_format(a.format.as_deref().unwrap_or(&default)),
    )?;
    let bm = match a.input("B") {
        Some(p) => Some(load::read_matrix(world, p, a.parallel_read)?),
        None => None,
    };
    let [m, k_dim] = am.shape;
    let [kb, n] = bm.as_ref().map_or(am.shape, |b| b.shape);
    agree(
        world,
        if kb == k_dim {
            Ok(())
        } else {
            Err(tessera::error::Error::tensor(
                "B",
                format!("A is {m} x {k_dim} but B is {kb} x {n}: the inner dimensions differ"),
            ))
        },
    )?;
    let mut outs =
        crate::open_outputs(world, &[("C", a.output("C"), vec![m, n], Scalar::F64(0.0))])?;
    let grid = Grid::for_ranks(size);
    let summa = grid.rows == grid.cols;
    let t_all = Instant::now();
    let (a_part, block) = if summa {
        let p = partition(world, &am, grid.rows);
        let b = crate::summa::multiply(world, runner, &am, bm.as_ref(), &p, am.leaf)?;
        (p, b)
    } else {
        let p = partition(world, &am, size);
        let b = by_rows(world, runner, &am, bm.as_ref(), &p, &format)?;
        (p, b)
    };
    drop((am, bm));
    let total_ms = t_all.elapsed().as_secs_f64() * 1e3;
    let c_local = &block.entries;
    let rows = gather_to_root(world, &c_local.iter().map(|e| e.0).collect::<Vec<_>>());
    let cols = gather_to_root(world, &c_local.iter().map(|e| e.1).collect::<Vec<_>>());
    let vals = gather_to_root(world, &c_local.iter().map(|e| e.2).collect::<Vec<_>>());
    let nnz_c = sum_u64(world, c_local.len() as u64);
    let received = sum_u64(world, block.received as u64);
    let written = match outs[0].take() {
        Some(f) => {
            let values = Buffer::F64(vals.into()).converted(block.format.elem());
            Tensor::from_coo(&block.format, &[m, n], &[rows, cols], &values, |x, _| x)
        }
        .and_then(|t| tessera::tensor::files::write_outputs(vec![(f, &t)])),
        None => Ok(()),
    };
    agree(world, written)?;
    let mine = [total_ms, block.compute_ms, block.comm_ms];
    let per_rank = gather_to_root(world, &mine);
    if me != 0 {
        return Ok(String::new());
    }
    let col = |k: usize| -> Vec<f64> { per_rank.chunks(3).map(|c| c[k]).collect() };
    let algorithm = if summa { "summa" } else { "rows" };
    if a.json {
        let line = serde_json::json!({
            "command": "spgemm",
            "algorithm": algorithm,
            "grid": [grid.rows, grid.cols],
            "ranks": size,
            "shape": [m, n],
            "nnz_c": nnz_c,
            "row_partition": a_part.bounds,
            "entries_received": received,
            "median_ms": col(0).into_iter().fold(0.0, f64::max),
            "compute_ms": col(1),
            "comm_ms": col(2),
        });
        Ok(format!("{line}\n"))
    } else {
        Ok(format!(
            "spgemm ({algorithm}): {m} x {n}, {nnz_c} entries in C on {size} ranks\n"
        ))
    }
}
