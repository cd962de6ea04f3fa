//! The user-facing tensor: a shape, a format (level chain) and each level's arrays.

mod build;
mod evaluate;
pub use evaluate::evaluate;
pub mod files;
#[cfg(feature = "ndarray")]
pub mod ndarray_interop;
pub mod pieces;
mod runs;
#[cfg(feature = "sprs")]
mod sprs_interop;

pub use build::{StoredEntries, add_duplicates, parse_format, random_exact};

use crate::error::{Error, Result};
use crate::levels::{Format, LevelKind, level_impl};
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};

#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub format: Format,
    /// The buffers of each level, in the order the level declares them.
    pub levels: Vec<Vec<Buffer>>,
}

impl Tensor {
    /// A tensor whose every entry is the format's fill value.
    /// A tensor too large for the memory limit is refused (see [`crate::memory`]).
    pub fn empty(format: &Format, shape: &[usize]) -> Result<Tensor> {
        check_rank(format, shape)?;
        crate::memory::check_tensor(format, shape, 0)?;
        let mut t = Tensor::unbuilt(format, shape);
        let mut count = 1;
        let mut first = 0;
        for (kind, bufs) in format.levels.iter().zip(t.levels.iter_mut()) {
            let dims = &shape[first..first + kind.rank()];
            first += kind.rank();
            count = level_impl(kind).empty(kind, bufs, dims, count);
        }
        Ok(t)
    }

    fn unbuilt(format: &Format, shape: &[usize]) -> Tensor {
        let levels = format
            .levels
            .iter()
            .map(|k| {
                level_impl(k)
                    .buffers(k, format.elem())
                    .into_iter()
                    .map(|(_, t)| Buffer::new(t))
                    .collect()
            })
            .collect();
        Tensor {
            shape: shape.to_vec(),
            format: format.clone(),
            levels,
        }
    }

    /// The dimensions indexed by level `k`.
    pub fn level_dims(&self, k: usize) -> &[usize] {
        let first: usize = self.format.levels[..k].iter().map(|l| l.rank()).sum();
        &self.shape[first..first + self.format.levels[k].rank()]
    }

