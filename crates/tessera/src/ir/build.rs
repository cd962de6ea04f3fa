//! Small constructors that keep IR-producing code readable.

use super::{BinOp, BufId, Expr, Stmt, UnOp, VarId};
use crate::types::{ElemType, Scalar};

pub fn int(v: i64) -> Expr {
    Expr::Const(Scalar::I64(v))
}
pub fn boolean(v: bool) -> Expr {
    Expr::Const(Scalar::Bool(v))
}
pub fn var(v: VarId) -> Expr {
    Expr::Var(v)
}
pub fn load(buf: BufId, index: Expr) -> Expr {
    Expr::Load {
        buf,
        index: Box::new(index),
    }
}
pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    // Fold the integer arithmetic that index computations produce all the time, so printed
    // code stays readable and structural equality of extents works.
    if let (Expr::Const(Scalar::I64(x)), Expr::Const(Scalar::I64(y))) = (&a, &b) {
        let (x, y) = (*x, *y);
        match op {
            BinOp::Add => return int(x.wrapping_add(y)),
            BinOp::Sub => return int(x.wrapping_sub(y)),
            BinOp::Mul => return int(x.wrapping_mul(y)),
            BinOp::Min => return int(x.min(y)),
            BinOp::Max => return int(x.max(y)),
            BinOp::Lt => return boolean(x < y),
            BinOp::Le => return boolean(x <= y),
            BinOp::Eq => return boolean(x == y),
            _ => {}
        }
    }
    match (op, &a, &b) {
        (BinOp::Add | BinOp::Sub, _, Expr::Const(Scalar::I64(0))) => return a,
        (BinOp::Add, Expr::Const(Scalar::I64(0)), _) => return b,
        (BinOp::Mul, _, Expr::Const(Scalar::I64(1))) => return a,
        (BinOp::Mul, Expr::Const(Scalar::I64(1)), _) => return b,
        (BinOp::Mul, _, Expr::Const(Scalar::I64(0)))
        | (BinOp::Mul, Expr::Const(Scalar::I64(0)), _) => {
            return int(0);
        }
        (BinOp::Min | BinOp::Max, _, _) if a == b => return a,
        (BinOp::And, Expr::Const(Scalar::Bool(true)), _) => return b,
        (BinOp::And, _, Expr::Const(Scalar::Bool(true))) => return a,
        (BinOp::And, Expr::Const(Scalar::Bool(false)), _)
        | (BinOp::And, _, Expr::Const(Scalar::Bool(false))) => {
            return boolean(false);
        }
        (BinOp::Or, Expr::Const(Scalar::Bool(false)), _) => return b,
        (BinOp::Or, _, Expr::Const(Scalar::Bool(false))) => return a,
        _ => {}
    }
    // (x + c1) + c2 → x + (c1 + c2): phase bounds are built as `stop + 1` chains.
    if let (BinOp::Add | BinOp::Sub, Expr::Binary(BinOp::Add, x, c1), Expr::Const(Scalar::I64(c2))) =
        (op, &a, &b)
        && let Expr::Const(Scalar::I64(c1)) = **c1
    {
        let c = if op == BinOp::Add {
            c1.wrapping_add(*c2)
        } else {
            c1.wrapping_sub(*c2)
        };
        return bin(BinOp::Add, (**x).clone(), int(c));
    }
    Expr::Binary(op, Box::new(a), Box::new(b))
}
pub fn add(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Add, a, b)
}
pub fn sub(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Sub, a, b)
}
pub fn mul(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Mul, a, b)
}
pub fn min(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Min, a, b)
}
pub fn max(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Max, a, b)
}
pub fn lt(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Lt, a, b)
}
pub fn le(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Le, a, b)
}
pub fn eq(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Eq, a, b)
}
pub fn and(a: Expr, b: Expr) -> Expr {
    bin(BinOp::And, a, b)
}
pub fn or(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Or, a, b)
}
pub fn not(a: Expr) -> Expr {
    match a {
        Expr::Const(Scalar::Bool(b)) => boolean(!b),
        a => Expr::Unary(UnOp::Not, Box::new(a)),
    }
}
pub fn cast(ty: ElemType, a: Expr) -> Expr {
    Expr::Cast(ty, Box::new(a))
}
pub fn select(c: Expr, a: Expr, b: Expr) -> Expr {
    match c {
        Expr::Const(Scalar::Bool(true)) => a,
        Expr::Const(Scalar::Bool(false)) => b,
        c => Expr::Select(Box::new(c), Box::new(a), Box::new(b)),
    }
}
/// The constant point `v + sign(eps)·ε`, canonical (`-0.0` is `+0.0`).
pub fn limit(v: f64, eps: i8) -> Expr {
    Expr::Const(Scalar::limit(v, i64::from(eps)))
}
/// The point `val + sign(eps)·ε` of an F64 value and an I64 sign (see `Expr::MakeLimit`).
pub fn make_limit(val: Expr, eps: Expr) -> Expr {
    Expr::MakeLimit(Box::new(val), Box::new(eps))
}
/// The value of a point (Limit → F64).
pub fn limit_val(e: Expr) -> Expr {
    match e {
        // A value taken apart again: the value itself, canonical (`-0.0 + 0.0` is `+0.0`,
        // as a Limit holds it) unless it is the value of a Limit already.
        Expr::MakeLimit(v, _) => match *v {
            v @ Expr::Unary(UnOp::LimitVal, _) => v,
            v => add(v, Expr::Const(Scalar::F64(0.0))),
        },
        e => Expr::Unary(UnOp::LimitVal, Box::new(e)),
    }
}
/// The infinitesimal sign of a point (Limit → I64 in {-1, 0, 1}).
pub fn limit_eps(e: Expr) -> Expr {
    match e {
        // A sign taken apart again, when it is one already (no saturation to apply).
        Expr::MakeLimit(_, eps)
            if matches!(
                *eps,
                Expr::Const(Scalar::I64(-1..=1)) | Expr::Unary(UnOp::LimitEps, _)
            ) =>
        {
            *eps
        }
        e => Expr::Unary(UnOp::LimitEps, Box::new(e)),
    }
}
/// The first point after `e` (saturating; `e + 1` on I64).
pub fn after(e: Expr) -> Expr {
    Expr::Unary(UnOp::After, Box::new(e))
}
/// The last point before `e` (saturating; `e - 1` on I64).
pub fn before(e: Expr) -> Expr {
    Expr::Unary(UnOp::Before, Box::new(e))
}
pub fn assign(v: VarId, e: Expr) -> Stmt {
    Stmt::Assign(v, e)
}
pub fn store(buf: BufId, index: Expr, value: Expr) -> Stmt {
    Stmt::Store { buf, index, value }
}
/// `if cond { then }`, folded when the condition is a constant.
pub fn if_(cond: Expr, then: Vec<Stmt>) -> Vec<Stmt> {
    if_else(cond, then, vec![])
}
pub fn if_else(cond: Expr, then: Vec<Stmt>, otherwise: Vec<Stmt>) -> Vec<Stmt> {
    match cond {
        Expr::Const(Scalar::Bool(true)) => then,
        Expr::Const(Scalar::Bool(false)) => otherwise,
        _ if then.is_empty() && otherwise.is_empty() => vec![],
        _ if then.is_empty() => vec![Stmt::If {
            cond: not(cond),
            then: otherwise,
            otherwise: vec![],
        }],
        cond => vec![Stmt::If {
            cond,
            then,
            otherwise,
        }],
    }
}

/// A kernel for the passes' unit tests: buffers (name, element type; all `growable` or none)
/// and variables (name, type) numbered in order, and `body`; no errors or vouched facts.
#[cfg(test)]
pub(crate) fn test_kernel(
    bufs: &[(&str, crate::types::ElemType)],
    growable: bool,
    vars: &[(&str, crate::types::ElemType)],
    body: Vec<super::Stmt>,
) -> super::Kernel {
    super::Kernel {
        name: "k".into(),
        bufs: bufs
            .iter()
            .map(|&(name, elem)| super::BufDecl {
                name: name.into(),
                elem,
                growable,
                tensor: None,
                scratch: false,
            })
            .collect(),
        vars: vars
            .iter()
            .map(|&(name, ty)| super::VarDecl {
                name: name.into(),
                ty,
                cold: false,
            })
            .collect(),
        body,
        errors: vec![],
        bounded: vec![],
        not_nan: vec![],
        vectorized: vec![],
    }
}
