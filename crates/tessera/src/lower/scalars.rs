//! Engine rules for the scalar formats of paper §1.9, stated through the `Level` trait so
//! any level can use them:
//!
//! - a leaf read that is a [`LeafValue::Switch`] (SparseScalar: `dirty ? val : fill`) splits
//!   the outermost statement that does not modify the tensor into one copy per case, so the
//!   fill case is simplified with the fill literal;
//! - a reduction into a tensor declared to the reducer's annihilator changes nothing and is
//!   removed statically (a `Scalar(0)` product needs no loop at all);
//! - a loop that reduces into a short-circuiting leaf (ShortCircuitScalar) tests it after each
//!   iteration and, once it holds the annihilator, runs the rest of the loop without that
//!   reduction and leaves. The rest is empty, so the loop just stops, unless the loop has other
//!   effects (another output): those still run to completion, so early exit never changes a
//!   result, only skips work that cannot change it.

use super::engine::Engine;
use super::node::{LAccess, LExpr, LStmt};
use crate::error::Result;
use crate::ir::{Expr, Stmt, build as b};
use crate::levels::{LeafValue, level_impl};
use crate::looplets::Ext;
use crate::looplets::Target;
use crate::notation::ast::{AssignOp, Reducer};
use crate::symbolic::algebra;
use crate::types::{Class, ElemType};

/// Whether `stmts` declare, freeze, thaw or write `tensor`.
fn modifies(stmts: &[LStmt], tensor: &str) -> bool {
    stmts.iter().any(|s| match s {
        LStmt::Declare { tensor: t, .. }
        | LStmt::Freeze { tensor: t }
        | LStmt::Thaw { tensor: t, .. } => t == tensor,
        LStmt::Assign { lhs, .. } => lhs.tensor == tensor,
        LStmt::Loop { body, .. } | LStmt::Let { body, .. } => modifies(body, tensor),
        LStmt::If {
            then, otherwise, ..
        } => modifies(then, tensor) || modifies(otherwise, tensor),
    })
}

fn leaf_read(a: &LAccess) -> Option<LeafValue> {
    match &a.target {
        Target::Fiber(f) if a.indices.is_empty() => {
            level_impl(&f.tensor.format.levels[f.level]).read_leaf(f)
        }
        _ => None,
    }
}

fn leaf_lexpr(lv: LeafValue, elem: ElemType) -> LExpr {
    match lv {
        LeafValue::Const(s) => LExpr::Lit(s.widen()),
        LeafValue::Value(v, ty) => LExpr::Ir(v, ty),
        sw @ LeafValue::Switch(..) => {
            let (e, _) = super::emit::leaf_expr(sw, elem.class());
            LExpr::Ir(e, elem.compute())
        }
    }
}

/// Specialise statements on the switches of the leaves they read (see the module comment).
pub fn split_leaf_switches(stmts: Vec<LStmt>) -> Vec<LStmt> {
    stmts.into_iter().map(split_one).collect()
}

fn split_one(mut s: LStmt) -> LStmt {
    // The first switch-valued read of a tensor this statement leaves alone.
    let mut found: Option<(String, Expr, LeafValue, LeafValue, ElemType)> = None;
    let mut candidates = vec![];
    let _ = super::node::visit_exprs_mut(&mut [s.clone()], &mut |e| {
        if let LExpr::Access(a) = e
            && let Some(LeafValue::Switch(c, x, y)) = leaf_read(a)
            && let Target::Fiber(f) = &a.target
        {
            candidates.push((a.tensor.clone(), c, *x, *y, f.tensor.elem));
        }
        Ok(())
    });
    for c in candidates {
        if !modifies(std::slice::from_ref(&s), &c.0) {
            found = Some(c);
            break;
        }
    }
    let Some((tensor, cond, then, otherwise, elem)) = found else {
        return s;
    };
    let span = match &s {
        LStmt::Assign { span, .. }
        | LStmt::Loop { span, .. }
        | LStmt::If { span, .. }
        | LStmt::Let { span, .. }
        | LStmt::Declare { span, .. }
        | LStmt::Thaw { span, .. } => *span,
        LStmt::Freeze { .. } => Default::default(),
    };
    let case = |lv: LeafValue| {
        let mut c = s.clone();
        let v = leaf_lexpr(lv, elem);
        let _ = super::node::visit_exprs_mut(std::slice::from_mut(&mut c), &mut |e| {
            if let LExpr::Access(a) = e
                && a.tensor == tensor
                && a.indices.is_empty()
            {
                *e = v.clone();
            }
            Ok(())
        });
        split_one(c)
    };
    let then = case(then);
    let otherwise = case(otherwise);
    s = LStmt::If {
        cond: LExpr::Ir(cond, ElemType::Bool),
        then: vec![then],
        otherwise: vec![otherwise],
        span,
    };
    s
}