    pub fn elem(&self) -> ElemType {
        self.format.elem()
    }
    pub fn fill(&self) -> Scalar {
        self.format.fill()
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Build from coordinates (`coords[d][k]`, 0-based) and values; duplicates are combined
    /// with `combine` (`+` for numbers, `|` for booleans is what files want). Explicitly
    /// stored fill values are kept.
    pub fn from_coo(
        format: &Format,
        shape: &[usize],
        coords: &[Vec<i64>],
        values: &Buffer,
        combine: impl Fn(Scalar, Scalar) -> Scalar,
    ) -> Result<Tensor> {
        Tensor::from_coo_dyn(format, shape, coords, values, &combine)
    }

    fn from_coo_dyn(
        format: &Format,
        shape: &[usize],
        coords: &[Vec<i64>],
        values: &Buffer,
        combine: &dyn Fn(Scalar, Scalar) -> Scalar,
    ) -> Result<Tensor> {
        check_rank(format, shape)?;
        check_integer(format)?;
        if format
            .levels
            .iter()
            .any(|l| matches!(l, crate::levels::LevelKind::SparseInterval { .. }))
        {
            return Tensor::build_intervals(format, |f| {
                Tensor::from_coo_dyn(f, shape, coords, values, combine)
            });
        }
        let n = values.len();
        if coords.len() != shape.len() || coords.iter().any(|c| c.len() != n) {
            return Err(Error::tensor(
                "",
                "coordinate lists and values differ in length",
            ));
        }
        check_build(format, shape, n)?;
        for (d, c) in coords.iter().enumerate() {
            if let Some((k, &bad)) = c
                .iter()
                .enumerate()
                .find(|&(_, &v)| v < 0 || v as usize >= shape[d])
            {
                return Err(Error::tensor(
                    "",
                    format!(
                        "entry {k}: coordinate {bad} of dimension {d} is outside 0..{}",
                        shape[d]
                    ),
                ));
            }
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| coords.iter().map(|c| c[a]).cmp(coords.iter().map(|c| c[b])));
        // Combine duplicates, keeping the first occurrence's place.
        let elem = format.elem();
        let mut uniq: Vec<usize> = vec![];
        let mut vals: Vec<Scalar> = vec![];
        for &k in &order {
            let v = values.get(k).cast(elem);
            match uniq.last() {
                Some(&last) if coords.iter().all(|c| c[last] == c[k]) => {
                    let m = vals.len() - 1;
                    vals[m] = combine(vals[m], v).cast(elem);
                }
                _ => {
                    uniq.push(k);
                    vals.push(v);
                }
            }
        }
        let sorted: Vec<Vec<i64>> = coords
            .iter()
            .map(|c| uniq.iter().map(|&k| c[k]).collect())
            .collect();
        let mut t = Tensor::unbuilt(format, shape);
        let mut groups = vec![(0usize, 0usize, uniq.len())];
        let mut count = 1;
        let mut dim = 0;
        for (k, kind) in format.levels.iter().enumerate() {
            let dims = t.level_dims(k).to_vec();
            let coords_here = &sorted[dim..dim + kind.rank()];
            level_impl(kind)
                .check_entries(kind, &dims, &groups, coords_here)
                .map_err(|m| Error::Format {
                    format: format.to_string(),
                    msg: format!("level {k}: {m}"),
                })?;
            let (c, g) =
                level_impl(kind).build(kind, &mut t.levels[k], &dims, count, &groups, coords_here);
            check_count(format, k, c)?;
            count = c;
            groups = g;
            dim += kind.rank();
        }
        // The leaf has been sized; write the values at their positions.
        let leaf = format.levels.len() - 1;
        if let Some(val) = t.levels[leaf].first_mut() {
            // A 0-d tensor given no entry has one group and nothing to write.
            for &(pos, lo, hi) in &groups {
                if hi > lo {
                    val.set(pos, vals[lo]);
                }
            }
        }
        t.merge_runs();
        // Built here, so in range: record it for the kernels that gather through it.
        t.mark_coordinates();
        Ok(t)
    }

    /// Build from row-major dense values, storing only entries that differ from the fill.
    pub fn from_dense(format: &Format, shape: &[usize], values: &Buffer) -> Result<Tensor> {
        check_rank(format, shape)?;
        check_integer(format)?;
        let total = shape.iter().try_fold(1usize, |a, &n| a.checked_mul(n));
        if total != Some(values.len()) {
            return Err(Error::tensor(
                "",
                format!("{} values for shape {:?}", values.len(), shape),
            ));
        }
        let total = values.len();
        if format.is_dense()
            && let Some(LevelKind::Element(_)) = format.levels.last()
        {
            // All-dense storage is the values themselves, in row-major order: no coordinates.
            crate::memory::check_tensor(format, shape, total)?;
            let mut t = Tensor::unbuilt(format, shape);
            if let Some(val) = t.levels.last_mut().and_then(|l| l.first_mut()) {
                *val = values.converted(format.elem());
            }
            return Ok(t);
        }
        let fill = format.fill();
        let kept = |k: &usize| format.is_dense() || values.get(*k).cast(format.elem()) != fill;
        check_build(format, shape, (0..total).filter(kept).count())?;
        let keep: Vec<usize> = (0..total).filter(kept).collect();
        let mut per_entry = vec![vec![]; shape.len()];
        for &k in &keep {
            let mut r = k;
            let mut idx = vec![0i64; shape.len()];
            for d in (0..shape.len()).rev() {
                idx[d] = (r % shape[d]) as i64;
                r /= shape[d];
            }
            for d in 0..shape.len() {
                per_entry[d].push(idx[d]);
            }
        }
        let mut vals = Buffer::new(format.elem());
        for &k in &keep {
            vals.push(values.get(k));
        }
        Tensor::from_coo(format, shape, &per_entry, &vals, |_, b| b)
    }

    /// Visit every stored entry: coordinates and value.
    pub fn for_each_stored(&self, f: &mut dyn FnMut(&[usize], Scalar)) {
        let mut coord = vec![];
        // Each level's code, looked up in the registry once rather than once per position.
        let imps: Vec<&dyn crate::levels::Level> =
            self.format.levels.iter().map(level_impl).collect();
        self.walk(&imps, 0, 0, &mut coord, f);
    }

    fn walk(
        &self,
        imps: &[&dyn crate::levels::Level],
        level: usize,
        pos: usize,
        coord: &mut Vec<usize>,
        f: &mut dyn FnMut(&[usize], Scalar),
    ) {
        let kind = &self.format.levels[level];
        let imp = imps[level];
        // A validated format's leaf is its last level.
        if level + 1 == imps.len() {
            f(coord, imp.leaf_value(kind, &self.levels[level], pos));
            return;
        }
        let dims = self.level_dims(level).to_vec();
        imp.for_each_child(kind, &self.levels[level], &dims, pos, &mut |c, child| {
            coord.extend_from_slice(c);
            self.walk(imps, level + 1, child, coord, f);
            coord.truncate(coord.len() - c.len());
        });
    }

    /// Row-major dense values, refused when they would not fit in the memory limit.
    pub fn try_to_dense(&self) -> Result<Buffer> {
        let dense = Format::dense(self.rank(), self.fill());
        let bytes = crate::memory::tensor_bytes(&dense, &self.shape, 0);
        crate::memory::check("", &self.shape, &dense, bytes)?;
        Ok(self.to_dense())
    }

    /// Row-major dense values.
    pub fn to_dense(&self) -> Buffer {
        let total: usize = self.shape.iter().product();
        // All-Dense levels over an Element leaf store every element, in row-major order: the
        // values are the dense array (walking them one by one cost ~300 instructions each).
        let levels = &self.format.levels;
        if let Some((LevelKind::Element(_), inner)) = levels.split_last()
            && inner.iter().all(|k| matches!(k, LevelKind::Dense))
            && let Some([val]) = self.levels.last().map(|b| &b[..])
            && val.len() >= total
            && val.elem() == self.elem()
        {
            let mut out = val.clone();
            out.truncate(total);
            return out;
        }
        let mut out = Buffer::filled(self.elem(), total, self.fill());
        let shape = self.shape.clone();
        self.for_each_stored(&mut |c, v| {
            let mut k = 0;
            for (d, &x) in c.iter().enumerate() {
                k = k * shape[d] + x;
            }
            out.set(k, v);
        });
        out
    }

    /// The number of stored leaf positions (Finch's `countstored`): the distinct positions of
    /// the leaf level reachable through the structure. A position shared by several
    /// coordinates (a run, a band slot) counts once; every position of a Dense level counts,
    /// and so does every slot of a SparseByteMap fiber (its children are allocated densely).
    pub fn countstored(&self) -> usize {
        let mut positions = vec![0usize];
        for (k, kind) in self.format.levels.iter().enumerate() {
            if kind.is_leaf() {
                break;
            }
            let dims = self.level_dims(k).to_vec();
            let imp = level_impl(kind);
            let mut next = vec![];
            for &p in &positions {
                if kind.is_real() {
                    // A real level's children are its pieces (its dimension has no size).
                    imp.for_each_piece(kind, &self.levels[k], p, &mut |_, _, c| next.push(c));
                } else {
                    imp.owned_children(kind, &self.levels[k], &dims, p, &mut |c| next.push(c));
                }
            }
            next.sort_unstable();
            next.dedup();
            positions = next;
        }
        positions.len()
    }

    /// The value at a coordinate.
    pub fn get(&self, idx: &[usize]) -> Result<Scalar> {
        if idx.len() != self.rank() || idx.iter().zip(&self.shape).any(|(i, n)| i >= n) {
            return Err(Error::tensor(
                "",
                format!("index {idx:?} is outside the shape {:?}", self.shape),
            ));
        }
        let mut found = self.fill();
        self.for_each_stored(&mut |c, v| {
            if c == idx {
                found = v;
            }
        });
        Ok(found)
    }

    /// Check the stored arrays are consistent with the shape and format.
    pub fn validate(&self, name: &str) -> Result<()> {
        // The arrays must be the ones each level declares before their contents are read.
        if self.levels.len() != self.format.levels.len() || self.shape.len() != self.format.rank() {
            return Err(Error::tensor(
                name,
                format!(
                    "{} levels of arrays and {} dimensions for the format {} ({} levels, rank {})",
                    self.levels.len(),
                    self.shape.len(),
                    self.format,
                    self.format.levels.len(),
                    self.format.rank()
                ),
            ));
        }
        let elem = self.format.elem();
        for (k, kind) in self.format.levels.iter().enumerate() {
            let want = level_impl(kind).buffers(kind, elem);
            let have: Vec<ElemType> = self.levels[k].iter().map(Buffer::elem).collect();
            if have.len() != want.len() || have.iter().zip(&want).any(|(h, (_, w))| h != w) {
                let want: Vec<String> = want.iter().map(|(n, t)| format!("{n}: {t}")).collect();
                let have: Vec<String> = have.iter().map(|t| t.to_string()).collect();
                return Err(Error::tensor(
                    name,
                    format!(
                        "level {k} ({}) has arrays [{}], not [{}]",
                        kind.name(),
                        have.join(", "),
                        want.join(", ")
                    ),
                ));
            }
        }
        let mut count = 1;
        for (k, kind) in self.format.levels.iter().enumerate() {
            let dims = self.level_dims(k).to_vec();
            count = level_impl(kind)
                .validate(kind, &self.levels[k], &dims, count)
                .map_err(|m| Error::tensor(name, format!("level {k}: {m}")))?;
        }
        Ok(())
    }

    /// Check the coordinate arrays of the tensor's levels (`Level::coordinates`) against
    /// their dimensions and record the bound on each that holds ([`Buffer::check_below`]),
    /// and record the largest element of each position array (`Level::positions`,
    /// [`Buffer::check_bounded`]): a
    /// kernel that reads the tensor without writing it then gathers through those coordinates
    /// without bounds checks (`ir::Kernel::bounded`), until the array changes. Arrays shared with
    /// memory someone else owns (a NumPy array lent without a copy) take no bound, since their
    /// owner may change them. One pass over the coordinates; done where tensors are loaded or
    /// converted.
    pub fn mark_coordinates(&mut self) {
        if self.levels.len() != self.format.levels.len() || self.shape.len() != self.format.rank() {
            return;
        }
        for (k, kind) in self.format.levels.iter().enumerate() {
            let dims = self.level_dims(k).to_vec();
            for (b, d) in level_impl(kind).coordinates(kind) {
                if let (Some(buf), Some(&n)) = (self.levels[k].get_mut(b), dims.get(d)) {
                    buf.check_below(n as u64);
                }
            }
            for b in level_impl(kind).positions(kind) {
                if let Some(buf) = self.levels[k].get_mut(b) {
                    buf.check_bounded();
                }
            }
        }
    }

    /// Forget the bounds [`Tensor::mark_coordinates`] recorded (a kernel writes the tensor).
    pub fn unmark(&mut self) {
        for b in self.levels.iter_mut().flatten() {
            b.unmark();
        }
    }

    /// Make every level array shareable without copying it ([`Buffer::share`]): clones of
    /// the tensor are then free until one of them is written.
    pub fn share(&mut self) {
        for b in self.levels.iter_mut().flatten() {
            b.share();
        }
    }

    /// Own every level array again where no clone shares it ([`Buffer::unshare`]), so that
    /// writing it copies nothing.
    pub fn unshare(&mut self) {
        for b in self.levels.iter_mut().flatten() {
            b.unshare();
        }
    }

    /// Cut every level's arrays to their logical length after a kernel wrote them.
    pub fn finish(&mut self) {
        // Borrowed field by field: every kernel call finishes its outputs, and cloning the
        // level kinds and dimensions here cost more than a tiny kernel.
        let Tensor {
            shape,
            format,
            levels,
        } = self;
        let mut count = 1;
        let mut first = 0;
        for (kind, bufs) in format.levels.iter().zip(levels.iter_mut()) {
            let dims = &shape[first..first + kind.rank()];
            first += kind.rank();
            count = level_impl(kind).finish(kind, bufs, dims, count);
        }
    }

    /// Conversion by the runtime builders (`from_coo`/`from_dense`), without compiling: the
    /// reference the compiled conversion is tested against.
    pub fn to_format_runtime(&self, format: &Format) -> Result<Tensor> {
        let mut coords = vec![vec![]; self.rank()];
        let mut vals = Buffer::new(format.elem());
        self.for_each_stored(&mut |c, v| {
            for (d, &x) in c.iter().enumerate() {
                coords[d].push(x as i64);
            }
            vals.push(v);
        });
        if format.is_dense() || self.format.is_dense() {
            let src = self.to_dense();
            let mut b = Buffer::new(format.elem());
            for k in 0..src.len() {
                b.push(src.get(k));
            }
            return Tensor::from_dense(format, &self.shape, &b);
        }
        Tensor::from_coo(format, &self.shape, &coords, &vals, |_, b| b)
    }
}

/// The memory check of building a tensor from `entries` coordinate entries: the storage, and
/// the builder's working arrays (a sort order, the combined values and a sorted copy of the
/// coordinates: about `40 + 8 * rank` bytes an entry).
fn check_build(format: &Format, shape: &[usize], entries: usize) -> Result<()> {
    let work = (entries as u64).checked_mul(40 + 8 * shape.len() as u64);
    let bytes = crate::memory::tensor_bytes(format, shape, entries)
        .zip(work)
        .and_then(|(a, b)| a.checked_add(b));
    crate::memory::check("", shape, format, bytes)
}

/// Coordinate and dense builders take integer coordinates; a format with a real-valued
/// dimension is built from pieces ([`Tensor::from_pieces`]).
fn check_integer(format: &Format) -> Result<()> {
    if format.is_real() {
        return Err(Error::Format {
            format: format.to_string(),
            msg: "a format with real-valued coordinates (coord=f64) is built from pieces (intervals and pinpoints), not from integer coordinates or dense values".to_string(),
        });
    }
    Ok(())
}

fn check_rank(format: &Format, shape: &[usize]) -> Result<()> {
    if format.rank() != shape.len() {
        return Err(Error::Format {
            format: format.to_string(),
            msg: format!(
                "format has {} dimensions but the shape {:?} has {}",
                format.rank(),
                shape,
                shape.len()
            ),
        });
    }
    // A 4-byte level stores coordinates below its dimension: one beyond `i32::MAX` would wrap.
    let mut first = 0;
    for l in &format.levels {
        let dims = &shape[first..first + l.rank()];
        first += l.rank();
        if let Some(&n) = dims.iter().find(|&&n| n > i32::MAX as usize)
            && l.coord() == crate::levels::format::Coord::I32
        {
            return Err(Error::Format {
                format: format.to_string(),
                msg: format!(
                    "{} with coord=i32 cannot index a dimension of {n} (above {}): use coord=i64",
                    l.name(),
                    i32::MAX
                ),
            });
        }
    }
    Ok(())
}

/// A 4-byte level (`coord=i32`) holds at most `i32::MAX` stored positions: its position array
/// is 4 bytes too. Checked after building, so an oversized tensor is refused, never wrapped.
fn check_count(format: &Format, level: usize, count: usize) -> Result<()> {
    let l = &format.levels[level];
    if l.coord() == crate::levels::format::Coord::I32 && count > i32::MAX as usize {
        return Err(Error::Format {
            format: format.to_string(),
            msg: format!(
                "level {level} ({} with coord=i32) would store {count} entries, above {}: use coord=i64",
                l.name(),
                i32::MAX
            ),
        });
    }
    Ok(())
}

/// A random tensor of the given format: each entry is stored with probability `density`,
/// values uniform integers in 1..=9 (exact in every element type), seeded.
pub fn random_sparse(format: &Format, shape: &[usize], density: f64, seed: u64) -> Result<Tensor> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let total: usize = shape.iter().product();
    let expected = (total as f64 * density).ceil() as usize;
    let mut coords = vec![vec![]; shape.len()];
    let mut values = Buffer::new(format.elem());
    if total > 0 {
        for _ in 0..expected {
            let mut k = rng.random_range(0..total);
            for d in (0..shape.len()).rev() {
                coords[d].push((k % shape[d]) as i64);
                k /= shape[d];
            }
            values.push(Scalar::I64(rng.random_range(1..=9)));
        }
    }
    Tensor::from_coo(format, shape, &coords, &values, |a, _| a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csr_from_coo_combines_duplicates() {
        let f = Format::parse("csr", None).unwrap();
        let coords = vec![vec![1, 0, 1, 1], vec![2, 1, 0, 2]];
        let vals = Buffer::F64(vec![1.0, 2.0, 3.0, 4.0].into());
        let t = Tensor::from_coo(&f, &[3, 3], &coords, &vals, |a, b| {
            Scalar::F64(a.as_f64() + b.as_f64())
        })
        .unwrap();
        assert_eq!(
            t.levels[1],
            vec![
                Buffer::I64(vec![0, 1, 3, 3].into()),
                Buffer::I64(vec![1, 0, 2].into())
            ]
        );
        assert_eq!(t.levels[2], vec![Buffer::F64(vec![2.0, 3.0, 5.0].into())]);
        assert_eq!(
            t.to_dense(),
            Buffer::F64(vec![0.0, 2.0, 0.0, 3.0, 0.0, 5.0, 0.0, 0.0, 0.0].into())
        );
        t.validate("A").unwrap();
        assert_eq!(t.countstored(), 3);
    }

    #[test]
    fn sizes_past_64_bits_are_refused_not_allocated() {
        let huge = [1usize << 40, 1 << 40];
        let dense = Format::dense(2, Scalar::F64(0.0));
        for e in [
            Tensor::empty(&dense, &huge).unwrap_err(),
            Tensor::from_coo(
                &Format::parse("csr", None).unwrap(),
                &[usize::MAX, 2],
                &[vec![0], vec![0]],
                &Buffer::F64(vec![1.0].into()),
                |a, _| a,
            )
            .unwrap_err(),
        ] {
            match e.named("T") {
                Error::Memory { tensor, bytes, .. } => {
                    assert_eq!(tensor, "T");
                    assert_eq!(bytes, None);
                }
                other => panic!("expected a memory error, got {other:?}"),
            }
        }
        // A sparse vector of length 2^40 is small and fine.
        let sv = Format::parse("SparseList(Element(0.0))", Some(1)).unwrap();
        assert!(Tensor::empty(&sv, &[1 << 40]).is_ok());
    }

    #[test]
    fn dense_values_are_stored_as_they_are() {
        let f = Format::dense(2, Scalar::I32(0));
        let t = Tensor::from_dense(&f, &[2, 2], &Buffer::F64(vec![1.0, 0.0, -2.0, 3.0].into()))
            .unwrap();
        assert_eq!(t.levels[2], vec![Buffer::I32(vec![1, 0, -2, 3].into())]);
        t.validate("t").unwrap();
        assert!(Tensor::from_dense(&f, &[3, 2], &Buffer::F64(vec![1.0].into())).is_err());
        assert!(Tensor::from_dense(&f, &[usize::MAX, 2], &Buffer::F64(vec![].into())).is_err());
    }
}
