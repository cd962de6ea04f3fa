//! Getting a matrix onto the ranks: rank 0 reads the file (the Matrix Market reader of
//! `tessera::io`, symmetric files expanded as for the serial commands) and sends each rank
//! the entries a placement rule gives it; each rank then stores its share in the Tessera
//! format it was asked for. A dense vector is read by every rank, which keeps its slice.

use crate::comm::{DistResult, agree};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::path::Path;
use tessera::error::{Error, Result};
use tessera::io::{FileData, read_file};
use tessera::levels::Format;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

/// Matrix entries in global coordinates, values as f64.
#[derive(Clone, Debug, Default)]
pub struct Entries {
    pub rows: Vec<i64>,
    pub cols: Vec<i64>,
    pub vals: Vec<f64>,
}

impl Entries {
    pub fn len(&self) -> usize {
        self.vals.len()
    }

    pub fn push(&mut self, r: i64, c: i64, v: f64) {
        self.rows.push(r);
        self.cols.push(c);
        self.vals.push(v);
    }

    /// Stored entries per row, for `m` rows.
    pub fn row_counts(&self, m: usize) -> Vec<usize> {
        let mut c = vec![0; m];
        for &r in &self.rows {
            c[r as usize] += 1;
        }
        c
    }
}

/// A matrix as rank 0 read it: its shape on every rank, its entries on rank 0 only.
pub struct RootMatrix {
    pub shape: [usize; 2],
    pub entries: Entries,
    /// The leaf the serial commands store the file's values in: `Pattern()` for a pattern
    /// file, `Element(0)` for integers, `Element(0.0)` for reals.
    pub leaf: &'static str,
}

const LEAVES: [&str; 3] = ["Element(0.0)", "Element(0)", "Pattern()"];

fn read_entries(path: &str) -> Result<([usize; 2], Entries, u64)> {
    let data = read_file(Path::new(path))?;
    let FileData::Coo(c) = data else {
        return Err(Error::Usage(format!(
            "{path}: a distributed matrix is read from a coordinate file (.mtx coordinate or .tns)"
        )));
    };
    let [m, n] = c.shape[..] else {
        return Err(Error::Usage(format!(
            "{path}: expected a matrix, the file holds a tensor of rank {}",
            c.shape.len()
        )));
    };
    let leaf = match c.values.elem() {
        tessera::types::ElemType::Bool => 2,
        tessera::types::ElemType::F64 | tessera::types::ElemType::F32 => 0,
        _ => 1,
    };
    let vals = match c.values.converted(tessera::types::ElemType::F64) {
        Buffer::F64(v) => v,
        _ => unreachable!("converted to f64"),
    };
    let mut coords = c.coords.into_iter();
    let (rows, cols) = (
        coords.next().unwrap_or_default(),
        coords.next().unwrap_or_default(),
    );
    Ok(([m, n], Entries { rows, cols, vals }, leaf))
}

/// Rank 0 reads `path`; every rank learns the shape, or every rank gets rank 0's error.
pub fn read_on_root(world: &SimpleCommunicator, path: &str) -> DistResult<RootMatrix> {
    let read = if world.rank() == 0 {
        read_entries(path).map(Some)
    } else {
        Ok(None)
    };
    let read = agree(world, read)?;
    let mut shape = [0u64; 3];
    let entries = match read {
        Some((s, e, leaf)) => {
            shape = [s[0] as u64, s[1] as u64, leaf];
            e
        }
        None => Entries::default(),
    };
    world.process_at_rank(0).broadcast_into(&mut shape[..]);
    Ok(RootMatrix {
        shape: [shape[0] as usize, shape[1] as usize],
        entries,
        leaf: LEAVES[shape[2] as usize],
    })
}

/// A vector of u64 computed on rank 0 (`Some` there), on every rank.
pub fn broadcast_u64s(world: &SimpleCommunicator, root_value: Option<Vec<u64>>) -> Vec<u64> {
    let root = world.process_at_rank(0);
    let mut v = root_value.unwrap_or_default();
    let mut len = v.len() as u64;
    root.broadcast_into(&mut len);
    v.resize(len as usize, 0);
    root.broadcast_into(&mut v[..]);
    v
}

/// Rank 0 sends each entry to the rank `dest(row, col)` names (in the file's order); every
/// rank returns its own entries.
pub fn scatter(
    world: &SimpleCommunicator,
    m: &RootMatrix,
    dest: impl Fn(i64, i64) -> usize,
) -> Entries {
    let root = world.process_at_rank(0);
    if world.rank() != 0 {
        let (rows, _) = root.receive_vec::<i64>();
        let (cols, _) = root.receive_vec::<i64>();
        let (vals, _) = root.receive_vec::<f64>();
        return Entries { rows, cols, vals };
    }
    let mut parts = vec![Entries::default(); world.size() as usize];
    let e = &m.entries;
    for k in 0..e.len() {
        parts[dest(e.rows[k], e.cols[k])].push(e.rows[k], e.cols[k], e.vals[k]);
    }
    for (r, p) in parts.iter().enumerate().skip(1) {
        let to = world.process_at_rank(r as i32);
        to.send(&p.rows[..]);
        to.send(&p.cols[..]);
        to.send(&p.vals[..]);
    }
    parts.swap_remove(0)
}

/// Entries combined at a repeated position as the file loaders combine them.
fn add(a: Scalar, b: Scalar) -> Scalar {
    match a.widen() {
        Scalar::Bool(x) => Scalar::Bool(x | b.as_bool()),
        Scalar::I64(x) => Scalar::I64(x.wrapping_add(b.as_i64())),
        _ => Scalar::F64(a.as_f64() + b.as_f64()),
    }
}

/// A block of `shape` in `format` from entries whose coordinates are shifted by `-row0` and
/// mapped through `col` (global column to the block's column).
pub fn block(
    format: &Format,
    shape: [usize; 2],
    e: &Entries,
    row0: usize,
    keep: impl Fn(i64) -> Option<i64>,
) -> Result<Tensor> {
    let (mut rows, mut cols, mut vals) = (vec![], vec![], vec![]);
    for k in 0..e.len() {
        if let Some(c) = keep(e.cols[k]) {
            rows.push(e.rows[k] - row0 as i64);
            cols.push(c);
            vals.push(e.vals[k]);
        }
    }
    let values = Buffer::F64(vals).converted(format.elem());
    Tensor::from_coo(format, &shape, &[rows, cols], &values, add)
}

/// A dense vector of length `n` from a file (`.npy`, or an `n x 1` `.mtx`), as f64.
pub fn read_vector(path: &str, n: usize) -> Result<Vec<f64>> {
    let t = tessera::tensor::files::load_tensor(path, None)?;
    if !(t.shape == [n] || t.shape == [n, 1]) {
        return Err(Error::tensor(
            "x",
            format!(
                "{path}: the vector has shape {:?}, the matrix has {n} columns",
                t.shape
            ),
        ));
    }
    match t.to_dense().converted(tessera::types::ElemType::F64) {
        Buffer::F64(v) => Ok(v),
        _ => unreachable!("converted to f64"),
    }
}

/// The format of each rank's blocks: `--format` text parsed for a matrix.
pub fn matrix_format(text: &str) -> Result<Format> {
    Format::parse(text, Some(2)).map_err(|e| Error::Usage(format!("--format {text}: {e}")))
}
