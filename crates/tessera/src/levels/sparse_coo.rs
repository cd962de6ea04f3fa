//! `SparseCOO{N}`: N dimensions in one level. The entries of fiber `p` are positions
//! `ptr[p]..ptr[p+1]`; entry `q` has coordinates `(idx0[q], ..., idx{N-1}[q])`, strictly
//! increasing in lexicographic order; child positions are entry positions.
//!
//! Reading dimension `s` of a fiber walks the runs of equal `idx{s}` inside the fiber's
//! position range (for `s > 0` the range of one run of the previous dimension), so every
//! dimension is a stepper over stored coordinates only. Updates append whole entries; the
//! coordinates of the outer dimensions wait in variables of their access (`Fiber::coords`)
//! until the innermost one is known. Entries may be written in any order (non-concordant
//! loops, scatters): each records its fiber in `epos`, and a freeze after an out-of-order write
//! sorts the entries with a stable permutation sort and moves coordinates and leaf values into
//! place. An entry written twice cannot be combined at freeze (its child may be a whole
//! sub-fiber), so it is an error; SparseDict and SparseByteMap accumulate repeated writes.
//!
//! An entry is appended (its position taken, its coordinates stored) as soon as its write
//! starts, and given back when it ends without writing anything, if no later entry was
//! appended meanwhile. Several writes in one loop body are separate accesses whose set-up all
//! runs before their wrap-up, so appending early is what gives each its own entry; one that
//! ends up unwritten behind a written one stays, holding the fill value.
//!
//! A root level has one fiber, so its entries need no `epos`: appends neither store nor
//! compare it, and the freeze sorts by the coordinates alone (a 1-D root with a `Pattern`
//! child, such as a query's list of hits, by one in-place sort of its coordinates).

