//! `SparseSliceList`: sliced ELLPACK with slices of [`SLICE`] fibers (SELL-8). The fibers of
//! parent positions `8s .. 8s + 7` form slice `s` and are stored interleaved: entry `k` of
//! fiber `p` sits at slot `ptr[p / 8] + p % 8 + 8 k` for `k < len[p]`, its coordinate in
//! `idx` and its child at that slot. Slice `s` holds the slots `ptr[s] .. ptr[s + 1]`, a
//! multiple of 8 and at least 8 times its longest fiber; the slots past a fiber's length are
//! padding, with a coordinate inside the dimension (0) and a fill child, and are never read
//! as entries. Coordinates increase strictly within a fiber.
//!
//! Why: entry `k` of 8 neighbouring rows is one contiguous run of 8 coordinates and 8 values,
//! so a kernel can run the rows of a slice in the lanes of a vector register with one gather
//! (of `x` in SpMV) a step, where CSR needs a row's mispredicted loop exit per row
//! (bench/analysis/spmv.md, "Sliced ELLPACK measured by hand"). Read one fiber at a time, as
//! any program may, the walk steps 8 slots at a time.
//!
//! The child is the leaf: writes reach the slots of a slice out of order (see `check_below`).
//!
//! Writes come as `SparseList`'s: fibers in increasing position order, coordinates increasing
//! within a fiber, checked at run time. Since fibers arrive in order, the slices before the
//! current one are complete, so a fiber's slots are known when it starts: the current slice
//! begins at `top - ptr[s + 1]`, where `top` counts the slots in use and `ptr[s + 1]` holds
//! slice `s`'s slot count until the freeze turns counts into offsets. An entry past the
//! slice's longest fiber adds a row of 8 slots, the other 7 made padding.

use super::registry::{Args, Arity, Caps, LevelSpec, Param, Role};
use super::shared::{int_at, int_buf, ints};
use super::{Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::{Cx, KernelError, KernelErrorKind, Order};
use crate::ir::{BinOp, Expr, Stmt, build as b};
use crate::looplets::{Fiber, Looplet, Positions, Stepper, Target};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use std::rc::Rc;

/// Fibers per slice: the f64 lanes of a 512-bit register.
pub const SLICE: usize = 8;

pub struct SparseSliceList;

pub const SPEC: LevelSpec = LevelSpec {
    name: "SparseSliceList",
    role: Role::Level,
    arity: Arity::Fixed(1),
    params: &[Param::Coord],
    protocols: &[],
    caps: Caps {
        sparse: true,
        real_coords: false,
        ..Caps::LEVEL
    },
    is: |k| matches!(k, LevelKind::SparseSliceList { .. }),
    make: |a| LevelKind::SparseSliceList { coord: a.coord },
    args: |k| match k {
        LevelKind::SparseSliceList { coord } => Args {
            coord: *coord,
            ..Args::default()
        },
        _ => Args::default(),
    },
    check_below,
    imp: &SparseSliceList,
};

/// The entries of a slice's 8 fibers are interleaved, so a kernel writing one fiber after
/// another reaches its child positions out of order and more than once (a slot, then the rest
/// of a new row of padding), which only a leaf takes: levels such as `RunList` append their
/// children in position order and roll back to an earlier position when it is assembled again.
fn check_below(below: &[LevelKind]) -> Option<&'static str> {
    (below.len() != 1).then_some(
        "SparseSliceList interleaves the entries of 8 fibers, so its child must be the leaf (Element or Pattern)",
    )
}

const PTR: usize = 0;
const LEN: usize = 1;
const IDX: usize = 2;
const TOP: usize = 0;
const PREV: usize = 1;

/// Slices of `count` parent positions.
fn slices(count: usize) -> usize {
    count.div_ceil(SLICE)
}

/// The same for an I64 IR value.
fn slices_of(count: Expr) -> Expr {
    b::bin(BinOp::Div, b::add(count, b::int(7)), b::int(8))
}

