//! `SparseList`: the stored coordinates of fiber `p` are `idx[ptr[p]..ptr[p+1]]`, strictly
//! increasing; child positions are entry positions (CSR's compressed level).
//!
//! While being updated `ptr[p+1]` holds the count of fiber `p`; freeze turns counts into
//! offsets. Writes must come in increasing coordinate order within a fiber and fibers in
//! increasing position order; anything else is a runtime error, never corrupt storage. After
//! a read, a thaw reopens the level for appending after its last stored entry.

use super::real;
use super::registry::{self, Args, Arity, Caps, LevelSpec, Param, Role};
use super::shared::{int_at, int_buf, int_range, ints};
use super::{Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::{Cx, KernelError, KernelErrorKind, Order};
use crate::ir::{Expr, Stmt, build as b};
use crate::limit::Limit;
use crate::looplets::{Fiber, Looplet, Positions, Stepper, Target};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};

/// Check `ptr` (`parent_count + 1` offsets from 0) and each fiber's coordinates in `idx`
/// (strictly increasing, inside `0..dim`); the child count.
fn check_fibers<P: Copy + Into<i64>, I: Copy + Into<i64>>(
    ptr: &[P],
    idx: &[I],
    parent_count: usize,
    dim: usize,
) -> std::result::Result<usize, String> {
    if ptr.len() != parent_count + 1 {
        return Err(format!(
            "ptr has {} entries, expected {}",
            ptr.len(),
            parent_count + 1
        ));
    }
    let at = |p: usize| -> i64 { ptr[p].into() };
    if at(0) != 0 {
        return Err("ptr[0] must be 0".into());
    }
    for p in 0..parent_count {
        let (lo, hi) = (at(p), at(p + 1));
        if hi < lo || hi as usize > idx.len() {
            return Err(format!(
                "ptr[{}] = {hi} is out of order or past the end of idx",
                p + 1
            ));
        }
        let mut prev = -1i64;
        for (q, &x) in idx.iter().enumerate().take(hi as usize).skip(lo as usize) {
            let x: i64 = x.into();
            if x < 0 || x as usize >= dim {
                return Err(format!("idx[{q}] = {x} is outside 0..{dim}"));
            }
            if x <= prev {
                return Err(format!(
                    "idx[{q}] = {x} is not above idx[{}] = {prev}",
                    q - 1
                ));
            }
            prev = x;
        }
    }
    Ok(at(parent_count) as usize)
}
use std::rc::Rc;

pub struct SparseList;

pub const SPEC: LevelSpec = LevelSpec {
    name: "SparseList",
    role: Role::Level,
    arity: Arity::Fixed(1),
    params: &[Param::Coord],
    protocols: &[Protocol::Gallop, Protocol::Follow],
    caps: Caps {
        sparse: true,
        reopen: true,
        ..Caps::LEVEL
    },
    is: |k| matches!(k, LevelKind::SparseList { .. }),
    make: |a| LevelKind::SparseList { coord: a.coord },
    args: |k| match k {
        LevelKind::SparseList { coord } => Args {
            coord: *coord,
            ..Args::default()
        },
        _ => Args::default(),
    },
    check_below: registry::any_below,
    imp: &SparseList,
};

const PTR: usize = 0;
const IDX: usize = 1;
const QOS: usize = 0;
const PREV: usize = 1;

impl Level for SparseList {
    fn buffers(&self, kind: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        vec![("ptr", kind.coord().pos_elem()), ("idx", coord_type(kind))]
    }
    fn state(&self, _: &LevelKind) -> Vec<(&'static str, ElemType)> {
        vec![("qos", ElemType::I64), ("prev", ElemType::I64)]
    }
    fn coordinates(&self, kind: &LevelKind) -> Vec<(usize, usize)> {
        match kind.is_real() {
            true => vec![],
            false => vec![(IDX, 0)],
        }
    }
    fn positions(&self, _kind: &LevelKind) -> Vec<usize> {
        vec![PTR]
    }
    /// Fibers share only `qos` (the next entry), `prev` (the fiber order) and the entry arrays
    /// `idx` and the leaf's: `ptr[p + 1]` holds fiber `p`'s own count until the freeze, so
    /// fibers written by different chunks touch different elements of it.
    fn appends_rows(&self, kind: &LevelKind, child: &LevelKind) -> bool {
        !kind.is_real() && child.is_leaf()
    }
    fn appends(&self, l: &LevelRef) -> Option<crate::ir::Rows> {
        let leaf = l.tensor.level_bufs.get(l.level + 1)?;
        let mut arrays = vec![l.buf(IDX)];
        arrays.extend(leaf.iter().copied());
        Some(crate::ir::Rows {
            cursor: l.state(QOS),
            last: Some(l.state(PREV)),
            arrays,
        })
    }
    /// `ptr[p + 1]` holds fiber `p`'s count until the freeze (`shared::counted_fiber`).
    fn fiber_counts(&self, l: &LevelRef) -> Option<crate::ir::BufId> {
        Some(l.buf(PTR))
    }

