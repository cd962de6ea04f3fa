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

/// Variables assigned anywhere in `body` (by `Assign`, as a loop's variable, as a range's
/// chunk bounds).
pub fn assigned(body: &[Stmt], out: &mut std::collections::HashSet<VarId>) {
    walk_stmts(body, &mut |s| match s {
        Stmt::Assign(v, _) | Stmt::For { var: v, .. } => {
            out.insert(*v);
        }
        Stmt::Chunked(c) => {
            out.extend([c.lo, c.hi]);
        }
        _ => {}
    });
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

/// Whether a select `c ? a : b` should pick without a branch: float values at hand (a
/// variable, a constant or its negation) chosen by the sign of a difference
/// (`ifelse(x[p] - x[q] >= 0.0, g, -g)`, the derivative of `abs(x[p] - x[q])` in a
/// gradient): the sign of a difference of data, which random data mispredict half the time,
/// while computing the arm not taken costs nothing. Other selects stay as they were (a
/// branch, where GCC or Cranelift make one): masks such as `ifelse(inside, v, 0.0)` follow
/// conditions that are mostly predictable (SoftRas's inside tests are coherent across
/// pixels; picking those without a branch made its C kernels 8% slower), and an expensive
/// arm would be computed for nothing.
pub fn branchless_select(k: &super::Kernel, c: &Expr, a: &Expr, b: &Expr) -> bool {
    fn at_hand(e: &Expr) -> bool {
        match e {
            Expr::Var(_) | Expr::Const(_) => true,
            Expr::Unary(super::UnOp::Neg, x) => matches!(**x, Expr::Var(_) | Expr::Const(_)),
            _ => false,
        }
    }
    let difference = |e: &Expr| matches!(e, Expr::Binary(BinOp::Sub, ..));
    let sign_of_difference = match c {
        Expr::Binary(BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge, x, y) => {
            k.type_of(x) == crate::types::ElemType::F64 && (difference(x) || difference(y))
        }
        _ => false,
    };
    sign_of_difference && k.type_of(a) == crate::types::ElemType::F64 && at_hand(a) && at_hand(b)
}
