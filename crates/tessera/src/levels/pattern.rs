//! `Pattern()`: a leaf without storage; a stored position reads `true`, fill is `false`.

use super::registry::{self, Arity, Caps, LevelSpec, Role};
use super::{LeafValue, Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::Cx;
use crate::ir::{Expr, Stmt, build as b};
use crate::looplets::{Fiber, Looplet};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};

pub struct Pattern;

pub const SPEC: LevelSpec = LevelSpec {
    name: "Pattern",
    role: Role::Leaf,
    arity: Arity::Fixed(0),
    params: &[],
    protocols: &[],
    caps: Caps::LEAF,
    is: |k| matches!(k, LevelKind::Pattern),
    make: |_| LevelKind::Pattern,
    args: registry::no_args,
    check_below: registry::any_below,
    imp: &Pattern,
};

impl Level for Pattern {
    fn buffers(&self, _: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        vec![]
    }
    fn validate(
        &self,
        _: &LevelKind,
        _: &[Buffer],
        _: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        Ok(parent_count)
    }
    fn finish(&self, _: &LevelKind, _: &mut [Buffer], _: &[usize], parent_count: usize) -> usize {
        parent_count
    }
    fn empty(&self, _: &LevelKind, _: &mut [Buffer], _: &[usize], parent_count: usize) -> usize {
        parent_count
    }
    fn remap(
        &self,
        _: &LevelKind,
        _: &mut [Buffer],
        _: &[usize],
        _: &[Option<usize>],
    ) -> Vec<Option<usize>> {
        vec![]
    }
    fn build(
        &self,
        _: &LevelKind,
        _: &mut [Buffer],
        _: &[usize],
        parent_count: usize,
        groups: &[(usize, usize, usize)],
        _: &[Vec<i64>],
    ) -> (usize, Vec<(usize, usize, usize)>) {
        (parent_count, groups.to_vec())
    }
    fn leaf_value(&self, _: &LevelKind, _: &[Buffer], _: usize) -> Scalar {
        Scalar::Bool(true)
    }

    fn declare(&self, _: &mut Cx, l: &LevelRef, _: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        if init.as_bool() {
            return Err(crate::Error::tensor(
                &l.tensor.name,
                "a Pattern tensor can only be declared `false`",
            ));
        }
        Ok(vec![])
    }
    fn assemble(&self, _: &mut Cx, _: &LevelRef, _: Expr, _: Expr) -> Result<Vec<Stmt>> {
        Ok(vec![])
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
    fn read_leaf(&self, _: &Fiber) -> Option<LeafValue> {
        Some(LeafValue::Const(Scalar::Bool(true)))
    }
    /// The stored "value" is the parent's dirty flag: writing `true` marks the coordinate.
    fn update_leaf(&self, _: &mut Cx, f: &Fiber, new: &dyn Fn(Expr) -> Expr) -> Option<Vec<Stmt>> {
        let d = f.dirty?;
        let v = new(b::boolean(false));
        Some(b::if_(v, vec![b::assign(d, b::boolean(true))]))
    }
}