    fn validate(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        if kind.is_real() {
            let idx = real::f64s(&bufs[IDX]);
            let point = |q: usize| (real::limit(idx[q], 0), real::limit(idx[q], 0));
            return real::check_fibers(&ints(&bufs[PTR]), parent_count, idx.len(), &point);
        }
        // Read in place at either width: widening a shared 10⁷-entry index array to check it
        // would cost what sharing it saved.
        match (&bufs[PTR], &bufs[IDX]) {
            (Buffer::I32(p), Buffer::I32(i)) => check_fibers(p, i, parent_count, dims[0]),
            (Buffer::I64(p), Buffer::I64(i)) => check_fibers(p, i, parent_count, dims[0]),
            (Buffer::I32(p), Buffer::I64(i)) => check_fibers(p, i, parent_count, dims[0]),
            (Buffer::I64(p), Buffer::I32(i)) => check_fibers(p, i, parent_count, dims[0]),
            (p, i) => Err(format!(
                "ptr and idx must be i64 or i32 arrays, not {} and {}",
                p.elem(),
                i.elem()
            )),
        }
    }
    fn finish(
        &self,
        _: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        bufs[PTR].truncate(parent_count + 1);
        let n = int_at(&bufs[PTR], parent_count) as usize;
        bufs[IDX].truncate(n);
        n
    }
    fn empty(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        bufs[PTR] = int_buf(kind.coord().pos_elem(), vec![0; parent_count + 1]);
        bufs[IDX] = Buffer::new(coord_type(kind));
        0
    }

