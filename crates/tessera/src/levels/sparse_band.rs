//! `SparseBand`: one contiguous band of stored coordinates per fiber. Fiber `p`'s band ends at
//! coordinate `idx[p]` and its child positions are `ofs[p]..ofs[p+1]`, so it starts at
//! `idx[p] - (ofs[p+1] - ofs[p]) + 1`. Every coordinate inside the band is stored, fill values
//! included (countstored counts the whole band). An empty fiber has `ofs[p+1] == ofs[p]` and
//! stores `idx[p] = -1` (any in-range `idx` reads the same; -1 is what this code writes).
//!
//! Reading needs no search: fill before the band, random access inside it, fill after.
//! While being updated `ofs[p+1]` holds fiber `p`'s band length and `idx[p]` its last
//! coordinate; freeze turns lengths into offsets. Fibers must be written in increasing position
//! order; within a fiber a write past the band's end extends the band (allocating the gap as
//! fill), a write inside the band updates it in place, and a write before the band's start is
//! a runtime error (it would have to shift the stored entries).

use super::registry::{self, Arity, Caps, LevelSpec, Role};
use super::{Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::{Cx, KernelError, KernelErrorKind, Order};
use crate::ir::{Expr, Stmt, build as b};
use crate::looplets::{Fiber, Looplet, Phase, Target};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use std::rc::Rc;

pub struct SparseBand;

pub const SPEC: LevelSpec = LevelSpec {
    name: "SparseBand",
    role: Role::Level,
    arity: Arity::Fixed(1),
    params: &[],
    // Its walk needs no loop: fill, the band by random access, fill.
    protocols: &[],
    caps: Caps {
        sparse: true,
        // As in Finch: each fiber's band is fixed once frozen.
        reopen: false,
        ..Caps::LEVEL
    },
    is: |k| matches!(k, LevelKind::SparseBand),
    make: |_| LevelKind::SparseBand,
    args: registry::no_args,
    check_below,
    imp: &SparseBand,
};

/// Positions inside a band are stored even where they hold the fill, and a Pattern leaf reads
/// every stored position as `true`: the band's gaps would read wrong.
fn check_below(below: &[LevelKind]) -> Option<&'static str> {
    below
        .iter()
        .all(|c| matches!(c, LevelKind::Dense | LevelKind::Pattern))
        .then_some(
            "SparseBand stores fill values inside its band, which a Pattern leaf cannot hold (use Element(false))",
        )
}

const IDX: usize = 0;
const OFS: usize = 1;
const QOS: usize = 0;
const PREV: usize = 1;
/// `idx` of an empty fiber.
pub const EMPTY: i64 = -1;

