//! Which vectorised loops (`Kernel::vectorized`) the JIT runs in 128-bit SIMD lanes, and why
//! the others stay scalar (`tessera code` prints the verdict; it is never an error).
//!
//! The class is a loop whose body, once the bounds checks of its accesses are tested before
//! it (`backend::versioning`), is:
//! - stores `out[i + c] = e` to contiguous elements (`i` the loop's variable, stride 1, `c` a
//!   part of the index the body leaves alone, such as a row's start) of `f64`, `i64` or `u64`
//!   buffers;
//! - reductions `acc = op(acc, e)` into a variable that nothing else in the body touches,
//!   with `+ * min max` on `f64` and `+ * min max & |` on `i64`;
//! - where `e` is built from contiguous loads `a[i + c]` (`f64`, `i64`, `u64`, `i32`), constants,
//!   variables the body does not assign, and `+ - * / min max` (`f64`: also negation,
//!   `abs`, `sqrt`; `i64`: `+ - * min max & | ^`).
//!
//! Every value of the class has 64-bit lanes, so one iteration of the vector loop runs
//! [`LANES`] iterations of the original, and a scalar tail runs what is left. Lanes keep a
//! partial result of each reduction, combined after the vector loop: integer results,
//! `min` and `max` are exact (IEEE 754-2019 `minimum`/`maximum` are associative and
//! commutative, NaN and -0.0 included); a float sum or product is reassociated (lane 0 sums
//! the even iterations, lane 1 the odd ones), so it equals the serial one within rounding,
//! the tolerance the parallel loops' folded sums have.

use super::{BinOp, Expr, Kernel, Stmt, UnOp, VarId};
use crate::types::{ElemType, Scalar};

/// Iterations per vector iteration: 128-bit registers of 64-bit lanes.
pub const LANES: i64 = 2;

/// A reduction the vector loop keeps in lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reduction {
    pub var: VarId,
    pub op: BinOp,
    /// `F64` or `I64`.
    pub ty: ElemType,
}

/// What the JIT does with a vectorised loop.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub reductions: Vec<Reduction>,
}

/// The loop `for var ... { body }` in lanes, or why not (a sentence naming the obstacle).
pub fn plan(k: &Kernel, var: VarId, body: &[Stmt]) -> Result<Plan, String> {
    let assigned = assigned_vars(body);
    let mut reductions = vec![];
    let mut touches = false;
    for s in body {
        match s {
            Stmt::Comment(_) => {}
            Stmt::Store { buf, index, value } => {
                if !contiguous(index, var, &assigned) {
                    return Err(format!(
                        "a store to `{}` is not at the loop's index",
                        k.bufs[buf.0 as usize].name
                    ));
                }
                let elem = k.buf_elem(*buf);
                if !matches!(elem, ElemType::F64 | ElemType::I64 | ElemType::U64) {
                    return Err(format!(
                        "a store narrows to `{elem}` (`{}`); lanes store f64, i64 and u64",
                        k.bufs[buf.0 as usize].name
                    ));
                }
                lane_expr(k, var, &assigned, value)?;
                touches = true;
            }
            Stmt::Assign(acc, e) => {
                let r = reduction(k, *acc, e).ok_or_else(|| {
                    format!(
                        "`{}` is assigned other than by a reduction `{0} = op({0}, ...)` with + * min max (& | on integers)",
                        k.vars[acc.0 as usize].name
                    )
                })?;
                let Expr::Binary(_, a, b) = e else {
                    unreachable!("a reduction is binary")
                };
                let operand = if **a == Expr::Var(*acc) { b } else { a };
                let others = body
                    .iter()
                    .filter(|t| !std::ptr::eq(*t, s))
                    .any(|t| stmt_mentions(t, *acc));
                if others || expr_mentions(operand, *acc) {
                    return Err(format!(
                        "the reduction variable `{}` is used elsewhere in the body",
                        k.vars[acc.0 as usize].name
                    ));
                }
                lane_expr(k, var, &assigned, operand)?;
                reductions.push(r);
            }
            Stmt::If { .. } => return Err("the body branches (`if`)".into()),
            Stmt::For { .. } | Stmt::While { .. } | Stmt::Chunked(_) => {
                return Err("the body holds a loop".into());
            }
            Stmt::Atomic { .. } => return Err("the body updates atomically".into()),
            other => {
                return Err(format!(
                    "the body does more than stores and reductions ({})",
                    stmt_name(other)
                ));
            }
        }
    }
    // Lanes run only in the copy of a versioned loop, whose range test covers the body's
    // accesses: a body with none is never versioned, so it would stay scalar anyway.
    let mut loads = false;
    for s in body {
        for e in s.own_exprs() {
            e.visit(&mut |x| loads |= matches!(x, Expr::Load { .. }));
        }
    }
    if !touches && !loads {
        return Err("the body reads and writes no array at the loop's index".into());
    }
    Ok(Plan { reductions })
}

/// Whether `index` is the loop's variable plus a part the body leaves alone (`f * n + o`
/// for a row of a matrix): consecutive iterations then address consecutive elements.
fn contiguous(index: &Expr, var: VarId, assigned: &[VarId]) -> bool {
    let invariant = |e: &Expr| {
        let mut ok = true;
        e.visit(&mut |x| match x {
            Expr::Var(v) => ok &= *v != var && !assigned.contains(v),
            Expr::Const(Scalar::I64(_)) | Expr::Binary(..) | Expr::Unary(..) => {}
            _ => ok = false,
        });
        ok
    };
    match index {
        Expr::Var(v) => *v == var,
        Expr::Binary(BinOp::Add, a, b) => {
            (contiguous(a, var, assigned) && invariant(b))
                || (invariant(a) && contiguous(b, var, assigned))
        }
        _ => false,
    }
}

