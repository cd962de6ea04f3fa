//! `Dense`: every coordinate of every fiber is stored; child position = `pos * n + i`.

use super::registry::{self, Arity, Caps, LevelSpec, Role, Writes};
use super::{Level, LevelKind, LevelRef};
use crate::error::Result;
use crate::ir::cx::Cx;
use crate::ir::{Expr, Stmt, build as b};
use crate::looplets::{Fiber, Looplet, Target};
use crate::notation::ast::Protocol;
use crate::runtime::Buffer;
use crate::types::{ElemType, Scalar};
use std::rc::Rc;

pub struct Dense;

pub const SPEC: LevelSpec = LevelSpec {
    name: "Dense",
    role: Role::Level,
    arity: Arity::Fixed(1),
    params: &[],
    // Its walk is random access already.
    protocols: &[],
    caps: Caps {
        writes: Writes::Random,
        reopen: true,
        ..Caps::LEVEL
    },
    is: |k| matches!(k, LevelKind::Dense),
    make: |_| LevelKind::Dense,
    args: registry::no_args,
    check_below,
    imp: &Dense,
};

/// Every position is stored, which a Pattern leaf reads as `true`: it could not hold `false`.
fn check_below(below: &[LevelKind]) -> Option<&'static str> {
    matches!(below.first(), Some(LevelKind::Pattern)).then_some(
        "Dense stores every position, and a Pattern leaf reads every stored position as `true`, so it could not hold `false`: use Dense(Element(false)) or a sparse level above Pattern()",
    )
}

impl Level for Dense {
    fn buffers(&self, _: &LevelKind, _: ElemType) -> Vec<(&'static str, ElemType)> {
        vec![]
    }
    fn validate(
        &self,
        _: &LevelKind,
        _: &[Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> std::result::Result<usize, String> {
        parent_count
            .checked_mul(dims[0])
            .ok_or_else(|| "dense size overflows".to_string())
    }
    fn finish(
        &self,
        _: &LevelKind,
        _: &mut [Buffer],
        dims: &[usize],
        parent_count: usize,
    ) -> usize {
        parent_count * dims[0]
    }
    fn empty(&self, _: &LevelKind, _: &mut [Buffer], dims: &[usize], parent_count: usize) -> usize {
        parent_count * dims[0]
    }

    fn for_each_child(
        &self,
        _: &LevelKind,
        _: &[Buffer],
        dims: &[usize],
        pos: usize,
        f: &mut dyn FnMut(&[usize], usize),
    ) {
        for i in 0..dims[0] {
            f(&[i], pos * dims[0] + i);
        }
    }
    fn remap(
        &self,
        _: &LevelKind,
        _: &mut [Buffer],
        dims: &[usize],
        map: &[Option<usize>],
    ) -> Vec<Option<usize>> {
        let n = dims[0];
        map.iter()
            .flat_map(|m| (0..n).map(move |i| m.map(|p| p * n + i)))
            .collect()
    }
    fn build(
        &self,
        _: &LevelKind,
        _: &mut [Buffer],
        dims: &[usize],
        parent_count: usize,
        groups: &[(usize, usize, usize)],
        coords: &[Vec<i64>],
    ) -> (usize, Vec<(usize, usize, usize)>) {
        let n = dims[0];
        let mut out = vec![];
        for &(p, lo, hi) in groups {
            split_runs(&coords[0], lo, hi, |c, a, z| {
                out.push((p * n + c as usize, a, z))
            });
        }
        (parent_count * n, out)
    }

    fn declare(&self, cx: &mut Cx, l: &LevelRef, count: Expr, init: Scalar) -> Result<Vec<Stmt>> {
        l.child_impl()
            .declare(cx, &l.child(), b::mul(count, l.dim(0)), init)
    }
    fn assemble(&self, cx: &mut Cx, l: &LevelRef, lo: Expr, hi: Expr) -> Result<Vec<Stmt>> {
        let n = l.dim(0);
        l.child_impl()
            .assemble(cx, &l.child(), b::mul(lo, n.clone()), b::mul(hi, n))
    }
    fn freeze(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        l.child_impl()
            .freeze(cx, &l.child(), b::mul(count, l.dim(0)))
    }
    fn thaw(&self, cx: &mut Cx, l: &LevelRef, count: Expr) -> Result<(Vec<Stmt>, Expr)> {
        l.child_impl().thaw(cx, &l.child(), b::mul(count, l.dim(0)))
    }
    fn unfurl_read(&self, _: &mut Cx, f: &Fiber, _: Option<Protocol>) -> Result<Looplet> {
        Ok(lookup(f))
    }
    fn unfurl_update(&self, _: &mut Cx, f: &Fiber) -> Result<Looplet> {
        Ok(lookup(f))
    }
}

fn lookup(f: &Fiber) -> Looplet {
    let f = f.clone();
    let n = f.tensor.dim_of_level(f.level, 0);
    Looplet::Lookup(Rc::new(move |i: &Expr| {
        Target::Fiber(f.child(b::add(b::mul(f.pos.clone(), n.clone()), i.clone())))
    }))
}

/// Call `f(coordinate, start, end)` for each run of equal coordinates in `coords[lo..hi]`.
pub fn split_runs(coords: &[i64], lo: usize, hi: usize, mut f: impl FnMut(i64, usize, usize)) {
    let mut a = lo;
    while a < hi {
        let mut z = a + 1;
        while z < hi && coords[z] == coords[a] {
            z += 1;
        }
        f(coords[a], a, z);
        a = z;
    }
}
