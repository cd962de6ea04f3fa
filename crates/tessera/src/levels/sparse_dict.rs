//! `SparseDict` (the paper's SparseHash): a hash map from (parent position, coordinate) to child
//! position, so it takes writes in any order, and sorted arrays for reading.
//!
//! Storage, for a dimension of size `n`:
//! - `ptr`, `idx`, `val` (i64), the read form built by a freeze: the entries of fiber `p` are
//!   `ptr[p]..ptr[p+1]`, in increasing coordinate `idx[q]`, and entry `q`'s child is child
//!   position `val[q]` (an indirection: children stay where they were created);
//! - `key` (i64): child position `c`'s (position, coordinate) pair encoded as `p * n + i`, so
//!   lexicographic order is integer order (children are created in write order);
//! - `htbl`, `hval` (i64): an open-addressing table (`hash_find`, -1 = empty) from encoded
//!   key to child position, kept at most half full; it serves updates and `follow` reads.
//!
//! An update finds or creates the key's child. A child is created (and entered in the table) as
//! soon as its write starts, so that another write in the same loop body finds it: several
//! writes in one body are separate accesses whose set-up all runs before their wrap-up. A
//! child that ends up unwritten is taken out again if it is still the last one created (the
//! last key inserted in a linear-probing table can be deleted by emptying its slot: no other
//! key's probe sequence passes through it); one created behind a written one stays, holding
//! the fill value. A freeze sorts the children by key (`sort_perm`) into `val` and rebuilds
//! `ptr` and `idx`. A declaration empties the table, which costs O(table size), i.e. O(largest
//! number of entries so far).