use super::registry::{self, Args, Arity, Caps, LevelSpec, Param, Role, Writes};
use super::{Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::{Cx, KernelError, KernelErrorKind, Order};
use crate::ir::{BufId, Expr, Stmt, VarId, build as b};
use crate::looplets::{Fiber, Looplet, Stepper, Target};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use std::rc::Rc;

pub struct SparseCOO;

pub const SPEC: LevelSpec = LevelSpec {
    name: "SparseCOO",
    role: Role::Level,
    arity: Arity::Dims,
    params: &[Param::Dims { max: MAX_RANK }],
    protocols: &[Protocol::Gallop, Protocol::Follow],
    caps: Caps {
        sparse: true,
        writes: Writes::AnyOrderOnce,
        reopen: true,
        ..Caps::LEVEL
    },
    is: |k| matches!(k, LevelKind::SparseCOO(_)),
    make: |a| LevelKind::SparseCOO(a.dims),
    args: |k| Args {
        dims: rank_of(k),
        ..Args::default()
    },
    check_below: registry::any_below,
    imp: &SparseCOO,
};

/// The largest N of `SparseCOO{N}`.
pub const MAX_RANK: usize = 8;
const IDX_NAMES: [&str; MAX_RANK] = [
    "idx0", "idx1", "idx2", "idx3", "idx4", "idx5", "idx6", "idx7",
];

const PTR: usize = 0;
/// State: the number of entries appended since the declaration.
const QOS: usize = 0;
/// State: an entry arrived out of order since the declaration.
const UNSORTED: usize = 1;

/// Update scratch after the coordinate arrays: each entry's fiber, and the sort permutation.
const fn epos(n: usize) -> usize {
    1 + n
}
const fn perm(n: usize) -> usize {
    2 + n
}

/// Whether the level holds a single fiber (it is the root), so `epos` would always be 0.
fn one_fiber(l: &LevelRef) -> bool {
    l.level == 0
}

/// Whether the freeze sorts the entries in place, nothing moving with them: a root
/// `SparseCOO{1}` of `Pattern()` (a set of coordinates, such as the ids a point query finds).
/// Such a level skips the order test at each append and always sorts at the freeze: the sort
/// helper returns after one pass when the entries came in order, and the duplicate scan is
/// one more pass, where the test cost two loads and a compare per entry (most of an
/// append's work).
fn sorts_in_place(l: &LevelRef) -> bool {
    one_fiber(l) && rank_of(l.kind()) == 1 && matches!(l.child().kind(), LevelKind::Pattern)
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
        out.push(("epos", ElemType::I64));
        out.push(("perm", ElemType::I64));
        out
    }
    fn scratch(&self) -> &'static [&'static str] {
        &["epos", "perm"]
    }
    fn state(&self, _: &LevelKind) -> Vec<(&'static str, ElemType)> {
        vec![("qos", ElemType::I64), ("unsorted", ElemType::Bool)]
    }
    fn coordinates(&self, kind: &LevelKind) -> Vec<(usize, usize)> {
        (0..rank_of(kind)).map(|k| (1 + k, k)).collect()
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
        super::shared::check_ptr_shape(ptr, parent_count)?;
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
        let n = rank_of(kind);
        for k in 0..n {
            bufs[1 + k].truncate(entries);
        }
        bufs[epos(n)].truncate(0);
        bufs[perm(n)].truncate(0);
        entries
    }
    fn empty(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        bufs[PTR] = Buffer::I64(vec![0; parent_count + 1].into());
        for k in 0..rank_of(kind) {
            bufs[1 + k] = Buffer::I64(vec![].into());
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
        bufs[PTR] = Buffer::I64(new_ptr.into());
        for (k, v) in new_idx.into_iter().enumerate() {
            bufs[1 + k] = Buffer::I64(v.into());
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
        bufs[PTR] = Buffer::I64(ptr.into());
        for (k, v) in idx.into_iter().enumerate() {
            bufs[1 + k] = Buffer::I64(v.into());
        }
        (entries, out)
    }

    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        super::shared::declare_to_fill(l, init)?;
        let ptr = l.buf(PTR);
        let mut code = super::shared::zero_ptr(ptr, count).to_vec();
        code.extend([
            b::assign(l.state(QOS), b::int(0)),
            b::assign(l.state(UNSORTED), b::boolean(false)),
        ]);
        code.extend(l.child_impl().declare(cx, &l.child(), b::int(0), init)?);
        Ok(code)
    }
    fn assemble(&self, _: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        // Fibers `lo..hi` start empty: their counts (`ptr[p + 1]` until the freeze) are 0.
        Ok(super::shared::empty_fibers(l.buf(PTR), lo, hi))
    }
    fn freeze(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        let ptr = l.buf(PTR);
        let mut code = if sorts_in_place(l) {
            self.sort_entries(cx, l)?
        } else {
            b::if_(b::var(l.state(UNSORTED)), self.sort_entries(cx, l)?)
        };
        code.push(super::shared::prefix_sum(cx, ptr, count.clone()));
        let (child, n) = l.child_impl().freeze(cx, &l.child(), b::load(ptr, count))?;
        code.extend(child);
        Ok((code, n))
    }
    /// Finch's thaw, which Finch itself lacks for this level: new entries are appended in any
    /// order and the freeze sorts them in among the stored ones (a coordinate written again
    /// is the usual "written twice" error). The entries' fibers (`epos`) are rebuilt first,
    /// since the sort needs them and a tensor given to the kernel does not carry them.
    fn thaw(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        let n = rank_of(l.kind());
        let (ptr, epos_buf, qos) = (l.buf(PTR), l.buf(epos(n)), l.state(QOS));
        let (cnt, p, q) = (
            cx.var("thaw_fibers", ElemType::I64),
            cx.var("p", ElemType::I64),
            cx.var("q", ElemType::I64),
        );
        let mut code = vec![b::assign(cnt, count)];
        if !one_fiber(l) {
            code.extend([
                Stmt::Grow {
                    buf: epos_buf,
                    len: b::load(ptr, b::var(cnt)),
                },
                Stmt::For {
                    var: p,
                    start: b::int(0),
                    stop: b::var(cnt),
                    body: vec![Stmt::For {
                        var: q,
                        start: b::load(ptr, b::var(p)),
                        stop: b::load(ptr, b::add(b::var(p), b::int(1))),
                        body: vec![b::store(epos_buf, b::var(q), b::var(p))],
                    }],
                },
            ]);
        }
        // No fiber order to keep: an entry before the last stored one only marks the level
        // for sorting at the next freeze.
        code.extend(super::shared::thaw_counted(cx, ptr, qos, None, b::var(cnt)));
        code.push(b::assign(l.state(UNSORTED), b::boolean(false)));
        let (child, m) = l.child_impl().thaw(cx, &l.child(), b::var(qos))?;
        code.extend(child);
        Ok((code, m))
    }

    fn unfurl_read(&self, cx: &mut Cx, f: &Fiber, protocol: Option<Protocol>) -> Result<Looplet> {
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
        if protocol == Some(Protocol::Follow) {
            // Entries `lo..hi` agree on the outer coordinates, so this one is sorted there;
            // the entries at `i` run up to the first one past it.
            let (t2, level, fill) = (t.clone(), f.level, Target::Fill(t.fill));
            let f2 = f.clone();
            return Ok(super::shared::follow_by_search(
                cx,
                &format!("{}{s}", t.name),
                vec![b::assign(q, lo), b::assign(q_stop, hi)],
                idx,
                b::var(q),
                b::var(q_stop),
                Rc::new(move |q: &Expr, i: &Expr| b::eq(b::load(idx, q.clone()), i.clone())),
                Rc::new(move |at: &Expr, i: &Expr| {
                    if s + 1 < n {
                        Target::Fiber(Fiber {
                            tensor: t2.clone(),
                            level,
                            pos: at.clone(),
                            pos_hi: Some(Expr::SearchGe {
                                buf: idx,
                                lo: Box::new(at.clone()),
                                hi: Box::new(b::var(q_stop)),
                                key: Box::new(b::add(i.clone(), b::int(1))),
                            }),
                            sub: s + 1,
                            dirty: None,
                            coords: vec![],
                        })
                    } else {
                        Target::Fiber(f2.child(at.clone()))
                    }
                }),
                fill,
            ));
        }
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
                coords: vec![],
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
            positions: None,
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
        let l = LevelRef {
            tensor: &t,
            level: f.level,
        };
        let n = rank_of(l.kind());
        let s = f.sub;
        if s + 1 < n {
            // An outer dimension: this access holds the coordinate until the entry is complete.
            let c = cx.var(&format!("{}_c{s}", t.name), ElemType::I64);
            let mut coords = f.coords.clone();
            coords.push(b::var(c));
            let inner = Fiber {
                tensor: t.clone(),
                level: f.level,
                pos: f.pos.clone(),
                pos_hi: None,
                sub: s + 1,
                dirty: f.dirty,
                coords,
            };
            return Ok(Looplet::Lookup(Rc::new(move |i: &Expr| {
                Target::Looplet(Looplet::Thunk {
                    preamble: vec![b::assign(c, i.clone())],
                    body: Box::new(Target::Fiber(inner.clone())),
                    epilogue: vec![],
                })
            })));
        }
        let idx_bufs: Vec<BufId> = (0..n).map(|k| l.buf(1 + k)).collect();
        let (ptr, epos_buf) = (l.buf(PTR), l.buf(epos(n)));
        // The fiber is part of an entry's key unless there is only one.
        let fiber_key: Option<BufId> = (!one_fiber(&l)).then_some(epos_buf);
        let (qos, unsorted_var) = (l.state(QOS), l.state(UNSORTED));
        let test_order = !sorts_in_place(&l);
        // This access's entry, and whether its child was written.
        let q = cx.var(&format!("{}_q", t.name), ElemType::I64);
        let dirty = cx.var(&format!("{}_dirty", t.name), ElemType::Bool);
        let mut grow: Vec<Stmt> = idx_bufs
            .iter()
            .chain(&fiber_key)
            .map(|&buf| Stmt::Grow {
                buf,
                len: b::add(b::var(q), b::int(1)),
            })
            .collect();
        grow.extend(l.child_impl().assemble(
            cx,
            &l.child(),
            b::var(q),
            b::add(b::var(q), b::int(1)),
        )?);
        let mut child = f.child(b::var(q));
        child.dirty = Some(dirty);
        let (parent_dirty, fiber_pos, outer) = (f.dirty, f.pos.clone(), f.coords.clone());
        // Entry `k` as (fiber, coordinates), the order the freeze sorts by.
        let entry = {
            let idx_bufs = idx_bufs.clone();
            move |k: Expr| -> Vec<Expr> {
                fiber_key
                    .iter()
                    .chain(&idx_bufs)
                    .map(|&buf| b::load(buf, k.clone()))
                    .collect()
            }
        };
        let lookup = Looplet::Lookup(Rc::new(move |i: &Expr| {
            let mut preamble = vec![b::assign(q, b::var(qos))];
            preamble.extend(grow.clone());
            for (&buf, c) in idx_bufs.iter().zip(outer.iter().chain([i])) {
                preamble.push(b::store(buf, b::var(q), c.clone()));
            }
            if let Some(e) = fiber_key {
                preamble.push(b::store(e, b::var(q), fiber_pos.clone()));
            }
            preamble.extend([
                b::assign(qos, b::add(b::var(q), b::int(1))),
                b::assign(dirty, b::boolean(false)),
            ]);
            // Kept: count it in its fiber, and sort at freeze if it is not after the entry
            // before it (an out-of-order write, or a fiber reopened after a later one).
            let count = b::add(fiber_pos.clone(), b::int(1));
            let before = entry(b::sub(b::var(q), b::int(1)));
            let mut keep = vec![b::store(
                ptr,
                count.clone(),
                b::add(b::load(ptr, count), b::int(1)),
            )];
            if test_order {
                keep.push(Stmt::If {
                    cond: b::lt(b::int(0), b::var(q)),
                    then: b::if_(
                        b::not(lex_less(&before, &entry(b::var(q)))),
                        vec![b::assign(unsorted_var, b::boolean(true))],
                    ),
                    otherwise: vec![],
                });
            }
            if let Some(d) = parent_dirty {
                keep.push(b::assign(d, b::boolean(true)));
            }
            // Unwritten and still the last entry: give its position back.
            let last = b::eq(b::add(b::var(q), b::int(1)), b::var(qos));
            let epilogue = vec![Stmt::If {
                cond: b::and(b::not(b::var(dirty)), last),
                then: vec![b::assign(qos, b::var(q))],
                otherwise: keep,
            }];
            Target::Looplet(Looplet::Thunk {
                preamble,
                body: Box::new(Target::Fiber(child.clone())),
                epilogue,
            })
        }));
        Ok(lookup)
    }
}