/// Replace every write to `tensor` by a discarded one.
fn null_writes(stmts: &mut [LStmt], tensor: &str) {
    for s in stmts {
        match s {
            LStmt::Assign { lhs, .. } if lhs.tensor == tensor => lhs.target = Target::Null,
            LStmt::Loop { body, .. } | LStmt::Let { body, .. } => null_writes(body, tensor),
            LStmt::If {
                then, otherwise, ..
            } => {
                null_writes(then, tensor);
                null_writes(otherwise, tensor);
            }
            _ => {}
        }
    }
}

/// The reducers of every write to `tensor` in `stmts` (`None` for an overwrite).
fn writes(stmts: &[LStmt], tensor: &str, out: &mut Vec<Option<Reducer>>) {
    for s in stmts {
        match s {
            LStmt::Assign { lhs, op, .. } if lhs.tensor == tensor => out.push(match op {
                AssignOp::Reduce(r) => Some(r.clone()),
                AssignOp::Overwrite => None,
            }),
            LStmt::Loop { body, .. } | LStmt::Let { body, .. } => writes(body, tensor, out),
            LStmt::If {
                then, otherwise, ..
            } => {
                writes(then, tensor, out);
                writes(otherwise, tensor, out);
            }
            _ => {}
        }
    }
}

/// The one reducer all writes use, if they all reduce with the same one.
fn sole_reducer(ws: &[Option<Reducer>]) -> Option<Reducer> {
    let first = ws.first()?.clone()?;
    ws.iter()
        .all(|w| w.as_ref() == Some(&first))
        .then_some(first)
}

/// After `T .= a`, reductions into T whose annihilator is `a` leave every entry `a`: drop them
/// (up to T's next declaration or freeze).
pub fn drop_annihilated_writes(engine: &Engine, stmts: &mut [LStmt]) {
    for k in 0..stmts.len() {
        let LStmt::Declare { tensor, init, .. } = &stmts[k] else {
            continue;
        };
        let tensor = tensor.clone();
        let Some(t) = engine.tensors.get(&tensor) else {
            continue;
        };
        let init = init.cast(t.elem).widen();
        let end = stmts[k + 1..]
            .iter()
            .position(|s| {
                matches!(s, LStmt::Freeze { tensor: x } | LStmt::Declare { tensor: x, .. } if *x == tensor)
            })
            .map_or(stmts.len(), |p| k + 1 + p);
        let region = &mut stmts[k + 1..end];
        let mut ws = vec![];
        writes(region, &tensor, &mut ws);
        if let Some(r) = sole_reducer(&ws)
            && algebra::annihilator(&r, t.elem.class()) == Some(init)
        {
            null_writes(region, &tensor);
        }
    }
}

/// Reductions in `body` into short-circuiting leaves declared outside it: (tensor, the test
/// that its value can no longer change, [`saturated`]).
fn short_circuits(body: &[LStmt]) -> Vec<(String, Expr)> {
    let mut found: Vec<(String, Expr)> = vec![];
    fn visit(stmts: &[LStmt], all: &[LStmt], found: &mut Vec<(String, Expr)>) {
        for s in stmts {
            match s {
                LStmt::Assign {
                    lhs,
                    op: AssignOp::Reduce(r),
                    ..
                } if lhs.indices.is_empty() => {
                    let Target::Fiber(f) = &lhs.target else {
                        continue;
                    };
                    if found.iter().any(|(t, ..)| *t == lhs.tensor) {
                        continue;
                    }
                    let imp = level_impl(&f.tensor.format.levels[f.level]);
                    let Some(value) = imp.short_circuit_value(f) else {
                        continue;
                    };
                    let mut ws = vec![];
                    writes(all, &lhs.tensor, &mut ws);
                    let declared_inside = modifies_lifecycle(all, &lhs.tensor);
                    if declared_inside || sole_reducer(&ws).as_ref() != Some(r) {
                        continue;
                    }
                    if let Some(done) = saturated(r, f.tensor.elem, value) {
                        found.push((lhs.tensor.clone(), done));
                    }
                }
                LStmt::Loop { body, .. } | LStmt::Let { body, .. } => visit(body, all, found),
                LStmt::If {
                    then, otherwise, ..
                } => {
                    visit(then, all, found);
                    visit(otherwise, all, found);
                }
                _ => {}
            }
        }
    }
    visit(body, body, &mut found);
    found
}

