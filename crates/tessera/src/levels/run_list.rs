//! `RunList` (Finch's RunList, formerly DenseRLE): the fiber at position `p` is the runs
//! `ptr[p]..ptr[p+1]`; run `q` ends at coordinate `right[q]` (inclusive) and starts after the
//! previous run of its fiber (the first at 0). The runs of a fiber cover `0..n` exactly, fill
//! runs included; child position = run number.
//!
//! Reads are a stepper whose chunks are `Run(child(q))`, so a loop over a run-length fiber does
//! one iteration per run (and `s += x[i]` integrates to `s += len * v`).
//!
//! Writes go through `AcceptRun`: each write of an extent `a..=z` becomes one run, preceded by a
//! fill run when the previous write ended before `a`. A run is recorded only if its child was
//! written (the dirty flag), so a sparse parent that retries a position never sees half-written
//! runs. Fibers nobody wrote, and the tail of a fiber after its last write, are completed with
//! fill runs lazily: when a later fiber is opened, or at freeze. While a kernel writes the level
//! `next` is the first coordinate not yet covered in fiber `prev`.
//!
//! Adjacent runs with equal sub-fibers are merged (with `merge`, the default) by the runtime
//! after the kernel ([`crate::tensor::Tensor::merge_runs`]): a kernel that reads the level after
//! freezing it sees the unmerged runs, which denote the same values.
//!
//! With real coordinates (`coord=f64`, the seed's `RunList{Ti}` over a real dimension) a fiber
//! is a piecewise-constant function of the whole real line: run `q` ends at the [`Limit`]
//! `right[q]` (its value in `right`, its infinitesimal sign in `right_eps`: 0 for a closed end,
//! -1 for an open one, as SparseRunList stores its ends, see [`super::real`]) and starts just
//! after the previous run's end (`prev.next()`), the first at -Inf; the last ends at +Inf.
//! No left ends are stored because the runs tile the line. A fiber holds at least one run.
//! Built from pieces, the gaps between them become fill runs (so `[1, 2)` alone is the three
//! runs `[-Inf, 1)`, `[1, 2)`, `[2, +Inf]`). Reads are the same stepper of `Run(child(q))`
//! chunks over Limit ends ([`real::unfurl_runs`]); an integral over a fill run reaching ±Inf
//! contributes what the evaluator gives (0 for a zero fill, ±Inf for a nonzero value). Writes
//! to its real coordinates are refused ([`real::no_writes_yet`], as for SparsePoint and
//! SparseInterval): a kernel would have to complete each fiber with fill runs out to +Inf.
//! (`coord=i32` stores `ptr` and `right` in 4 bytes, as on the other levels taking `coord=`.)

use super::real;
use super::registry::{Args, Arity, Caps, LevelSpec, Param, Role};
use super::shared::{int_at, int_buf, int_range, ints};
use super::{Level, LevelKind, LevelRef};
use crate::error::{Error, Result};
use crate::ir::cx::{Cx, KernelError, KernelErrorKind, Order};
use crate::ir::{Expr, Stmt, build as b};
use crate::limit::{Eps, Limit};
use crate::looplets::{Fiber, Looplet, Stepper, Target};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use std::rc::Rc;

pub struct RunList;

pub const SPEC: LevelSpec = LevelSpec {
    name: "RunList",
    role: Role::Level,
    arity: Arity::Fixed(1),
    params: &[
        Param::Flag {
            key: "merge",
            default: true,
        },
        // i64, i32 (4-byte arrays) or f64 (runs tiling the real line).
        Param::Coord,
    ],
    // Nothing to skip: its runs cover every coordinate.
    protocols: &[Protocol::Follow],
    caps: Caps {
        merges_runs: true,
        // As in Finch: the freeze extends every fiber's runs to its end, so nothing is left
        // to append after.
        reopen: false,
        ..Caps::LEVEL
    },
    is: |k| matches!(k, LevelKind::RunList { .. }),
    make: |a| LevelKind::RunList {
        merge: a.flag("merge"),
        coord: a.coord,
    },
    args: |k| match k {
        LevelKind::RunList { merge, coord } => Args {
            flags: vec![("merge", *merge)],
            coord: *coord,
            ..Args::default()
        },
        _ => Args::default(),
    },
    check_below,
    imp: &RunList,
};

