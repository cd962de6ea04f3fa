//! Level formats. Each file holds one format: its runtime storage (which buffers it keeps and
//! how to check and finish them) and its compile-time methods (declare, assemble, freeze,
//! unfurl into looplets, leaf reads and writes), and its [`registry::LevelSpec`]: name,
//! parameters, protocols and capabilities, listed in [`registry::LEVELS`]. The lowering engine
//! only talks to [`Level`] and asks the spec's capabilities.

pub mod dense;
pub mod element;
pub mod format;
pub mod pattern;
pub mod real;
pub mod registry;
pub mod run_list;
pub mod scalar;
pub mod shared;
pub mod sparse_band;
pub mod sparse_block_list;
pub mod sparse_bytemap;
pub mod sparse_coo;
pub mod sparse_dict;
pub mod sparse_interval;
pub mod sparse_list;
pub mod sparse_point;
pub mod sparse_run_list;
pub mod sparse_slice_list;
#[cfg(test)]
pub mod testing;

pub use format::{Format, LevelKind};

use crate::error::Result;
use crate::ir::cx::Cx;
use crate::ir::{Expr, Stmt};
use crate::looplets::tensor::TensorInfo;
use crate::looplets::{Fiber, Looplet};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};

/// Where a level sits: the tensor and the level's number in its chain.
pub struct LevelRef<'a> {
    pub tensor: &'a TensorInfo,
    pub level: usize,
}

impl LevelRef<'_> {
    pub fn kind(&self) -> &LevelKind {
        &self.tensor.format.levels[self.level]
    }
    pub fn buf(&self, k: usize) -> crate::ir::BufId {
        self.tensor.level_bufs[self.level][k]
    }
    pub fn state(&self, k: usize) -> crate::ir::VarId {
        self.tensor.level_vars[self.level][k]
    }
    /// The size of the `sub`-th dimension this level indexes (an I64 IR value).
    pub fn dim(&self, sub: usize) -> Expr {
        self.tensor.dim_of_level(self.level, sub)
    }
    pub fn child(&self) -> LevelRef<'_> {
        LevelRef {
            tensor: self.tensor,
            level: self.level + 1,
        }
    }
    pub fn child_impl(&self) -> &'static dyn Level {
        level_impl(&self.tensor.format.levels[self.level + 1])
    }
}

/// A leaf read: either a constant or a lowered value.
pub enum LeafValue {
    Const(Scalar),
    Value(Expr, ElemType),
    /// `cond ? then : otherwise`, with a loop-invariant `cond` (a SparseScalar's dirty flag):
    /// the engine lowers statements reading it once per case, so each case simplifies.
    Switch(Expr, Box<LeafValue>, Box<LeafValue>),
}

/// What building a level gives: its child count and the child groups (position, entry range).
pub type Built = (usize, Vec<(usize, usize, usize)>);

pub trait Level: Sync {
    /// The buffers the level stores, with their element types (`elem` is the tensor's).
    fn buffers(&self, kind: &LevelKind, elem: ElemType) -> Vec<(&'static str, ElemType)>;
    /// Buffers used only while a kernel writes the level (empty in a finished tensor), which
    /// `tessera info --storage` does not show.
    fn scratch(&self) -> &'static [&'static str] {
        &[]
    }
    /// Per-kernel state variables the level's update code keeps (name, compute type).
    fn state(&self, _kind: &LevelKind) -> Vec<(&'static str, ElemType)> {
        vec![]
    }
    /// Whether, over a `child` level, the only storage this level's fibers share while being
    /// written is an entry cursor, an optional last-written-fiber state and arrays indexed by
    /// entry that the cursor appends to (see [`Level::appends`]). Then a parallel loop whose
    /// chunks write disjoint, increasing runs of fibers (the rows of `C[i, j]` under `for i =
    /// parallel(_)`) can give each chunk fragments of those arrays of its own and concatenate
    /// them in chunk order afterwards (`ir::Rows`). `false` by default: such outputs are
    /// refused under a parallel loop.
    fn appends_rows(&self, _kind: &LevelKind, _child: &LevelKind) -> bool {
        false
    }
    /// The cursor, fiber-order state and per-entry arrays of a level for which
    /// [`Level::appends_rows`] holds (the arrays include the leaf child's, stored per entry).
    fn appends(&self, _l: &LevelRef) -> Option<crate::ir::Rows> {
        None
    }
    /// For a level for which [`Level::appends_rows`] holds: the array in which a fiber being
    /// written keeps its own entry count, at its position + 1 (SparseList's `ptr`), if the
    /// level writes one. A row's count is its iteration's alone, but a 1-D output has one
    /// fiber, which every chunk of a parallel loop over its dimension appends to: each chunk
    /// then counts into a copy of this array starting at zero, and the copies are summed.
    fn fiber_counts(&self, _l: &LevelRef) -> Option<crate::ir::BufId> {
        None
    }

    /// The level's coordinate arrays: `(buffer, dimension)` for each buffer whose every
    /// element is a coordinate of the level's dimension `dimension` in a valid tensor. A kernel
    /// may gather through such an array's elements without bounds checks once they are checked
    /// (`Tensor::mark_coordinates`, `ir::Kernel::bounded`).
    fn coordinates(&self, _kind: &LevelKind) -> Vec<(usize, usize)> {
        vec![]
    }