impl Level for SparseBand {
    fn buffers(&self, _: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        vec![("idx", ElemType::I64), ("ofs", ElemType::I64)]
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
        let (idx, ofs) = (i64s(&bufs[IDX]), i64s(&bufs[OFS]));
        if idx.len() != parent_count {
            return Err(format!(
                "idx has {} entries, expected one per fiber ({parent_count})",
                idx.len()
            ));
        }
        if ofs.len() != parent_count + 1 {
            return Err(format!(
                "ofs has {} entries, expected {}",
                ofs.len(),
                parent_count + 1
            ));
        }
        if ofs[0] != 0 {
            return Err("ofs[0] must be 0".into());
        }
        let n = dims[0] as i64;
        for p in 0..parent_count {
            let len = ofs[p + 1] - ofs[p];
            if len < 0 {
                return Err(format!(
                    "ofs[{}] = {} is below ofs[{p}] = {}",
                    p + 1,
                    ofs[p + 1],
                    ofs[p]
                ));
            }
            if idx[p] < EMPTY || idx[p] >= n {
                return Err(format!("idx[{p}] = {} is outside -1..{n}", idx[p]));
            }
            if len > 0 && idx[p] - len + 1 < 0 {
                return Err(format!(
                    "fiber {p}: a band of {len} entries cannot end at idx[{p}] = {}",
                    idx[p]
                ));
            }
        }
        Ok(ofs[parent_count] as usize)
    }
    fn finish(
        &self,
        _: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        bufs[IDX].truncate(parent_count);
        bufs[OFS].truncate(parent_count + 1);
        i64s(&bufs[OFS])[parent_count] as usize
    }
    fn empty(&self, _: &LevelKind, bufs: &mut [Buffer], _: &[usize], parent_count: usize) -> usize {
        bufs[IDX] = Buffer::I64(vec![EMPTY; parent_count].into());
        bufs[OFS] = Buffer::I64(vec![0; parent_count + 1].into());
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
        let (idx, ofs) = (i64s(&bufs[IDX]), i64s(&bufs[OFS]));
        let (lo, hi) = (ofs[pos], ofs[pos + 1]);
        let first = idx[pos] - (hi - lo) + 1;
        for q in lo..hi {
            f(&[(first + q - lo) as usize], q as usize);
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
        let mut idx = vec![EMPTY; parent_count];
        let mut ofs = vec![0i64; parent_count + 1];
        let mut out = vec![];
        let mut total = 0i64;
        for &(p, lo, hi) in groups {
            if lo == hi {
                continue;
            }
            // Groups come in increasing position order, so this fiber's band starts at the
            // running total; the band spans the first to the last coordinate.
            let (first, last) = (coords[0][lo], coords[0][hi - 1]);
            super::dense::split_runs(&coords[0], lo, hi, |c, a, z| {
                out.push(((total + c - first) as usize, a, z));
            });
            idx[p] = last;
            ofs[p + 1] = last - first + 1;
            total += last - first + 1;
        }
        for p in 1..=parent_count {
            ofs[p] += ofs[p - 1];
        }
        bufs[IDX] = Buffer::I64(idx.into());
        bufs[OFS] = Buffer::I64(ofs.into());
        (total as usize, out)
    }

    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        super::shared::declare_to_fill(l, init)?;
        let mut code = vec![
            Stmt::Grow {
                buf: l.buf(OFS),
                len: b::int(1),
            },
            b::store(l.buf(OFS), b::int(0), b::int(0)),
        ];
        code.extend(empty_fibers(l, b::int(0), count));
        code.push(b::assign(l.state(QOS), b::int(0)));
        code.push(b::assign(l.state(PREV), b::int(-1)));
        code.extend(l.child_impl().declare(cx, &l.child(), b::int(0), init)?);
        Ok(code)
    }
    fn assemble(&self, _: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        Ok(empty_fibers(l, lo, hi))
    }
    fn freeze(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        let ofs = l.buf(OFS);
        let mut code = vec![super::shared::prefix_sum(cx, ofs, count.clone())];
        let (child, n) = l.child_impl().freeze(cx, &l.child(), b::load(ofs, count))?;
        code.extend(child);
        Ok((code, n))
    }
    fn unfurl_read(&self, cx: &mut Cx, f: &Fiber, _: Option<Protocol>) -> Result<Looplet> {
        let t = &f.tensor;
        let (idx, ofs) = (t.level_bufs[f.level][IDX], t.level_bufs[f.level][OFS]);
        let v = |cx: &mut Cx, s: &str| cx.var(&format!("{}_{s}", t.name), ElemType::I64);
        let (last, q_stop, first, q_ofs) = (
            v(cx, "band_stop"),
            v(cx, "q_stop"),
            v(cx, "band_start"),
            v(cx, "q_ofs"),
        );
        let preamble = vec![
            b::assign(last, b::load(idx, f.pos.clone())),
            b::assign(q_stop, b::load(ofs, b::add(f.pos.clone(), b::int(1)))),
            b::assign(
                first,
                b::add(
                    b::sub(
                        b::var(last),
                        b::sub(b::var(q_stop), b::load(ofs, f.pos.clone())),
                    ),
                    b::int(1),
                ),
            ),
            // Child position of coordinate i inside the band: q_ofs + i.
            b::assign(
                q_ofs,
                b::sub(b::sub(b::var(q_stop), b::var(last)), b::int(1)),
            ),
        ];
        let fill = Target::Fill(t.fill);
        let f2 = f.clone();
        let band = Looplet::Lookup(Rc::new(move |i: &Expr| {
            Target::Fiber(f2.child(b::add(b::var(q_ofs), i.clone())))
        }));
        Ok(Looplet::Thunk {
            preamble,
            body: Box::new(Target::Looplet(Looplet::Sequence(vec![
                Phase {
                    stop: Some(b::sub(b::var(first), b::int(1))),
                    body: Looplet::Run(Box::new(fill.clone())),
                },
                Phase {
                    stop: Some(b::var(last)),
                    body: band,
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
        let (idx, ofs) = (l.buf(IDX), l.buf(OFS));
        let (qos, prev) = (l.state(QOS), l.state(PREV));
        let v = |cx: &mut Cx, s: &str| cx.var(&format!("{}_{s}", t.name), ElemType::I64);
        let (start, n, last, first, tpos) = (
            v(cx, "qos_start"),
            v(cx, "band_len"),
            v(cx, "band_stop"),
            v(cx, "band_start"),
            v(cx, "band_pos"),
        );
        let dirty = cx.var(&format!("{}_dirty", t.name), ElemType::Bool);
        let fiber_order = cx.error(KernelError::new(
            &t.name,
            KernelErrorKind::OutOfOrder {
                level: "SparseBand",
                order: Order::Fibers,
            },
        ));
        let coord_order = cx.error(KernelError::new(
            &t.name,
            KernelErrorKind::OutOfOrder {
                level: "SparseBand",
                order: Order::BandStart,
            },
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
                b::sub(b::var(qos), b::load(ofs, b::add(pos.clone(), b::int(1)))),
            ),
        ];
        let epilogue = vec![b::store(
            ofs,
            b::add(pos.clone(), b::int(1)),
            b::sub(b::var(qos), b::var(start)),
        )];
        // The child positions a write may need: one fresh position, or the gap up to it.
        let fresh =
            l.child_impl()
                .assemble(cx, &l.child(), b::var(qos), b::add(b::var(qos), b::int(1)))?;
        let gap = l.child_impl().assemble(
            cx,
            &l.child(),
            b::var(qos),
            b::add(b::var(tpos), b::int(1)),
        )?;
        let mut child = f.child(b::var(tpos));
        child.dirty = Some(dirty);
        let parent_dirty = f.dirty;
        let lookup = Looplet::Lookup(Rc::new(move |i: &Expr| {
            let empty = b::eq(b::var(n), b::int(0));
            let before = b::lt(i.clone(), b::var(first));
            let after = b::lt(b::var(last), i.clone());
            let mut fresh_pos = vec![b::assign(tpos, b::var(qos))];
            fresh_pos.extend(fresh.clone());
            let mut gap_pos = vec![b::assign(
                tpos,
                b::add(
                    b::var(qos),
                    b::sub(b::sub(i.clone(), b::var(last)), b::int(1)),
                ),
            )];
            gap_pos.extend(gap.clone());
            let inside = vec![b::assign(
                tpos,
                b::sub(
                    b::sub(b::var(qos), b::int(1)),
                    b::sub(b::var(last), i.clone()),
                ),
            )];
            // Before the band the child writes into a scratch position past the end, which
            // the epilogue never commits (it fails instead).
            let mut pre = vec![
                b::assign(n, b::sub(b::var(qos), b::var(start))),
                b::assign(last, b::load(idx, pos.clone())),
                b::assign(first, b::add(b::sub(b::var(last), b::var(n)), b::int(1))),
            ];
            pre.extend(b::if_else(
                b::or(empty.clone(), before.clone()),
                fresh_pos,
                b::if_else(after.clone(), gap_pos, inside),
            ));
            pre.push(b::assign(dirty, b::boolean(false)));
            let mut commit = b::if_(
                b::and(b::not(empty.clone()), before),
                vec![Stmt::Fail(coord_order)],
            );
            commit.extend(b::if_(
                b::or(empty, after),
                vec![
                    b::assign(qos, b::add(b::var(tpos), b::int(1))),
                    b::store(idx, pos.clone(), i.clone()),
                ],
            ));
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
            preamble,
            body: Box::new(Target::Looplet(lookup)),
            epilogue,
        })
    }
}

/// Grow the arrays to `hi` fibers and make fibers `lo..hi` empty.
fn empty_fibers(l: &LevelRef, lo: Expr, hi: Expr) -> Vec<Stmt> {
    let (idx, ofs) = (l.buf(IDX), l.buf(OFS));
    vec![
        Stmt::Grow {
            buf: idx,
            len: hi.clone(),
        },
        Stmt::Fill {
            buf: idx,
            start: lo.clone(),
            stop: hi.clone(),
            value: b::int(EMPTY),
        },
        Stmt::Grow {
            buf: ofs,
            len: b::add(hi.clone(), b::int(1)),
        },
        Stmt::Fill {
            buf: ofs,
            start: b::add(lo, b::int(1)),
            stop: b::add(hi, b::int(1)),
            value: b::int(0),
        },
    ]
}

fn i64s(b: &Buffer) -> &[i64] {
    b.as_i64().expect("SparseBand buffers are i64")
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
        let t = Tensor::from_dense(&fmt("SparseBand(Element(0.0))"), &[9], &vector()).unwrap();
        assert_eq!(
            t.levels[0],
            vec![Buffer::I64(vec![7].into()), Buffer::I64(vec![0, 7].into())]
        );
        assert_eq!(
            t.levels[1],
            vec![Buffer::F64(vec![1.0, 1.0, 2.0, 2.0, 0.0, 0.0, 3.0].into())]
        );
        assert_eq!(t.countstored(), 7);
        assert_eq!(t.to_dense(), vector());
        t.validate("x").unwrap();
    }

    #[test]
    fn empty_fibers_nested_and_fill() {
        let f = fmt("Dense(SparseBand(Element(1.0)))");
        let vals = Buffer::F64(vec![1.0, 1.0, 1.0, 5.0, 1.0, 6.0, 1.0, 7.0, 1.0].into());
        let t = Tensor::from_dense(&f, &[3, 3], &vals).unwrap();
        assert_eq!(
            t.levels[1],
            vec![
                Buffer::I64(vec![-1, 2, 1].into()),
                Buffer::I64(vec![0, 0, 3, 4].into())
            ]
        );
        assert_eq!(t.to_dense(), vals);
        t.validate("A").unwrap();
        let f = fmt("SparseBand(SparseList(Element(0.0)))");
        let vals = Buffer::F64(vec![0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0].into());
        let t = Tensor::from_dense(&f, &[3, 3], &vals).unwrap();
        assert_eq!(
            t.levels[0],
            vec![Buffer::I64(vec![2].into()), Buffer::I64(vec![0, 3].into())]
        );
        assert_eq!(t.to_dense(), vals);
        t.validate("A").unwrap();
        let e = Tensor::empty(&f, &[3, 3]).unwrap();
        e.validate("e").unwrap();
        assert_eq!(e.countstored(), 0);
    }

    #[test]
    fn validate_rejects_bad_arrays() {
        let t = Tensor::from_dense(&fmt("SparseBand(Element(0.0))"), &[9], &vector()).unwrap();
        for (idx, ofs, msg) in [
            (vec![9], vec![0, 7], "outside"),
            (vec![5], vec![0, 7], "cannot end"),
            (vec![7], vec![1, 7], "ofs[0]"),
            (vec![7, 8], vec![0, 7], "idx has 2"),
            (vec![7], vec![0, 7, 8], "ofs has 3"),
            (vec![7], vec![0, 8], "val has 7"),
        ] {
            let mut bad = t.clone();
            bad.levels[0] = vec![Buffer::I64(idx.into()), Buffer::I64(ofs.into())];
            let e = bad.validate("x").unwrap_err().to_string();
            assert!(e.contains(msg), "{e}");
        }
    }

    #[test]
    fn writes_fill_the_band_and_out_of_order_fails() {
        let mut ts = BTreeMap::new();
        ts.insert(
            "x".to_string(),
            Tensor::from_dense(&fmt("SparseList(Element(0.0))"), &[9], &vector()).unwrap(),
        );
        ts.insert(
            "y".to_string(),
            Tensor::empty(&fmt("SparseBand(Element(0.0))"), &[9]).unwrap(),
        );
        run("y .= 0\nfor i = _\n  y[i] = x[i]\nend\n", &mut ts).unwrap();
        let y = &ts["y"];
        assert_eq!(
            y.levels[0],
            vec![Buffer::I64(vec![7].into()), Buffer::I64(vec![0, 7].into())]
        );
        assert_eq!(y.to_dense(), vector());
        y.validate("y").unwrap();

        // A second pass over the same fiber writes inside the band, in place.
        run(
            "y .= 0\nfor i = _\n  y[i] += x[i]\nend\nfor i = _\n  y[i] += x[i]\nend\n",
            &mut ts,
        )
        .unwrap();
        let y = &ts["y"];
        assert_eq!(
            y.levels[1],
            vec![Buffer::F64(vec![2.0, 2.0, 4.0, 4.0, 0.0, 0.0, 6.0].into())]
        );
        y.validate("y").unwrap();

        // A fiber written twice, the second time from its start: before the band's end is
        // fine (in place), so only the reversed order below fails.
        ts.insert(
            "z".to_string(),
            Tensor::empty(&fmt("SparseBand(Element(0.0))"), &[9]).unwrap(),
        );
        let e = run(
            "z .= 0\nfor i = 0:8\n  z[8 - i] += x[8 - i]\nend\n",
            &mut ts,
        )
        .unwrap_err();
        assert!(e.to_string().contains("`z`"), "{e}");
        assert!(e.to_string().contains("SparseBand"), "{e}");
    }
}