/// Fill runs are stored with a value, which a Pattern leaf cannot hold (it reads `true`).
fn check_below(below: &[LevelKind]) -> Option<&'static str> {
    matches!(below.first(), Some(LevelKind::Pattern)).then_some(
        "RunList stores a value for every run, fill runs included, and a Pattern leaf cannot hold `false`: use RunList(Element(false)) or SparseRunList(Pattern())",
    )
}

const PTR: usize = 0;
const RIGHT: usize = 1;
/// Real coordinates only: the infinitesimal signs of the runs' ends.
const RIGHT_EPS: usize = 2;
const QOS: usize = 0;
const PREV: usize = 1;
const NEXT: usize = 2;

impl RunList {
    /// Append a run of fill ending at `stop` to the fiber being written.
    fn append_fill(cx: &mut Cx, l: &LevelRef, stop: Expr) -> Result<Vec<Stmt>> {
        let (right, qos) = (l.buf(RIGHT), l.state(QOS));
        let mut code = vec![
            Stmt::Grow {
                buf: right,
                len: b::add(b::var(qos), b::int(1)),
            },
            b::store(right, b::var(qos), stop),
        ];
        code.extend(l.child_impl().assemble(
            cx,
            &l.child(),
            b::var(qos),
            b::add(b::var(qos), b::int(1)),
        )?);
        code.push(b::assign(qos, b::add(b::var(qos), b::int(1))));
        Ok(code)
    }

    /// Complete fiber `prev` with a fill run, then give each fiber up to `hi` (exclusive) that
    /// was never written one fill run covering it.
    fn fill_up_to(cx: &mut Cx, l: &LevelRef, hi: Expr) -> Result<Vec<Stmt>> {
        let n = l.dim(0);
        let (ptr, qos, prev, next) = (l.buf(PTR), l.state(QOS), l.state(PREV), l.state(NEXT));
        let mut code = b::if_(
            b::and(
                b::le(b::int(0), b::var(prev)),
                b::lt(b::var(next), n.clone()),
            ),
            Self::append_fill(cx, l, b::sub(n.clone(), b::int(1)))?,
        );
        code.push(b::assign(next, n.clone()));
        let p = cx.var("p", ElemType::I64);
        let mut body = vec![b::store(ptr, b::var(p), b::var(qos))];
        body.extend(b::if_(
            b::lt(b::int(0), n.clone()),
            Self::append_fill(cx, l, b::sub(n, b::int(1)))?,
        ));
        code.push(Stmt::For {
            var: p,
            start: b::add(b::var(prev), b::int(1)),
            stop: hi,
            body,
        });
        Ok(code)
    }

    /// Positions from `lo` on are being made fill again: forget the runs of the fibers from
    /// `lo` to `prev` (a sparse parent retrying a position it did not keep).
    fn rollback(l: &LevelRef, lo: Expr) -> Vec<Stmt> {
        let (ptr, qos, prev, next) = (l.buf(PTR), l.state(QOS), l.state(PREV), l.state(NEXT));
        b::if_(
            b::le(lo.clone(), b::var(prev)),
            vec![
                b::assign(qos, b::load(ptr, lo.clone())),
                b::assign(prev, b::sub(lo, b::int(1))),
                b::assign(next, l.dim(0)),
            ],
        )
    }
}

impl Level for RunList {
    fn buffers(&self, kind: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        if kind.is_real() {
            // The ends' values, then their infinitesimal signs (see `levels::real`).
            return vec![
                ("ptr", kind.coord().pos_elem()),
                ("right", ElemType::F64),
                ("right_eps", ElemType::I8),
            ];
        }
        vec![
            ("ptr", kind.coord().pos_elem()),
            ("right", kind.coord().elem()),
        ]
    }
    fn state(&self, _: &LevelKind) -> Vec<(&'static str, ElemType)> {
        vec![
            ("qos", ElemType::I64),
            ("prev", ElemType::I64),
            ("next", ElemType::I64),
        ]
    }