/// The test that `value`, an element of type `elem` reduced into by `r`, can no longer change:
/// it holds the reducer's annihilator (`0` for `*`, `true` for `|`), or, for
/// `<<choose(z)>>=`, anything but `z` (choose replaces only a value equal to `z`). The
/// choose test must be the reduction's own compare, made in the class both operands join
/// (`semantics::reducer_classes`): a float element always compares as a float, with `z`
/// converted; an integer one (never given float values under a reducer) as an integer, with
/// `z` an integer or bool; a bool one is given a bool `z` (with integer values it would
/// compare as integers, where `z = 2` never matches). Otherwise no test: the loop runs on.
fn saturated(r: &Reducer, elem: ElemType, value: Expr) -> Option<Expr> {
    if let Some(a) = algebra::annihilator(r, elem.class()) {
        return Some(b::eq(value, Expr::Const(a.cast(elem.compute()))));
    }
    let Reducer::Choose(z) = r else {
        return None;
    };
    if elem == ElemType::Limit || z.ty() == ElemType::Limit {
        return None;
    }
    let same = match (elem.class(), z.ty().class()) {
        (Class::Float, _) => true,
        (Class::Int, c) => c != Class::Float,
        (Class::Bool, c) => c == Class::Bool,
    };
    same.then(|| b::not(b::eq(value, Expr::Const(z.cast(elem.compute())))))
}

/// Whether `stmts` declare, freeze or thaw `tensor` (its value is reset or its mode changes).
fn modifies_lifecycle(stmts: &[LStmt], tensor: &str) -> bool {
    stmts.iter().any(|s| match s {
        LStmt::Declare { tensor: t, .. }
        | LStmt::Freeze { tensor: t }
        | LStmt::Thaw { tensor: t, .. } => t == tensor,
        LStmt::Loop { body, .. } | LStmt::Let { body, .. } => modifies_lifecycle(body, tensor),
        LStmt::If {
            then, otherwise, ..
        } => modifies_lifecycle(then, tensor) || modifies_lifecycle(otherwise, tensor),
        LStmt::Assign { .. } => false,
    })
}

impl Engine {
    /// Code for the end of one iteration of the loop over `index` whose (not yet specialised)
    /// body is `body`: for each short-circuiting reduction, `if value == annihilator { the
    /// iterations from next to stop without it; break }`. Empty when there is none.
    pub fn short_circuit_exit(
        &mut self,
        index: &str,
        next: Expr,
        stop: &Expr,
        body: &[LStmt],
    ) -> Result<Vec<Stmt>> {
        let mut code = vec![];
        for (tensor, done) in short_circuits(body) {
            let mut rest = body.to_vec();
            null_writes(&mut rest, &tensor);
            let start = self.cx.var(&format!("{index}_rest"), ElemType::I64);
            let lowered = self.lower_loop(
                index,
                Ext {
                    start: b::var(start),
                    stop: stop.clone(),
                },
                rest,
            )?;
            let mut then = vec![];
            if !lowered.is_empty() {
                then.push(b::assign(start, next.clone()));
                then.extend(b::if_(b::le(b::var(start), stop.clone()), lowered));
            }
            then.push(Stmt::Break);
            code.extend(b::if_(done, then));
        }
        Ok(code)
    }
}

impl Engine {
    /// Straight-line parts of one loop (a spike's tail after its body, a sequence's later
    /// phases) run after reductions that may already have reached their annihilator: give
    /// `lowered` (the part over `ext`, lowered from `body`) an alternative without those
    /// reductions, so a short-circuited scalar stops reading inputs inside a chunk too.
    pub fn short_circuit_guard(
        &mut self,
        index: &str,
        ext: &Ext,
        body: &[LStmt],
        lowered: Vec<Stmt>,
    ) -> Result<Vec<Stmt>> {
        let Some((tensor, done)) = short_circuits(body).into_iter().next() else {
            return Ok(lowered);
        };
        if lowered.is_empty() {
            return Ok(lowered);
        }
        let mut rest = body.to_vec();
        null_writes(&mut rest, &tensor);
        let without = self.lower_loop(index, ext.clone(), rest)?;
        Ok(if without.is_empty() {
            b::if_(b::not(done), lowered)
        } else {
            b::if_else(done, without, lowered)
        })
    }
}