/// Check the stored arrays (see the module comment); the number of slots.
fn check(
    ptr: &[i64],
    len: &[i64],
    idx: &[i64],
    parent_count: usize,
    dim: usize,
) -> std::result::Result<usize, String> {
    let n = slices(parent_count);
    super::shared::check_ptr_shape(ptr, n)?;
    if len.len() != parent_count {
        return Err(format!(
            "len has {} entries, expected {parent_count}",
            len.len()
        ));
    }
    for s in 0..n {
        let size = ptr[s + 1] - ptr[s];
        if size < 0 || size % SLICE as i64 != 0 || ptr[s + 1] as u64 > idx.len() as u64 {
            return Err(format!(
                "ptr[{}] = {} does not end slice {s} a multiple of {SLICE} slots after ptr[{s}] = {} within idx",
                s + 1,
                ptr[s + 1],
                ptr[s]
            ));
        }
    }
    let slots = ptr[n] as usize;
    for (q, &x) in idx.iter().enumerate().take(slots) {
        if x < 0 || x as usize >= dim {
            return Err(format!("idx[{q}] = {x} is outside 0..{dim}"));
        }
    }
    for (p, &l) in len.iter().enumerate() {
        let s = p / SLICE;
        if l < 0 || l.saturating_mul(SLICE as i64) > ptr[s + 1] - ptr[s] {
            return Err(format!(
                "len[{p}] = {l} does not fit slice {s} of {} slots",
                ptr[s + 1] - ptr[s]
            ));
        }
        let first = ptr[s] as usize + p % SLICE;
        for k in 1..l as usize {
            let q = first + SLICE * k;
            if idx[q] <= idx[q - SLICE] {
                return Err(format!(
                    "idx[{q}] = {} is not above idx[{}] = {} (fiber {p})",
                    idx[q],
                    q - SLICE,
                    idx[q - SLICE]
                ));
            }
        }
    }
    Ok(slots)
}

impl Level for SparseSliceList {
    fn buffers(&self, kind: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        let pos = kind.coord().pos_elem();
        vec![("ptr", pos), ("len", pos), ("idx", kind.coord().elem())]
    }
    fn state(&self, _: &LevelKind) -> Vec<(&'static str, ElemType)> {
        vec![("top", ElemType::I64), ("prev", ElemType::I64)]
    }
    /// Padding slots hold coordinate 0, so every element of `idx` is a coordinate.
    fn coordinates(&self, _: &LevelKind) -> Vec<(usize, usize)> {
        vec![(IDX, 0)]
    }

    fn validate(
        &self,
        _: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        for (k, name) in [(PTR, "ptr"), (LEN, "len"), (IDX, "idx")] {
            if !matches!(bufs[k], Buffer::I64(_) | Buffer::I32(_)) {
                return Err(format!(
                    "{name} must be an i64 or i32 array, not {}",
                    bufs[k].elem()
                ));
            }
        }
        check(
            &ints(&bufs[PTR]),
            &ints(&bufs[LEN]),
            &ints(&bufs[IDX]),
            parent_count,
            dims[0],
        )
    }
    fn finish(
        &self,
        _: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        let n = slices(parent_count);
        bufs[PTR].truncate(n + 1);
        bufs[LEN].truncate(parent_count);
        let slots = int_at(&bufs[PTR], n) as usize;
        bufs[IDX].truncate(slots);
        slots
    }
    fn empty(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        let pos = kind.coord().pos_elem();
        bufs[PTR] = int_buf(pos, vec![0; slices(parent_count) + 1]);
        bufs[LEN] = int_buf(pos, vec![0; parent_count]);
        bufs[IDX] = Buffer::new(kind.coord().elem());
        0
    }