use super::registry::{self, Arity, Caps, LevelSpec, Role, Writes};
use super::{Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::Cx;
use crate::ir::{BinOp, BufId, Expr, Stmt, VarId, build as b};
use crate::looplets::{Fiber, Looplet, Positions, Stepper, Target};
use crate::notation::ast::Protocol;
use crate::runtime::{Buffer, intrinsics};
use crate::types::{ElemType, Scalar};
use std::rc::Rc;

pub struct SparseDict;

pub const SPEC: LevelSpec = LevelSpec {
    name: "SparseDict",
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
    is: |k| matches!(k, LevelKind::SparseDict),
    make: |_| LevelKind::SparseDict,
    args: registry::no_args,
    check_below: registry::any_below,
    imp: &SparseDict,
};

const PTR: usize = 0;
const IDX: usize = 1;
const VAL: usize = 2;
const KEY: usize = 3;
const HTBL: usize = 4;
const HVAL: usize = 5;
/// State: the number of children (entries).
const NENT: usize = 0;
/// State: children below this position were written since the declaration (or came from the
/// read form) and are never given back, even by a write that created one and left it alone.
const KEPT: usize = 1;

impl Level for SparseDict {
    fn buffers(&self, _: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        vec![
            ("ptr", ElemType::I64),
            ("idx", ElemType::I64),
            ("val", ElemType::I64),
            ("key", ElemType::I64),
            ("htbl", ElemType::I64),
            ("hval", ElemType::I64),
        ]
    }
    fn state(&self, _: &LevelKind) -> Vec<(&'static str, ElemType)> {
        vec![("nent", ElemType::I64), ("kept", ElemType::I64)]
    }

    fn validate(
        &self,
        _: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        let [ptr, idx, val, _, htbl, hval] = [0, 1, 2, 3, 4, 5].map(|k| i64s(&bufs[k]));
        let n = dims[0] as i64;
        super::shared::check_ptr_shape(ptr, parent_count)?;
        let entries = ptr[parent_count];
        if entries < 0 || idx.len() < entries as usize || val.len() < entries as usize {
            return Err(format!(
                "idx and val have {} and {} entries, ptr promises {entries}",
                idx.len(),
                val.len()
            ));
        }
        let mut seen = vec![false; entries as usize];
        for p in 0..parent_count {
            let (lo, hi) = (ptr[p], ptr[p + 1]);
            if hi < lo || hi > entries {
                return Err(format!(
                    "ptr[{}] = {hi} is out of order or past the end",
                    p + 1
                ));
            }
            for q in lo as usize..hi as usize {
                if idx[q] < 0 || idx[q] >= n {
                    return Err(format!("idx[{q}] = {} is outside 0..{n}", idx[q]));
                }
                if q > lo as usize && idx[q] <= idx[q - 1] {
                    return Err(format!(
                        "idx[{q}] = {} is not above idx[{}] = {}",
                        idx[q],
                        q - 1,
                        idx[q - 1]
                    ));
                }
                let c = val[q];
                if c < 0 || c >= entries || std::mem::replace(&mut seen[c as usize], true) {
                    return Err(format!(
                        "val[{q}] = {c} is not a distinct child position in 0..{entries}"
                    ));
                }
                // The hash table, when present, must find every entry.
                if !htbl.is_empty() {
                    let key = p as i64 * n + idx[q];
                    let s = intrinsics::hash_find(htbl, key);
                    if s < 0 || htbl[s as usize] != key || hval.get(s as usize) != Some(&c) {
                        return Err(format!(
                            "the hash table does not map entry {q} (key {key}) to child {c}"
                        ));
                    }
                }
            }
        }
        if !htbl.is_empty() {
            let used = htbl.iter().filter(|&&k| k != -1).count();
            if used as i64 != entries {
                return Err(format!("htbl holds {used} keys, ptr promises {entries}"));
            }
        }
        Ok(entries as usize)
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
        for k in [IDX, VAL, KEY] {
            bufs[k].truncate(n);
        }
        n
    }
    fn empty(&self, _: &LevelKind, bufs: &mut [Buffer], _: &[usize], parent_count: usize) -> usize {
        bufs[PTR] = Buffer::I64(vec![0; parent_count + 1].into());
        for k in [IDX, VAL, KEY, HTBL, HVAL] {
            bufs[k] = Buffer::I64(vec![].into());
        }
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
        let (ptr, idx, val) = (i64s(&bufs[PTR]), i64s(&bufs[IDX]), i64s(&bufs[VAL]));
        for q in ptr[pos] as usize..ptr[pos + 1] as usize {
            f(&[idx[q] as usize], val[q] as usize);
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
        let n = dims[0] as i64;
        let mut ptr = vec![0i64; parent_count + 1];
        let (mut idx, mut key) = (vec![], vec![]);
        let mut out = vec![];
        for &(p, lo, hi) in groups {
            super::dense::split_runs(&coords[0], lo, hi, |c, a, z| {
                out.push((idx.len(), a, z));
                idx.push(c);
                key.push(p as i64 * n + c);
                ptr[p + 1] += 1;
            });
        }
        for p in 1..=parent_count {
            ptr[p] += ptr[p - 1];
        }
        let m = idx.len();
        let cap = (4 * m).max(16);
        let (mut htbl, mut hval) = (vec![-1i64; cap], vec![0i64; cap]);
        for (c, &k) in key.iter().enumerate() {
            let s = intrinsics::hash_find(&htbl, k) as usize;
            htbl[s] = k;
            hval[s] = c as i64;
        }
        bufs[PTR] = Buffer::I64(ptr.into());
        bufs[IDX] = Buffer::I64(idx.into());
        bufs[VAL] = Buffer::I64((0..m as i64).collect());
        bufs[KEY] = Buffer::I64(key.into());
        bufs[HTBL] = Buffer::I64(htbl.into());
        bufs[HVAL] = Buffer::I64(hval.into());
        (m, out)
    }

    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        super::shared::declare_to_fill(l, init)?;
        let (ptr, htbl) = (l.buf(PTR), l.buf(HTBL));
        let mut code = super::shared::zero_ptr(ptr, count).to_vec();
        code.extend([
            Stmt::Fill {
                buf: htbl,
                start: b::int(0),
                stop: Expr::Len(htbl),
                value: b::int(-1),
            },
            b::assign(l.state(NENT), b::int(0)),
            b::assign(l.state(KEPT), b::int(0)),
        ]);
        code.extend(l.child_impl().declare(cx, &l.child(), b::int(0), init)?);
        Ok(code)
    }
    fn assemble(&self, _: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        // New positions have no entries; `ptr` is rebuilt by the freeze.
        Ok(super::shared::empty_fibers(l.buf(PTR), lo, hi))
    }
    fn freeze(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        let (ptr, idx, val, key) = (l.buf(PTR), l.buf(IDX), l.buf(VAL), l.buf(KEY));
        let nent = l.state(NENT);
        let n = l.dim(0);
        let (k, kk, p) = (
            cx.var("k", ElemType::I64),
            cx.var("key", ElemType::I64),
            cx.var("p", ElemType::I64),
        );
        let fiber = b::add(b::bin(BinOp::Div, b::var(kk), n.clone()), b::int(1));
        let code = vec![
            Stmt::Grow {
                buf: val,
                len: b::var(nent),
            },
            Stmt::Grow {
                buf: idx,
                len: b::var(nent),
            },
            Stmt::For {
                var: k,
                start: b::int(0),
                stop: b::var(nent),
                body: vec![b::store(val, b::var(k), b::var(k))],
            },
            Stmt::SortPerm {
                keys: key,
                perm: val,
                lo: b::int(0),
                hi: b::var(nent),
            },
            Stmt::Grow {
                buf: ptr,
                len: b::add(count.clone(), b::int(1)),
            },
            Stmt::Fill {
                buf: ptr,
                start: b::int(0),
                stop: b::add(count.clone(), b::int(1)),
                value: b::int(0),
            },
            Stmt::For {
                var: k,
                start: b::int(0),
                stop: b::var(nent),
                body: vec![
                    b::assign(kk, b::load(key, b::load(val, b::var(k)))),
                    b::store(idx, b::var(k), b::bin(BinOp::Rem, b::var(kk), n.clone())),
                    b::store(ptr, fiber.clone(), b::add(b::load(ptr, fiber), b::int(1))),
                ],
            },
            Stmt::For {
                var: p,
                start: b::int(1),
                stop: b::add(count, b::int(1)),
                body: vec![b::store(
                    ptr,
                    b::var(p),
                    b::add(
                        b::load(ptr, b::var(p)),
                        b::load(ptr, b::sub(b::var(p), b::int(1))),
                    ),
                )],
            },
        ];
        let (child, m) = l.child_impl().freeze(cx, &l.child(), b::var(nent))?;
        let mut code = code;
        code.extend(child);
        Ok((code, m))
    }
    fn thaw(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        // Rebuild the per-child keys and the table from the read form (which may come from
        // outside the kernel).
        let (ptr, idx, val, key) = (l.buf(PTR), l.buf(IDX), l.buf(VAL), l.buf(KEY));
        let nent = l.state(NENT);
        let (p, q) = (cx.var("p", ElemType::I64), cx.var("q", ElemType::I64));
        let mut code = vec![
            b::assign(nent, b::load(ptr, count.clone())),
            b::assign(l.state(KEPT), b::var(nent)),
            Stmt::Grow {
                buf: key,
                len: b::var(nent),
            },
            Stmt::For {
                var: p,
                start: b::int(0),
                stop: count,
                body: vec![Stmt::For {
                    var: q,
                    start: b::load(ptr, b::var(p)),
                    stop: b::load(ptr, b::add(b::var(p), b::int(1))),
                    body: vec![b::store(
                        key,
                        b::load(val, b::var(q)),
                        b::add(b::mul(b::var(p), l.dim(0)), b::load(idx, b::var(q))),
                    )],
                }],
            },
        ];
        code.extend(rehash(
            cx,
            l,
            b::mul(b::int(4), b::add(b::var(nent), b::int(1))),
        ));
        let (child, m) = l.child_impl().thaw(cx, &l.child(), b::var(nent))?;
        code.extend(child);
        Ok((code, m))
    }

    fn unfurl_read(&self, cx: &mut Cx, f: &Fiber, protocol: Option<Protocol>) -> Result<Looplet> {
        let t = &f.tensor;
        let bufs = &t.level_bufs[f.level];
        let (ptr, idx, val) = (bufs[PTR], bufs[IDX], bufs[VAL]);
        let (htbl, hval) = (bufs[HTBL], bufs[HVAL]);
        let fill = Target::Fill(t.fill);
        if protocol == Some(Protocol::Follow) {
            // Random access through the hash table. The probe is a pure expression in the
            // switch conditions (not a per-coordinate preamble), so where the statement does
            // not need the value no probe is emitted.
            let base = cx.var(&format!("{}_base", t.name), ElemType::I64);
            let set_base = b::assign(base, b::mul(f.pos.clone(), t.dim_of_level(f.level, 0)));
            let f2 = f.clone();
            let lookup = Looplet::Lookup(Rc::new(move |i: &Expr| {
                let k = b::add(b::var(base), i.clone());
                let slot = Expr::HashFind {
                    table: htbl,
                    key: Box::new(k.clone()),
                };
                let fill = || Looplet::Run(Box::new(fill.clone()));
                let stored = Looplet::Switch(vec![
                    (
                        b::eq(b::load(htbl, slot.clone()), k),
                        Looplet::Run(Box::new(Target::Fiber(
                            f2.child(b::load(hval, slot.clone())),
                        ))),
                    ),
                    (b::boolean(true), fill()),
                ]);
                Target::Looplet(Looplet::Switch(vec![
                    (b::le(b::int(0), slot), stored),
                    (b::boolean(true), fill()),
                ]))
            }));
            return Ok(Looplet::Thunk {
                preamble: vec![set_base],
                body: Box::new(Target::Looplet(lookup)),
                epilogue: vec![],
            });
        }
        let q = cx.var(&format!("{}_q", t.name), ElemType::I64);
        let q_stop = cx.var(&format!("{}_q_stop", t.name), ElemType::I64);
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
                tail: Box::new(Target::Fiber(f.child(b::load(val, b::var(q))))),
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
        let l = LevelRef {
            tensor: &t,
            level: f.level,
        };
        let (key, htbl, hval, nent) = (l.buf(KEY), l.buf(HTBL), l.buf(HVAL), l.state(NENT));
        let name = &t.name;
        let base = cx.var(&format!("{name}_base"), ElemType::I64);
        let k = cx.var(&format!("{name}_key"), ElemType::I64);
        let slot = cx.var(&format!("{name}_slot"), ElemType::I64);
        let c = cx.var(&format!("{name}_child"), ElemType::I64);
        let fresh = cx.var(&format!("{name}_fresh"), ElemType::Bool);
        let dirty = cx.var(&format!("{name}_dirty"), ElemType::Bool);
        // Keep the table at most half full, so a probe always ends at the key or a free slot.
        let mut pre = b::if_(
            b::lt(
                Expr::Len(htbl),
                b::mul(b::int(2), b::add(b::var(nent), b::int(1))),
            ),
            rehash(cx, &l, b::mul(b::int(4), b::add(b::var(nent), b::int(1)))),
        );
        let mut create = vec![
            b::assign(c, b::var(nent)),
            b::assign(fresh, b::boolean(true)),
            Stmt::Grow {
                buf: key,
                len: b::add(b::var(nent), b::int(1)),
            },
        ];
        create.extend(l.child_impl().assemble(
            cx,
            &l.child(),
            b::var(c),
            b::add(b::var(c), b::int(1)),
        )?);
        create.extend([
            b::store(htbl, b::var(slot), b::var(k)),
            b::store(hval, b::var(slot), b::var(c)),
            b::store(key, b::var(c), b::var(k)),
            b::assign(nent, b::add(b::var(nent), b::int(1))),
        ]);
        let point_pre = {
            let mut v = vec![
                b::assign(
                    slot,
                    Expr::HashFind {
                        table: htbl,
                        key: Box::new(b::var(k)),
                    },
                ),
                b::assign(fresh, b::boolean(false)),
            ];
            // `slot` is valid: the table has room and keys are >= 0 (a bad slot faults).
            v.extend(b::if_else(
                b::eq(b::load(htbl, b::var(slot)), b::var(k)),
                vec![b::assign(c, b::load(hval, b::var(slot)))],
                create,
            ));
            v.push(b::assign(dirty, b::boolean(false)));
            v
        };
        pre.extend(point_pre);
        let mut child = f.child(b::var(c));
        child.dirty = Some(dirty);
        let parent_dirty = f.dirty;
        let dim = l.dim(0);
        // A child this write created and left alone goes out of the table again if it is
        // still the last one and no other write (which found it) wrote it; its slot is found
        // afresh, as a write in between may have rehashed the table.
        let kept = l.state(KEPT);
        let unmake = vec![
            b::store(
                htbl,
                Expr::HashFind {
                    table: htbl,
                    key: Box::new(b::var(k)),
                },
                b::int(-1),
            ),
            b::assign(nent, b::var(c)),
        ];
        let after = b::add(b::var(c), b::int(1));
        let removable = b::and(
            b::eq(after.clone(), b::var(nent)),
            b::le(b::var(kept), b::var(c)),
        );
        let mut keep = vec![];
        if let Some(d) = parent_dirty {
            keep.push(b::assign(d, b::boolean(true)));
        }
        let mut written = vec![b::assign(kept, b::max(b::var(kept), after))];
        written.extend(keep.clone());
        let epilogue = vec![Stmt::If {
            cond: b::var(dirty),
            then: written,
            otherwise: b::if_(b::var(fresh), b::if_else(removable, unmake, keep)),
        }];
        let lookup = Looplet::Lookup(Rc::new(move |i: &Expr| {
            let mut preamble = vec![b::assign(k, b::add(b::var(base), i.clone()))];
            preamble.extend(pre.clone());
            Target::Looplet(Looplet::Thunk {
                preamble,
                body: Box::new(Target::Fiber(child.clone())),
                epilogue: epilogue.clone(),
            })
        }));
        Ok(Looplet::Thunk {
            preamble: vec![b::assign(base, b::mul(f.pos.clone(), dim))],
            body: Box::new(Target::Looplet(lookup)),
            epilogue: vec![],
        })
    }
}

/// Rebuild the table with room for at least `cap` slots from the children's keys.
fn rehash(cx: &mut Cx, l: &LevelRef, cap: Expr) -> Vec<Stmt> {
    let (key, htbl, hval, nent) = (l.buf(KEY), l.buf(HTBL), l.buf(HVAL), l.state(NENT));
    let c: VarId = cx.var("c", ElemType::I64);
    let s: VarId = cx.var("s", ElemType::I64);
    let insert = |buf: BufId, v: Expr| b::store(buf, b::var(s), v);
    vec![
        Stmt::Grow {
            buf: htbl,
            len: cap,
        },
        Stmt::Grow {
            buf: hval,
            len: Expr::Len(htbl),
        },
        Stmt::Fill {
            buf: htbl,
            start: b::int(0),
            stop: Expr::Len(htbl),
            value: b::int(-1),
        },
        Stmt::For {
            var: c,
            start: b::int(0),
            stop: b::var(nent),
            body: vec![
                b::assign(
                    s,
                    Expr::HashFind {
                        table: htbl,
                        key: Box::new(b::load(key, b::var(c))),
                    },
                ),
                insert(htbl, b::load(key, b::var(c))),
                insert(hval, b::var(c)),
            ],
        },
    ]
}

fn i64s(b: &Buffer) -> &[i64] {
    b.as_i64().expect("SparseDict buffers are i64")
}

#[cfg(test)]
mod tests {
    use crate::levels::testing::{fmt, run_both as run};

    use crate::runtime::Buffer;
    use crate::tensor::Tensor;
    use std::collections::BTreeMap;

    const V: [f64; 9] = [0.0, 1.0, 1.0, 2.0, 2.0, 0.0, 0.0, 3.0, 0.0];

    #[test]
    fn golden_storage() {
        let f = fmt("SparseDict(Element(0.0))");
        let t = Tensor::from_dense(&f, &[9], &Buffer::F64(V.to_vec().into())).unwrap();
        assert_eq!(t.levels[0][0], Buffer::I64(vec![0, 5].into()));
        assert_eq!(t.levels[0][1], Buffer::I64(vec![1, 2, 3, 4, 7].into()));
        assert_eq!(t.levels[0][2], Buffer::I64(vec![0, 1, 2, 3, 4].into()));
        assert_eq!(
            t.levels[1][0],
            Buffer::F64(vec![1.0, 1.0, 2.0, 2.0, 3.0].into())
        );
        t.validate("y").unwrap();
        assert_eq!(t.to_dense(), Buffer::F64(V.to_vec().into()));
    }

    #[test]
    fn kernel_writes_in_any_order() {
        let f = fmt("SparseDict(Element(0.0))");
        let x = Tensor::from_dense(
            &fmt("SparseList(Element(0.0))"),
            &[9],
            &Buffer::F64(V.to_vec().into()),
        );
        let mut ts = BTreeMap::new();
        ts.insert("x".to_string(), x.unwrap());
        ts.insert("y".to_string(), Tensor::empty(&f, &[9]).unwrap());
        let out = run("y .= 0\nfor i = _\n  y[i] = x[i]\nend\n", &ts).unwrap();
        let t = &out["y"];
        assert_eq!(t.levels[0][0], Buffer::I64(vec![0, 5].into()));
        assert_eq!(t.levels[0][1], Buffer::I64(vec![1, 2, 3, 4, 7].into()));
        assert_eq!(t.levels[0][2], Buffer::I64(vec![0, 1, 2, 3, 4].into()));
        t.validate("y").unwrap();
        // Backwards through a permutation, twice: children are created in write order, so
        // `val` is the indirection that puts them back in coordinate order.
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
        assert_eq!(t.levels[0][1], Buffer::I64(vec![1, 2, 3, 4, 7].into()));
        assert_eq!(t.levels[0][2], Buffer::I64(vec![4, 3, 2, 1, 0].into()));
        assert_eq!(
            t.to_dense(),
            Buffer::F64(V.iter().map(|x| 2.0 * x).collect())
        );
        t.validate("y").unwrap();
        // Read back by hash lookup (`follow`), in the same kernel family.
        let mut ts2 = BTreeMap::new();
        ts2.insert("y".to_string(), t.clone());
        ts2.insert(
            "z".to_string(),
            Tensor::empty(&fmt("Dense(Element(0.0))"), &[9]).unwrap(),
        );
        let out = run("z .= 0\nfor i = _\n  z[i] = y[follow(i)] + 1\nend\n", &ts2).unwrap();
        assert_eq!(
            out["z"].to_dense(),
            Buffer::F64(V.iter().map(|x| 2.0 * x + 1.0).collect())
        );
    }

    #[test]
    fn nested_dicts_grow_and_rehash_with_fill_other_than_zero() {
        // Enough entries to rehash several times, written column by column.
        let (m, n) = (9, 13);
        let vals: Vec<f64> = (0..m * n)
            .map(|k| if k % 3 == 0 { 2.5 } else { k as f64 })
            .collect();
        let src = Tensor::from_dense(
            &fmt("Dense(Dense(Element(2.5)))"),
            &[m, n],
            &Buffer::F64(vals.clone().into()),
        )
        .unwrap();
        let f = fmt("SparseDict(SparseDict(Element(2.5)))");
        let mut ts = BTreeMap::new();
        ts.insert("A".to_string(), src);
        ts.insert("D".to_string(), Tensor::empty(&f, &[m, n]).unwrap());
        let out = run(
            "D .= 2.5\nfor j = _, i = _\n  D[i, j] = A[i, j]\nend\n",
            &ts,
        )
        .unwrap();
        out["D"].validate("D").unwrap();
        assert_eq!(out["D"].to_dense(), Buffer::F64(vals.clone().into()));
        // Thaw: add to a dictionary read in the same kernel, then read it again.
        let mut ts = BTreeMap::new();
        ts.insert("D".to_string(), out["D"].clone());
        ts.insert(
            "s".to_string(),
            Tensor::empty(&fmt("Element(0.0)"), &[]).unwrap(),
        );
        let text = "for i = _, j = _\n  D[i, j] += 1\nend\ns .= 0\nfor i = _, j = _\n  s[] += D[i, j]\nend\n";
        let out = run(text, &ts).unwrap();
        let want: f64 = vals.iter().map(|v| v + 1.0).sum();
        assert_eq!(out["s"].to_dense(), Buffer::F64(vec![want].into()));
        out["D"].validate("D").unwrap();
    }

    #[test]
    fn inconsistent_arrays_are_reported() {
        let f = fmt("SparseDict(Element(0.0))");
        let good = Tensor::from_dense(&f, &[9], &Buffer::F64(V.to_vec().into())).unwrap();
        let cases: [(usize, Buffer, &str); 4] = [
            (0, Buffer::I64(vec![0, 6].into()), "ptr promises"),
            (1, Buffer::I64(vec![1, 2, 3, 4, 4].into()), "not above"),
            (2, Buffer::I64(vec![0, 1, 1, 3, 4].into()), "distinct child"),
            (4, Buffer::I64(vec![-1; 16].into()), "hash table"),
        ];
        for (k, buf, msg) in cases {
            let mut t = good.clone();
            t.levels[0][k] = buf;
            let e = t.validate("y").unwrap_err().to_string();
            assert!(e.contains(msg) && e.contains("`y`"), "{e}");
        }
    }
}
