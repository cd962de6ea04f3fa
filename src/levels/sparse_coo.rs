//! `SparseCOO{N}`: N dimensions in one level. The entries of fiber `p` are positions
//! `ptr[p]..ptr[p+1]`; entry `q` has coordinates `(idx0[q], ..., idx{N-1}[q])`, strictly
//! increasing in lexicographic order; child positions are entry positions.
//!
//! Reading dimension `s` of a fiber walks the runs of equal `idx{s}` inside the fiber's
//! position range (for `s > 0` the range of one run of the previous dimension), so every
//! dimension is a stepper over stored coordinates only. Updates append whole entries in
//! lexicographic order; the coordinates of the outer dimensions wait in state variables until
//! the innermost one is known.

use super::{Level, LevelKind, LevelRef};
use crate::error::{Error, Result};
use crate::ir::{BufId, Expr, Stmt, VarId, build as b};
use crate::looplets::{Fiber, Looplet, Phase, Stepper, Target};
use crate::lower::ctx::Cx;
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use std::rc::Rc;

pub struct SparseCOO;

/// The largest N of `SparseCOO{N}`.
pub const MAX_RANK: usize = 8;
const IDX_NAMES: [&str; MAX_RANK] = [
    "idx0", "idx1", "idx2", "idx3", "idx4", "idx5", "idx6", "idx7",
];
const COORD_NAMES: [&str; MAX_RANK] = ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"];

const PTR: usize = 0;
const QOS: usize = 0;
const PREV: usize = 1;
const START: usize = 2;
/// State variable of the pending coordinate of dimension `s`.
const fn coord(s: usize) -> usize {
    3 + s
}

fn rank_of(kind: &LevelKind) -> usize {
    match kind {
        LevelKind::SparseCOO(n) => *n,
        _ => unreachable!("SparseCOO implements only SparseCOO levels"),
    }
}

impl Level for SparseCOO {
    fn buffers(&self, kind: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        let mut out = vec![("ptr", ElemType::I64)];
        out.extend(
            IDX_NAMES[..rank_of(kind)]
                .iter()
                .map(|n| (*n, ElemType::I64)),
        );
        out
    }
    fn state(&self, kind: &LevelKind) -> Vec<(&'static str, ElemType)> {
        let mut out = vec![
            ("qos", ElemType::I64),
            ("prev", ElemType::I64),
            ("start", ElemType::I64),
        ];
        out.extend(
            COORD_NAMES[..rank_of(kind)]
                .iter()
                .map(|n| (*n, ElemType::I64)),
        );
        out
    }

