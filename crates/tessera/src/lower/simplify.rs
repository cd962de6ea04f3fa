//! The simplifier: constant folding, identities and annihilators, removal of assignments that
//! cannot change anything, and dead control flow. It is what turns looplet structure into
//! skipped work (`x * 0`, `s += 0`, `if false`).
//!
//! Like Finch, it treats zero as annihilating `*` (`x * 0 == 0` even where x could be infinite
//! or NaN); the dense semantics agrees (`semantics::mul_f`), so folding never changes a result.

use crate::levels::{LeafValue, level_impl};
use crate::looplets::Target;
use crate::lower::node::{LExpr, LStmt};
use crate::notation::ast::{AssignOp, BinaryOp};
use crate::semantics::{self, Builtin};
use crate::symbolic::algebra;
use crate::types::{Class, ElemType, Scalar};
use std::collections::HashMap;

/// The compute class of an expression, if it can be typed.
pub fn class_of(e: &LExpr) -> Option<Class> {
    match e {
        LExpr::Lit(s) => Some(s.ty().class()),
        LExpr::Ir(_, t) => Some(t.class()),
        LExpr::Index(_) => Some(Class::Int),
        LExpr::Mask(_) => Some(Class::Bool),
        LExpr::Access(a) => match &a.target {
            Target::Fill(v) => Some(v.ty().class()),
            Target::Fiber(f) => Some(f.tensor.elem.class()),
            Target::Looplet(_) | Target::Null => None,
        },
        LExpr::Unary(op, x, _) => semantics::unary_class(*op, class_of(x)?).ok().map(|c| c.1),
        LExpr::Binary(op, x, y, _) => semantics::binary_classes(*op, class_of(x)?, class_of(y)?)
            .ok()
            .map(|c| c.1),
        LExpr::Call(f, args, _) => {
            let cs: Option<Vec<Class>> = args.iter().map(class_of).collect();
            f.classes(&cs?).ok().map(|c| c.1)
        }
    }
}

fn lit(e: &LExpr) -> Option<Scalar> {
    match e {
        LExpr::Lit(s) => Some(*s),
        _ => None,
    }
}

fn zero_of(c: Class) -> Option<LExpr> {
    match c {
        Class::Int => Some(LExpr::Lit(Scalar::I64(0))),
        Class::Float => Some(LExpr::Lit(Scalar::F64(0.0))),
        Class::Bool => None,
    }
}

pub fn simplify_expr(e: &mut LExpr) {
    for c in e.children_mut() {
        simplify_expr(c);
    }
    let replacement = match e {
        LExpr::Access(a) => match &a.target {
            Target::Fill(v) => Some(LExpr::Lit(v.widen())),
            Target::Fiber(f) if a.indices.is_empty() => {
                match level_impl(&f.tensor.format.levels[f.level]).read_leaf(f) {
                    Some(LeafValue::Const(s)) => Some(LExpr::Lit(s.widen())),
                    _ => None,
                }
            }
            _ => None,
        },
        LExpr::Mask(m) => lit(&m.original).map(LExpr::Lit),
        LExpr::Unary(op, x, _) => lit(x)
            .and_then(|v| semantics::eval_unary(*op, v.widen()).ok())
            .map(LExpr::Lit),
        LExpr::Binary(op, x, y, _) => simplify_binary(*op, x, y),
        LExpr::Call(f, args, _) => {
            let f = *f;
            let lits: Option<Vec<Scalar>> = args.iter().map(lit).collect();
            match (f, lits) {
                (_, Some(vs)) => f
                    .eval(&vs.iter().map(|v| v.widen()).collect::<Vec<_>>())
                    .ok()
                    .map(LExpr::Lit),
                (Builtin::IfElse, None) => match lit(&args[0]) {
                    Some(Scalar::Bool(c)) => {
                        let chosen = if c { &args[1] } else { &args[2] };
                        let other = if c { &args[2] } else { &args[1] };
                        // Keep the class the dense semantics would give the result.
                        (class_of(chosen).is_some() && class_of(chosen) == class_of(other))
                            .then(|| chosen.clone())
                    }
                    // Both branches the same constant (bit for bit, one type): the condition
                    // does not matter. Gradient programs make `ifelse(c, g, 0.0)` whose `g`
                    // is annihilated outside a sparse operand's pattern; without this the
                    // loop would visit every coordinate there.
                    _ => match (lit(&args[1]), lit(&args[2])) {
                        (Some(a), Some(b)) if a == b => Some(LExpr::Lit(a)),
                        _ => None,
                    },
                },
                _ => None,
            }
        }
        _ => None,
    };
    if let Some(r) = replacement {
        *e = r;
    }
}