    fn for_each_child(
        &self,
        _: &LevelKind,
        bufs: &[Buffer],
        _: &[usize],
        pos: usize,
        f: &mut dyn FnMut(&[usize], usize),
    ) {
        let first = int_at(&bufs[PTR], pos / SLICE) as usize + pos % SLICE;
        for k in 0..int_at(&bufs[LEN], pos) as usize {
            let q = first + SLICE * k;
            f(&[int_at(&bufs[IDX], q) as usize], q);
        }
    }
    fn build(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
        groups: &[(usize, usize, usize)],
        coords: &[Vec<i64>],
    ) -> (usize, Vec<(usize, usize, usize)>) {
        let mut len = vec![0i64; parent_count];
        for &(p, lo, hi) in groups {
            super::dense::split_runs(&coords[0], lo, hi, |_, _, _| len[p] += 1);
        }
        let n = slices(parent_count);
        let mut ptr = vec![0i64; n + 1];
        for s in 0..n {
            let longest = len[SLICE * s..(SLICE * s + SLICE).min(parent_count)]
                .iter()
                .max()
                .copied()
                .unwrap_or(0);
            ptr[s + 1] = ptr[s] + SLICE as i64 * longest;
        }
        let slots = ptr[n] as usize;
        let mut idx = vec![0i64; slots];
        let mut entry: Vec<Option<(usize, usize)>> = vec![None; slots];
        let mut next = vec![0usize; parent_count];
        for &(p, lo, hi) in groups {
            let first = ptr[p / SLICE] as usize + p % SLICE;
            super::dense::split_runs(&coords[0], lo, hi, |c, a, z| {
                let q = first + SLICE * next[p];
                idx[q] = c;
                entry[q] = Some((a, z));
                next[p] += 1;
            });
        }
        let out = (entry.iter().enumerate())
            .filter_map(|(q, e)| e.map(|(a, z)| (q, a, z)))
            .collect();
        let pos = kind.coord().pos_elem();
        bufs[PTR] = int_buf(pos, ptr);
        bufs[LEN] = int_buf(pos, len);
        bufs[IDX] = int_buf(kind.coord().elem(), idx);
        (slots, out)
    }

    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        super::shared::declare_to_fill(l, init)?;
        let mut code = super::shared::fits_i32(cx, l, "a dimension", l.dim(0));
        code.extend(super::shared::zero_ptr(
            l.buf(PTR),
            slices_of(count.clone()),
        ));
        code.extend(zero(l.buf(LEN), b::int(0), count));
        code.extend([
            b::assign(l.state(TOP), b::int(0)),
            b::assign(l.state(PREV), b::int(-1)),
        ]);
        code.extend(l.child_impl().declare(cx, &l.child(), b::int(0), init)?);
        Ok(code)
    }
    /// Fibers `lo..hi` exist and are empty, and so are the slices that start at or after
    /// `lo` (a sparse ancestor retrying positions from `lo` on recorded nothing under them,
    /// so those slices hold no row yet; zeroing them only clears what an earlier use of the
    /// buffer left).
    fn assemble(&self, _: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        let ptr = l.buf(PTR);
        let mut code = zero(l.buf(LEN), lo.clone(), hi.clone()).to_vec();
        let end = b::add(slices_of(hi), b::int(1));
        code.push(Stmt::Grow {
            buf: ptr,
            len: end.clone(),
        });
        code.push(Stmt::Fill {
            buf: ptr,
            start: b::add(slices_of(lo.clone()), b::int(1)),
            stop: end,
            value: b::int(0),
        });
        code.extend(super::shared::reopen_from(l.state(PREV), lo));
        Ok(code)
    }
    fn freeze(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        let ptr = l.buf(PTR);
        let n = slices_of(count);
        let mut code = super::shared::fits_i32(cx, l, "a stored count", b::var(l.state(TOP)));
        code.push(super::shared::prefix_sum(cx, ptr, n.clone()));
        let (child, slots) = l.child_impl().freeze(cx, &l.child(), b::load(ptr, n))?;
        code.extend(child);
        Ok((code, slots))
    }

    /// Every protocol reads by the walk: a strided seek gains nothing over it.
    fn unfurl_read(&self, cx: &mut Cx, f: &Fiber, _: Option<Protocol>) -> Result<Looplet> {
        let t = &f.tensor;
        let bufs = &t.level_bufs[f.level];
        let (ptr, len, idx) = (bufs[PTR], bufs[LEN], bufs[IDX]);
        let q = cx.var(&format!("{}_q", t.name), ElemType::I64);
        let q_stop = cx.var(&format!("{}_q_stop", t.name), ElemType::I64);
        let last = cx.var(&format!("{}_last", t.name), ElemType::I64);
        let preamble = vec![
            b::assign(q, first_slot(ptr, &f.pos)),
            b::assign(
                q_stop,
                b::add(
                    b::var(q),
                    b::mul(b::int(SLICE as i64), b::load(len, f.pos.clone())),
                ),
            ),
            b::assign(last, b::int(-1)),
            Stmt::If {
                cond: b::lt(b::var(q), b::var(q_stop)),
                then: vec![b::assign(
                    last,
                    b::load(idx, b::sub(b::var(q_stop), b::int(SLICE as i64))),
                )],
                otherwise: vec![],
            },
        ];
        let step = b::assign(q, b::add(b::var(q), b::int(SLICE as i64)));
        let fill = Target::Fill(t.fill);
        let stop = b::load(idx, b::var(q));
        let seek_step = step.clone();
        let stepper = Stepper {
            // A fiber's entries are 8 slots apart, so the seek walks them (the fibers this
            // format is for hold a few entries each).
            seek: Rc::new(move |start: &Expr| {
                if *start == b::int(0) {
                    return vec![];
                }
                vec![Stmt::While {
                    cond: b::lt(b::var(q), b::var(q_stop)),
                    body: vec![
                        Stmt::If {
                            cond: b::le(start.clone(), b::load(idx, b::var(q))),
                            then: vec![Stmt::Break],
                            otherwise: vec![],
                        },
                        seek_step.clone(),
                    ],
                }]
            }),
            stop: stop.clone(),
            chunk: Looplet::Spike {
                at: stop,
                body: Box::new(fill.clone()),
                tail: Box::new(Target::Fiber(f.child(b::var(q)))),
            },
            next: vec![step],
            positions: Some(Positions {
                first: b::var(q),
                end: b::var(q_stop),
                last: b::var(last),
                bound: b::sub(t.dim_of_level(f.level, 0), b::int(1)),
                coords: idx,
                stride: SLICE as i64,
            }),
            within: None,
        };
        Ok(super::shared::chunks_then_fill(
            preamble,
            stepper,
            None,
            b::var(last),
            fill,
        ))
    }

    fn unfurl_update(&self, cx: &mut Cx, f: &Fiber) -> Result<Looplet> {
        let t = f.tensor.clone();
        let l = LevelRef {
            tensor: &t,
            level: f.level,
        };
        let (ptr, len, idx) = (l.buf(PTR), l.buf(LEN), l.buf(IDX));
        let (top, prev) = (l.state(TOP), l.state(PREV));
        let name = &t.name;
        let base = cx.var(&format!("{name}_slice_base"), ElemType::I64);
        let slot = cx.var(&format!("{name}_slot"), ElemType::I64);
        let row = cx.var(&format!("{name}_row"), ElemType::I64);
        let dirty = cx.var(&format!("{name}_dirty"), ElemType::Bool);
        let order = |order| {
            KernelError::new(
                name,
                KernelErrorKind::OutOfOrder {
                    level: "SparseSliceList",
                    order,
                },
            )
        };
        let (fiber_order, coord_order) = (
            cx.error(order(Order::Fibers)),
            cx.error(order(Order::Entries)),
        );
        let pos = f.pos.clone();
        let size_at = b::add(slice(&pos), b::int(1));
        let size = move || b::load(ptr, size_at.clone());
        // The slices before this fiber's are complete (fibers come in order, checked at each
        // commit), so its slice starts where the slots in use end, less what it holds already.
        let fiber_pre = vec![b::assign(base, b::sub(b::var(top), size()))];
        let count = b::load(len, pos.clone());
        // A fiber before the last one written cannot take entries (the commit fails), and its
        // slice's start is not known: its child is assembled in the unused slot `top`, so that
        // a visit that writes nothing leaves the stored slots alone.
        let mut point_pre = vec![
            b::assign(
                slot,
                b::select(
                    b::lt(pos.clone(), b::var(prev)),
                    b::var(top),
                    b::add(
                        b::add(b::var(base), lane(&pos)),
                        b::mul(b::int(SLICE as i64), count.clone()),
                    ),
                ),
            ),
            Stmt::Grow {
                buf: idx,
                len: b::add(b::var(slot), b::int(1)),
            },
        ];
        let child_impl = l.child_impl();
        point_pre.extend(child_impl.assemble(
            cx,
            &l.child(),
            b::var(slot),
            b::add(b::var(slot), b::int(1)),
        )?);
        point_pre.push(b::assign(dirty, b::boolean(false)));
        // A new row of the slice: its other 7 slots become padding (coordinate 0, fill).
        let row_end = b::add(b::var(row), b::int(SLICE as i64));
        let mut new_row = vec![
            b::assign(row, b::add(b::var(base), size())),
            Stmt::Grow {
                buf: idx,
                len: row_end.clone(),
            },
        ];
        new_row.extend(zero(idx, b::var(row), b::var(slot)));
        new_row.extend(zero(idx, b::add(b::var(slot), b::int(1)), row_end.clone()));
        new_row.extend(child_impl.assemble(cx, &l.child(), b::var(row), b::var(slot))?);
        new_row.extend(child_impl.assemble(
            cx,
            &l.child(),
            b::add(b::var(slot), b::int(1)),
            row_end,
        )?);
        new_row.push(b::store(
            ptr,
            b::add(slice(&pos), b::int(1)),
            b::add(size(), b::int(SLICE as i64)),
        ));
        new_row.push(b::assign(top, b::add(b::var(base), size())));
        let mut child = f.child(b::var(slot));
        child.dirty = Some(dirty);
        let parent_dirty = f.dirty;
        let lookup = Looplet::Lookup(Rc::new(move |i: &Expr| {
            let mut commit = vec![
                Stmt::If {
                    cond: b::lt(pos.clone(), b::var(prev)),
                    then: vec![Stmt::Fail(fiber_order)],
                    otherwise: vec![],
                },
                b::assign(prev, pos.clone()),
                Stmt::If {
                    cond: b::lt(b::int(0), count.clone()),
                    then: b::if_(
                        b::le(
                            i.clone(),
                            b::load(idx, b::sub(b::var(slot), b::int(SLICE as i64))),
                        ),
                        vec![Stmt::Fail(coord_order)],
                    ),
                    otherwise: vec![],
                },
                b::store(idx, b::var(slot), i.clone()),
                b::store(len, pos.clone(), b::add(count.clone(), b::int(1))),
            ];
            commit.extend(b::if_(
                b::lt(size(), b::mul(b::int(SLICE as i64), count.clone())),
                new_row.clone(),
            ));
            if let Some(d) = parent_dirty {
                commit.push(b::assign(d, b::boolean(true)));
            }
            Target::Looplet(Looplet::Thunk {
                preamble: point_pre.clone(),
                body: Box::new(Target::Fiber(child.clone())),
                epilogue: b::if_(b::var(dirty), commit),
            })
        }));
        Ok(Looplet::Thunk {
            preamble: fiber_pre,
            body: Box::new(Target::Looplet(lookup)),
            epilogue: vec![],
        })
    }
}

/// `buf[lo..hi] = 0` after growing it to `hi`.
fn zero(buf: crate::ir::BufId, lo: Expr, hi: Expr) -> [Stmt; 2] {
    [
        Stmt::Grow {
            buf,
            len: hi.clone(),
        },
        Stmt::Fill {
            buf,
            start: lo,
            stop: hi,
            value: b::int(0),
        },
    ]
}

/// The slice of parent position `pos`.
fn slice(pos: &Expr) -> Expr {
    b::bin(BinOp::Div, pos.clone(), b::int(SLICE as i64))
}

/// The lane of parent position `pos` in its slice.
fn lane(pos: &Expr) -> Expr {
    b::bin(BinOp::Rem, pos.clone(), b::int(SLICE as i64))
}

/// The slot of entry 0 of fiber `pos` (a frozen level: `ptr` holds offsets).
fn first_slot(ptr: crate::ir::BufId, pos: &Expr) -> Expr {
    b::add(b::load(ptr, slice(pos)), lane(pos))
}