    fn validate(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        let n = rank_of(kind);
        let ptr = i64s(&bufs[PTR]);
        let idx: Vec<&[i64]> = (0..n).map(|k| i64s(&bufs[1 + k])).collect();
        if ptr.len() != parent_count + 1 {
            return Err(format!(
                "ptr has {} entries, expected {}",
                ptr.len(),
                parent_count + 1
            ));
        }
        if ptr[0] != 0 {
            return Err("ptr[0] must be 0".into());
        }
        let entries = ptr[parent_count];
        if let Some(k) = (0..n).find(|&k| (idx[k].len() as i64) < entries) {
            return Err(format!(
                "idx{k} has {} entries, ptr promises {entries}",
                idx[k].len()
            ));
        }
        for p in 0..parent_count {
            let (lo, hi) = (ptr[p], ptr[p + 1]);
            if hi < lo || hi > entries {
                return Err(format!(
                    "ptr[{}] = {hi} is out of order or past the end",
                    p + 1
                ));
            }
            for q in lo as usize..hi as usize {
                for k in 0..n {
                    if idx[k][q] < 0 || idx[k][q] as usize >= dims[k] {
                        return Err(format!(
                            "idx{k}[{q}] = {} is outside 0..{}",
                            idx[k][q], dims[k]
                        ));
                    }
                }
                let tuple = |q: usize| idx.iter().map(move |c| c[q]);
                if q > lo as usize && !tuple(q - 1).lt(tuple(q)) {
                    return Err(format!(
                        "entry {q} is not after entry {} in lexicographic order",
                        q - 1
                    ));
                }
            }
        }
        Ok(entries as usize)
    }
    fn finish(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        bufs[PTR].truncate(parent_count + 1);
        let entries = i64s(&bufs[PTR])[parent_count] as usize;
        for k in 0..rank_of(kind) {
            bufs[1 + k].truncate(entries);
        }
        entries
    }
    fn empty(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        bufs[PTR] = Buffer::I64(vec![0; parent_count + 1]);
        for k in 0..rank_of(kind) {
            bufs[1 + k] = Buffer::I64(vec![]);
        }
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
        let n = rank_of(kind);
        let ptr = i64s(&bufs[PTR]);
        let mut c = vec![0usize; n];
        for q in ptr[pos] as usize..ptr[pos + 1] as usize {
            for (k, x) in c.iter_mut().enumerate() {
                *x = i64s(&bufs[1 + k])[q] as usize;
            }
            f(&c, q);
        }
    }
    fn remap(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        map: &[Option<usize>],
    ) -> Vec<Option<usize>> {
        let n = rank_of(kind);
        let ptr = i64s(&bufs[PTR]).to_vec();
        let old: Vec<Vec<i64>> = (0..n).map(|k| i64s(&bufs[1 + k]).to_vec()).collect();
        let mut new_ptr = vec![0i64];
        let mut new_idx = vec![vec![]; n];
        let mut child = vec![];
        for m in map {
            if let Some(p) = *m {
                let (lo, hi) = (ptr[p] as usize, ptr[p + 1] as usize);
                for (new, old) in new_idx.iter_mut().zip(&old) {
                    new.extend_from_slice(&old[lo..hi]);
                }
                child.extend((lo..hi).map(Some));
            }
            new_ptr.push(child.len() as i64);
        }
        bufs[PTR] = Buffer::I64(new_ptr);
        for (k, v) in new_idx.into_iter().enumerate() {
            bufs[1 + k] = Buffer::I64(v);
        }
        child
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
        let n = rank_of(kind);
        let mut ptr = vec![0i64; parent_count + 1];
        let mut idx = vec![vec![]; n];
        let mut out = vec![];
        for &(p, lo, hi) in groups {
            let mut a = lo;
            while a < hi {
                let mut z = a + 1;
                while z < hi && coords.iter().all(|c| c[z] == c[a]) {
                    z += 1;
                }
                out.push((idx[0].len(), a, z));
                for k in 0..n {
                    idx[k].push(coords[k][a]);
                }
                ptr[p + 1] += 1;
                a = z;
            }
        }
        for p in 1..=parent_count {
            ptr[p] += ptr[p - 1];
        }
        let entries = out.len();
        bufs[PTR] = Buffer::I64(ptr);
        for (k, v) in idx.into_iter().enumerate() {
            bufs[1 + k] = Buffer::I64(v);
        }
        (entries, out)
    }

    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        if init.cast(l.tensor.elem) != l.tensor.fill {
            return Err(Error::tensor(
                &l.tensor.name,
                format!(
                    "a sparse tensor can only be declared with its fill value {}, not {init}",
                    l.tensor.fill
                ),
            ));
        }
        let ptr = l.buf(PTR);
        let mut code = vec![
            Stmt::Grow {
                buf: ptr,
                len: b::add(count.clone(), b::int(1)),
            },
            Stmt::Fill {
                buf: ptr,
                start: b::int(0),
                stop: b::add(count, b::int(1)),
                value: b::int(0),
            },
            b::assign(l.state(QOS), b::int(0)),
            b::assign(l.state(PREV), b::int(-1)),
        ];
        code.extend(l.child_impl().declare(cx, &l.child(), b::int(0), init)?);
        Ok(code)
    }
    fn assemble(&self, _: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        let ptr = l.buf(PTR);
        let prev = l.state(PREV);
        let mut code = vec![
            Stmt::Grow {
                buf: ptr,
                len: b::add(hi.clone(), b::int(1)),
            },
            Stmt::Fill {
                buf: ptr,
                start: b::add(lo.clone(), b::int(1)),
                stop: b::add(hi, b::int(1)),
                value: b::int(0),
            },
        ];
        // A sparse ancestor retrying positions it did not keep (nothing was recorded under
        // them) reopens fibers from `lo` on: they may be written again.
        code.extend(b::if_(
            b::le(lo.clone(), b::var(prev)),
            vec![b::assign(prev, b::sub(lo, b::int(1)))],
        ));
        Ok(code)
    }
    fn freeze(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        let ptr = l.buf(PTR);
        let p = cx.var("p", ElemType::I64);
        let mut code = vec![Stmt::For {
            var: p,
            start: b::int(1),
            stop: b::add(count.clone(), b::int(1)),
            body: vec![b::store(
                ptr,
                b::var(p),
                b::add(
                    b::load(ptr, b::var(p)),
                    b::load(ptr, b::sub(b::var(p), b::int(1))),
                ),
            )],
        }];
        let (child, n) = l.child_impl().freeze(cx, &l.child(), b::load(ptr, count))?;
        code.extend(child);
        Ok((code, n))
    }
    fn thaw(&self, _: &mut Cx, l: &LevelRef, _: Expr) -> Result<(Vec<Stmt>, Expr)> {
        Err(Error::tensor(
            &l.tensor.name,
            "a SparseCOO level cannot be reopened for updates after it was read (declare it again, or use a Dense format)",
        ))
    }

    fn unfurl_read(&self, cx: &mut Cx, f: &Fiber, _: Option<Protocol>) -> Result<Looplet> {
        let t = &f.tensor;
        let n = rank_of(&t.format.levels[f.level]);
        let s = f.sub;
        let (ptr, idx) = (t.level_bufs[f.level][PTR], t.level_bufs[f.level][1 + s]);
        let q = cx.var(&format!("{}_q{s}", t.name), ElemType::I64);
        let q_stop = cx.var(&format!("{}_q{s}_stop", t.name), ElemType::I64);
        let run_end = cx.var(&format!("{}_q{s}_run", t.name), ElemType::I64);
        let last = cx.var(&format!("{}_last{s}", t.name), ElemType::I64);
        let (lo, hi) = match &f.pos_hi {
            Some(hi) => (f.pos.clone(), hi.clone()),
            None => (
                b::load(ptr, f.pos.clone()),
                b::load(ptr, b::add(f.pos.clone(), b::int(1))),
            ),
        };
        let find_run_end = find_run_end(idx, q, q_stop, run_end);
        let mut preamble = vec![
            b::assign(q, lo),
            b::assign(q_stop, hi),
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
        preamble.extend(find_run_end.clone());
        let fill = Target::Fill(t.fill);
        let stop = b::load(idx, b::var(q));
        let tail = if s + 1 < n {
            Fiber {
                tensor: t.clone(),
                level: f.level,
                pos: b::var(q),
                pos_hi: Some(b::var(run_end)),
                sub: s + 1,
                dirty: None,
            }
        } else {
            f.child(b::var(q))
        };
        let seek_run_end = find_run_end.clone();
        let mut next = vec![b::assign(q, b::var(run_end))];
        next.extend(find_run_end);
        let stepper = Stepper {
            seek: Rc::new(move |start: &Expr| {
                // Every stored coordinate is >= 0, so a walk from 0 needs no search.
                if *start == b::int(0) {
                    return vec![];
                }
                let mut code = vec![b::assign(
                    q,
                    Expr::SearchGe {
                        buf: idx,
                        lo: Box::new(b::var(q)),
                        hi: Box::new(b::var(q_stop)),
                        key: Box::new(start.clone()),
                    },
                )];
                code.extend(seek_run_end.clone());
                code
            }),
            stop: stop.clone(),
            chunk: Looplet::Spike {
                at: stop,
                body: Box::new(fill.clone()),
                tail: Box::new(Target::Fiber(tail)),
            },
            next,
        };
        Ok(Looplet::Thunk {
            preamble,
            body: Box::new(Target::Looplet(Looplet::Sequence(vec![
                Phase {
                    stop: Some(b::var(last)),
                    body: Looplet::Stepper(Rc::new(stepper)),
                },
                Phase {
                    stop: None,
                    body: Looplet::Run(Box::new(fill)),
                },
            ]))),
            epilogue: vec![],
        })
    }

    fn unfurl_update(&self, cx: &mut Cx, f: &Fiber) -> Result<Looplet> {
        let t = f.tensor.clone();
        let l = LevelRef {
            tensor: &t,
            level: f.level,
        };
        let n = rank_of(l.kind());
        let s = f.sub;
        if s + 1 < n {
            // An outer dimension: remember the coordinate until the entry is complete.
            let c = l.state(coord(s));
            let inner = Fiber {
                tensor: t.clone(),
                level: f.level,
                pos: f.pos.clone(),
                pos_hi: None,
                sub: s + 1,
                dirty: f.dirty,
            };
            let lookup = Looplet::Lookup(Rc::new(move |i: &Expr| {
                Target::Looplet(Looplet::Thunk {
                    preamble: vec![b::assign(c, i.clone())],
                    body: Box::new(Target::Fiber(inner.clone())),
                    epilogue: vec![],
                })
            }));
            return Ok(if s == 0 {
                self.open_fiber(cx, &l, f, lookup)
            } else {
                lookup
            });
        }
        let ptr_bufs: Vec<BufId> = (0..n).map(|k| l.buf(1 + k)).collect();
        let coords: Vec<VarId> = (0..n - 1).map(|k| l.state(coord(k))).collect();
        let (qos, start) = (l.state(QOS), l.state(START));
        let dirty = cx.var(&format!("{}_dirty", t.name), ElemType::Bool);
        let order = cx.error(format!(
            "tensor `{}`: SparseCOO entries must be written once each, in increasing lexicographic order",
            t.name
        ));
        let mut point_pre: Vec<Stmt> = ptr_bufs
            .iter()
            .map(|&buf| Stmt::Grow {
                buf,
                len: b::add(b::var(qos), b::int(1)),
            })
            .collect();
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
        let lookup = Looplet::Lookup(Rc::new(move |i: &Expr| {
            let mut new: Vec<Expr> = coords.iter().map(|&c| b::var(c)).collect();
            new.push(i.clone());
            let prev: Vec<Expr> = ptr_bufs
                .iter()
                .map(|&buf| b::load(buf, b::sub(b::var(qos), b::int(1))))
                .collect();
            let mut commit = vec![Stmt::If {
                cond: b::lt(b::var(start), b::var(qos)),
                then: b::if_(b::not(lex_less(&prev, &new)), vec![Stmt::Fail(order)]),
                otherwise: vec![],
            }];
            for (&buf, v) in ptr_bufs.iter().zip(new) {
                commit.push(b::store(buf, b::var(qos), v));
            }
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
        Ok(if s == 0 {
            self.open_fiber(cx, &l, f, lookup)
        } else {
            lookup
        })
    }
}

impl SparseCOO {
    /// Start updating fiber `f.pos`: fibers in increasing order, its count recorded at the end.
    fn open_fiber(&self, cx: &mut Cx, l: &LevelRef, f: &Fiber, body: Looplet) -> Looplet {
        let (ptr, qos, prev, start) = (l.buf(PTR), l.state(QOS), l.state(PREV), l.state(START));
        let fiber_order = cx.error(format!(
            "tensor `{}`: SparseCOO fibers must be written in increasing position order",
            l.tensor.name
        ));
        let pos = f.pos.clone();
        let preamble = vec![
            Stmt::If {
                cond: b::lt(pos.clone(), b::var(prev)),
                then: vec![Stmt::Fail(fiber_order)],
                otherwise: vec![],
            },
            b::assign(prev, pos.clone()),
            b::assign(
                start,
                b::sub(b::var(qos), b::load(ptr, b::add(pos.clone(), b::int(1)))),
            ),
        ];
        let epilogue = vec![b::store(
            ptr,
            b::add(pos, b::int(1)),
            b::sub(b::var(qos), b::var(start)),
        )];
        Looplet::Thunk {
            preamble,
            body: Box::new(Target::Looplet(body)),
            epilogue,
        }
    }
}

/// `run_end` = the first position after `q` whose coordinate differs from `idx[q]`.
fn find_run_end(idx: BufId, q: VarId, q_stop: VarId, run_end: VarId) -> Vec<Stmt> {
    vec![Stmt::If {
        cond: b::lt(b::var(q), b::var(q_stop)),
        then: vec![b::assign(
            run_end,
            Expr::SearchGe {
                buf: idx,
                lo: Box::new(b::add(b::var(q), b::int(1))),
                hi: Box::new(b::var(q_stop)),
                key: Box::new(b::add(b::load(idx, b::var(q)), b::int(1))),
            },
        )],
        otherwise: vec![b::assign(run_end, b::var(q))],
    }]
}

/// `a < b` in lexicographic order.
fn lex_less(a: &[Expr], b_: &[Expr]) -> Expr {
    let last = a.len() - 1;
    let mut e = b::lt(a[last].clone(), b_[last].clone());
    for k in (0..last).rev() {
        e = b::or(
            b::lt(a[k].clone(), b_[k].clone()),
            b::and(b::eq(a[k].clone(), b_[k].clone()), e),
        );
    }
    e
}

fn i64s(b: &Buffer) -> &[i64] {
    b.as_i64().expect("SparseCOO buffers are i64")
}
