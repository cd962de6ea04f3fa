//! Distributed y = A x in PETSc's layout: rank r owns rows `rows.range(r)` of A and y, and the
//! entries `cols.range(r)` of x. Its rows are stored as two blocks, the diagonal block (the
//! columns it owns, indexed locally) and the off-diagonal block (the other columns, renumbered
//! densely as "ghosts"). The ghost lists and who sends what to whom are computed once per
//! matrix; each product posts the ghost receives and sends, multiplies the diagonal block
//! while they are in flight, waits, and adds the off-diagonal block's product.
//! Both products are the Tessera kernel of `examples/spmv_row.tess` (the second without the
//! `y .= 0`, so it adds to y).

use crate::comm::{DistResult, agree, exchange};
use crate::load::{Entries, block};
use crate::partition::Partition;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;
use tessera::error::{Error, Result};
use tessera::levels::Format;
use tessera::notation::parse::parse_program;
use tessera::run::{Compiled, Runner};
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

pub const SPMV: &str = include_str!("../../../examples/spmv_row.tess");
/// The off-diagonal product adds into the y the diagonal product wrote.
pub const SPMV_ADD: &str = "for i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";

pub struct DistSpmv {
    /// Global indices of the x entries this rank reads but does not own, sorted.
    pub ghosts: Vec<usize>,
    /// How many of `ghosts` each rank owns (they are contiguous: owners grow with the index).
    recv_counts: Vec<usize>,
    /// For each rank, the local indices of x it needs from this one, in its ghost order.
    send_idx: Vec<Vec<usize>>,
    diag: BTreeMap<String, Tensor>,
    off: BTreeMap<String, Tensor>,
    diag_kernel: Rc<Compiled>,
    off_kernel: Option<Rc<Compiled>>,
    pub compile_ms: f64,
}

/// The formats of a rank's two blocks.
#[derive(Clone, Debug)]
pub struct BlockFormats {
    pub diag: Format,
    pub off: Format,
}

impl BlockFormats {
    /// `--format` for both blocks when given. Otherwise PETSc's choices: the diagonal block
    /// is CSR, and the off-diagonal block stores only its nonempty rows (`SparseList` rows,
    /// "compressed rows"): on a matrix with locality a rank's off-diagonal block has a few
    /// dozen nonempty rows of its hundreds of thousands, and a CSR walk would read a row
    /// pointer for every one of them. Both take 4-byte coordinates and positions when the
    /// matrix's columns and entries fit, which is 12 bytes moved per entry instead of 16 on
    /// a product that is bound by memory bandwidth.
    pub fn choose(given: Option<&str>, shape: [usize; 2], nnz: u64) -> Result<BlockFormats> {
        if let Some(text) = given {
            let f = crate::load::matrix_format(text)?;
            return Ok(BlockFormats {
                diag: f.clone(),
                off: f,
            });
        }
        let fits = |n: u64| n <= i32::MAX as u64;
        let coord = match fits(shape[0] as u64) && fits(shape[1] as u64) && fits(nnz) {
            true => "i32",
            false => "i64",
        };
        let diag = format!("Dense(SparseList(Element(0.0), coord={coord}))");
        let off = format!("SparseList(SparseList(Element(0.0), coord={coord}), coord={coord})");
        Ok(BlockFormats {
            diag: crate::load::matrix_format(&diag)?,
            off: crate::load::matrix_format(&off)?,
        })
    }
}

/// One product's times on this rank, in milliseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Times {
    pub diag: f64,
    pub off: f64,
    /// Packing, posting, the wait after the diagonal product, and unpacking: the
    /// communication the overlap did not hide.
    pub exchange: f64,
    pub total: f64,
}

fn dense(n: usize) -> Result<Tensor> {
    Tensor::empty(&Format::dense(1, Scalar::F64(0.0)), &[n])
}

/// The values of a `Dense(Element(0.0))` vector.
pub fn values_mut(t: &mut Tensor) -> Result<&mut Vec<f64>> {
    match t.levels.last_mut().and_then(|l| l.first_mut()) {
        Some(Buffer::F64(v)) => Ok(v.to_mut()),
        _ => Err(Error::Usage(format!(
            "expected a dense f64 vector, got {}",
            t.format
        ))),
    }
}

