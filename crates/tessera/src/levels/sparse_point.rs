//! `SparsePoint` (the paper's SparsePinpoint): at most one stored coordinate per fiber.
//! `idx[p]` is fiber `p`'s coordinate, or -1 when the fiber is empty (0 is a valid coordinate);
//! child position = parent position, so the child has one position per fiber, stored or not
//! (an empty fiber's child position holds the fill).
//!
//! Reading needs no loop: fill before the point, the child at the point, fill after. Writing a
//! second coordinate to a fiber is a runtime error; rewriting the stored coordinate is fine.

use super::real;
use super::registry::{self, Args, Arity, Caps, LevelSpec, Param, Role};
use super::shared::{int_at, int_buf, ints};
use super::{Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::{Cx, KernelError, KernelErrorKind};
use crate::ir::{Expr, Stmt, build as b};
use crate::limit::Limit;
use crate::looplets::{Fiber, Kind, Looplet, Phase, Target};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use std::rc::Rc;

pub struct SparsePoint;

pub const SPEC: LevelSpec = LevelSpec {
    name: "SparsePoint",
    role: Role::Level,
    arity: Arity::Fixed(1),
    params: &[Param::Coord],
    // Its walk reaches the one coordinate without a loop.
    protocols: &[],
    // Reopened, a fiber takes writes at its stored coordinate (or its first, if empty).
    caps: Caps {
        sparse: true,
        reopen: true,
        holds_any: false,
        ..Caps::LEVEL
    },
    is: |k| matches!(k, LevelKind::SparsePoint { .. }),
    make: |a| LevelKind::SparsePoint { coord: a.coord },
    args: |k| match k {
        LevelKind::SparsePoint { coord } => Args {
            coord: *coord,
            ..Args::default()
        },
        _ => Args::default(),
    },
    check_below: registry::any_below,
    imp: &SparsePoint,
};

const IDX: usize = 0;
/// `idx` of an empty fiber.
pub const EMPTY: i64 = -1;
/// `idx` of an empty fiber of real coordinates (never a stored point: those are not NaN).
const EMPTY_REAL: f64 = f64::NAN;

impl Level for SparsePoint {
    fn buffers(&self, kind: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        vec![("idx", kind.coord().elem())]
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
            if idx.len() != parent_count {
                return Err(format!(
                    "idx has {} entries, expected one per fiber ({parent_count})",
                    idx.len()
                ));
            }
            for (p, &x) in idx.iter().enumerate() {
                if !x.is_nan() {
                    real::check_piece(real::limit(x, 0), real::limit(x, 0))
                        .map_err(|m| format!("idx[{p}]: {m}"))?;
                }
            }
            return Ok(parent_count);
        }
        let idx = ints(&bufs[IDX]);
        if idx.len() != parent_count {
            return Err(format!(
                "idx has {} entries, expected one per fiber ({parent_count})",
                idx.len()
            ));
        }
        for (p, &i) in idx.iter().enumerate() {
            if i != EMPTY && (i < 0 || i as usize >= dims[0]) {
                return Err(format!(
                    "idx[{p}] = {i} is outside 0..{} (and is not -1, the mark of an empty fiber)",
                    dims[0]
                ));
            }
        }
        Ok(parent_count)
    }
    fn finish(
        &self,
        _: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        bufs[IDX].truncate(parent_count);
        parent_count
    }
    fn empty(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        bufs[IDX] = match kind.is_real() {
            true => Buffer::F64(vec![EMPTY_REAL; parent_count].into()),
            false => int_buf(kind.coord().elem(), vec![EMPTY; parent_count]),
        };
        parent_count
    }
    fn for_each_piece(
        &self,
        kind: &LevelKind,
        bufs: &[Buffer],
        pos: usize,
        f: &mut dyn FnMut(Limit<f64>, Limit<f64>, usize),
    ) {
        if kind.is_real() {
            let x = real::f64s(&bufs[IDX])[pos];
            if !x.is_nan() {
                f(real::limit(x, 0), real::limit(x, 0), pos);
            }
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
            return Err(real::integer_level("SparsePoint"));
        }
        let mut idx = vec![EMPTY_REAL; parent_count];
        let out = real::single_pieces("SparsePoint", groups, pieces, &mut |p, a, z| {
            idx[p] = real::pinpoint("SparsePoint", a, z)?;
            Ok(())
        })?;
        bufs[IDX] = Buffer::F64(idx.into());
        Ok((parent_count, out))
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
        let i = int_at(&bufs[IDX], pos);
        if i != EMPTY {
            f(&[i as usize], pos);
        }
    }
    fn check_entries(
        &self,
        _: &LevelKind,
        _: &[usize],
        groups: &[(usize, usize, usize)],
        coords: &[Vec<i64>],
    ) -> std::result::Result<(), String> {
        for &(p, lo, hi) in groups {
            if let Some(k) = (lo + 1..hi).find(|&k| coords[0][k] != coords[0][lo]) {
                return Err(format!(
                    "SparsePoint holds one entry per fiber, but fiber {p} has coordinates {} and {}",
                    coords[0][lo], coords[0][k]
                ));
            }
        }
        Ok(())
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
        let mut idx = vec![EMPTY; parent_count];
        let mut out = vec![];
        for &(p, lo, hi) in groups {
            // `check_entries` made sure the group is one run of a single coordinate.
            if lo < hi {
                idx[p] = coords[0][lo];
                out.push((p, lo, hi));
            }
        }
        bufs[IDX] = int_buf(kind.coord().elem(), idx);
        (parent_count, out)
    }

    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        super::shared::declare_to_fill(l, init)?;
        let mut code = super::shared::fits_i32(cx, l, "a dimension", l.dim(0));
        code.extend(mark_empty(l, b::int(0), count.clone()));
        code.extend(l.child_impl().declare(cx, &l.child(), count, init)?);
        Ok(code)
    }
    fn assemble(&self, cx: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        let mut code = mark_empty(l, lo.clone(), hi.clone());
        code.extend(l.child_impl().assemble(cx, &l.child(), lo, hi)?);
        Ok(code)
    }
    fn freeze(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        l.child_impl().freeze(cx, &l.child(), count)
    }
    fn thaw(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        // Positions never move, and a later write checks against the stored coordinate.
        l.child_impl().thaw(cx, &l.child(), count)
    }

    fn unfurl_read(&self, cx: &mut Cx, f: &Fiber, _: Option<Protocol>) -> Result<Looplet> {
        let t = &f.tensor;
        let idx = t.level_bufs[f.level][IDX];
        let is_real = t.format.levels[f.level].is_real();
        let at = cx.var(&format!("{}_point", t.name), Kind::from_real(is_real).ty());
        let fill = Target::Fill(t.fill);
        // An empty fiber's -1 makes the first phase empty: everything is fill. A real one's
        // NaN becomes -Inf-ε, below every point.
        let load = b::load(idx, f.pos.clone());
        let point = match is_real {
            true => b::select(
                Expr::Binary(
                    crate::ir::BinOp::Ne,
                    Box::new(load.clone()),
                    Box::new(load.clone()),
                ),
                b::limit(f64::NEG_INFINITY, -1),
                b::make_limit(load, b::int(0)),
            ),
            false => load,
        };
        Ok(Looplet::Thunk {
            preamble: vec![b::assign(at, point)],
            body: Box::new(Target::Looplet(Looplet::Sequence(vec![
                Phase {
                    stop: Some(b::var(at)),
                    body: Looplet::Spike {
                        at: b::var(at),
                        body: Box::new(fill.clone()),
                        tail: Box::new(Target::Fiber(f.child(f.pos.clone()))),
                    },
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
        real::no_writes_yet(f)?;
        let t = &f.tensor;
        let idx = t.level_bufs[f.level][IDX];
        let dirty = cx.var(&format!("{}_dirty", t.name), ElemType::Bool);
        let second = cx.error(KernelError::new(
            &t.name,
            KernelErrorKind::SecondEntry {
                level: "SparsePoint",
            },
        ));
        let pos = f.pos.clone();
        let mut child = f.child(pos.clone());
        child.dirty = Some(dirty);
        let parent_dirty = f.dirty;
        Ok(Looplet::Lookup(Rc::new(move |i: &Expr| {
            let stored = b::load(idx, pos.clone());
            let mut commit = b::if_(
                b::and(
                    b::not(b::eq(stored.clone(), b::int(EMPTY))),
                    b::not(b::eq(stored, i.clone())),
                ),
                vec![Stmt::Fail(second)],
            );
            commit.push(b::store(idx, pos.clone(), i.clone()));
            if let Some(d) = parent_dirty {
                commit.push(b::assign(d, b::boolean(true)));
            }
            Target::Looplet(Looplet::Thunk {
                preamble: vec![b::assign(dirty, b::boolean(false))],
                body: Box::new(Target::Fiber(child.clone())),
                epilogue: b::if_(b::var(dirty), commit),
            })
        })))
    }
}

/// Grow `idx` to `hi` and mark fibers `lo..hi` empty.
fn mark_empty(l: &LevelRef, lo: Expr, hi: Expr) -> Vec<Stmt> {
    let idx = l.buf(IDX);
    vec![
        Stmt::Grow {
            buf: idx,
            len: hi.clone(),
        },
        Stmt::Fill {
            buf: idx,
            start: lo,
            stop: hi,
            value: b::int(EMPTY),
        },
    ]
}

#[cfg(test)]
mod tests {
    use crate::levels::testing::{fmt, run_jit as run};

    use crate::runtime::Buffer;
    use crate::tensor::Tensor;
    use crate::types::Scalar;
    use std::collections::BTreeMap;

    fn vec_tensor(f: &str, v: Vec<f64>) -> Tensor {
        let n = v.len();
        Tensor::from_dense(&fmt(f), &[n], &Buffer::F64(v.into())).unwrap()
    }

    #[test]
    fn writes_one_coordinate_and_rejects_a_second() {
        let mut ts = BTreeMap::new();
        ts.insert(
            "x".into(),
            vec_tensor("SparseList(Element(0.0))", vec![0.0, 0.0, 4.0, 0.0]),
        );
        ts.insert(
            "y".into(),
            Tensor::empty(&fmt("SparsePoint(Element(0.0))"), &[4]).unwrap(),
        );
        run("y .= 0\nfor i = _\n  y[i] = x[i]\nend\n", &mut ts).unwrap();
        assert_eq!(ts["y"].levels[0], vec![Buffer::I64(vec![2].into())]);
        assert_eq!(ts["y"].levels[1], vec![Buffer::F64(vec![4.0].into())]);
        ts["y"].validate("y").unwrap();
        // The same coordinate twice is fine (accumulates in place).
        run(
            "y .= 0\nfor i = _\n  y[i] += x[i]\nend\nfor i = _\n  y[i] += x[i]\nend\n",
            &mut ts,
        )
        .unwrap();
        assert_eq!(ts["y"].levels[1], vec![Buffer::F64(vec![8.0].into())]);
        // Two coordinates in one fiber are a runtime error naming the tensor.
        ts.insert(
            "x".into(),
            vec_tensor("SparseList(Element(0.0))", vec![1.0, 0.0, 4.0, 0.0]),
        );
        let e = run("y .= 0\nfor i = _\n  y[i] = x[i]\nend\n", &mut ts).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("`y`") && e.contains("one entry per fiber"),
            "{e}"
        );
    }

    #[test]
    fn golden_storage() {
        let f = fmt("SparsePoint(Element(false))");
        let vals = Buffer::Bool(vec![false, false, true, false, false, false].into());
        let t = Tensor::from_dense(&f, &[6], &vals).unwrap();
        assert_eq!(t.levels[0], vec![Buffer::I64(vec![2].into())]);
        assert_eq!(t.levels[1], vec![Buffer::Bool(vec![true].into())]);
        assert_eq!(t.to_dense(), vals);
        assert_eq!(t.countstored(), 1);
        t.validate("x").unwrap();
        // Coordinate 0 is a real coordinate, not "empty".
        let v0 = Buffer::F64(vec![4.0, 0.0, 0.0].into());
        let t = Tensor::from_dense(&fmt("SparsePoint(Element(0.0))"), &[3], &v0).unwrap();
        assert_eq!(t.levels[0], vec![Buffer::I64(vec![0].into())]);
        assert_eq!(t.to_dense(), v0);
    }

    #[test]
    fn empty_fibers_and_nonzero_fill() {
        let f = fmt("Dense(SparsePoint(Element(1.0)))");
        let vals = Buffer::F64(vec![1.0, 1.0, 1.0, 5.0, 1.0, 1.0, 1.0, 1.0, 7.0].into());
        let t = Tensor::from_dense(&f, &[3, 3], &vals).unwrap();
        assert_eq!(t.levels[1], vec![Buffer::I64(vec![-1, 0, 2].into())]);
        assert_eq!(t.levels[2], vec![Buffer::F64(vec![1.0, 5.0, 7.0].into())]);
        assert_eq!(t.to_dense(), vals);
        let e = Tensor::empty(&f, &[3, 3]).unwrap();
        assert_eq!(e.levels[1], vec![Buffer::I64(vec![-1, -1, -1].into())]);
        e.validate("e").unwrap();
    }

    #[test]
    fn two_entries_in_a_fiber_are_an_error() {
        let f = fmt("SparsePoint(Element(0.0))");
        let e = Tensor::from_dense(&f, &[4], &Buffer::F64(vec![0.0, 1.0, 2.0, 0.0].into()))
            .unwrap_err();
        assert!(e.to_string().contains("one entry per fiber"), "{e}");
    }

    #[test]
    fn validate_rejects_bad_arrays() {
        let f = fmt("SparsePoint(Element(0.0))");
        let mut t =
            Tensor::from_dense(&f, &[4], &Buffer::F64(vec![0.0, 1.0, 0.0, 0.0].into())).unwrap();
        t.levels[0][0] = Buffer::I64(vec![4].into());
        assert!(t.validate("x").unwrap_err().to_string().contains("idx[0]"));
        t.levels[0][0] = Buffer::I64(vec![-2].into());
        assert!(t.validate("x").is_err());
        t.levels[0][0] = Buffer::I64(vec![1, 2].into());
        assert!(
            t.validate("x")
                .unwrap_err()
                .to_string()
                .contains("idx has 2")
        );
        t.levels[0][0] = Buffer::I64(vec![-1].into());
        t.validate("x").unwrap();
        assert_eq!(t.get(&[1]).unwrap(), Scalar::F64(0.0));
    }
}
