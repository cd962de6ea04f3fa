//! `SparseByteMap` (the paper's SparseBytemap): a dense table of flags plus the list of the
//! slots that were set, so it takes writes in any order and reads like a sparse level.
//!
//! Storage, for a dimension of size `n` under `P` parent positions:
//! - `tbl` (bool, `P * n`): whether slot `q = p * n + i` holds an entry;
//! - `srt` (i64): the set slots, each encoded as the single number `q = p * n + i` (so the
//!   lexicographic order of (position, coordinate) pairs is plain integer order, and one sort
//!   orders them); sorted after a freeze, in write order while being updated;
//! - `ptr` (i64, `P + 1`): after a freeze the entries of fiber `p` are `srt[ptr[p]..ptr[p+1]]`.
//!
//! Children are allocated densely: the child of slot `q` is child position `q` whatever `tbl`
//! says, and an unset slot's child holds fill.
//!
//! Updates are random access: the first write to a slot sets `tbl` and appends to `srt`.
//! Freeze sorts `srt` and rebuilds `ptr`. Declaring again clears only the slots listed in `srt`
//! (their flags, and their children when the child is a leaf), so resetting a workspace costs
//! O(entries written), not O(n); that is what makes Gustavson's SpGEMM fast. The first
//! declaration in a kernel clears the whole table (the `ready` state says which). A non-leaf
//! child cannot be reset slot by slot and is declared whole each time.