impl SparseCOO {
    /// Sort the entries written since the declaration by (fiber, coordinates), moving leaf
    /// values along; a repeated entry is an error.
    fn sort_entries(&self, cx: &mut Cx, l: &LevelRef) -> Result<Vec<Stmt>> {
        let n = rank_of(l.kind());
        let name = &l.tensor.name;
        let total = b::var(l.state(QOS));
        let (perm_buf, epos_buf) = (l.buf(perm(n)), l.buf(epos(n)));
        // An entry's key: its fiber (unless there is one) and its coordinates.
        let fiber_key: Option<BufId> = (!one_fiber(l)).then_some(epos_buf);
        let coords: Vec<BufId> = (0..n).map(|k| l.buf(1 + k)).collect();
        // What moves with an entry: its key and (for a leaf child) its value.
        let mut moved: Vec<BufId> = fiber_key.iter().chain(&coords).copied().collect();
        let child = l.child();
        match child.kind() {
            LevelKind::Element(_) => moved.push(child.buf(0)),
            LevelKind::Pattern => {}
            _ => {
                let e = cx.error(KernelError::new(
                    name,
                    KernelErrorKind::OutOfOrder {
                        level: "SparseCOO",
                        order: Order::Sorted,
                    },
                ));
                return Ok(vec![Stmt::Fail(e)]);
            }
        }
        let k = cx.var("k", ElemType::I64);
        let mut code = vec![];
        if let [only] = moved[..] {
            // Nothing moves with the one key: sort it in place.
            code.push(Stmt::Sort {
                buf: only,
                lo: b::int(0),
                hi: total.clone(),
                flags: None,
            });
        } else {
            code.extend([
                Stmt::Grow {
                    buf: perm_buf,
                    len: total.clone(),
                },
                Stmt::For {
                    var: k,
                    start: b::int(0),
                    stop: total.clone(),
                    body: vec![b::store(perm_buf, b::var(k), b::var(k))],
                },
            ]);
            // Stable sorts from the least significant key: last coordinate first, fiber last.
            for &key in coords.iter().rev().chain(&fiber_key) {
                code.push(Stmt::SortPerm {
                    keys: key,
                    perm: perm_buf,
                    lo: b::int(0),
                    hi: total.clone(),
                });
            }
            code.extend(apply_permutation(cx, perm_buf, &moved, total.clone()));
        }
        // Sorted: a repeated entry now sits next to its twin.
        let dup = cx.error(KernelError::new(
            name,
            KernelErrorKind::Duplicate { level: "SparseCOO" },
        ));
        let same = coords
            .iter()
            .chain(&fiber_key)
            .map(|&buf| {
                b::eq(
                    b::load(buf, b::var(k)),
                    b::load(buf, b::sub(b::var(k), b::int(1))),
                )
            })
            .reduce(b::and)
            .expect("at least the fiber key");
        code.push(Stmt::For {
            var: k,
            start: b::int(1),
            stop: total,
            body: b::if_(same, vec![Stmt::Fail(dup)]),
        });
        Ok(code)
    }
}

