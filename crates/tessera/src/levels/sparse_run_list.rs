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

use super::real;
use super::registry::{self, Args, Arity, Caps, LevelSpec, Param, Role};
use super::shared::{int_at, int_buf, ints};
use super::{Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::{Cx, KernelError, KernelErrorKind, Order};
use crate::ir::{Expr, Stmt, build as b};
use crate::limit::Limit;
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
    params: &[
        Param::Flag {
            key: "merge",
            default: true,
        },
        Param::Coord,
    ],
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
        coord: a.coord,
    },
    args: |k| match k {
        LevelKind::SparseRunList { merge, coord } => Args {
            flags: vec![("merge", *merge)],
            coord: *coord,
            ..Args::default()
        },
        _ => Args::default(),
    },
    check_below: registry::any_below,
    imp: &SparseRunList,
};

const PTR: usize = 0;
const LEFT: usize = 1;
const RIGHT: usize = 2;
const LEFT_EPS: usize = 3;
const RIGHT_EPS: usize = 4;
const QOS: usize = 0;
const PREV: usize = 1;

impl Level for SparseRunList {
    fn buffers(&self, kind: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        if kind.is_real() {
            // The endpoints' values, then their infinitesimal signs (see `levels::real`).
            return vec![
                ("ptr", kind.coord().pos_elem()),
                ("left", ElemType::F64),
                ("right", ElemType::F64),
                ("left_eps", ElemType::I8),
                ("right_eps", ElemType::I8),
            ];
        }
        vec![
            ("ptr", kind.coord().pos_elem()),
            ("left", kind.coord().elem()),
            ("right", kind.coord().elem()),
        ]
    }
    fn state(&self, _: &LevelKind) -> Vec<(&'static str, ElemType)> {
        vec![("qos", ElemType::I64), ("prev", ElemType::I64)]
    }