impl DistSpmv {
    /// Build this rank's blocks from its entries (global coordinates) and agree on the
    /// exchange lists with the other ranks.
    pub fn new(
        world: &SimpleCommunicator,
        runner: &Runner,
        rows: Partition,
        cols: Partition,
        local: &Entries,
        formats: &BlockFormats,
    ) -> DistResult<DistSpmv> {
        let me = world.rank() as usize;
        let (lo, hi) = (rows.bounds[me], rows.bounds[me + 1]);
        let own = cols.range(me);
        let mut ghosts: Vec<usize> = local
            .cols
            .iter()
            .map(|&c| c as usize)
            .filter(|c| !own.contains(c))
            .collect();
        ghosts.sort_unstable();
        ghosts.dedup();
        let mut recv_counts = vec![0; cols.parts()];
        for &g in &ghosts {
            recv_counts[cols.owner(g)] += 1;
        }
        let built = (|| -> Result<_> {
            let n_local = hi - lo;
            let d = block(&formats.diag, [n_local, own.len()], local, lo, |c| {
                let c = c as usize;
                own.contains(&c).then(|| (c - own.start) as i64)
            })?;
            let o = block(&formats.off, [n_local, ghosts.len()], local, lo, |c| {
                ghosts.binary_search(&(c as usize)).ok().map(|k| k as i64)
            })?;
            let mut diag = BTreeMap::new();
            diag.insert("A".to_string(), d);
            diag.insert("x".to_string(), dense(own.len())?);
            diag.insert("y".to_string(), dense(n_local)?);
            let mut off = BTreeMap::new();
            off.insert("A".to_string(), o);
            off.insert("x".to_string(), dense(ghosts.len())?);
            let formats = |m: &BTreeMap<String, Tensor>| -> BTreeMap<String, Format> {
                m.iter()
                    .map(|(k, t)| (k.clone(), t.format.clone()))
                    .collect()
            };
            let diag_kernel = runner.compile(&parse_program(SPMV)?, &formats(&diag))?;
            let mut compile_ms = *runner.last_compile_ms.borrow();
            let off_kernel = if ghosts.is_empty() {
                None
            } else {
                let mut f = formats(&off);
                f.insert("y".into(), diag["y"].format.clone());
                let k = runner.compile(&parse_program(SPMV_ADD)?, &f)?;
                compile_ms += *runner.last_compile_ms.borrow();
                Some(k)
            };
            Ok((diag, off, diag_kernel, off_kernel, compile_ms))
        })();
        let (diag, off, diag_kernel, off_kernel, compile_ms) = agree(world, built)?;
        // Tell each owner which of its entries this rank reads.
        let mut need: Vec<Vec<u64>> = vec![vec![]; cols.parts()];
        for &g in &ghosts {
            need[cols.owner(g)].push(g as u64);
        }
        let asked = exchange(world, &need);
        let send_idx = asked
            .into_iter()
            .map(|v| v.into_iter().map(|g| g as usize - own.start).collect())
            .collect();
        Ok(DistSpmv {
            ghosts,
            recv_counts,
            send_idx,
            diag,
            off,
            diag_kernel,
            off_kernel,
            compile_ms,
        })
    }

    /// The number of x values this rank sends per product.
    pub fn sent(&self) -> usize {
        self.send_idx.iter().map(Vec::len).sum()
    }

    /// This rank's slice of x, which [`DistSpmv::multiply`] reads in place (an iterative
    /// method writes its next vector here; nothing is copied per product).
    pub fn x_mut(&mut self) -> Result<&mut Vec<f64>> {
        values_mut(self.diag.get_mut("x").expect("built"))
    }

    /// This rank's rows of y after [`DistSpmv::multiply`].
    pub fn y(&mut self) -> Result<&[f64]> {
        Ok(values_mut(self.diag.get_mut("y").expect("built"))?)
    }