    /// The level's position arrays: buffers whose elements are positions in the level's entry
    /// arrays, a fiber's entries lying between two of them (`SparseList`'s `ptr`). Once their
    /// elements are checked to lie in `0..=max` (`Tensor::mark_coordinates`), a loop over a
    /// fiber's entries reads the entry arrays without bounds checks behind one test that `max`
    /// is at most their length (`ir::Vouched::Positions`).
    fn positions(&self, _kind: &LevelKind) -> Vec<usize> {
        vec![]
    }

    // ---- runtime side ----
    /// Check stored arrays against the shape for `parent_count` parent positions; returns the
    /// number of child positions.
    fn validate(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String>;
    /// After a kernel wrote the level: cut buffers to their logical length; returns the number
    /// of child positions.
    fn finish(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> usize;
    /// Empty storage for `parent_count` fill-valued parent positions; returns the child count.
    fn empty(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> usize;

    /// Visit the stored children of fiber `pos` as (coordinates in this level's dimensions,
    /// child position).
    fn for_each_child(
        &self,
        _kind: &LevelKind,
        _bufs: &[Buffer],
        _dims: &[usize],
        _pos: usize,
        _f: &mut dyn FnMut(&[usize], usize),
    ) {
    }
    /// Rank-1 levels: visit the stored children of fiber `pos` as inclusive coordinate ranges
    /// `(lo, hi, child position)`, in increasing order. Levels that store one child per
    /// coordinate need not override this.
    fn for_each_run(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        pos: usize,
        f: &mut dyn FnMut(usize, usize, usize),
    ) {
        self.for_each_child(kind, bufs, dims, pos, &mut |c, q| f(c[0], c[0], q));
    }
    /// The child positions fiber `pos` holds storage for, each once (what `countstored`
    /// counts, as Finch's `countstored` does): by default its stored children, a run or
    /// block slot once. A level that allocates its children densely overrides this.
    fn owned_children(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        pos: usize,
        f: &mut dyn FnMut(usize),
    ) {
        if kind.rank() == 1 {
            self.for_each_run(kind, bufs, dims, pos, &mut |_, _, c| f(c));
        } else {
            self.for_each_child(kind, bufs, dims, pos, &mut |_, c| f(c));
        }
    }
    /// Rebuild the level so that its new position `k` holds what old position `map[k]` held,
    /// or an all-fill fiber for `None`. Returns the same kind of map for the child level.
    /// (Used to drop merged runs and to reshape storage after building.) The default rebuilds
    /// the level from the stored children of the kept positions (`for_each_child`, then
    /// `build`); levels with a cheaper direct rearrangement override it.
    fn remap(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        dims: &[usize],
        map: &[Option<usize>],
    ) -> Vec<Option<usize>> {
        if kind.is_real() {
            return remap_pieces(self, kind, bufs, map);
        }
        let rank = kind.rank();
        let mut coords = vec![vec![]; rank];
        let mut old_children = vec![];
        let mut groups = vec![];
        for (k, m) in map.iter().enumerate() {
            let lo = old_children.len();
            if let Some(p) = *m {
                self.for_each_child(kind, bufs, dims, p, &mut |c, q| {
                    for (d, &x) in c.iter().enumerate() {
                        coords[d].push(x as i64);
                    }
                    old_children.push(q);
                });
            }
            if old_children.len() > lo {
                groups.push((k, lo, old_children.len()));
            }
        }
        let (count, child_groups) = self.build(kind, bufs, dims, map.len(), &groups, &coords);
        let mut out = vec![None; count];
        for (pos, lo, _) in child_groups {
            out[pos] = Some(old_children[lo]);
        }
        out
    }
    /// Run-length levels with merging on: merge neighbouring runs of each fiber whose
    /// sub-fibers are equal (`equal(child position, child position)`). Returns the map of kept
    /// child positions for [`Level::remap`] of the child level, or `None` if nothing merged.
    fn merge_runs(
        &self,
        _kind: &LevelKind,
        _bufs: &mut [Buffer],
        _dims: &[usize],
        _parent_count: usize,
        _equal: &mut dyn FnMut(usize, usize) -> bool,
    ) -> Option<Vec<Option<usize>>> {
        None
    }
    /// Build storage from coordinate-sorted, duplicate-free entries. `groups` are (parent
    /// position, entry range) in increasing position order and `coords` holds, for each of this
    /// level's dimensions, every entry's coordinate. Returns the child count and the child groups.
    fn build(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        dims: &[usize],
        parent_count: usize,
        groups: &[(usize, usize, usize)],
        coords: &[Vec<i64>],
    ) -> (usize, Vec<(usize, usize, usize)>);
    /// Whether `build` can store these entries (same arguments); formats that cannot hold some
    /// sets of coordinates (SparsePoint: one per fiber) say why, so `Tensor::from_coo` fails
    /// with a message instead of building wrong storage.
    fn check_entries(
        &self,
        _kind: &LevelKind,
        _dims: &[usize],
        _groups: &[(usize, usize, usize)],
        _coords: &[Vec<i64>],
    ) -> std::result::Result<(), String> {
        Ok(())
    }
    /// Real-valued levels (`coord=f64`): visit the stored pieces of fiber `pos` in increasing
    /// order as (closed Limit interval, child position). Integer levels visit nothing.
    fn for_each_piece(
        &self,
        _kind: &LevelKind,
        _bufs: &[Buffer],
        _pos: usize,
        _f: &mut dyn FnMut(crate::limit::Limit<f64>, crate::limit::Limit<f64>, usize),
    ) {
    }
    /// Real-valued levels: build storage from pieces, each group's (parent position, entry
    /// range) sorted and disjoint; like [`Level::build`] otherwise. Integer levels refuse.
    fn build_pieces(
        &self,
        kind: &LevelKind,
        _bufs: &mut [Buffer],
        _parent_count: usize,
        _groups: &[(usize, usize, usize)],
        _pieces: &[(crate::limit::Limit<f64>, crate::limit::Limit<f64>)],
    ) -> std::result::Result<Built, String> {
        Err(format!("{} does not store real coordinates", kind.name()))
    }
    /// Leaves: the stored value at a position.
    fn leaf_value(&self, _kind: &LevelKind, _bufs: &[Buffer], _pos: usize) -> Scalar {
        unreachable!("only leaves hold values")
    }

    // ---- compile time ----
    /// Reset `count` positions to their fill (update mode).
    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>>;
    /// Make positions `lo..hi` exist and hold fill.
    fn assemble(&self, cx: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>>;
    /// Finish updates of `count` positions; returns code and the number of child positions.
    fn freeze(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)>;
    /// Reopen for updates (after a freeze in the same kernel). Levels whose spec says
    /// `caps.reopen` implement it; for the others the engine refuses before calling it, and
    /// this default says the same.
    fn thaw(&self, _cx: &mut Cx, l: &LevelRef, _count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        Err(registry::reopen_error(&l.tensor.name, l.kind()))
    }
    /// Looplets to read the next dimension of a fiber.
    fn unfurl_read(&self, cx: &mut Cx, f: &Fiber, protocol: Option<Protocol>) -> Result<Looplet>;
    /// Looplets to update the next dimension of a fiber.
    fn unfurl_update(&self, cx: &mut Cx, f: &Fiber) -> Result<Looplet>;
    /// Read a leaf (only leaves implement this).
    fn read_leaf(&self, _f: &Fiber) -> Option<LeafValue> {
        None
    }
    /// Update a leaf: `new` computes the stored value from the old one.
    fn update_leaf(
        &self,
        _cx: &mut Cx,
        _f: &Fiber,
        _new: &dyn Fn(Expr) -> Expr,
    ) -> Option<Vec<Stmt>> {
        None
    }
    /// For a leaf that short-circuits reductions (ShortCircuitScalar): the value it holds now,
    /// which loops reducing into it test against the reducer's annihilator to stop early.
    fn short_circuit_value(&self, _f: &Fiber) -> Option<Expr> {
        None
    }
}

/// [`Level::remap`] of a real-valued level: rebuild it from the kept fibers' pieces.
pub(super) fn remap_pieces<L: Level + ?Sized>(
    level: &L,
    kind: &LevelKind,
    bufs: &mut [Buffer],
    map: &[Option<usize>],
) -> Vec<Option<usize>> {
    let mut pieces = vec![];
    let mut old_children = vec![];
    let mut groups = vec![];
    for (k, m) in map.iter().enumerate() {
        let lo = pieces.len();
        if let Some(p) = *m {
            level.for_each_piece(kind, bufs, p, &mut |a, z, q| {
                pieces.push((a, z));
                old_children.push(q);
            });
        }
        if pieces.len() > lo {
            groups.push((k, lo, pieces.len()));
        }
    }
    let (count, child_groups) = level
        .build_pieces(kind, bufs, map.len(), &groups, &pieces)
        .expect("stored pieces rebuild");
    let mut out = vec![None; count];
    for (pos, lo, _) in child_groups {
        out[pos] = Some(old_children[lo]);
    }
    out
}

/// The level of `format` whose fibers a parallel loop over the first index can append row by
/// row (see [`Level::appends_rows`]): the format is zero or more `Dense` levels, then that
/// level, then a leaf. With no `Dense` level (a 1-D vector such as a BFS frontier) the loop's
/// index is the appending level's own: each chunk appends a sorted run of coordinates, and the
/// runs concatenated in chunk order are the serial list. `None` for any other format.
pub fn row_appended_level(format: &Format) -> Option<usize> {
    let k = format
        .levels
        .iter()
        .position(|l| !matches!(l, LevelKind::Dense))?;
    let (level, child) = (format.levels.get(k)?, format.levels.get(k + 1)?);
    (k + 2 == format.levels.len()
        && child.is_leaf()
        && level_impl(level).appends_rows(level, child))
    .then_some(k)
}

pub fn level_impl(kind: &LevelKind) -> &'static dyn Level {
    kind.spec().imp
}
