//! Getting a matrix onto the ranks. Either rank 0 reads the file (the Matrix Market reader of
//! `tessera::io`, symmetric files expanded as for the serial commands) and sends each rank the
//! entries a placement rule gives it (`--read root`, the default), or every rank parses its
//! own byte range of a `.mtx` file with the same reader and the entries are exchanged to
//! their places (`--read parallel`). Each rank then stores its share in the Tessera format it
//! was asked for. A dense vector is read by every rank, which keeps its slice.

use crate::comm::{DistResult, agree, exchange};
use crate::partition::Partition;
use mpi::collective::SystemOperation;
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

/// A matrix as read: its shape on every rank; its entries on rank 0 only, or (`spread`) each
/// rank's byte range of the file on that rank.
pub struct RootMatrix {
    pub shape: [usize; 2],
    pub entries: Entries,
    pub spread: bool,
    /// The leaf the serial commands store the file's values in: `Pattern()` for a pattern
    /// file, `Element(0)` for integers, `Element(0.0)` for reals.
    pub leaf: &'static str,
}

const LEAVES: [&str; 3] = ["Element(0.0)", "Element(0)", "Pattern()"];

fn read_entries(path: &str) -> Result<([usize; 2], Entries, u64)> {
    entries_of(read_file(Path::new(path))?, path)
}

fn entries_of(data: FileData, path: &str) -> Result<([usize; 2], Entries, u64)> {
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
    Ok((
        [m, n],
        Entries {
            rows,
            cols,
            vals: vals.into_vec(),
        },
        leaf,
    ))
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
        spread: false,
        leaf: LEAVES[shape[2] as usize],
    })
}

/// The start of the first line at or after byte `at` (`at` itself when a line ends just
/// before it): ranks cut the file there, so each line belongs to exactly one range.
fn line_start(f: &mut std::fs::File, at: u64) -> std::io::Result<u64> {
    use std::io::{BufRead, BufReader, Seek, SeekFrom};
    if at == 0 {
        return Ok(0);
    }
    f.seek(SeekFrom::Start(at - 1))?;
    let mut skipped = vec![];
    BufReader::new(&mut *f).read_until(b'\n', &mut skipped)?;
    Ok(at - 1 + skipped.len() as u64)
}

/// This rank's entries of a coordinate `.mtx`: the header (read by every rank) and the entry
/// lines of byte range `rank` of `size` equal ranges of the data, cut at line starts, parsed by
/// Tessera's reader (the banner and a size line counting this range's entries put before it).
fn read_range(path: &str, rank: usize, size: usize) -> Result<([usize; 2], Entries, u64)> {
    use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
    let io = |e: std::io::Error| Error::Usage(format!("{path}: {e}"));
    let mut f = std::fs::File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    let (banner, size_line, data_start) = {
        let mut r = BufReader::new(&mut f);
        let (mut banner, mut line, mut at) = (String::new(), String::new(), 0u64);
        at += r.read_line(&mut banner).map_err(io)? as u64;
        loop {
            line.clear();
            let n = r.read_line(&mut line).map_err(io)?;
            at += n as u64;
            let t = line.trim();
            if n == 0 || !(t.is_empty() || t.starts_with('%')) {
                break;
            }
        }
        (banner, line.trim().to_string(), at)
    };
    if !banner.to_ascii_lowercase().contains("coordinate") {
        return Err(Error::Usage(format!(
            "{path}: --read parallel reads coordinate Matrix Market files (.mtx); use --read root"
        )));
    }
    let span = len - data_start;
    let cut = |r: usize| data_start + span * r as u64 / size as u64;
    let start = if rank == 0 {
        data_start
    } else {
        line_start(&mut f, cut(rank)).map_err(io)?
    };
    let end = if rank + 1 == size {
        len
    } else {
        line_start(&mut f, cut(rank + 1)).map_err(io)?
    };
    let mut chunk = vec![0u8; end.saturating_sub(start) as usize];
    f.seek(SeekFrom::Start(start)).map_err(io)?;
    f.read_exact(&mut chunk).map_err(io)?;
    let count = chunk
        .split(|&b| b == b'\n')
        .map(|l| String::from_utf8_lossy(l).trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('%'))
        .count();
    let dims: Vec<&str> = size_line.split_whitespace().collect();
    let (m, n) = match dims.as_slice() {
        [m, n, _] => (*m, *n),
        _ => return Err(Error::Usage(format!("{path}: bad size line `{size_line}`"))),
    };
    let mut text = format!("{}\n{m} {n} {count}\n", banner.trim()).into_bytes();
    text.extend_from_slice(&chunk);
    let place = format!("{path} (bytes {start}..{end}, read by rank {rank})");
    entries_of(tessera::io::mtx::read_mtx(&text[..], &place)?, &place)
}

