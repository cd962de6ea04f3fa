//! Walks over the loop IR and the affine index form the passes and the backends share
//! (`ir::interleave`, `backend::versioning`): they sit here, below both layers.

use super::{BinOp, BufId, Expr, Stmt, VarId};
use crate::types::Scalar;

/// The largest constant offset versioning and row interleaving consider (keeps the range tests overflow-free
/// where they are done in 64 bits).
pub const MAX_OFFSET: i64 = 1 << 20;

/// `index` as `var + w + c`: the loop variable once, at most one other variable `w`, and a
/// small constant `c`, summed in any order (`v - c` too); `None` for any other form.
pub fn loop_offset(index: &Expr, var: VarId) -> Option<(Option<VarId>, i64)> {
    fn terms(e: &Expr, vars: &mut Vec<VarId>, c: &mut i64) -> bool {
        match e {
            Expr::Var(v) => {
                vars.push(*v);
                true
            }
            Expr::Const(Scalar::I64(k)) => {
                *c = c.saturating_add(*k);
                true
            }
            Expr::Binary(BinOp::Add, a, b) => terms(a, vars, c) && terms(b, vars, c),
            Expr::Binary(BinOp::Sub, a, b) => match &**b {
                Expr::Const(Scalar::I64(k)) => {
                    *c = c.saturating_sub(*k);
                    terms(a, vars, c)
                }
                _ => false,
            },
            _ => false,
        }
    }
    let (mut vars, mut c) = (vec![], 0i64);
    if !terms(index, &mut vars, &mut c) || !(-MAX_OFFSET..=MAX_OFFSET).contains(&c) {
        return None;
    }
    let at = vars.iter().position(|v| *v == var)?;
    vars.remove(at);
    match vars[..] {
        [] => Some((None, c)),
        [w] if w != var => Some((Some(w), c)),
        _ => None,
    }
}

/// Every statement, nested ones after the statement that holds them.
pub fn walk_stmts(stmts: &[Stmt], f: &mut dyn FnMut(&Stmt)) {
    for s in stmts {
        f(s);
        match s {
            Stmt::If {
                then, otherwise, ..
            } => {
                walk_stmts(then, f);
                walk_stmts(otherwise, f);
            }
            Stmt::For { body, .. } | Stmt::While { body, .. } => walk_stmts(body, f),
            // A range inside a kernel is its serial loop (the C backend's buffers it grows
            // must not be declared constant).
            Stmt::Chunked(c) => walk_stmts(&c.body, f),
            _ => {}
        }
    }
}

/// Every expression (and sub-expression) in the statements.
pub fn walk_exprs(stmts: &[Stmt], f: &mut dyn FnMut(&Expr)) {
    walk_stmts(stmts, &mut |s| {
        for e in s.own_exprs() {
            e.visit(f);
        }
    });
}

/// Every buffer access in the statements: each store's buffer and index, then each load's.
pub fn walk_accesses(stmts: &[Stmt], f: &mut dyn FnMut(BufId, &Expr)) {
    walk_stmts(stmts, &mut |s| {
        if let Stmt::Store { buf, index, .. } = s {
            f(*buf, index);
        }
    });
    walk_exprs(stmts, &mut |e| {
        if let Expr::Load { buf, index } = e {
            f(*buf, index);
        }
    });
}

/// Whether a select between `a` and `b` should pick without a branch: float values at hand
/// (a variable, a constant or its negation; `ifelse(x >= 0.0, g, -g)`, the derivative of
/// `abs`, `max` or a ReLU in a gradient), whose condition the data decide, so a branch is
/// mispredicted half the time on random data, while computing the arm not taken costs
/// nothing. Both backends compile other selects as they did (C's `?:`, which GCC may make a
/// branch, is right where an arm is expensive or the condition follows the loop).
pub fn branchless_select(k: &super::Kernel, a: &Expr, b: &Expr) -> bool {
    fn at_hand(e: &Expr) -> bool {
        match e {
            Expr::Var(_) | Expr::Const(_) => true,
            Expr::Unary(super::UnOp::Neg, x) => matches!(**x, Expr::Var(_) | Expr::Const(_)),
            _ => false,
        }
    }
    k.type_of(a) == crate::types::ElemType::F64 && at_hand(a) && at_hand(b)
}