    fn validate(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        if kind.is_real() {
            let (left, right) = (real::f64s(&bufs[LEFT]), real::f64s(&bufs[RIGHT]));
            let (le, re) = (real::i8s(&bufs[LEFT_EPS]), real::i8s(&bufs[RIGHT_EPS]));
            let n = left.len();
            if right.len() != n || le.len() != n || re.len() != n {
                return Err("left, right, left_eps and right_eps differ in length".to_string());
            }
            let piece = |q: usize| (real::endpoint(left, le, q), real::endpoint(right, re, q));
            return real::check_fibers(&ints(&bufs[PTR]), parent_count, n, &piece);
        }
        let (ptr, left, right) = (ints(&bufs[PTR]), ints(&bufs[LEFT]), ints(&bufs[RIGHT]));
        let n = dims[0] as i64;
        super::shared::check_ptr_shape(&ptr, parent_count)?;
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
        let n = int_at(&bufs[PTR], parent_count) as usize;
        for b in &mut bufs[LEFT..] {
            b.truncate(n);
        }
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
        for (b, (_, ty)) in bufs
            .iter_mut()
            .zip(self.buffers(kind, ElemType::F64))
            .skip(1)
        {
            *b = Buffer::new(ty);
        }
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
        kind: &LevelKind,
        bufs: &[Buffer],
        _: &[usize],
        pos: usize,
        f: &mut dyn FnMut(usize, usize, usize),
    ) {
        if kind.is_real() {
            return;
        }
        for q in int_at(&bufs[PTR], pos) as usize..int_at(&bufs[PTR], pos + 1) as usize {
            f(
                int_at(&bufs[LEFT], q) as usize,
                int_at(&bufs[RIGHT], q) as usize,
                q,
            );
        }
    }
    fn remap(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        map: &[Option<usize>],
    ) -> Vec<Option<usize>> {
        let ptr = ints(&bufs[PTR]);
        let mut new_ptr = vec![0i64];
        let mut ends: Vec<Buffer> = bufs[LEFT..].iter().map(|b| Buffer::new(b.elem())).collect();
        let mut child = vec![];
        for m in map {
            if let Some(p) = *m {
                for q in ptr[p] as usize..ptr[p + 1] as usize {
                    for (new, old) in ends.iter_mut().zip(&bufs[LEFT..]) {
                        new.push(old.get(q));
                    }
                    child.push(Some(q));
                }
            }
            new_ptr.push(child.len() as i64);
        }
        bufs[PTR] = int_buf(kind.coord().pos_elem(), new_ptr);
        for (b, new) in bufs[LEFT..].iter_mut().zip(ends) {
            *b = new;
        }
        child
    }
    fn merge_runs(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
        equal: &mut dyn FnMut(usize, usize) -> bool,
    ) -> Option<Vec<Option<usize>>> {
        if kind.is_real() {
            return merge_real_runs(bufs, parent_count, equal);
        }
        let (ptr, left, right) = (ints(&bufs[PTR]), ints(&bufs[LEFT]), ints(&bufs[RIGHT]));
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
        bufs[PTR] = int_buf(kind.coord().pos_elem(), new_ptr);
        bufs[LEFT] = int_buf(kind.coord().elem(), new_left);
        bufs[RIGHT] = int_buf(kind.coord().elem(), new_right);
        Some(kept)
    }
    /// One run per distinct coordinate; contiguous equal runs are merged afterwards by the
    /// tensor (values are only known once the leaves are built).
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
        bufs[LEFT] = int_buf(kind.coord().elem(), idx.clone());
        bufs[RIGHT] = int_buf(kind.coord().elem(), idx);
        (n, out)
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
        let ptr = ints(&bufs[PTR]);
        let (left, right) = (real::f64s(&bufs[LEFT]), real::f64s(&bufs[RIGHT]));
        let (le, re) = (real::i8s(&bufs[LEFT_EPS]), real::i8s(&bufs[RIGHT_EPS]));
        for q in ptr[pos] as usize..ptr[pos + 1] as usize {
            f(real::endpoint(left, le, q), real::endpoint(right, re, q), q);
        }
    }
    /// One run per distinct piece (entries with equal pieces share a child group).
    fn build_pieces(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        parent_count: usize,
        groups: &[(usize, usize, usize)],
        pieces: &[(Limit<f64>, Limit<f64>)],
    ) -> std::result::Result<super::Built, String> {
        if !kind.is_real() {
            return Err(real::integer_level("SparseRunList"));
        }
        let (mut left, mut right, mut le, mut re) = (vec![], vec![], vec![], vec![]);
        let (ptr, out) = real::counted_pieces(parent_count, groups, pieces, &mut |a, z| {
            left.push(real::canonical(a.val));
            le.push(a.eps.sign());
            right.push(real::canonical(z.val));
            re.push(z.eps.sign());
            Ok(())
        })?;
        let n = left.len();
        bufs[PTR] = int_buf(kind.coord().pos_elem(), ptr);
        bufs[LEFT] = Buffer::F64(left.into());
        bufs[RIGHT] = Buffer::F64(right.into());
        bufs[LEFT_EPS] = Buffer::I8(le.into());
        bufs[RIGHT_EPS] = Buffer::I8(re.into());
        Ok((n, out))
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
        if t.format.levels[f.level].is_real() {
            let ends = real::Ends {
                lo: (bufs[LEFT], Some(bufs[LEFT_EPS])),
                hi: (bufs[RIGHT], Some(bufs[RIGHT_EPS])),
            };
            return Ok(real::unfurl_pieces(cx, f, bufs[PTR], ends, protocol));
        }
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
            within: Some((b::var(q), b::var(q_stop))),
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
        let is_real = t.format.levels[f.level].is_real();
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
        // Real runs also store their ends' infinitesimal signs.
        let eps_bufs = is_real.then(|| (l.buf(LEFT_EPS), l.buf(RIGHT_EPS)));
        let mut alloc: Vec<Stmt> = [Some(left), Some(right)]
            .into_iter()
            .chain(
                eps_bufs
                    .map(|(a, z)| [Some(a), Some(z)])
                    .into_iter()
                    .flatten(),
            )
            .flatten()
            .map(|buf| Stmt::Grow {
                buf,
                len: b::add(b::var(qos), b::int(1)),
            })
            .collect();
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
            let last = b::sub(b::var(qos), b::int(1));
            let prev_right = match eps_bufs {
                Some((_, re)) => b::make_limit(b::load(right, last.clone()), b::load(re, last)),
                None => b::load(right, last),
            };
            // Every written extent must start past the fiber's last run, whether or not it is
            // recorded: a fill value written over a recorded run would otherwise leave the
            // run's old value in place. (Nested: the previous run is only loaded when the
            // fiber has one.)
            let order = b::if_(
                b::var(dirty),
                b::if_(
                    b::lt(b::var(start), b::var(qos)),
                    b::if_(b::le(a.clone(), prev_right), vec![Stmt::Fail(run_order)]),
                ),
            );
            let mut commit = fiber_commit.clone();
            match eps_bufs {
                Some((le, re)) => commit.extend([
                    b::store(left, b::var(qos), b::limit_val(a.clone())),
                    b::store(le, b::var(qos), b::limit_eps(a.clone())),
                    b::store(right, b::var(qos), b::limit_val(z.clone())),
                    b::store(re, b::var(qos), b::limit_eps(z.clone())),
                ]),
                None => commit.extend([
                    b::store(left, b::var(qos), a.clone()),
                    b::store(right, b::var(qos), z.clone()),
                ]),
            }
            commit.push(b::assign(qos, b::add(b::var(qos), b::int(1))));
            if let Some(d) = parent_dirty {
                commit.push(b::assign(d, b::boolean(true)));
            }
            Target::Looplet(Looplet::Thunk {
                preamble: alloc.clone(),
                body: Box::new(Target::Fiber(child.clone())),
                epilogue: [order, b::if_(record.clone(), commit)].concat(),
            })
        }));
        Ok(Looplet::Thunk {
            preamble: fiber.preamble,
            body: Box::new(Target::Looplet(accept)),
            epilogue: fiber.epilogue,
        })
    }
}