/// Every rank reads its byte range of `path` (a coordinate `.mtx`); any rank's error fails all.
pub fn read_spread(world: &SimpleCommunicator, path: &str) -> DistResult<RootMatrix> {
    let (me, size) = (world.rank() as usize, world.size() as usize);
    let (shape, entries, leaf) = agree(world, read_range(path, me, size))?;
    Ok(RootMatrix {
        shape,
        entries,
        spread: true,
        leaf: LEAVES[leaf as usize],
    })
}

/// Read `path` as `--read` says: `root` (rank 0 reads, then scatters) or `parallel`.
pub fn read_matrix(
    world: &SimpleCommunicator,
    path: &str,
    parallel: bool,
) -> DistResult<RootMatrix> {
    if parallel {
        read_spread(world, path)
    } else {
        read_on_root(world, path)
    }
}

/// The 1-D partition of `m`'s rows into `parts` ranges balanced by stored entries
/// ([`Partition::balanced`]), the same on every rank: counted on rank 0, or summed over the
/// ranks when the entries are spread.
pub fn balanced(world: &SimpleCommunicator, m: &RootMatrix, parts: usize) -> Partition {
    let local: Vec<u64> = m
        .entries
        .row_counts(m.shape[0])
        .into_iter()
        .map(|c| c as u64)
        .collect();
    let counts = if m.spread {
        let mut all = vec![0u64; local.len()];
        world.all_reduce_into(&local[..], &mut all[..], SystemOperation::sum());
        Some(all)
    } else {
        (world.rank() == 0).then_some(local)
    };
    let bounds = broadcast_u64s(
        world,
        counts.filter(|_| world.rank() == 0).map(|c| {
            let c: Vec<usize> = c.into_iter().map(|x| x as usize).collect();
            Partition::balanced(&c, parts)
                .bounds
                .iter()
                .map(|&b| b as u64)
                .collect()
        }),
    );
    Partition {
        bounds: bounds.into_iter().map(|b| b as usize).collect(),
    }
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
    if m.spread {
        let mut parts = vec![Entries::default(); world.size() as usize];
        let e = &m.entries;
        for k in 0..e.len() {
            parts[dest(e.rows[k], e.cols[k])].push(e.rows[k], e.cols[k], e.vals[k]);
        }
        let rows = exchange(
            world,
            &parts.iter().map(|p| p.rows.clone()).collect::<Vec<_>>(),
        );
        let cols = exchange(
            world,
            &parts.iter().map(|p| p.cols.clone()).collect::<Vec<_>>(),
        );
        let vals = exchange(
            world,
            &parts.iter().map(|p| p.vals.clone()).collect::<Vec<_>>(),
        );
        // In rank order, so entries keep the file's order as rank 0's scatter does.
        return Entries {
            rows: rows.concat(),
            cols: cols.concat(),
            vals: vals.concat(),
        };
    }
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
    let values = Buffer::F64(vals.into()).converted(format.elem());
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
        Buffer::F64(v) => Ok(v.into_vec()),
        _ => unreachable!("converted to f64"),
    }
}

/// The format of each rank's blocks: `--format` text parsed for a matrix.
pub fn matrix_format(text: &str) -> Result<Format> {
    Format::parse(text, Some(2)).map_err(|e| Error::Usage(format!("--format {text}: {e}")))
}
