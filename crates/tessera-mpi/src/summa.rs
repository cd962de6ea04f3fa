//! Distributed C = A B by 2-D Sparse SUMMA (CombBLAS's algorithm) on a √P x √P grid: rank
//! (I, J) holds A's block (I, J) (rows split among grid rows, balanced by A's stored entries;
//! the inner dimension split evenly among grid columns), B's block (I, J) (the inner dimension
//! among grid rows, B's columns among grid columns) and builds C's block (I, J). At stage k,
//! A's block (I, k) is broadcast along grid row I and B's block (k, J) along grid column J,
//! and every rank adds their product into its C block.
//!
//! The per-stage product is Gustavson's (as `examples/spgemm_gustavson.tess`), with the
//! workspace row started from the C row of the previous stages: each C[i, j] is then the sum
//! over k in increasing order from 0, the order the serial kernel adds in, so C equals the
//! serial result exactly (not just to rounding).

use crate::comm::{DistResult, agree};
use crate::load::{self, Entries, RootMatrix};
use crate::partition::{Grid, Partition};
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;
use std::collections::BTreeMap;
use std::time::Instant;
use tessera::error::Result;
use tessera::levels::Format;
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::tensor::Tensor;

/// One SUMMA stage: `C = Cp + A B` row by row, each row's sums continuing `Cp`'s.
pub const STAGE: &str = "C .= 0
for i = _
  w .= 0
  for j = _
    w[j] += Cp[i, j]
  end
  for k = _, j = _
    w[j] += A[i, k] * B[k, j]
  end
  for j = _
    C[i, j] = w[j]
  end
end
";

/// This rank's block of C (global coordinates), its format, and times in ms.
pub struct Block {
    pub entries: Vec<(i64, i64, f64)>,
    pub format: Format,
    pub comm_ms: f64,
    pub compute_ms: f64,
    /// Entries of A and B blocks received by broadcast.
    pub received: usize,
}

fn bcast_entries(comm: &SimpleCommunicator, root: usize, mine: Option<&Entries>) -> Entries {
    let mut e = mine.cloned().unwrap_or_default();
    let from = comm.process_at_rank(root as i32);
    let mut len = e.len() as u64;
    from.broadcast_into(&mut len);
    let n = len as usize;
    e.rows.resize(n, 0);
    e.cols.resize(n, 0);
    e.vals.resize(n, 0.0);
    from.broadcast_into(&mut e.rows[..]);
    from.broadcast_into(&mut e.cols[..]);
    from.broadcast_into(&mut e.vals[..]);
    e
}

fn shift(e: &Entries, r0: usize, c0: usize) -> Entries {
    Entries {
        rows: e.rows.iter().map(|&r| r - r0 as i64).collect(),
        cols: e.cols.iter().map(|&c| c - c0 as i64).collect(),
        vals: e.vals.clone(),
    }
}

pub fn multiply(
    world: &SimpleCommunicator,
    runner: &Runner,
    am: &RootMatrix,
    bm: Option<&RootMatrix>,
    a_rows: &Partition,
    leaf: &str,
) -> DistResult<Block> {
    let (me, size) = (world.rank() as usize, world.size() as usize);
    let grid = Grid::for_ranks(size);
    let s = grid.rows;
    let bm_ = bm.unwrap_or(am);
    let [m, k_dim] = am.shape;
    let n = bm_.shape[1];
    let (row_i, col_j) = grid.coords(me);
    let inner = Partition::even(k_dim, s);
    let cols = Partition::even(n, s);
    let a_local = load::scatter(world, am, |r, c| {
        grid.rank(a_rows.owner(r as usize), inner.owner(c as usize))
    });
    let b_local = load::scatter(world, bm_, |r, c| {
        grid.rank(inner.owner(r as usize), cols.owner(c as usize))
    });
    let a_local = shift(&a_local, a_rows.bounds[row_i], inner.bounds[col_j]);
    let b_local = shift(&b_local, inner.bounds[row_i], cols.bounds[col_j]);
    let row_comm = world
        .split_by_color(Color::with_value(row_i as i32))
        .expect("every rank has a colour");
    let col_comm = world
        .split_by_color(Color::with_value(col_j as i32))
        .expect("every rank has a colour");
    let element = if leaf == "Element(0.0)" {
        "Element(0.0)"
    } else {
        "Element(0)"
    };
    let setup = (|| -> Result<_> {
        let csr = Format::parse(&format!("Dense(SparseList({element}))"), Some(2))?;
        let w = Format::parse(&format!("SparseByteMap({element})"), Some(1))?;
        Ok((csr, w))
    })();
    let (csr, w_format) = agree(world, setup)?;
    let (mrows, ncols) = (a_rows.len(row_i), cols.len(col_j));
    let mut c = agree(world, Tensor::empty(&csr, &[mrows, ncols]))?;
    let (mut comm_ms, mut compute_ms, mut received) = (0.0, 0.0, 0);
    for k in 0..s {
        let t = Instant::now();
        let a_k = bcast_entries(&row_comm, k, (col_j == k).then_some(&a_local));
        let b_k = bcast_entries(&col_comm, k, (row_i == k).then_some(&b_local));
        comm_ms += t.elapsed().as_secs_f64() * 1e3;
        if col_j != k {
            received += a_k.len();
        }
        if row_i != k {
            received += b_k.len();
        }
        let t = Instant::now();
        let stage = (|| -> Result<Tensor> {
            let mut ts = BTreeMap::new();
            ts.insert(
                "A".to_string(),
                load::block(&csr, [mrows, inner.len(k)], &a_k, 0, Some)?,
            );
            ts.insert(
                "B".to_string(),
                load::block(&csr, [inner.len(k), ncols], &b_k, 0, Some)?,
            );
            ts.insert(
                "Cp".to_string(),
                std::mem::replace(&mut c, Tensor::empty(&csr, &[0, 0])?),
            );
            ts.insert("C".to_string(), Tensor::empty(&csr, &[mrows, ncols])?);
            ts.insert("w".to_string(), Tensor::empty(&w_format, &[ncols])?);
            let formats = ts
                .iter()
                .map(|(k, t)| (k.clone(), t.format.clone()))
                .collect();
            let kernel = runner.compile(&parse_program(STAGE)?, &formats)?;
            runner.execute(&kernel, &mut ts)?;
            Ok(ts.remove("C").expect("inserted above"))
        })();
        c = agree(world, stage)?;
        compute_ms += t.elapsed().as_secs_f64() * 1e3;
    }
    let (r0, c0) = (a_rows.bounds[row_i], cols.bounds[col_j]);
    let mut entries = vec![];
    c.for_each_stored(&mut |ij, v| {
        entries.push(((ij[0] + r0) as i64, (ij[1] + c0) as i64, v.as_f64()))
    });
    let _ = m;
    Ok(Block {
        entries,
        format: c.format,
        comm_ms,
        compute_ms,
        received,
    })
}