fn stmt_name(s: &Stmt) -> &'static str {
    match s {
        Stmt::Grow { .. } => "growth",
        Stmt::Fill { .. } => "a fill",
        Stmt::Sort { .. } | Stmt::SortPerm { .. } => "a sort",
        Stmt::Fail(_) => "a fault",
        Stmt::Break => "a `break`",
        _ => "a statement",
    }
}

/// `acc = op(acc, ...)` with an operator lanes can combine for `acc`'s type, or `None`.
pub fn reduction(k: &Kernel, acc: VarId, e: &Expr) -> Option<Reduction> {
    let Expr::Binary(op, a, b) = e else {
        return None;
    };
    if **a != Expr::Var(acc) && **b != Expr::Var(acc) {
        return None;
    }
    let ty = k.var_ty(acc);
    let ok = match ty {
        ElemType::F64 => matches!(op, BinOp::Add | BinOp::Mul | BinOp::Min | BinOp::Max),
        ElemType::I64 => matches!(
            op,
            BinOp::Add | BinOp::Mul | BinOp::Min | BinOp::Max | BinOp::And | BinOp::Or
        ),
        _ => false,
    };
    ok.then_some(Reduction {
        var: acc,
        op: *op,
        ty,
    })
}

/// Whether `e` has a lane form (see the module documentation).
fn lane_expr(k: &Kernel, var: VarId, assigned: &[VarId], e: &Expr) -> Result<(), String> {
    let ty = k.type_of(e);
    if !matches!(ty, ElemType::F64 | ElemType::I64) {
        return Err(format!("a value of type `{ty}` (lanes hold f64 and i64)"));
    }
    match e {
        Expr::Const(s) => match s {
            Scalar::F64(_) | Scalar::I64(_) => Ok(()),
            _ => Err("a constant of a type lanes do not hold".into()),
        },
        Expr::Var(v) if *v == var => {
            Err("the loop's index is used as a value (only as a contiguous index)".into())
        }
        Expr::Var(v) if assigned.contains(v) => Err(format!(
            "`{}` changes in the body",
            k.vars[v.0 as usize].name
        )),
        Expr::Var(_) => Ok(()),
        Expr::Load { buf, index } => {
            let name = &k.bufs[buf.0 as usize].name;
            if !contiguous(index, var, assigned) {
                return Err(format!(
                    "a load of `{name}` is not at the loop's index (a gather or a shifted read)"
                ));
            }
            match k.buf_elem(*buf) {
                ElemType::F64 | ElemType::I64 | ElemType::U64 | ElemType::I32 => Ok(()),
                t => Err(format!(
                    "a load of `{name}` widens `{t}` (lanes load f64, i64, u64 and i32)"
                )),
            }
        }
        Expr::Unary(op, a) => {
            let ok = ty == ElemType::F64 && matches!(op, UnOp::Neg | UnOp::Abs | UnOp::Sqrt)
                || ty == ElemType::I64 && matches!(op, UnOp::Neg);
            if !ok {
                return Err(format!("`{op:?}` has no lane form here"));
            }
            lane_expr(k, var, assigned, a)
        }
        Expr::Binary(op, a, b) => {
            use BinOp::*;
            let ok = match ty {
                ElemType::F64 => matches!(op, Add | Sub | Mul | IeeeMul | Div | Min | Max),
                _ => matches!(op, Add | Sub | Mul | Min | Max | And | Or | Xor),
            };
            if !ok || k.type_of(a) != ty {
                return Err(format!("`{op:?}` on {ty} has no lane form here"));
            }
            lane_expr(k, var, assigned, a)?;
            lane_expr(k, var, assigned, b)
        }
        Expr::Select(..) => Err("a selection `c ? a : b`".into()),
        Expr::Cast(..) => Err("a conversion between types".into()),
        _ => Err("an expression with no lane form".into()),
    }
}

fn assigned_vars(body: &[Stmt]) -> Vec<VarId> {
    let mut out = vec![];
    for s in body {
        if let Stmt::Assign(v, _) = s {
            out.push(*v);
        }
    }
    out
}

/// Whether `e` reads `v`.
pub fn expr_mentions(e: &Expr, v: VarId) -> bool {
    let mut found = false;
    e.visit(&mut |x| found |= *x == Expr::Var(v));
    found
}

/// Whether `s` assigns `v` or reads it.
pub fn stmt_mentions(s: &Stmt, v: VarId) -> bool {
    matches!(s, Stmt::Assign(w, _) if *w == v) || s.own_exprs().iter().any(|e| expr_mentions(e, v))
}

/// What the C backend does with every vectorised loop (`backend::c::emit`).
const C_VERDICT: &str = "C: omp simd with its float sums and products reassociated, or ivdep";

/// The verdict `tessera code` prints above a vectorised loop.
pub fn verdict(k: &Kernel, var: VarId, body: &[Stmt]) -> String {
    match plan(k, var, body) {
        Ok(_) => format!(
            "vectorised: the JIT runs {LANES} iterations per instruction (64-bit lanes, scalar tail); {C_VERDICT}"
        ),
        Err(why) => format!("vectorised: the JIT runs it scalar ({why}); {C_VERDICT}"),
    }
}