/// Rearrange `bufs[0..total]` in place so entry `k` becomes old entry `perm[k]`, following
/// each cycle of the permutation once (visited entries of `perm` are marked by `-1 - p`).
fn apply_permutation(cx: &mut Cx, perm: BufId, bufs: &[BufId], total: Expr) -> Vec<Stmt> {
    let (start, j, next) = (
        cx.var("cycle", ElemType::I64),
        cx.var("j", ElemType::I64),
        cx.var("next", ElemType::I64),
    );
    let temps: Vec<VarId> = bufs
        .iter()
        .map(|&buf| {
            let elem = cx.bufs[buf.0 as usize].elem;
            cx.var("held", elem.compute())
        })
        .collect();
    let mut walk = vec![
        b::assign(next, b::load(perm, b::var(j))),
        b::store(perm, b::var(j), b::sub(b::int(-1), b::var(next))),
    ];
    let mut close = vec![];
    let mut shift = vec![];
    for (&buf, &t) in bufs.iter().zip(&temps) {
        close.push(b::store(buf, b::var(j), b::var(t)));
        shift.push(b::store(buf, b::var(j), b::load(buf, b::var(next))));
    }
    close.push(Stmt::Break);
    shift.push(b::assign(j, b::var(next)));
    walk.push(Stmt::If {
        cond: b::eq(b::var(next), b::var(start)),
        then: close,
        otherwise: shift,
    });
    let mut cycle: Vec<Stmt> = bufs
        .iter()
        .zip(&temps)
        .map(|(&buf, &t)| b::assign(t, b::load(buf, b::var(start))))
        .collect();
    cycle.push(b::assign(j, b::var(start)));
    cycle.push(Stmt::While {
        cond: b::boolean(true),
        body: walk,
    });
    vec![Stmt::For {
        var: start,
        start: b::int(0),
        stop: total,
        body: b::if_(b::le(b::int(0), b::load(perm, b::var(start))), cycle),
    }]
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