/// `merge_runs` of real runs: neighbours that touch (the next starts right after the previous
/// ends: `[a, b-ε]` then `[b, c]`, or `[a, b]` then `[b+ε, c]`) and hold equal sub-fibers.
fn merge_real_runs(
    bufs: &mut [Buffer],
    parent_count: usize,
    equal: &mut dyn FnMut(usize, usize) -> bool,
) -> Option<Vec<Option<usize>>> {
    let ptr = ints(&bufs[PTR]);
    let (left, right) = (real::f64s(&bufs[LEFT]), real::f64s(&bufs[RIGHT]));
    let (le, re) = (real::i8s(&bufs[LEFT_EPS]), real::i8s(&bufs[RIGHT_EPS]));
    let mut new_ptr = vec![0i64];
    let (mut nl, mut nr, mut nle, mut nre) = (vec![], vec![], vec![], vec![]);
    let mut kept: Vec<Option<usize>> = vec![];
    for p in 0..parent_count {
        let (lo, hi) = (ptr[p] as usize, ptr[p + 1] as usize);
        for q in lo..hi {
            let start = real::endpoint(left, le, q);
            let touches = match (kept.last(), nr.last(), nre.last()) {
                (Some(&Some(k)), Some(&r), Some(&e)) if q > lo => {
                    real::limit(r, e).next() == start && equal(k, q)
                }
                _ => false,
            };
            if touches {
                *nr.last_mut().expect("a run was kept") = right[q];
                *nre.last_mut().expect("a run was kept") = re[q];
            } else {
                nl.push(left[q]);
                nle.push(le[q]);
                nr.push(right[q]);
                nre.push(re[q]);
                kept.push(Some(q));
            }
        }
        new_ptr.push(nr.len() as i64);
    }
    if kept.len() == right.len() {
        return None;
    }
    bufs[PTR] = Buffer::I64(new_ptr.into());
    bufs[LEFT] = Buffer::F64(nl.into());
    bufs[RIGHT] = Buffer::F64(nr.into());
    bufs[LEFT_EPS] = Buffer::I8(nle.into());
    bufs[RIGHT_EPS] = Buffer::I8(nre.into());
    Some(kept)
}