use super::registry::{self, Arity, Caps, LevelSpec, Role, Writes};
use super::{Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::Cx;
use crate::ir::{Expr, Stmt, build as b};
use crate::looplets::{Fiber, Looplet, Positions, Stepper, Target};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use std::rc::Rc;

pub struct SparseByteMap;

pub const SPEC: LevelSpec = LevelSpec {
    name: "SparseByteMap",
    role: Role::Level,
    arity: Arity::Fixed(1),
    params: &[],
    protocols: &[Protocol::Gallop, Protocol::Follow],
    caps: Caps {
        sparse: true,
        writes: Writes::Random,
        reopen: true,
        ..Caps::LEVEL
    },
    is: |k| matches!(k, LevelKind::SparseByteMap),
    make: |_| LevelKind::SparseByteMap,
    args: registry::no_args,
    check_below: registry::any_below,
    imp: &SparseByteMap,
};

const PTR: usize = 0;
const TBL: usize = 1;
const SRT: usize = 2;
/// State: the number of entries of `srt`, and whether the table is known clean apart from them.
const NSRT: usize = 0;
const READY: usize = 1;

impl Level for SparseByteMap {
    fn buffers(&self, _: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        vec![
            ("ptr", ElemType::I64),
            ("tbl", ElemType::Bool),
            ("srt", ElemType::I64),
        ]
    }
    fn state(&self, _: &LevelKind) -> Vec<(&'static str, ElemType)> {
        vec![("nsrt", ElemType::I64), ("ready", ElemType::Bool)]
    }
    /// Fibers share only `nsrt` and the list `srt` it appends to: the flags and the children
    /// are per slot (`p * n + i`), so fibers written by different chunks touch different
    /// elements of them. A leaf child only, whose slots the declaration already sized.
    fn appends_rows(&self, _: &LevelKind, child: &LevelKind) -> bool {
        child.is_leaf()
    }
    fn appends(&self, l: &LevelRef) -> Option<crate::ir::Rows> {
        Some(crate::ir::Rows {
            cursor: l.state(NSRT),
            last: None,
            arrays: vec![l.buf(SRT)],
        })
    }

    fn validate(
        &self,
        _: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        let (ptr, tbl, srt) = (i64s(&bufs[PTR]), bools(&bufs[TBL]), i64s(&bufs[SRT]));
        let n = dims[0];
        let slots = parent_count
            .checked_mul(n)
            .ok_or_else(|| "the table size overflows".to_string())?;
        super::shared::check_ptr_shape(ptr, parent_count)?;
        if tbl.len() < slots {
            return Err(format!("tbl has {} entries, expected {slots}", tbl.len()));
        }
        for p in 0..parent_count {
            let (lo, hi) = (ptr[p], ptr[p + 1]);
            if hi < lo || hi as usize > srt.len() {
                return Err(format!(
                    "ptr[{}] = {hi} is out of order or past the end of srt",
                    p + 1
                ));
            }
            let base = (p * n) as i64;
            for k in lo as usize..hi as usize {
                let q = srt[k];
                if q < base || q >= base + n as i64 {
                    return Err(format!(
                        "srt[{k}] = {q} is not a slot of fiber {p} ({base}..{})",
                        base + n as i64
                    ));
                }
                if k > lo as usize && q <= srt[k - 1] {
                    return Err(format!(
                        "srt[{k}] = {q} is not above srt[{}] = {}",
                        k - 1,
                        srt[k - 1]
                    ));
                }
                if !tbl[q as usize] {
                    return Err(format!("srt[{k}] = {q} lists a slot tbl does not set"));
                }
            }
        }
        let set = tbl[..slots].iter().filter(|&&x| x).count();
        if set as i64 != ptr[parent_count] {
            return Err(format!(
                "tbl sets {set} slots but srt lists {}",
                ptr[parent_count]
            ));
        }
        Ok(slots)
    }
    fn finish(
        &self,
        _: &LevelKind,
        bufs: &mut [Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> usize {
        bufs[PTR].truncate(parent_count + 1);
        let n = i64s(&bufs[PTR])[parent_count] as usize;
        bufs[SRT].truncate(n);
        bufs[TBL].truncate(parent_count * dims[0]);
        parent_count * dims[0]
    }
    fn empty(
        &self,
        _: &LevelKind,
        bufs: &mut [Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> usize {
        let slots = parent_count * dims[0];
        bufs[PTR] = Buffer::I64(vec![0; parent_count + 1].into());
        bufs[TBL] = Buffer::Bool(vec![false; slots].into());
        bufs[SRT] = Buffer::I64(vec![].into());
        slots
    }

    /// Every slot: the children are allocated densely, set or not (Finch counts them all).
    fn owned_children(
        &self,
        _: &LevelKind,
        _: &[Buffer],
        dims: &[usize],
        pos: usize,
        f: &mut dyn FnMut(usize),
    ) {
        let n = dims[0];
        (pos * n..(pos + 1) * n).for_each(f);
    }
    fn for_each_child(
        &self,
        _: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        pos: usize,
        f: &mut dyn FnMut(&[usize], usize),
    ) {
        let (ptr, srt) = (i64s(&bufs[PTR]), i64s(&bufs[SRT]));
        let base = pos * dims[0];
        for &q in &srt[ptr[pos] as usize..ptr[pos + 1] as usize] {
            f(&[q as usize - base], q as usize);
        }
    }
    fn build(
        &self,
        _: &LevelKind,
        bufs: &mut [Buffer],
        dims: &[usize],
        parent_count: usize,
        groups: &[(usize, usize, usize)],
        coords: &[Vec<i64>],
    ) -> (usize, Vec<(usize, usize, usize)>) {
        let n = dims[0];
        let mut ptr = vec![0i64; parent_count + 1];
        let mut tbl = vec![false; parent_count * n];
        let mut srt = vec![];
        let mut out = vec![];
        for &(p, lo, hi) in groups {
            super::dense::split_runs(&coords[0], lo, hi, |c, a, z| {
                let q = p * n + c as usize;
                tbl[q] = true;
                srt.push(q as i64);
                ptr[p + 1] += 1;
                out.push((q, a, z));
            });
        }
        for p in 1..=parent_count {
            ptr[p] += ptr[p - 1];
        }
        bufs[PTR] = Buffer::I64(ptr.into());
        bufs[TBL] = Buffer::Bool(tbl.into());
        bufs[SRT] = Buffer::I64(srt.into());
        (parent_count * n, out)
    }

    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        super::shared::declare_to_fill(l, init)?;
        let (ptr, tbl, srt) = (l.buf(PTR), l.buf(TBL), l.buf(SRT));
        let (nsrt, ready) = (l.state(NSRT), l.state(READY));
        let slots = b::mul(count.clone(), l.dim(0));
        let leaf_child = l.child().kind().is_leaf();
        // Clear the slots written since the last declaration.
        let k = cx.var("k", ElemType::I64);
        let q = cx.var(&format!("{}_q", l.tensor.name), ElemType::I64);
        let mut clear = vec![
            b::assign(q, b::load(srt, b::var(k))),
            b::store(tbl, b::var(q), b::boolean(false)),
        ];
        if leaf_child {
            // Each listed slot was written since the declaration that grew the leaf to every
            // slot, so resetting it needs no growth, and its one-element fill is a store
            // (SpGEMM's short rows spent ~10% of the kernel on the growth and range tests).
            let reset =
                l.child_impl()
                    .assemble(cx, &l.child(), b::var(q), b::add(b::var(q), b::int(1)))?;
            clear.extend(reset.into_iter().filter_map(|s| match s {
                Stmt::Grow { .. } => None,
                Stmt::Fill {
                    buf,
                    start,
                    stop,
                    value,
                } if stop == b::add(start.clone(), b::int(1)) => Some(b::store(buf, start, value)),
                other => Some(other),
            }));
        }
        let mut fast = vec![Stmt::For {
            var: k,
            start: b::int(0),
            stop: b::var(nsrt),
            body: clear,
        }];
        let mut full = vec![
            Stmt::Grow {
                buf: tbl,
                len: slots.clone(),
            },
            Stmt::Fill {
                buf: tbl,
                start: b::int(0),
                stop: slots.clone(),
                value: b::boolean(false),
            },
        ];
        let child = l.child_impl().declare(cx, &l.child(), slots, init)?;
        if leaf_child {
            full.extend(child);
        } else {
            fast.extend(child.clone());
            full.extend(child);
        }
        let mut code = b::if_else(b::var(ready), fast, full);
        code.extend([
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
            b::assign(nsrt, b::int(0)),
            b::assign(ready, b::boolean(true)),
        ]);
        Ok(code)
    }
    fn assemble(&self, cx: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        let (ptr, tbl) = (l.buf(PTR), l.buf(TBL));
        let n = l.dim(0);
        let (slo, shi) = (b::mul(lo.clone(), n.clone()), b::mul(hi.clone(), n));
        let mut code = vec![
            Stmt::Grow {
                buf: ptr,
                len: b::add(hi.clone(), b::int(1)),
            },
            Stmt::Fill {
                buf: ptr,
                start: b::add(lo, b::int(1)),
                stop: b::add(hi, b::int(1)),
                value: b::int(0),
            },
            Stmt::Grow {
                buf: tbl,
                len: shi.clone(),
            },
            Stmt::Fill {
                buf: tbl,
                start: slo.clone(),
                stop: shi.clone(),
                value: b::boolean(false),
            },
        ];
        code.extend(l.child_impl().assemble(cx, &l.child(), slo, shi)?);
        Ok(code)
    }
    fn freeze(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        let (ptr, tbl, srt, nsrt) = (l.buf(PTR), l.buf(TBL), l.buf(SRT), l.state(NSRT));
        let n = l.dim(0);
        let mut code = vec![
            // `srt` lists each set flag of `tbl` once (declare clears exactly the listed
            // slots, updates list a slot when they set its flag, `validate` checks an input's).
            Stmt::Sort {
                buf: srt,
                flags: Some(tbl),
                lo: b::int(0),
                hi: b::var(nsrt),
            },
            Stmt::Grow {
                buf: ptr,
                len: b::add(count.clone(), b::int(1)),
            },
        ];
        if count == b::int(1) {
            // One fiber (a root level: a workspace vector, a frontier): every set slot is
            // its own, so its end is the count of set slots. Counting per fiber would divide
            // each slot by the dimension, an integer division per stored entry.
            code.extend([
                b::store(ptr, b::int(0), b::int(0)),
                b::store(ptr, b::int(1), b::var(nsrt)),
            ]);
            let (child, m) = l.child_impl().freeze(cx, &l.child(), n)?;
            code.extend(child);
            return Ok((code, m));
        }
        let (k, p) = (cx.var("k", ElemType::I64), cx.var("p", ElemType::I64));
        let fiber = b::add(
            b::bin(crate::ir::BinOp::Div, b::load(srt, b::var(k)), n.clone()),
            b::int(1),
        );
        code.extend([
            Stmt::Fill {
                buf: ptr,
                start: b::int(0),
                stop: b::add(count.clone(), b::int(1)),
                value: b::int(0),
            },
            Stmt::For {
                var: k,
                start: b::int(0),
                stop: b::var(nsrt),
                body: vec![b::store(
                    ptr,
                    fiber.clone(),
                    b::add(b::load(ptr, fiber), b::int(1)),
                )],
            },
            Stmt::For {
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
            },
        ]);
        let (child, m) = l.child_impl().freeze(cx, &l.child(), b::mul(count, n))?;
        code.extend(child);
        Ok((code, m))
    }
    fn thaw(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        // Updates only need `tbl` and the list of set slots, which a frozen level still has.
        let mut code = vec![
            b::assign(l.state(NSRT), b::load(l.buf(PTR), count.clone())),
            b::assign(l.state(READY), b::boolean(true)),
        ];
        let (child, m) = l
            .child_impl()
            .thaw(cx, &l.child(), b::mul(count, l.dim(0)))?;
        code.extend(child);
        Ok((code, m))
    }

    fn unfurl_read(&self, cx: &mut Cx, f: &Fiber, protocol: Option<Protocol>) -> Result<Looplet> {
        let t = &f.tensor;
        let (ptr, tbl, srt) = (
            t.level_bufs[f.level][PTR],
            t.level_bufs[f.level][TBL],
            t.level_bufs[f.level][SRT],
        );
        let (base, set_base) = fiber_start(
            cx,
            &t.name,
            b::mul(f.pos.clone(), t.dim_of_level(f.level, 0)),
        );
        let fill = Target::Fill(t.fill);
        if protocol == Some(Protocol::Follow) {
            // Random access: test the slot's flag.
            let f2 = f.clone();
            let lookup = Looplet::Lookup(Rc::new(move |i: &Expr| {
                let q = b::add(base.clone(), i.clone());
                Target::Looplet(Looplet::Switch(vec![
                    (
                        b::load(tbl, q.clone()),
                        Looplet::Run(Box::new(Target::Fiber(f2.child(q)))),
                    ),
                    (b::boolean(true), Looplet::Run(Box::new(fill.clone()))),
                ]))
            }));
            return Ok(Looplet::Thunk {
                preamble: set_base,
                body: Box::new(Target::Looplet(lookup)),
                epilogue: vec![],
            });
        }
        let q = cx.var(&format!("{}_q", t.name), ElemType::I64);
        let q_stop = cx.var(&format!("{}_q_stop", t.name), ElemType::I64);
        let last = cx.var(&format!("{}_last", t.name), ElemType::I64);
        let mut preamble = set_base;
        preamble.extend([
            b::assign(q, b::load(ptr, f.pos.clone())),
            b::assign(q_stop, b::load(ptr, b::add(f.pos.clone(), b::int(1)))),
            b::assign(last, b::int(-1)),
            Stmt::If {
                cond: b::lt(b::var(q), b::var(q_stop)),
                then: vec![b::assign(
                    last,
                    b::sub(
                        b::load(srt, b::sub(b::var(q_stop), b::int(1))),
                        base.clone(),
                    ),
                )],
                otherwise: vec![],
            },
        ]);
        let stop = b::sub(b::load(srt, b::var(q)), base.clone());
        let unbased = base == b::int(0);
        let stepper = Stepper {
            seek: Rc::new(move |start: &Expr| {
                // Every stored coordinate is >= 0, so a walk from 0 needs no search.
                if *start == b::int(0) {
                    return vec![];
                }
                vec![b::assign(
                    q,
                    Expr::SearchGe {
                        buf: srt,
                        lo: Box::new(b::var(q)),
                        hi: Box::new(b::var(q_stop)),
                        key: Box::new(b::add(base.clone(), start.clone())),
                    },
                )]
            }),
            stop: stop.clone(),
            chunk: Looplet::Spike {
                at: stop,
                body: Box::new(fill.clone()),
                tail: Box::new(Target::Fiber(f.child(b::load(srt, b::var(q))))),
            },
            next: vec![b::assign(q, b::add(b::var(q), b::int(1)))],
            // A fiber starting at slot 0 (a vector, as a row's workspace) lists its
            // coordinates themselves in `srt`, sorted: its slots are positions the engine may
            // walk with a counted loop (a sparse product's copy-out, each row's listed slots),
            // as a sparse list's. Other fibers list `base + i`, which a search for a
            // coordinate would misread.
            positions: unbased.then(|| Positions {
                first: b::var(q),
                end: b::var(q_stop),
                last: b::var(last),
                bound: b::sub(t.dim_of_level(f.level, 0), b::int(1)),
                coords: srt,
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
        let l = LevelRef {
            tensor: &t,
            level: f.level,
        };
        let (tbl, srt, nsrt) = (l.buf(TBL), l.buf(SRT), l.state(NSRT));
        let (base, preamble) = fiber_start(cx, &t.name, b::mul(f.pos.clone(), l.dim(0)));
        let slot = cx.var(&format!("{}_slot", t.name), ElemType::I64);
        let dirty = cx.var(&format!("{}_dirty", t.name), ElemType::Bool);
        let mut child = f.child(b::var(slot));
        child.dirty = Some(dirty);
        let parent_dirty = f.dirty;
        let lookup = Looplet::Lookup(Rc::new(move |i: &Expr| {
            let mut record = b::if_(
                b::not(b::load(tbl, b::var(slot))),
                vec![
                    b::store(tbl, b::var(slot), b::boolean(true)),
                    Stmt::Grow {
                        buf: srt,
                        len: b::add(b::var(nsrt), b::int(1)),
                    },
                    b::store(srt, b::var(nsrt), b::var(slot)),
                    b::assign(nsrt, b::add(b::var(nsrt), b::int(1))),
                ],
            );
            if let Some(d) = parent_dirty {
                record.push(b::assign(d, b::boolean(true)));
            }
            Target::Looplet(Looplet::Thunk {
                preamble: vec![
                    b::assign(slot, b::add(base.clone(), i.clone())),
                    b::assign(dirty, b::boolean(false)),
                ],
                body: Box::new(Target::Fiber(child.clone())),
                epilogue: b::if_(b::var(dirty), record),
            })
        }));
        Ok(Looplet::Thunk {
            preamble,
            body: Box::new(Target::Looplet(lookup)),
            epilogue: vec![],
        })
    }
}

/// The first slot of a fiber, `start = pos * dim`, and the statements that compute it: a
/// constant for a root level (0) stays a constant, so a slot is the coordinate itself (in an
/// update, the bounds-check versioning then sees a gather through the coordinate,
/// `backend::versioning`); anything else is computed once into a variable.
fn fiber_start(cx: &mut Cx, tensor: &str, start: Expr) -> (Expr, Vec<Stmt>) {
    match start {
        Expr::Const(_) => (start, vec![]),
        start => {
            let v = cx.var(&format!("{tensor}_base"), ElemType::I64);
            (b::var(v), vec![b::assign(v, start)])
        }
    }
}

fn i64s(b: &Buffer) -> &[i64] {
    b.as_i64().expect("SparseByteMap ptr and srt are i64")
}

fn bools(b: &Buffer) -> &[bool] {
    match b {
        Buffer::Bool(v) => v,
        _ => unreachable!("SparseByteMap tbl is bool"),
    }
}

#[cfg(test)]
mod tests {
    use crate::levels::testing::{fmt, run_both as run};

    use crate::runtime::Buffer;
    use crate::tensor::Tensor;
    use std::collections::BTreeMap;

    const V: [f64; 9] = [0.0, 1.0, 1.0, 2.0, 2.0, 0.0, 0.0, 3.0, 0.0];

    fn golden_check(t: &Tensor) {
        assert_eq!(t.levels[0][0], Buffer::I64(vec![0, 5].into()));
        assert_eq!(
            t.levels[0][1],
            Buffer::Bool(V.iter().map(|&x| x != 0.0).collect())
        );
        assert_eq!(t.levels[0][2], Buffer::I64(vec![1, 2, 3, 4, 7].into()));
        assert_eq!(t.levels[1][0], Buffer::F64(V.to_vec().into()));
        t.validate("y").unwrap();
    }

    #[test]
    fn golden_storage() {
        let f = fmt("SparseByteMap(Element(0.0))");
        let t = Tensor::from_dense(&f, &[9], &Buffer::F64(V.to_vec().into())).unwrap();
        golden_check(&t);
        assert_eq!(t.to_dense(), Buffer::F64(V.to_vec().into()));
    }

    #[test]
    fn kernel_writes_golden_storage_in_any_order() {
        let f = fmt("SparseByteMap(Element(0.0))");
        let x = Tensor::from_dense(
            &fmt("SparseList(Element(0.0))"),
            &[9],
            &Buffer::F64(V.to_vec().into()),
        );
        let mut ts = BTreeMap::new();
        ts.insert("x".to_string(), x.unwrap());
        ts.insert("y".to_string(), Tensor::empty(&f, &[9]).unwrap());
        let out = run("y .= 0\nfor i = _\n  y[i] = x[i]\nend\n", &ts).unwrap();
        golden_check(&out["y"]);
        // The same vector written backwards through a permutation, and twice.
        let p = Tensor::from_dense(
            &fmt("Dense(Element(0))"),
            &[9],
            &Buffer::I64((0..9).rev().collect()),
        );
        ts.insert("p".to_string(), p.unwrap());
        let text =
            "y .= 0\nfor i = _\n  y[p[i]] += x[p[i]]\nend\nfor i = _\n  y[p[i]] += x[p[i]]\nend\n";
        let out = run(text, &ts).unwrap();
        let t = &out["y"];
        assert_eq!(t.levels[0][2], Buffer::I64(vec![1, 2, 3, 4, 7].into()));
        assert_eq!(
            t.to_dense(),
            Buffer::F64(V.iter().map(|x| 2.0 * x).collect())
        );
        t.validate("y").unwrap();
    }

    #[test]
    fn redeclared_workspace_is_reset_and_nonzero_fill_works() {
        // Per row, copy the row into a workspace and out again: the workspace must come back
        // clean at each declaration.
        let a =
            crate::tensor::random_sparse(&fmt("Dense(SparseList(Element(0.0)))"), &[6, 7], 0.4, 3)
                .unwrap();
        let mut ts = BTreeMap::new();
        ts.insert("A".to_string(), a.clone());
        ts.insert(
            "w".to_string(),
            Tensor::empty(&fmt("SparseByteMap(Element(0.0))"), &[7]).unwrap(),
        );
        ts.insert(
            "C".to_string(),
            Tensor::empty(&fmt("Dense(SparseList(Element(0.0)))"), &[6, 7]).unwrap(),
        );
        let text = "C .= 0\nfor i = _\n  w .= 0\n  for j = _\n    w[j] += A[i, j]\n  end\n  for j = _\n    C[i, j] = w[j]\n  end\nend\n";
        let out = run(text, &ts).unwrap();
        assert_eq!(out["C"].to_dense(), a.to_dense());
        // A fill other than zero.
        let f = fmt("Dense(SparseByteMap(Element(1.5)))");
        let b = Tensor::from_dense(
            &f,
            &[2, 3],
            &Buffer::F64(vec![1.5, 2.0, 1.5, 0.0, 1.5, 1.5].into()),
        )
        .unwrap();
        b.validate("b").unwrap();
        assert_eq!(b.levels[1][2], Buffer::I64(vec![1, 3].into()));
        let mut ts = BTreeMap::new();
        ts.insert("B".to_string(), b.clone());
        ts.insert("D".to_string(), Tensor::empty(&f, &[2, 3]).unwrap());
        let out = run(
            "D .= 1.5\nfor j = _, i = _\n  D[i, j] = B[i, j]\nend\n",
            &ts,
        )
        .unwrap();
        assert_eq!(out["D"].to_dense(), b.to_dense());
        out["D"].validate("D").unwrap();
    }

    #[test]
    fn inconsistent_arrays_are_reported() {
        let f = fmt("SparseByteMap(Element(0.0))");
        let good = Tensor::from_dense(&f, &[9], &Buffer::F64(V.to_vec().into())).unwrap();
        let cases: [(usize, Buffer, &str); 4] = [
            (0, Buffer::I64(vec![0, 6].into()), "past the end"),
            (2, Buffer::I64(vec![1, 2, 3, 7, 4].into()), "not above"),
            (2, Buffer::I64(vec![1, 2, 3, 4, 9].into()), "not a slot"),
            (1, Buffer::Bool(vec![true; 9].into()), "tbl sets 9"),
        ];
        for (k, buf, msg) in cases {
            let mut t = good.clone();
            t.levels[0][k] = buf;
            let e = t.validate("y").unwrap_err().to_string();
            assert!(e.contains(msg) && e.contains("`y`"), "{e}");
        }
    }

    #[test]
    fn declaring_with_a_non_fill_value_is_an_error() {
        let mut ts = BTreeMap::new();
        ts.insert(
            "y".to_string(),
            Tensor::empty(&fmt("SparseByteMap(Element(0.0))"), &[4]).unwrap(),
        );
        let e = run("y .= 1\n", &ts).unwrap_err().to_string();
        assert!(e.contains("fill value"), "{e}");
    }
}