fn simplify_binary(op: BinaryOp, x: &LExpr, y: &LExpr) -> Option<LExpr> {
    if let (Some(a), Some(b)) = (lit(x), lit(y)) {
        return semantics::eval_binary(op, a.widen(), b.widen())
            .ok()
            .map(LExpr::Lit);
    }
    let (cx, cy) = (class_of(x)?, class_of(y)?);
    let result = semantics::binary_classes(op, cx, cy).ok()?.1;
    let keep = |e: &LExpr, c: Class| (c == result).then(|| e.clone());
    match op {
        BinaryOp::Mul => {
            // A `Pattern()` fill is `false`, which multiplies as 0 (Finch's strong zero):
            // without this, SpMV over a pattern matrix walked every fill coordinate.
            let zero = |e: &LExpr| {
                lit(e).is_some_and(|v| algebra::is_zero(&v) || v == Scalar::Bool(false))
            };
            if zero(x) || zero(y) {
                return zero_of(result);
            }
            if lit(x).is_some_and(|v| algebra::is_one(&v)) {
                return keep(y, cy);
            }
            if lit(y).is_some_and(|v| algebra::is_one(&v)) {
                return keep(x, cx);
            }
            None
        }
        // `x + 0` is `x` except for a float `+0.0` added to `x = -0.0`, which IEEE makes
        // `+0.0` (observable through a quotient): only an integer zero or `-0.0` (the exact
        // identity of float addition) is dropped.
        BinaryOp::Add => {
            let identity = |v: Scalar| match v {
                Scalar::F64(z) => z == 0.0 && z.is_sign_negative(),
                Scalar::F32(z) => z == 0.0 && z.is_sign_negative(),
                v => algebra::is_zero(&v),
            };
            if lit(x).is_some_and(identity) {
                return keep(y, cy);
            }
            if lit(y).is_some_and(identity) {
                return keep(x, cx);
            }
            None
        }
        BinaryOp::Sub if lit(y).is_some_and(|v| algebra::is_zero(&v)) => keep(x, cx),
        BinaryOp::AndAnd | BinaryOp::BitAnd if result == Class::Bool => match (lit(x), lit(y)) {
            (Some(Scalar::Bool(false)), _) | (_, Some(Scalar::Bool(false))) => {
                Some(LExpr::Lit(Scalar::Bool(false)))
            }
            (Some(Scalar::Bool(true)), _) => Some(y.clone()),
            (_, Some(Scalar::Bool(true))) => Some(x.clone()),
            _ => None,
        },
        BinaryOp::OrOr | BinaryOp::BitOr if result == Class::Bool => match (lit(x), lit(y)) {
            (Some(Scalar::Bool(true)), _) | (_, Some(Scalar::Bool(true))) => {
                Some(LExpr::Lit(Scalar::Bool(true)))
            }
            (Some(Scalar::Bool(false)), _) => Some(y.clone()),
            (_, Some(Scalar::Bool(false))) => Some(x.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// Whether assigning `v` with `op` to tensor `t` can change nothing; `elem` is the tensor's
/// element type where the write already reached its fiber.
fn is_noop(
    op: &AssignOp,
    v: Scalar,
    t: &str,
    elem: Option<ElemType>,
    declared: &HashMap<String, Scalar>,
) -> bool {
    let v = v.widen();
    match op {
        // Finch's `initwrite`: overwriting with the declared value (held in the tensor's
        // element type) is a no-op.
        AssignOp::Overwrite => declared
            .get(t)
            .is_some_and(|init| v.cast(init.ty()) == *init),
        // The value is reduced in the compute class (a pattern's `false` added to a float
        // is 0.0), so the identity is that class's.
        AssignOp::Reduce(r) => {
            let class = elem
                .and_then(|e| semantics::reducer_classes(r, e.class(), v.ty().class()).ok())
                .map_or(v.ty().class(), |(compute, _)| compute);
            let v = v.cast(semantics::class_type(class)).widen();
            algebra::identity(r, class).is_some_and(|id| v == id)
        }
    }
}

pub fn simplify_stmts(stmts: &mut Vec<LStmt>, declared: &HashMap<String, Scalar>) {
    let old = std::mem::take(stmts);
    for mut s in old {
        match &mut s {
            LStmt::Assign { lhs, op, rhs, .. } => {
                simplify_expr(rhs);
                if matches!(lhs.target, Target::Null) {
                    continue;
                }
                // Whether the write still goes through a looplet (a run writer waiting for
                // the extent) or already reached its fiber, a no-op is dropped: dropping it
                // early also drops the set-up of writers that would only wrap it.
                let elem = match &lhs.target {
                    Target::Fiber(f) => Some(f.tensor.elem),
                    _ => None,
                };
                if let Some(v) = lit(rhs)
                    && is_noop(op, v, &lhs.tensor, elem, declared)
                {
                    continue;
                }
                stmts.push(s);
            }
            LStmt::Loop {
                start, stop, body, ..
            } => {
                simplify_expr(start);
                simplify_expr(stop);
                simplify_stmts(body, declared);
                if !body.is_empty() {
                    stmts.push(s);
                }
            }
            LStmt::If {
                cond,
                then,
                otherwise,
                ..
            } => {
                simplify_expr(cond);
                simplify_stmts(then, declared);
                simplify_stmts(otherwise, declared);
                match lit(cond) {
                    Some(Scalar::Bool(true)) => stmts.append(then),
                    Some(Scalar::Bool(false)) => stmts.append(otherwise),
                    _ if then.is_empty() && otherwise.is_empty() => {}
                    _ => stmts.push(s),
                }
            }
            LStmt::Let {
                name, value, body, ..
            } => {
                simplify_expr(value);
                if let Some(v) = lit(value) {
                    let _ = crate::lower::node::visit_exprs_mut(body, &mut |e| {
                        if matches!(e, LExpr::Index(n) if n == name) {
                            *e = LExpr::Lit(v);
                        }
                        Ok(())
                    });
                    simplify_stmts(body, declared);
                    stmts.append(body);
                    continue;
                }
                simplify_stmts(body, declared);
                if !body.is_empty() {
                    stmts.push(s);
                }
            }
            LStmt::Declare { .. } | LStmt::Freeze { .. } | LStmt::Thaw { .. } => stmts.push(s),
        }
    }
}
