//! `Element(fill)`: the leaf holding one value per position.

use super::registry::{self, Args, Arity, Caps, LevelSpec, Param, Role};
use super::{LeafValue, Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::Cx;
use crate::ir::{Expr, Stmt, build as b};
use crate::looplets::{Fiber, Looplet};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};

pub struct Element;

pub const SPEC: LevelSpec = LevelSpec {
    name: "Element",
    role: Role::Leaf,
    arity: Arity::Fixed(0),
    params: &[Param::Fill],
    protocols: &[],
    caps: Caps::LEAF,
    is: |k| matches!(k, LevelKind::Element(_)),
    make: |a| LevelKind::Element(a.fill),
    args: |k| Args {
        fill: fill_of(k),
        ..Args::default()
    },
    check_below: registry::any_below,
    imp: &Element,
};

fn fill_of(kind: &LevelKind) -> Scalar {
    match kind {
        LevelKind::Element(f) => *f,
        _ => unreachable!("Element level with a non-Element kind"),
    }
}

impl Level for Element {
    fn buffers(&self, _: &LevelKind, elem: ElemType) -> Vec<(&'static str, ElemType)> {
        vec![("val", elem)]
    }
    fn validate(
        &self,
        _: &LevelKind,
        bufs: &[Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        if bufs[0].len() < parent_count {
            return Err(format!(
                "val has {} entries, the structure needs {parent_count}",
                bufs[0].len()
            ));
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
        bufs[0].truncate(parent_count);
        parent_count
    }
    fn empty(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> usize {
        bufs[0] = Buffer::filled(bufs[0].elem(), parent_count, fill_of(kind));
        parent_count
    }

    fn remap(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        map: &[Option<usize>],
    ) -> Vec<Option<usize>> {
        let old = &bufs[0];
        let mut new = Buffer::filled(old.elem(), map.len(), fill_of(kind));
        for (k, m) in map.iter().enumerate() {
            if let Some(p) = m {
                new.set(k, old.get(*p));
            }
        }
        bufs[0] = new;
        vec![]
    }
    fn build(
        &self,
        kind: &LevelKind,
        bufs: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
        groups: &[(usize, usize, usize)],
        _: &[Vec<i64>],
    ) -> (usize, Vec<(usize, usize, usize)>) {
        bufs[0] = Buffer::filled(bufs[0].elem(), parent_count, fill_of(kind));
        (parent_count, groups.to_vec())
    }
    fn leaf_value(&self, _: &LevelKind, bufs: &[Buffer], pos: usize) -> Scalar {
        bufs[0].get(pos)
    }

    fn declare(&self, _: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        let val = l.buf(0);
        Ok(vec![
            Stmt::Grow {
                buf: val,
                len: count.clone(),
            },
            Stmt::Fill {
                buf: val,
                start: b::int(0),
                stop: count,
                value: Expr::Const(init.cast(l.tensor.elem).widen()),
            },
        ])
    }
    fn assemble(&self, _: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        let val = l.buf(0);
        Ok(vec![
            Stmt::Grow {
                buf: val,
                len: hi.clone(),
            },
            Stmt::Fill {
                buf: val,
                start: lo,
                stop: hi,
                value: Expr::Const(fill_of(l.kind()).widen()),
            },
        ])
    }
    fn freeze(&self, _: &mut Cx, _: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        Ok((vec![], count))
    }
    fn thaw(&self, _: &mut Cx, _: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        Ok((vec![], count))
    }
    fn unfurl_read(&self, _: &mut Cx, f: &Fiber, _: Option<Protocol>) -> Result<Looplet> {
        unreachable!("leaf `{}` has no dimension to unfurl", f.tensor.name)
    }
    fn unfurl_update(&self, _: &mut Cx, f: &Fiber) -> Result<Looplet> {
        unreachable!("leaf `{}` has no dimension to unfurl", f.tensor.name)
    }
    fn read_leaf(&self, f: &Fiber) -> Option<LeafValue> {
        let val = f.tensor.level_bufs[f.level][0];
        Some(LeafValue::Value(
            b::load(val, f.pos.clone()),
            f.tensor.elem.compute(),
        ))
    }
    fn update_leaf(&self, _: &mut Cx, f: &Fiber, new: &dyn Fn(Expr) -> Expr) -> Option<Vec<Stmt>> {
        let val = f.tensor.level_bufs[f.level][0];
        let mut code = vec![b::store(
            val,
            f.pos.clone(),
            new(b::load(val, f.pos.clone())),
        )];
        if let Some(d) = f.dirty {
            code.push(b::assign(d, b::boolean(true)));
        }
        Some(code)
    }
    /// A boolean leaf short-circuits its reductions (`|=` once true, `&=` once false), as
    /// ShortCircuitScalar does: a query flagged by its first match (interval overlap, a BFS
    /// pull) stops walking the rest. A boolean reaches the annihilator often and its test is
    /// one compare; numeric leaves do not get the test, as `max=` rarely reaches the type's
    /// top and the compare in every iteration would cost more than it saves (ShortCircuitScalar
    /// opts in). The value at `pos` is the accumulator: every parent fills the positions it
    /// assembles (`assemble`), so it holds the fill before the first write.
    fn short_circuit_value(&self, f: &Fiber) -> Option<Expr> {
        (f.tensor.elem == ElemType::Bool)
            .then(|| b::load(f.tensor.level_bufs[f.level][0], f.pos.clone()))
    }
}