    fn for_each_child(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        _: &[usize],
        pos: usize,
        f: &mut dyn FnMut(&[usize], usize),
    ) {
        if kind.is_real() {
            return;
        }
        let (lo, hi) = (
            int_at(&bufs[PTR], pos) as usize,
            int_at(&bufs[PTR], pos + 1) as usize,
        );
        for (k, &i) in int_range(&bufs[IDX], lo, hi).iter().enumerate() {
            f(&[i as usize], lo + k);
        }
    }
    fn remap(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        map: &[Option<usize>],
    ) -> Vec<Option<usize>> {
        let (ptr, idx) = (ints(&bufs[PTR]), &bufs[IDX]);
        let mut new_ptr = vec![0i64];
        let mut new_idx = Buffer::new(coord_type(kind));
        let mut child = vec![];
        for m in map {
            if let Some(p) = *m {
                let (lo, hi) = (ptr[p] as usize, ptr[p + 1] as usize);
                for q in lo..hi {
                    new_idx.push(idx.get(q));
                }
                child.extend((lo..hi).map(Some));
            }
            new_ptr.push(new_idx.len() as i64);
        }
        bufs[PTR] = int_buf(kind.coord().pos_elem(), new_ptr);
        bufs[IDX] = new_idx;
        child
    }
    fn for_each_piece(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        pos: usize,
        f: &mut dyn FnMut(Limit<f64>, Limit<f64>, usize),
    ) {
        if !kind.is_real() {
            return;
        }
        let (ptr, idx) = (ints(&bufs[PTR]), real::f64s(&bufs[IDX]));
        let (lo, hi) = (ptr[pos] as usize, ptr[pos + 1] as usize);
        for (q, &x) in idx.iter().enumerate().take(hi).skip(lo) {
            f(real::limit(x, 0), real::limit(x, 0), q);
        }
    }
    fn build_pieces(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        parent_count: usize,
        groups: &[(usize, usize, usize)],
        pieces: &[(Limit<f64>, Limit<f64>)],
    ) -> std::result::Result<super::Built, String> {
        if !kind.is_real() {
            return Err(real::integer_level("SparseList"));
        }
        let mut idx = vec![];
        let (ptr, out) = real::counted_pieces(parent_count, groups, pieces, &mut |a, z| {
            idx.push(real::pinpoint("SparseList", a, z)?);
            Ok(())
        })?;
        let n = idx.len();
        bufs[PTR] = Buffer::I64(ptr.into());
        bufs[IDX] = Buffer::F64(idx.into());
        Ok((n, out))
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
        let mut ptr = vec![0i64; parent_count + 1];
        let mut idx = vec![];
        let mut out = vec![];
        for &(p, lo, hi) in groups {
            super::dense::split_runs(&coords[0], lo, hi, |c, a, z| {
                out.push((idx.len(), a, z));
                idx.push(c);
                ptr[p + 1] += 1;
            });
        }
        for p in 1..=parent_count {
            ptr[p] += ptr[p - 1];
        }
        let n = idx.len();
        bufs[PTR] = int_buf(kind.coord().pos_elem(), ptr);
        bufs[IDX] = int_buf(coord_type(kind), idx);
        (n, out)
    }

    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        super::shared::declare_to_fill(l, init)?;
        let ptr = l.buf(PTR);
        let mut code = super::shared::fits_i32(cx, l, "a dimension", l.dim(0));
        code.extend(super::shared::zero_ptr(ptr, count));
        code.extend([
            b::assign(l.state(QOS), b::int(0)),
            b::assign(l.state(PREV), b::int(-1)),
        ]);
        code.extend(l.child_impl().declare(cx, &l.child(), b::int(0), init)?);
        Ok(code)
    }
    fn assemble(&self, _: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        Ok(super::shared::assemble_counted(
            l.buf(PTR),
            l.state(PREV),
            lo,
            hi,
        ))
    }
    fn freeze(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        let ptr = l.buf(PTR);
        // Every fiber's count is at most the total (`qos`), so if that fits nothing wrapped.
        let mut code = super::shared::fits_i32(cx, l, "a stored count", b::var(l.state(QOS)));
        code.push(super::shared::prefix_sum(cx, ptr, count.clone()));
        let (child, n) = l.child_impl().freeze(cx, &l.child(), b::load(ptr, count))?;
        code.extend(child);
        Ok((code, n))
    }
    /// Finch's thaw: new entries append after the stored ones (see `shared::thaw_counted`).
    fn thaw(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        let qos = l.state(QOS);
        let mut code = super::shared::thaw_counted(cx, l.buf(PTR), qos, Some(l.state(PREV)), count);
        let (child, n) = l.child_impl().thaw(cx, &l.child(), b::var(qos))?;
        code.extend(child);
        Ok((code, n))
    }

    fn unfurl_read(&self, cx: &mut Cx, f: &Fiber, protocol: Option<Protocol>) -> Result<Looplet> {
        let t = &f.tensor;
        if t.format.levels[f.level].is_real() {
            let (ptr, idx) = (t.level_bufs[f.level][PTR], t.level_bufs[f.level][IDX]);
            let ends = real::Ends {
                lo: (idx, None),
                hi: (idx, None),
            };
            return Ok(real::unfurl_pieces(cx, f, ptr, ends, protocol));
        }
        let (ptr, idx) = (t.level_bufs[f.level][PTR], t.level_bufs[f.level][IDX]);
        let q = cx.var(&format!("{}_q", t.name), ElemType::I64);
        let q_stop = cx.var(&format!("{}_q_stop", t.name), ElemType::I64);
        if protocol == Some(Protocol::Follow) {
            let f2 = f.clone();
            return Ok(super::shared::follow_by_search(
                cx,
                &t.name,
                vec![
                    b::assign(q, b::load(ptr, f.pos.clone())),
                    b::assign(q_stop, b::load(ptr, b::add(f.pos.clone(), b::int(1)))),
                ],
                idx,
                b::var(q),
                b::var(q_stop),
                Rc::new(move |q: &Expr, i: &Expr| b::eq(b::load(idx, q.clone()), i.clone())),
                Rc::new(move |q: &Expr, _: &Expr| Target::Fiber(f2.child(q.clone()))),
                Target::Fill(t.fill),
            ));
        }
        let last = cx.var(&format!("{}_last", t.name), ElemType::I64);
        let preamble = vec![
            b::assign(q, b::load(ptr, f.pos.clone())),
            b::assign(q_stop, b::load(ptr, b::add(f.pos.clone(), b::int(1)))),
            b::assign(last, b::int(-1)),
            Stmt::If {
                cond: b::lt(b::var(q), b::var(q_stop)),
                then: vec![b::assign(
                    last,
                    b::load(idx, b::sub(b::var(q_stop), b::int(1))),
                )],
                otherwise: vec![],
            },
        ];
        let fill = Target::Fill(t.fill);
        let stop = b::load(idx, b::var(q));
        let stepper = Stepper {
            seek: Rc::new(move |start: &Expr| {
                // Every stored coordinate is >= 0, so a walk from 0 needs no search.
                if *start == b::int(0) {
                    return vec![];
                }
                vec![b::assign(
                    q,
                    Expr::SearchGe {
                        buf: idx,
                        lo: Box::new(b::var(q)),
                        hi: Box::new(b::var(q_stop)),
                        key: Box::new(start.clone()),
                    },
                )]
            }),
            stop: stop.clone(),
            chunk: Looplet::Spike {
                at: stop,
                body: Box::new(fill.clone()),
                tail: Box::new(Target::Fiber(f.child(b::var(q)))),
            },
            next: vec![b::assign(q, b::add(b::var(q), b::int(1)))],
            positions: Some(Positions {
                first: b::var(q),
                end: b::var(q_stop),
                last: b::var(last),
                bound: b::sub(t.dim_of_level(f.level, 0), b::int(1)),
                coords: idx,
                stride: 1,
            }),
            within: None,
        };
        Ok(super::shared::chunks_then_fill(
            preamble,
            stepper,
            protocol,
            b::var(last),
            fill,
        ))
    }

    fn unfurl_update(&self, cx: &mut Cx, f: &Fiber) -> Result<Looplet> {
        let t = f.tensor.clone();
        // Real pinpoints are written at the points of a real loop (a piece of positive length
        // with a value other than the fill cannot be a pinpoint: the lookup refuses it).
        let is_real = t.format.levels[f.level].is_real();
        let l = LevelRef {
            tensor: &t,
            level: f.level,
        };
        let (ptr, idx) = (l.buf(PTR), l.buf(IDX));
        let (qos, prev) = (l.state(QOS), l.state(PREV));
        let start = cx.var(&format!("{}_qos_start", t.name), ElemType::I64);
        let dirty = cx.var(&format!("{}_dirty", t.name), ElemType::Bool);
        let coord_order = cx.error(KernelError::new(
            &t.name,
            KernelErrorKind::OutOfOrder {
                level: "SparseList",
                order: Order::Entries,
            },
        ));
        let pos = f.pos.clone();
        let fiber = super::shared::counted_fiber(
            cx,
            "SparseList",
            &t.name,
            ptr,
            qos,
            prev,
            start,
            pos.clone(),
        );
        let mut point_pre = vec![Stmt::Grow {
            buf: idx,
            len: b::add(b::var(qos), b::int(1)),
        }];
        point_pre.extend(l.child_impl().assemble(
            cx,
            &l.child(),
            b::var(qos),
            b::add(b::var(qos), b::int(1)),
        )?);
        point_pre.push(b::assign(dirty, b::boolean(false)));
        let mut child = f.child(b::var(qos));
        child.dirty = Some(dirty);
        let parent_dirty = f.dirty;
        let fiber_commit = fiber.commit.clone();
        let lookup = Looplet::Lookup(Rc::new(move |i: &Expr| {
            let prev_idx = b::load(idx, b::sub(b::var(qos), b::int(1)));
            let (prev_idx, stored) = match is_real {
                true => (b::make_limit(prev_idx, b::int(0)), b::limit_val(i.clone())),
                false => (prev_idx, i.clone()),
            };
            let mut commit = fiber_commit.clone();
            commit.push(Stmt::If {
                cond: b::lt(b::var(start), b::var(qos)),
                then: b::if_(b::le(i.clone(), prev_idx), vec![Stmt::Fail(coord_order)]),
                otherwise: vec![],
            });
            commit.push(b::store(idx, b::var(qos), stored));
            commit.push(b::assign(qos, b::add(b::var(qos), b::int(1))));
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
            preamble: fiber.preamble,
            body: Box::new(Target::Looplet(lookup)),
            epilogue: fiber.epilogue,
        })
    }
}

/// The element type of the `idx` array.
fn coord_type(kind: &LevelKind) -> ElemType {
    kind.coord().elem()
}
