//! `SparseBlockList` (the paper's SparseBlockList, formerly SparseVBL): each fiber stores runs
//! ("blocks") of consecutive coordinates. Fiber `p` owns blocks `ptr[p]..ptr[p+1]`; block `r`
//! ends at coordinate `idx[r]` (inclusive) and its child positions are `ofs[r]..ofs[r+1]`, so
//! it starts at `idx[r] - (ofs[r+1] - ofs[r]) + 1`. Blocks of a fiber are non-empty and in
//! increasing order without overlap.
//!
//! Reading walks the blocks with a stepper (a jumper under `gallop`); each block's chunk is
//! fill up to the block's start and random access inside it, so no search or compare happens
//! per entry. While being updated `ptr[p+1]` holds fiber `p`'s block count (freeze turns counts
//! into offsets) and `ofs` is already absolute. Writes must come in increasing coordinate
//! order within a fiber and fibers in increasing position order: a write next to the previous
//! coordinate extends the current block, any other later coordinate starts a new block, and a
//! repeated or earlier coordinate is a runtime error.

use super::registry::{self, Arity, Caps, LevelSpec, Role};
use super::{Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::{Cx, KernelError, KernelErrorKind, Order};
use crate::ir::{Expr, Stmt, build as b};
use crate::looplets::{Fiber, Looplet, Phase, Stepper, Target};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use std::rc::Rc;

pub struct SparseBlockList;

pub const SPEC: LevelSpec = LevelSpec {
    name: "SparseBlockList",
    role: Role::Level,
    arity: Arity::Fixed(1),
    params: &[],
    protocols: &[Protocol::Gallop, Protocol::Follow],
    caps: Caps {
        sparse: true,
        reopen: true,
        ..Caps::LEVEL
    },
    is: |k| matches!(k, LevelKind::SparseBlockList),
    make: |_| LevelKind::SparseBlockList,
    args: registry::no_args,
    check_below: registry::any_below,
    imp: &SparseBlockList,
};

const PTR: usize = 0;
const IDX: usize = 1;
const OFS: usize = 2;
const QOS: usize = 0;
const ROS: usize = 1;
const PREV: usize = 2;

impl Level for SparseBlockList {
    fn buffers(&self, _: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        vec![
            ("ptr", ElemType::I64),
            ("idx", ElemType::I64),
            ("ofs", ElemType::I64),
        ]
    }
    fn state(&self, _: &LevelKind) -> Vec<(&'static str, ElemType)> {
        vec![
            ("qos", ElemType::I64),
            ("ros", ElemType::I64),
            ("prev", ElemType::I64),
        ]
    }

    fn validate(
        &self,
        _: &LevelKind,
        bufs: &[Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        let (ptr, idx, ofs) = (i64s(&bufs[PTR]), i64s(&bufs[IDX]), i64s(&bufs[OFS]));
        super::shared::check_ptr_shape(ptr, parent_count)?;
        for p in 0..parent_count {
            if ptr[p + 1] < ptr[p] {
                return Err(format!(
                    "ptr[{}] = {} is below ptr[{p}] = {}",
                    p + 1,
                    ptr[p + 1],
                    ptr[p]
                ));
            }
        }
        let blocks = ptr[parent_count] as usize;
        if idx.len() < blocks {
            return Err(format!(
                "ptr promises {blocks} blocks but idx has {} entries",
                idx.len()
            ));
        }
        if ofs.len() < blocks + 1 {
            return Err(format!(
                "ptr promises {blocks} blocks but ofs has {} entries (needs {})",
                ofs.len(),
                blocks + 1
            ));
        }
        if ofs[0] != 0 {
            return Err("ofs[0] must be 0".into());
        }
        let n = dims[0] as i64;
        for p in 0..parent_count {
            for r in ptr[p] as usize..ptr[p + 1] as usize {
                let len = ofs[r + 1] - ofs[r];
                if len <= 0 {
                    return Err(format!(
                        "block {r} is empty or reversed (ofs[{r}] = {}, ofs[{}] = {})",
                        ofs[r],
                        r + 1,
                        ofs[r + 1]
                    ));
                }
                if idx[r] >= n || idx[r] - len + 1 < 0 {
                    return Err(format!(
                        "block {r} ({len} entries ending at idx[{r}] = {}) is outside 0..{n}",
                        idx[r]
                    ));
                }
                if r > ptr[p] as usize && idx[r] - len < idx[r - 1] {
                    return Err(format!(
                        "block {r} starting at {} overlaps or precedes block {} ending at {}",
                        idx[r] - len + 1,
                        r - 1,
                        idx[r - 1]
                    ));
                }
            }
        }
        Ok(ofs[blocks] as usize)
    }
    fn finish(
        &self,
        _: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        bufs[PTR].truncate(parent_count + 1);
        let blocks = i64s(&bufs[PTR])[parent_count] as usize;
        bufs[IDX].truncate(blocks);
        bufs[OFS].truncate(blocks + 1);
        i64s(&bufs[OFS])[blocks] as usize
    }
    fn empty(&self, _: &LevelKind, bufs: &mut [Buffer], _: &[usize], parent_count: usize) -> usize {
        bufs[PTR] = Buffer::I64(vec![0; parent_count + 1].into());
        bufs[IDX] = Buffer::I64(vec![].into());
        bufs[OFS] = Buffer::I64(vec![0].into());
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
        let (ptr, idx, ofs) = (i64s(&bufs[PTR]), i64s(&bufs[IDX]), i64s(&bufs[OFS]));
        for r in ptr[pos] as usize..ptr[pos + 1] as usize {
            let first = idx[r] - (ofs[r + 1] - ofs[r]) + 1;
            for q in ofs[r]..ofs[r + 1] {
                f(&[(first + q - ofs[r]) as usize], q as usize);
            }
        }
    }
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
        let mut idx: Vec<i64> = vec![];
        let mut ofs = vec![0i64];
        let mut out = vec![];
        for &(p, lo, hi) in groups {
            let first_block = idx.len();
            super::dense::split_runs(&coords[0], lo, hi, |c, a, z| {
                let q = out.len() as i64;
                out.push((q as usize, a, z));
                // Blocks are maximal runs of consecutive stored coordinates.
                if idx.len() > first_block && idx[idx.len() - 1] + 1 == c {
                    *idx.last_mut().expect("a block exists") = c;
                    *ofs.last_mut().expect("ofs starts with 0") = q + 1;
                } else {
                    idx.push(c);
                    ofs.push(q + 1);
                }
            });
            ptr[p + 1] = (idx.len() - first_block) as i64;
        }
        for p in 1..=parent_count {
            ptr[p] += ptr[p - 1];
        }
        let n = out.len();
        bufs[PTR] = Buffer::I64(ptr.into());
        bufs[IDX] = Buffer::I64(idx.into());
        bufs[OFS] = Buffer::I64(ofs.into());
        (n, out)
    }

    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        super::shared::declare_to_fill(l, init)?;
        let (ptr, ofs) = (l.buf(PTR), l.buf(OFS));
        let mut code = super::shared::zero_ptr(ptr, count).to_vec();
        code.extend([
            Stmt::Grow {
                buf: ofs,
                len: b::int(1),
            },
            b::store(ofs, b::int(0), b::int(0)),
            b::assign(l.state(QOS), b::int(0)),
            b::assign(l.state(ROS), b::int(0)),
            b::assign(l.state(PREV), b::int(-1)),
        ]);
        code.extend(l.child_impl().declare(cx, &l.child(), b::int(0), init)?);
        Ok(code)
    }
    fn assemble(&self, _: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        Ok(super::shared::empty_fibers(l.buf(PTR), lo, hi))
    }
    fn freeze(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        let (ptr, ofs) = (l.buf(PTR), l.buf(OFS));
        let mut code = vec![super::shared::prefix_sum(cx, ptr, count.clone())];
        let children = b::load(ofs, b::load(ptr, count));
        let (child, n) = l.child_impl().freeze(cx, &l.child(), children)?;
        code.extend(child);
        Ok((code, n))
    }
    /// Finch's thaw, which Finch itself lacks for this level: new entries append after the
    /// stored ones, extending the last block when they continue it (see
    /// `shared::thaw_counted`; the cursor there counts blocks).
    fn thaw(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        let (ros, qos) = (l.state(ROS), l.state(QOS));
        let mut code = super::shared::thaw_counted(cx, l.buf(PTR), ros, Some(l.state(PREV)), count);
        code.push(b::assign(qos, b::load(l.buf(OFS), b::var(ros))));
        let (child, n) = l.child_impl().thaw(cx, &l.child(), b::var(qos))?;
        code.extend(child);
        Ok((code, n))
    }

    fn unfurl_read(&self, cx: &mut Cx, f: &Fiber, protocol: Option<Protocol>) -> Result<Looplet> {
        let t = &f.tensor;
        let bufs = &t.level_bufs[f.level];
        let (ptr, idx, ofs) = (bufs[PTR], bufs[IDX], bufs[OFS]);
        let v = |cx: &mut Cx, s: &str| cx.var(&format!("{}_{s}", t.name), ElemType::I64);
        let (r, r_stop, last) = (v(cx, "r"), v(cx, "r_stop"), v(cx, "last"));
        let (q_stop, b_stop, b_start, q_ofs) = (
            v(cx, "q_stop"),
            v(cx, "block_stop"),
            v(cx, "block_start"),
            v(cx, "q_ofs"),
        );
        let preamble = vec![
            b::assign(r, b::load(ptr, f.pos.clone())),
            b::assign(r_stop, b::load(ptr, b::add(f.pos.clone(), b::int(1)))),
            b::assign(last, b::int(-1)),
            Stmt::If {
                cond: b::lt(b::var(r), b::var(r_stop)),
                then: vec![b::assign(
                    last,
                    b::load(idx, b::sub(b::var(r_stop), b::int(1))),
                )],
                otherwise: vec![],
            },
        ];
        let fill = Target::Fill(t.fill);
        if protocol == Some(Protocol::Follow) {
            // The first block ending at or after `i` holds it unless it starts later; block
            // `r` ends at `idx[r]` at child position `ofs[r + 1] - 1`.
            let f2 = f.clone();
            let block_len = move |r: &Expr| {
                b::sub(
                    b::load(ofs, b::add(r.clone(), b::int(1))),
                    b::load(ofs, r.clone()),
                )
            };
            return Ok(super::shared::follow_by_search(
                cx,
                &t.name,
                vec![
                    b::assign(r, b::load(ptr, f.pos.clone())),
                    b::assign(r_stop, b::load(ptr, b::add(f.pos.clone(), b::int(1)))),
                ],
                idx,
                b::var(r),
                b::var(r_stop),
                Rc::new(move |r: &Expr, i: &Expr| {
                    b::lt(b::sub(b::load(idx, r.clone()), block_len(r)), i.clone())
                }),
                Rc::new(move |r: &Expr, i: &Expr| {
                    Target::Fiber(f2.child(b::sub(
                        b::add(b::load(ofs, b::add(r.clone(), b::int(1))), i.clone()),
                        b::add(b::load(idx, r.clone()), b::int(1)),
                    )))
                }),
                fill,
            ));
        }
        let f2 = f.clone();
        let inside = Looplet::Lookup(Rc::new(move |i: &Expr| {
            Target::Fiber(f2.child(b::add(b::var(q_ofs), i.clone())))
        }));
        // One chunk per block: fill from the previous block's end, then the block.
        let chunk = Looplet::Thunk {
            preamble: vec![
                b::assign(q_stop, b::load(ofs, b::add(b::var(r), b::int(1)))),
                b::assign(b_stop, b::load(idx, b::var(r))),
                b::assign(
                    b_start,
                    b::add(
                        b::sub(
                            b::var(b_stop),
                            b::sub(b::var(q_stop), b::load(ofs, b::var(r))),
                        ),
                        b::int(1),
                    ),
                ),
                b::assign(
                    q_ofs,
                    b::sub(b::sub(b::var(q_stop), b::var(b_stop)), b::int(1)),
                ),
            ],
            body: Box::new(Target::Looplet(Looplet::Sequence(vec![
                Phase {
                    stop: Some(b::sub(b::var(b_start), b::int(1))),
                    body: Looplet::Run(Box::new(fill.clone())),
                },
                Phase {
                    stop: None,
                    body: inside,
                },
            ]))),
            epilogue: vec![],
        };
        let stepper = Stepper {
            seek: Rc::new(move |start: &Expr| {
                // Every block ends at a coordinate >= 0, so a walk from 0 needs no search.
                if *start == b::int(0) {
                    return vec![];
                }
                vec![b::assign(
                    r,
                    Expr::SearchGe {
                        buf: idx,
                        lo: Box::new(b::var(r)),
                        hi: Box::new(b::var(r_stop)),
                        key: Box::new(start.clone()),
                    },
                )]
            }),
            stop: b::load(idx, b::var(r)),
            chunk,
            next: vec![b::assign(r, b::add(b::var(r), b::int(1)))],
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
        let (ptr, idx, ofs) = (l.buf(PTR), l.buf(IDX), l.buf(OFS));
        let (qos, ros, prev) = (l.state(QOS), l.state(ROS), l.state(PREV));
        let start = cx.var(&format!("{}_ros_start", t.name), ElemType::I64);
        let dirty = cx.var(&format!("{}_dirty", t.name), ElemType::Bool);
        let coord_order = cx.error(KernelError::new(
            &t.name,
            KernelErrorKind::OutOfOrder {
                level: "SparseBlockList",
                order: Order::Entries,
            },
        ));
        let pos = f.pos.clone();
        let fiber = super::shared::counted_fiber(
            cx,
            "SparseBlockList",
            &t.name,
            ptr,
            ros,
            prev,
            start,
            pos.clone(),
        );
        // Every write takes the next child position; it is committed only if the child
        // reports a write.
        let mut point_pre =
            l.child_impl()
                .assemble(cx, &l.child(), b::var(qos), b::add(b::var(qos), b::int(1)))?;
        point_pre.push(b::assign(dirty, b::boolean(false)));
        let mut child = f.child(b::var(qos));
        child.dirty = Some(dirty);
        let parent_dirty = f.dirty;
        let fiber_commit = fiber.commit.clone();
        let lookup = Looplet::Lookup(Rc::new(move |i: &Expr| {
            let end = b::add(b::var(qos), b::int(1));
            let new_block = vec![
                Stmt::Grow {
                    buf: idx,
                    len: b::add(b::var(ros), b::int(1)),
                },
                Stmt::Grow {
                    buf: ofs,
                    len: b::add(b::var(ros), b::int(2)),
                },
                b::store(idx, b::var(ros), i.clone()),
                b::store(ofs, b::add(b::var(ros), b::int(1)), end.clone()),
                b::assign(ros, b::add(b::var(ros), b::int(1))),
            ];
            let prev_end = b::load(idx, b::sub(b::var(ros), b::int(1)));
            let mut in_fiber = b::if_(
                b::le(i.clone(), prev_end.clone()),
                vec![Stmt::Fail(coord_order)],
            );
            in_fiber.extend(b::if_else(
                b::eq(i.clone(), b::add(prev_end, b::int(1))),
                vec![
                    b::store(idx, b::sub(b::var(ros), b::int(1)), i.clone()),
                    b::store(ofs, b::var(ros), end),
                ],
                new_block.clone(),
            ));
            // Only look at the previous block when this fiber has one (else idx[ros-1]
            // belongs to another fiber, or does not exist).
            let mut commit = fiber_commit.clone();
            commit.extend(b::if_else(
                b::lt(b::var(start), b::var(ros)),
                in_fiber,
                new_block,
            ));
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

fn i64s(b: &Buffer) -> &[i64] {
    b.as_i64().expect("SparseBlockList buffers are i64")
}

#[cfg(test)]
mod tests {
    use crate::levels::testing::{fmt, run_jit as run};

    use crate::runtime::Buffer;
    use crate::tensor::Tensor;
    use std::collections::BTreeMap;

    fn vector() -> Buffer {
        Buffer::F64(vec![0.0, 1.0, 1.0, 2.0, 2.0, 0.0, 0.0, 3.0, 0.0].into())
    }

    #[test]
    fn golden_storage() {
        let t = Tensor::from_dense(&fmt("SparseBlockList(Element(0.0))"), &[9], &vector()).unwrap();
        assert_eq!(
            t.levels[0],
            vec![
                Buffer::I64(vec![0, 2].into()),
                Buffer::I64(vec![4, 7].into()),
                Buffer::I64(vec![0, 4, 5].into())
            ]
        );
        assert_eq!(
            t.levels[1],
            vec![Buffer::F64(vec![1.0, 1.0, 2.0, 2.0, 3.0].into())]
        );
        assert_eq!(t.countstored(), 5);
        assert_eq!(t.to_dense(), vector());
        t.validate("x").unwrap();
    }

    #[test]
    fn nested_empty_and_fill() {
        let f = fmt("Dense(SparseBlockList(Element(1.0)))");
        let vals = Buffer::F64(vec![1.0, 1.0, 1.0, 5.0, 1.0, 6.0, 2.0, 7.0, 1.0].into());
        let t = Tensor::from_dense(&f, &[3, 3], &vals).unwrap();
        assert_eq!(
            t.levels[1],
            vec![
                Buffer::I64(vec![0, 0, 2, 3].into()),
                Buffer::I64(vec![0, 2, 1].into()),
                Buffer::I64(vec![0, 1, 2, 4].into())
            ]
        );
        assert_eq!(t.to_dense(), vals);
        t.validate("A").unwrap();
        let e = Tensor::empty(&f, &[3, 3]).unwrap();
        e.validate("e").unwrap();
        assert_eq!(e.countstored(), 0);
    }

    #[test]
    fn validate_rejects_bad_arrays() {
        let t = Tensor::from_dense(&fmt("SparseBlockList(Element(0.0))"), &[9], &vector()).unwrap();
        for (ptr, idx, ofs, msg) in [
            (vec![0, 2], vec![4, 9], vec![0, 4, 5], "outside"),
            (vec![0, 2], vec![4, 4], vec![0, 4, 5], "overlaps"),
            (vec![0, 2], vec![4, 7], vec![0, 4, 4], "empty"),
            (vec![0, 3], vec![4, 7], vec![0, 4, 5], "promises 3"),
            (vec![1, 2], vec![4, 7], vec![0, 4, 5], "ptr[0]"),
            (vec![0, 2], vec![2, 7], vec![0, 4, 5], "outside"),
        ] {
            let mut bad = t.clone();
            bad.levels[0] = vec![
                Buffer::I64(ptr.into()),
                Buffer::I64(idx.into()),
                Buffer::I64(ofs.into()),
            ];
            let e = bad.validate("x").unwrap_err().to_string();
            assert!(e.contains(msg), "{msg}: {e}");
        }
    }

    #[test]
    fn writes_build_blocks_and_out_of_order_fails() {
        let mut ts = BTreeMap::new();
        ts.insert(
            "x".to_string(),
            Tensor::from_dense(&fmt("SparseList(Element(0.0))"), &[9], &vector()).unwrap(),
        );
        ts.insert(
            "y".to_string(),
            Tensor::empty(&fmt("SparseBlockList(Element(0.0))"), &[9]).unwrap(),
        );
        run("y .= 0\nfor i = _\n  y[i] = x[i]\nend\n", &mut ts).unwrap();
        let y = &ts["y"];
        assert_eq!(
            y.levels[0],
            vec![
                Buffer::I64(vec![0, 2].into()),
                Buffer::I64(vec![4, 7].into()),
                Buffer::I64(vec![0, 4, 5].into())
            ]
        );
        assert_eq!(y.to_dense(), vector());
        y.validate("y").unwrap();

        ts.insert(
            "z".to_string(),
            Tensor::empty(&fmt("Dense(SparseBlockList(Element(0.0)))"), &[2, 9]).unwrap(),
        );
        let e = run(
            "z .= 0\nfor j = _, i = _\n  z[i, j] += x[j]\nend\n",
            &mut ts,
        )
        .unwrap_err();
        assert!(e.to_string().contains("`z`"), "{e}");
        assert!(e.to_string().contains("SparseBlockList"), "{e}");
    }
}