    fn validate(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        if kind.is_real() {
            return validate_real(bufs, parent_count);
        }
        let (ptr, right) = (ints(&bufs[PTR]), ints(&bufs[RIGHT]));
        let n = dims[0] as i64;
        super::shared::check_ptr_shape(&ptr, parent_count)?;
        for p in 0..parent_count {
            let (lo, hi) = (ptr[p], ptr[p + 1]);
            if hi < lo || hi as usize > right.len() {
                return Err(format!(
                    "ptr[{}] = {hi} is out of order or past the end of right",
                    p + 1
                ));
            }
            if n == 0 {
                if hi > lo {
                    return Err(format!("fiber {p} has runs but the dimension is empty"));
                }
                continue;
            }
            if hi == lo {
                return Err(format!(
                    "fiber {p} has no runs (runs must cover 0..{n}, fill runs included)"
                ));
            }
            let mut start = 0;
            for (q, &r) in right.iter().enumerate().take(hi as usize).skip(lo as usize) {
                if r < start || r >= n {
                    return Err(format!(
                        "right[{q}] = {r} does not end a run starting at {start} inside 0..{n}"
                    ));
                }
                start = r + 1;
            }
            if start != n {
                return Err(format!(
                    "the runs of fiber {p} end at {}, not at the last coordinate {}",
                    start - 1,
                    n - 1
                ));
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
        for b in &mut bufs[RIGHT..] {
            b.truncate(n);
        }
        n
    }
    fn empty(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> usize {
        if kind.is_real() {
            // One fill run over the whole line per fiber.
            bufs[PTR] = int_buf(kind.coord().pos_elem(), (0..=parent_count as i64).collect());
            bufs[RIGHT] = Buffer::F64(vec![f64::INFINITY; parent_count].into());
            bufs[RIGHT_EPS] = Buffer::I8(vec![0; parent_count].into());
            return parent_count;
        }
        let runs = if dims[0] > 0 { parent_count } else { 0 };
        bufs[PTR] = int_buf(
            kind.coord().pos_elem(),
            (0..=parent_count as i64)
                .map(|p| if dims[0] > 0 { p } else { 0 })
                .collect(),
        );
        bufs[RIGHT] = int_buf(kind.coord().elem(), vec![dims[0] as i64 - 1; runs]);
        runs
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
        let (lo, hi) = (
            int_at(&bufs[PTR], pos) as usize,
            int_at(&bufs[PTR], pos + 1) as usize,
        );
        let mut start = 0;
        for (k, &r) in int_range(&bufs[RIGHT], lo, hi).iter().enumerate() {
            let q = lo + k;
            f(start, r as usize, q);
            start = r as usize + 1;
        }
    }
    fn remap(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        dims: &[usize],
        map: &[Option<usize>],
    ) -> Vec<Option<usize>> {
        if kind.is_real() {
            // Kept fibers keep their runs; a dropped one becomes one fill run.
            return super::remap_pieces(self, kind, bufs, map);
        }
        let (ptr, right) = (ints(&bufs[PTR]), ints(&bufs[RIGHT]));
        let mut new_ptr = vec![0i64];
        let mut new_right = vec![];
        let mut child = vec![];
        for m in map {
            match *m {
                Some(p) => {
                    let (lo, hi) = (ptr[p] as usize, ptr[p + 1] as usize);
                    new_right.extend_from_slice(&right[lo..hi]);
                    child.extend((lo..hi).map(Some));
                }
                None if dims[0] > 0 => {
                    new_right.push(dims[0] as i64 - 1);
                    child.push(None);
                }
                None => {}
            }
            new_ptr.push(new_right.len() as i64);
        }
        bufs[PTR] = int_buf(kind.coord().pos_elem(), new_ptr);
        bufs[RIGHT] = int_buf(kind.coord().elem(), new_right);
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
        let (ptr, right) = (ints(&bufs[PTR]), ints(&bufs[RIGHT]));
        let mut new_ptr = vec![0i64];
        let mut new_right: Vec<i64> = vec![];
        let mut kept: Vec<Option<usize>> = vec![];
        for p in 0..parent_count {
            let (lo, hi) = (ptr[p] as usize, ptr[p + 1] as usize);
            for (q, &r) in right.iter().enumerate().take(hi).skip(lo) {
                match kept.last() {
                    Some(&Some(k)) if q > lo && equal(k, q) => {
                        *new_right.last_mut().expect("a kept run") = r;
                    }
                    _ => {
                        new_right.push(r);
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
        bufs[RIGHT] = int_buf(kind.coord().elem(), new_right);
        Some(kept)
    }
    /// One run per distinct coordinate, fill runs in the gaps; equal neighbours are merged
    /// afterwards by the tensor (values are only known once the leaves are built).
    fn build(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        dims: &[usize],
        parent_count: usize,
        groups: &[(usize, usize, usize)],
        coords: &[Vec<i64>],
    ) -> (usize, Vec<(usize, usize, usize)>) {
        let n = dims[0] as i64;
        let mut ptr = vec![0i64; parent_count + 1];
        let mut right = vec![];
        let mut out = vec![];
        let mut g = 0;
        for p in 0..parent_count {
            let mut next = 0;
            while g < groups.len() && groups[g].0 == p {
                let (_, lo, hi) = groups[g];
                super::dense::split_runs(&coords[0], lo, hi, |c, a, z| {
                    if next < c {
                        right.push(c - 1);
                    }
                    out.push((right.len(), a, z));
                    right.push(c);
                    next = c + 1;
                });
                g += 1;
            }
            if next < n {
                right.push(n - 1);
            }
            ptr[p + 1] = right.len() as i64;
        }
        let count = right.len();
        bufs[PTR] = int_buf(kind.coord().pos_elem(), ptr);
        bufs[RIGHT] = int_buf(kind.coord().elem(), right);
        (count, out)
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
        let (right, re) = (real::f64s(&bufs[RIGHT]), real::i8s(&bufs[RIGHT_EPS]));
        let mut start = Limit::exact(f64::NEG_INFINITY);
        for q in ptr[pos] as usize..ptr[pos + 1] as usize {
            let end = real::endpoint(right, re, q);
            f(start, end, q);
            start = end.next();
        }
    }
    /// One run per distinct piece, and a fill run for each gap before, between and after
    /// them (a fiber without pieces is one fill run over the line); equal neighbours are merged
    /// afterwards by the tensor, as in `build`.
    fn build_pieces(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        parent_count: usize,
        groups: &[(usize, usize, usize)],
        pieces: &[(Limit<f64>, Limit<f64>)],
    ) -> std::result::Result<super::Built, String> {
        if !kind.is_real() {
            return Err(real::integer_level("RunList"));
        }
        let mut ptr = vec![0i64; parent_count + 1];
        let (mut right, mut re): (Vec<f64>, Vec<i8>) = (vec![], vec![]);
        let mut out = vec![];
        let push = |end: Limit<f64>, right: &mut Vec<f64>, re: &mut Vec<i8>| {
            right.push(real::canonical(end.val));
            re.push(end.eps.sign());
        };
        let mut g = 0;
        for p in 0..parent_count {
            // The first point the fiber's runs do not cover yet.
            let mut next = Some(Limit::exact(f64::NEG_INFINITY));
            while g < groups.len() && groups[g].0 == p {
                let (_, lo, hi) = groups[g];
                let mut k = lo;
                while k < hi {
                    let end = (k + 1..hi).find(|&e| pieces[e] != pieces[k]).unwrap_or(hi);
                    let (a, z) = pieces[k];
                    let Some(from) = next else {
                        return Err(format!(
                            "the piece [{a}, {z}] starts after a piece that ends at +Inf"
                        ));
                    };
                    if a < from {
                        return Err(format!(
                            "the piece [{a}, {z}] starts before the end of the previous one"
                        ));
                    }
                    if a > from {
                        push(a.prev(), &mut right, &mut re);
                    }
                    out.push((right.len(), k, end));
                    push(z, &mut right, &mut re);
                    next = (z != Limit::exact(f64::INFINITY)).then(|| z.next());
                    k = end;
                }
                g += 1;
            }
            if next.is_some() {
                push(Limit::exact(f64::INFINITY), &mut right, &mut re);
            }
            ptr[p + 1] = right.len() as i64;
        }
        let n = right.len();
        bufs[PTR] = int_buf(kind.coord().pos_elem(), ptr);
        bufs[RIGHT] = Buffer::F64(right.into());
        bufs[RIGHT_EPS] = Buffer::I8(re.into());
        Ok((n, out))
    }

    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        // A real RunList is never written (`unfurl_update` refuses too): refuse before
        // declaring integer state over its real arrays.
        real::no_writes_to(&l.tensor.name, l.kind())?;
        if init.cast(l.tensor.elem) != l.tensor.fill {
            return Err(Error::tensor(
                &l.tensor.name,
                format!(
                    "a RunList level can only be declared with its fill value {}, not {init}",
                    l.tensor.fill
                ),
            ));
        }
        let ptr = l.buf(PTR);
        let mut code = super::shared::fits_i32(cx, l, "a dimension", l.dim(0));
        code.extend(super::shared::zero_ptr(ptr, count));
        code.extend([
            b::assign(l.state(QOS), b::int(0)),
            b::assign(l.state(PREV), b::int(-1)),
            b::assign(l.state(NEXT), l.dim(0)),
        ]);
        code.extend(l.child_impl().declare(cx, &l.child(), b::int(0), init)?);
        Ok(code)
    }
    fn assemble(&self, _: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        let mut code = vec![Stmt::Grow {
            buf: l.buf(PTR),
            len: b::add(hi, b::int(1)),
        }];
        code.extend(Self::rollback(l, lo));
        Ok(code)
    }
    fn freeze(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        let (ptr, qos) = (l.buf(PTR), l.state(QOS));
        let mut code = vec![Stmt::Grow {
            buf: ptr,
            len: b::add(count.clone(), b::int(1)),
        }];
        // Positions the parent did not keep (a retried last position) hold nothing.
        code.extend(Self::rollback(l, count.clone()));
        code.extend(Self::fill_up_to(cx, l, count.clone())?);
        // Every stored offset is at most the run count `qos`: if that fits, nothing wrapped.
        code.extend(super::shared::fits_i32(
            cx,
            l,
            "a stored count",
            b::var(qos),
        ));
        code.push(b::store(ptr, count.clone(), b::var(qos)));
        code.push(b::assign(l.state(PREV), b::sub(count, b::int(1))));
        let (child, n) = l.child_impl().freeze(cx, &l.child(), b::var(qos))?;
        code.extend(child);
        Ok((code, n))
    }
    fn unfurl_read(&self, cx: &mut Cx, f: &Fiber, protocol: Option<Protocol>) -> Result<Looplet> {
        let t = &f.tensor;
        if t.format.levels[f.level].is_real() {
            // Runs cover the line, so a lookup (`follow`) walks them too, as the other real
            // levels do.
            let bufs = &t.level_bufs[f.level];
            return Ok(real::unfurl_runs(
                cx,
                f,
                bufs[PTR],
                (bufs[RIGHT], Some(bufs[RIGHT_EPS])),
            ));
        }
        let (ptr, right) = (t.level_bufs[f.level][PTR], t.level_bufs[f.level][RIGHT]);
        let q = cx.var(&format!("{}_q", t.name), ElemType::I64);
        let q_stop = cx.var(&format!("{}_q_stop", t.name), ElemType::I64);
        let preamble = vec![
            b::assign(q, b::load(ptr, f.pos.clone())),
            b::assign(q_stop, b::load(ptr, b::add(f.pos.clone(), b::int(1)))),
        ];
        if protocol == Some(Protocol::Follow) {
            // The runs cover the fiber: the first one ending at or after `i` holds it.
            let f2 = f.clone();
            return Ok(super::shared::follow_by_search(
                cx,
                &t.name,
                preamble,
                right,
                b::var(q),
                b::var(q_stop),
                Rc::new(|_: &Expr, _: &Expr| b::boolean(true)),
                Rc::new(move |q: &Expr, _: &Expr| Target::Fiber(f2.child(q.clone()))),
                Target::Fill(t.fill),
            ));
        }
        // Runs cover every coordinate: no fill phase, every chunk is a run of one child.
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
            stop: b::load(right, b::var(q)),
            chunk: Looplet::Run(Box::new(Target::Fiber(f.child(b::var(q))))),
            next: vec![b::assign(q, b::add(b::var(q), b::int(1)))],
            positions: None,
            within: None,
        };
        Ok(Looplet::Thunk {
            preamble,
            body: Box::new(Target::Looplet(Looplet::Stepper(Rc::new(stepper)))),
            epilogue: vec![],
        })
    }

    fn unfurl_update(&self, cx: &mut Cx, f: &Fiber) -> Result<Looplet> {
        real::no_writes_yet(f)?;
        let t = f.tensor.clone();
        let l = LevelRef {
            tensor: &t,
            level: f.level,
        };
        let (ptr, right) = (l.buf(PTR), l.buf(RIGHT));
        let (qos, prev, next) = (l.state(QOS), l.state(PREV), l.state(NEXT));
        let fiber_order = cx.error(KernelError::new(
            &t.name,
            KernelErrorKind::OutOfOrder {
                level: "RunList",
                order: Order::Fibers,
            },
        ));
        let run_order = cx.error(KernelError::new(
            &t.name,
            KernelErrorKind::OutOfOrder {
                level: "RunList",
                order: Order::Runs,
            },
        ));
        let pos = f.pos.clone();
        let mut open = vec![Stmt::If {
            cond: b::lt(pos.clone(), b::var(prev)),
            then: vec![Stmt::Fail(fiber_order)],
            otherwise: vec![],
        }];
        let mut start = Self::fill_up_to(cx, &l, pos.clone())?;
        start.extend([
            b::store(ptr, pos.clone(), b::var(qos)),
            b::assign(prev, pos.clone()),
            b::assign(next, b::int(0)),
        ]);
        open.extend(b::if_(b::lt(b::var(prev), pos), start));

        let gap = cx.var(&format!("{}_gap", t.name), ElemType::Bool);
        let slot = cx.var(&format!("{}_slot", t.name), ElemType::I64);
        let dirty = cx.var(&format!("{}_dirty", t.name), ElemType::Bool);
        let mut alloc = vec![
            b::assign(
                slot,
                b::select(b::var(gap), b::add(b::var(qos), b::int(1)), b::var(qos)),
            ),
            Stmt::Grow {
                buf: right,
                len: b::add(b::var(slot), b::int(1)),
            },
        ];
        alloc.extend(l.child_impl().assemble(
            cx,
            &l.child(),
            b::var(qos),
            b::add(b::var(slot), b::int(1)),
        )?);
        alloc.push(b::assign(dirty, b::boolean(false)));
        let mut child = f.child(b::var(slot));
        child.dirty = Some(dirty);
        let parent_dirty = f.dirty;
        let accept = Looplet::AcceptRun(Rc::new(move |a: &Expr, z: &Expr| {
            let mut pre = vec![b::assign(gap, b::lt(b::var(next), a.clone()))];
            pre.extend(alloc.clone());
            let mut commit = b::if_(b::lt(a.clone(), b::var(next)), vec![Stmt::Fail(run_order)]);
            commit.extend(b::if_(
                b::var(gap),
                vec![
                    b::store(right, b::var(qos), b::sub(a.clone(), b::int(1))),
                    b::assign(qos, b::add(b::var(qos), b::int(1))),
                ],
            ));
            commit.extend([
                b::store(right, b::var(qos), z.clone()),
                b::assign(qos, b::add(b::var(qos), b::int(1))),
                b::assign(next, b::add(z.clone(), b::int(1))),
            ]);
            if let Some(d) = parent_dirty {
                commit.push(b::assign(d, b::boolean(true)));
            }
            Target::Looplet(Looplet::Thunk {
                preamble: pre,
                body: Box::new(Target::Fiber(child.clone())),
                epilogue: b::if_(b::var(dirty), commit),
            })
        }));
        Ok(Looplet::Thunk {
            preamble: open,
            body: Box::new(Target::Looplet(accept)),
            epilogue: vec![],
        })
    }
}

/// `validate` of a real RunList: in each fiber, at least one run; every end a valid value
/// with sign 0 or -1; each run holds a real number after the previous run's end (the ends
/// increase strictly); the last run ends at +Inf exactly.
fn validate_real(bufs: &[Buffer], parent_count: usize) -> std::result::Result<usize, String> {
    let ptr = ints(&bufs[PTR]);
    let (right, re) = (real::f64s(&bufs[RIGHT]), real::i8s(&bufs[RIGHT_EPS]));
    if right.len() != re.len() {
        return Err(format!(
            "right has {} entries but right_eps {}",
            right.len(),
            re.len()
        ));
    }
    super::shared::check_ptr_shape(&ptr, parent_count)?;
    for p in 0..parent_count {
        let (lo, hi) = (ptr[p], ptr[p + 1]);
        if hi < lo || hi as usize > right.len() {
            return Err(format!(
                "ptr[{}] = {hi} is out of order or past the end of right",
                p + 1
            ));
        }
        if hi == lo {
            return Err(format!(
                "fiber {p} has no runs (its runs must cover the real line, fill runs included)"
            ));
        }
        let mut start = Limit::exact(f64::NEG_INFINITY);
        for q in lo as usize..hi as usize {
            if !matches!(re[q], 0 | -1) {
                return Err(format!(
                    "right_eps[{q}] = {} (a run ends at its value, 0, or just before it, -1)",
                    re[q]
                ));
            }
            if right[q].is_nan() {
                return Err(format!("right[{q}] is NaN"));
            }
            let end = real::endpoint(right, re, q);
            if q > lo as usize && !real::holds_a_real(start, end) {
                return Err(format!(
                    "right[{q}] = {end} does not end after right[{}] = {}: the runs' ends must increase",
                    q - 1,
                    start.prev()
                ));
            }
            real::check_piece(start, end).map_err(|m| format!("right[{q}]: {m}"))?;
            start = end.next();
        }
        let last = real::endpoint(right, re, hi as usize - 1);
        if last != Limit::exact(f64::INFINITY) || last.eps != Eps::Zero {
            return Err(format!(
                "right[{}] = {last}: the last run of fiber {p} must end at +Inf",
                hi - 1
            ));
        }
    }
    Ok(ptr[parent_count] as usize)
}

/// `merge_runs` of real runs: neighbours in a fiber always touch (each starts just after the
/// previous one ends), so runs with equal sub-fibers merge into one ending at the later end.
fn merge_real_runs(
    bufs: &mut [Buffer],
    parent_count: usize,
    equal: &mut dyn FnMut(usize, usize) -> bool,
) -> Option<Vec<Option<usize>>> {
    let ptr = ints(&bufs[PTR]);
    let (right, re) = (real::f64s(&bufs[RIGHT]), real::i8s(&bufs[RIGHT_EPS]));
    let mut new_ptr = vec![0i64];
    let (mut nr, mut nre) = (vec![], vec![]);
    let mut kept: Vec<Option<usize>> = vec![];
    for p in 0..parent_count {
        let (lo, hi) = (ptr[p] as usize, ptr[p + 1] as usize);
        for q in lo..hi {
            match kept.last() {
                Some(&Some(k)) if q > lo && equal(k, q) => {
                    *nr.last_mut().expect("a kept run") = right[q];
                    *nre.last_mut().expect("a kept run") = re[q];
                }
                _ => {
                    nr.push(right[q]);
                    nre.push(re[q]);
                    kept.push(Some(q));
                }
            }
        }
        new_ptr.push(nr.len() as i64);
    }
    if kept.len() == right.len() {
        return None;
    }
    bufs[PTR] = Buffer::I64(new_ptr.into());
    bufs[RIGHT] = Buffer::F64(nr.into());
    bufs[RIGHT_EPS] = Buffer::I8(nre.into());
    Some(kept)
}