    /// y (this rank's rows) = A x. Collective: every rank calls it; a kernel error is
    /// returned only after the exchange has completed, so the caller can agree on it.
    pub fn multiply(&mut self, world: &SimpleCommunicator, runner: &Runner) -> Result<Times> {
        let t0 = Instant::now();
        let x: &[f64] = values_mut(self.diag.get_mut("x").expect("built"))?;
        let sends: Vec<Vec<f64>> = self
            .send_idx
            .iter()
            .map(|idx| idx.iter().map(|&k| x[k]).collect())
            .collect();
        let mut ghost_vals = vec![0.0f64; self.ghosts.len()];
        let mut times = Times {
            exchange: t0.elapsed().as_secs_f64() * 1e3,
            ..Times::default()
        };
        let (diag, kernel) = (&mut self.diag, &self.diag_kernel);
        let recv_counts = &self.recv_counts;
        let diag_result = mpi::request::scope(|scope| {
            let t = Instant::now();
            let mut reqs = vec![];
            let mut rest: &mut [f64] = &mut ghost_vals[..];
            for (r, &n) in recv_counts.iter().enumerate() {
                if n > 0 {
                    let (head, tail) = rest.split_at_mut(n);
                    rest = tail;
                    let from = world.process_at_rank(r as i32);
                    reqs.push(from.immediate_receive_into(scope, head));
                }
            }
            for (r, buf) in sends.iter().enumerate() {
                if !buf.is_empty() {
                    let to = world.process_at_rank(r as i32);
                    reqs.push(to.immediate_send(scope, &buf[..]));
                }
            }
            times.exchange += t.elapsed().as_secs_f64() * 1e3;
            let t = Instant::now();
            let result = runner.execute(kernel, diag);
            times.diag = t.elapsed().as_secs_f64() * 1e3;
            let t = Instant::now();
            for q in reqs {
                q.wait();
            }
            times.exchange += t.elapsed().as_secs_f64() * 1e3;
            result
        });
        diag_result?;
        if let Some(k) = &self.off_kernel {
            let t = Instant::now();
            values_mut(self.off.get_mut("x").expect("built"))?.copy_from_slice(&ghost_vals);
            times.exchange += t.elapsed().as_secs_f64() * 1e3;
            let t = Instant::now();
            let y = self.diag.remove("y").expect("built");
            self.off.insert("y".into(), y);
            let result = runner.execute(k, &mut self.off);
            let y = self.off.remove("y").expect("inserted above");
            self.diag.insert("y".into(), y);
            times.off = t.elapsed().as_secs_f64() * 1e3;
            result?;
        }
        times.total = t0.elapsed().as_secs_f64() * 1e3;
        Ok(times)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera::levels::format::{Coord, LevelKind};

    fn coords(f: &Format) -> Vec<Coord> {
        f.levels
            .iter()
            .filter(|l| matches!(l, LevelKind::SparseList { .. }))
            .map(LevelKind::coord)
            .collect()
    }

    #[test]
    fn default_blocks_are_csr_and_compressed_rows_with_4_byte_indices_when_they_fit() {
        let f = BlockFormats::choose(None, [1 << 20, 1 << 20], 8 << 20).unwrap();
        assert_eq!(f.diag.levels[0], LevelKind::Dense);
        assert_eq!(coords(&f.diag), [Coord::I32]);
        // The off-diagonal block stores only its nonempty rows.
        assert!(matches!(f.off.levels[0], LevelKind::SparseList { .. }));
        assert_eq!(coords(&f.off), [Coord::I32, Coord::I32]);
        // Too many entries, rows or columns for 4 bytes: 8-byte indices.
        for (shape, nnz) in [([10, 10], 1 << 31), ([1 << 31, 10], 5), ([10, 1 << 31], 5)] {
            let f = BlockFormats::choose(None, shape, nnz).unwrap();
            assert_eq!(coords(&f.diag), [Coord::I64]);
            assert_eq!(coords(&f.off), [Coord::I64, Coord::I64]);
        }
    }

    #[test]
    fn a_given_format_is_used_for_both_blocks() {
        let f = BlockFormats::choose(Some("csr"), [4, 4], 4).unwrap();
        assert_eq!(f.diag, f.off);
        assert_eq!(f.diag.to_string(), "Dense(SparseList(Element(0.0)))");
        let e = BlockFormats::choose(Some("Nonsense(1)"), [4, 4], 4).unwrap_err();
        assert!(e.to_string().contains("--format Nonsense(1)"), "{e}");
    }
}
