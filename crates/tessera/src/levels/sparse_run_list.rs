//! `SparseRunList` (Finch's SparseRunList, formerly SparseRLE): the runs of fiber `p` are
//! `ptr[p]..ptr[p+1]`; run `q` covers `left[q]..=right[q]`, runs are disjoint and increasing,
//! and the gaps between them are fill. Child position = run number.
//!
//! Reads: a stepper over the runs whose chunk is a fill phase up to `left[q] - 1` followed by
//! `Run(child(q))` (a jumper with the `gallop` protocol), then a fill phase after the last run.
//! Writes: `AcceptRun`, one run per written extent, recorded only if its child was written;
//! while a kernel writes the level `ptr[p+1]` holds the count of fiber `p`, as in SparseList.
//! Unlike SparseList, a leaf written with the fill value records no run.
//! Contiguous runs with equal sub-fibers are merged by the runtime after the kernel when
//! `merge` is on (the default).

use super::registry::{self, Args, Arity, Caps, LevelSpec, Param, Role};
use super::{Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::{Cx, KernelError, KernelErrorKind, Order};
use crate::ir::{Expr, Stmt, build as b};
use crate::looplets::{Fiber, Looplet, Phase, Stepper, Target};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use std::rc::Rc;

pub struct SparseRunList;

pub const SPEC: LevelSpec = LevelSpec {
    name: "SparseRunList",
    role: Role::Level,
    arity: Arity::Fixed(1),
    params: &[Param::Flag {
        key: "merge",
        default: true,
    }],
    protocols: &[Protocol::Gallop, Protocol::Follow],
    caps: Caps {
        sparse: true,
        merges_runs: true,
        reopen: true,
        ..Caps::LEVEL
    },
    is: |k| matches!(k, LevelKind::SparseRunList { .. }),
    make: |a| LevelKind::SparseRunList {
        merge: a.flag("merge"),
    },
    args: |k| Args {
        flags: vec![(
            "merge",
            matches!(k, LevelKind::SparseRunList { merge: true }),
        )],
        ..Args::default()
    },
    check_below: registry::any_below,
    imp: &SparseRunList,
};

const PTR: usize = 0;
const LEFT: usize = 1;
const RIGHT: usize = 2;
const QOS: usize = 0;
const PREV: usize = 1;

impl Level for SparseRunList {
    fn buffers(&self, _: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        vec![
            ("ptr", ElemType::I64),
            ("left", ElemType::I64),
            ("right", ElemType::I64),
        ]
    }
    fn state(&self, _: &LevelKind) -> Vec<(&'static str, ElemType)> {
        vec![("qos", ElemType::I64), ("prev", ElemType::I64)]
    }

    fn validate(
        &self,
        _: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        let (ptr, left, right) = (i64s(&bufs[PTR]), i64s(&bufs[LEFT]), i64s(&bufs[RIGHT]));
        let n = dims[0] as i64;
        super::shared::check_ptr_shape(ptr, parent_count)?;
        for p in 0..parent_count {
            let (lo, hi) = (ptr[p], ptr[p + 1]);
            if hi < lo || hi as usize > left.len() || hi as usize > right.len() {
                return Err(format!(
                    "ptr[{}] = {hi} is out of order or past the end of left/right",
                    p + 1
                ));
            }
            let mut start = 0;
            for q in lo as usize..hi as usize {
                if left[q] < start || right[q] < left[q] || right[q] >= n {
                    return Err(format!(
                        "run {q} = {}..={} is empty, outside 0..{n} or overlaps the previous run",
                        left[q], right[q]
                    ));
                }
                start = right[q] + 1;
            }
        }
        Ok(ptr[parent_count] as usize)
    }
    fn finish(
        &self,
        _: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        bufs[PTR].truncate(parent_count + 1);
        let n = i64s(&bufs[PTR])[parent_count] as usize;
        bufs[LEFT].truncate(n);
        bufs[RIGHT].truncate(n);
        n
    }
    fn empty(&self, _: &LevelKind, bufs: &mut [Buffer], _: &[usize], parent_count: usize) -> usize {
        bufs[PTR] = Buffer::I64(vec![0; parent_count + 1]);
        bufs[LEFT] = Buffer::I64(vec![]);
        bufs[RIGHT] = Buffer::I64(vec![]);
        0
    }

    fn for_each_child(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        pos: usize,
        f: &mut dyn FnMut(&[usize], usize),
    ) {
        self.for_each_run(kind, bufs, dims, pos, &mut |lo, hi, q| {
            for c in lo..=hi {
                f(&[c], q);
            }
        });
    }
    fn for_each_run(
        &self,
        _: &LevelKind,
        bufs: &[Buffer],
        _: &[usize],
        pos: usize,
        f: &mut dyn FnMut(usize, usize, usize),
    ) {
        let (ptr, left, right) = (i64s(&bufs[PTR]), i64s(&bufs[LEFT]), i64s(&bufs[RIGHT]));
        for q in ptr[pos] as usize..ptr[pos + 1] as usize {
            f(left[q] as usize, right[q] as usize, q);
        }
    }
    fn remap(
        &self,
        _: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        map: &[Option<usize>],
    ) -> Vec<Option<usize>> {
        let (ptr, left, right) = (i64s(&bufs[PTR]), i64s(&bufs[LEFT]), i64s(&bufs[RIGHT]));
        let mut new_ptr = vec![0i64];
        let (mut new_left, mut new_right) = (vec![], vec![]);
        let mut child = vec![];
        for m in map {
            if let Some(p) = *m {
                for q in ptr[p] as usize..ptr[p + 1] as usize {
                    new_left.push(left[q]);
                    new_right.push(right[q]);
                    child.push(Some(q));
                }
            }
            new_ptr.push(child.len() as i64);
        }
        bufs[PTR] = Buffer::I64(new_ptr);
        bufs[LEFT] = Buffer::I64(new_left);
        bufs[RIGHT] = Buffer::I64(new_right);
        child
    }
    fn merge_runs(
        &self,
        _: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
        equal: &mut dyn FnMut(usize, usize) -> bool,
    ) -> Option<Vec<Option<usize>>> {
        let (ptr, left, right) = (i64s(&bufs[PTR]), i64s(&bufs[LEFT]), i64s(&bufs[RIGHT]));
        let mut new_ptr = vec![0i64];
        let (mut new_left, mut new_right): (Vec<i64>, Vec<i64>) = (vec![], vec![]);
        let mut kept: Vec<Option<usize>> = vec![];
        for p in 0..parent_count {
            let (lo, hi) = (ptr[p] as usize, ptr[p + 1] as usize);
            for q in lo..hi {
                match (kept.last(), new_right.last_mut()) {
                    (Some(&Some(k)), Some(r)) if q > lo && *r + 1 == left[q] && equal(k, q) => {
                        *r = right[q];
                    }
                    _ => {
                        new_left.push(left[q]);
                        new_right.push(right[q]);
                        kept.push(Some(q));
                    }
                }
            }
            new_ptr.push(new_right.len() as i64);
        }
        if kept.len() == right.len() {
            return None;
        }
        bufs[PTR] = Buffer::I64(new_ptr);
        bufs[LEFT] = Buffer::I64(new_left);
        bufs[RIGHT] = Buffer::I64(new_right);
        Some(kept)
    }
    /// One run per distinct coordinate; contiguous equal runs are merged afterwards by the
    /// tensor (values are only known once the leaves are built).
    fn build(
        &self,
        _: &LevelKind,
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
        bufs[PTR] = Buffer::I64(ptr);
        bufs[LEFT] = Buffer::I64(idx.clone());
        bufs[RIGHT] = Buffer::I64(idx);
        (n, out)
    }

    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        super::shared::declare_to_fill(l, init)?;
        let ptr = l.buf(PTR);
        let mut code = super::shared::zero_ptr(ptr, count).to_vec();
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
        let mut code = vec![super::shared::prefix_sum(cx, ptr, count.clone())];
        let (child, n) = l.child_impl().freeze(cx, &l.child(), b::load(ptr, count))?;
        code.extend(child);
        Ok((code, n))
    }
    /// Finch's thaw: new runs append after the stored ones (see `shared::thaw_counted`).
    fn thaw(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        let qos = l.state(QOS);
        let mut code = super::shared::thaw_counted(cx, l.buf(PTR), qos, Some(l.state(PREV)), count);
        let (child, n) = l.child_impl().thaw(cx, &l.child(), b::var(qos))?;
        code.extend(child);
        Ok((code, n))
    }

    fn unfurl_read(&self, cx: &mut Cx, f: &Fiber, protocol: Option<Protocol>) -> Result<Looplet> {
        let t = &f.tensor;
        let bufs = &t.level_bufs[f.level];
        let (ptr, left, right) = (bufs[PTR], bufs[LEFT], bufs[RIGHT]);
        let q = cx.var(&format!("{}_q", t.name), ElemType::I64);
        let q_stop = cx.var(&format!("{}_q_stop", t.name), ElemType::I64);
        if protocol == Some(Protocol::Follow) {
            // The first run ending at or after `i` holds it unless it starts later.
            let f2 = f.clone();
            return Ok(super::shared::follow_by_search(
                cx,
                &t.name,
                vec![
                    b::assign(q, b::load(ptr, f.pos.clone())),
                    b::assign(q_stop, b::load(ptr, b::add(f.pos.clone(), b::int(1)))),
                ],
                right,
                b::var(q),
                b::var(q_stop),
                Rc::new(move |q: &Expr, i: &Expr| b::le(b::load(left, q.clone()), i.clone())),
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
                    b::load(right, b::sub(b::var(q_stop), b::int(1))),
                )],
                otherwise: vec![],
            },
        ];
        let fill = Target::Fill(t.fill);
        let stop = b::load(right, b::var(q));
        // A chunk ends at the end of run q: fill before the run starts, then the run.
        let chunk = Looplet::Sequence(vec![
            Phase {
                stop: Some(b::sub(b::load(left, b::var(q)), b::int(1))),
                body: Looplet::Run(Box::new(fill.clone())),
            },
            Phase {
                stop: None,
                body: Looplet::Run(Box::new(Target::Fiber(f.child(b::var(q))))),
            },
        ]);
        let stepper = Stepper {
            seek: Rc::new(move |start: &Expr| {
                if *start == b::int(0) {
                    return vec![];
                }
                vec![b::assign(
                    q,
                    Expr::SearchGe {
                        buf: right,
                        lo: Box::new(b::var(q)),
                        hi: Box::new(b::var(q_stop)),
                        key: Box::new(start.clone()),
                    },
                )]
            }),
            stop: stop.clone(),
            chunk,
            next: vec![b::assign(q, b::add(b::var(q), b::int(1)))],
            positions: None,
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
        let l = LevelRef {
            tensor: &t,
            level: f.level,
        };
        let (ptr, left, right) = (l.buf(PTR), l.buf(LEFT), l.buf(RIGHT));
        let (qos, prev) = (l.state(QOS), l.state(PREV));
        let start = cx.var(&format!("{}_qos_start", t.name), ElemType::I64);
        let dirty = cx.var(&format!("{}_dirty", t.name), ElemType::Bool);
        let run_order = cx.error(KernelError::new(
            &t.name,
            KernelErrorKind::OutOfOrder {
                level: "SparseRunList",
                order: Order::Runs,
            },
        ));
        let pos = f.pos.clone();
        let fiber = super::shared::counted_fiber(
            cx,
            "SparseRunList",
            &t.name,
            ptr,
            qos,
            prev,
            start,
            pos.clone(),
        );
        let mut alloc = vec![
            Stmt::Grow {
                buf: left,
                len: b::add(b::var(qos), b::int(1)),
            },
            Stmt::Grow {
                buf: right,
                len: b::add(b::var(qos), b::int(1)),
            },
        ];
        alloc.extend(l.child_impl().assemble(
            cx,
            &l.child(),
            b::var(qos),
            b::add(b::var(qos), b::int(1)),
        )?);
        alloc.push(b::assign(dirty, b::boolean(false)));
        let mut child = f.child(b::var(qos));
        child.dirty = Some(dirty);
        let parent_dirty = f.dirty;
        // With an Element leaf, a run written with the fill value is not recorded: the gap
        // already holds fill (a copy from a run list stores its real runs only).
        let record = match &t.format.levels[f.level + 1] {
            LevelKind::Element(_) => b::and(
                b::var(dirty),
                b::not(super::sparse_interval::same_value(
                    b::load(t.level_bufs[f.level + 1][0], b::var(qos)),
                    Expr::Const(t.fill.widen()),
                    t.elem.class(),
                )),
            ),
            _ => b::var(dirty),
        };
        let fiber_commit = fiber.commit.clone();
        let accept = Looplet::AcceptRun(Rc::new(move |a: &Expr, z: &Expr| {
            let prev_right = b::load(right, b::sub(b::var(qos), b::int(1)));
            // (Nested: the previous run is only loaded when the fiber has one.)
            let mut commit = fiber_commit.clone();
            commit.push(Stmt::If {
                cond: b::lt(b::var(start), b::var(qos)),
                then: b::if_(b::le(a.clone(), prev_right), vec![Stmt::Fail(run_order)]),
                otherwise: vec![],
            });
            commit.extend([
                b::store(left, b::var(qos), a.clone()),
                b::store(right, b::var(qos), z.clone()),
                b::assign(qos, b::add(b::var(qos), b::int(1))),
            ]);
            if let Some(d) = parent_dirty {
                commit.push(b::assign(d, b::boolean(true)));
            }
            Target::Looplet(Looplet::Thunk {
                preamble: alloc.clone(),
                body: Box::new(Target::Fiber(child.clone())),
                epilogue: b::if_(record.clone(), commit),
            })
        }));
        Ok(Looplet::Thunk {
            preamble: fiber.preamble,
            body: Box::new(Target::Looplet(accept)),
            epilogue: fiber.epilogue,
        })
    }
}

fn i64s(b: &Buffer) -> &[i64] {
    b.as_i64().expect("SparseRunList buffers are i64")
}
