//! Fill-value algebra of an einsum's right side: its value class, and what it is known to be
//! where some inputs hold their fill. This decides the output's fill and which output
//! dimensions can be stored sparsely (those where the right side is the reducer's identity
//! whenever the sparse inputs store nothing).

use crate::error::{Error, Result};
use crate::notation::ast::{BinaryOp, Expr, ExprKind};
use crate::semantics::{self, Builtin, binary_classes, unary_class};
use crate::types::{Class, Scalar};

/// The compute class of the right side, given each read's element class (in read order).
pub fn class_of(e: &Expr, reads: &[Class]) -> Result<Class> {
    let mut next = 0;
    class_walk(e, reads, &mut next)
}

fn class_walk(e: &Expr, reads: &[Class], next: &mut usize) -> Result<Class> {
    let err = |m: String| Error::program(e.span, m);
    Ok(match &e.kind {
        ExprKind::Literal(v) => v.widen().ty().class(),
        // δ and ε are not reads: integer-valued (0, ±1) structured tensors.
        ExprKind::Access(a) if crate::transforms::ein::is_reserved(&a.tensor) => Class::Int,
        ExprKind::Access(_) => {
            *next += 1;
            reads[*next - 1]
        }
        ExprKind::Unary(op, x) => {
            unary_class(*op, class_walk(x, reads, next)?)
                .map_err(err)?
                .1
        }
        ExprKind::Binary(op, a, b) => {
            let (ca, cb) = (class_walk(a, reads, next)?, class_walk(b, reads, next)?);
            binary_classes(*op, ca, cb).map_err(err)?.1
        }
        ExprKind::Call(name, args) => {
            let cs = args
                .iter()
                .map(|a| class_walk(a, reads, next))
                .collect::<Result<Vec<_>>>()?;
            Builtin::named(name)
                .and_then(|f| f.classes(&cs))
                .map_err(err)?
                .1
        }
        ExprKind::Name(_) | ExprKind::Missing => {
            return Err(err("einsum reads only accesses and literals".into()));
        }
    })
}

/// The value of the right side where the reads with `absent[k]` hold their fill `fills[k]`
/// (the others unknown), or `None` when it depends on the unknown ones. An annihilator on one
/// side decides an operator alone (`0 * x`, `false & x`, `min(-Inf, x)`), as the simplifier
/// treats it.
pub fn absent_value(e: &Expr, fills: &[Scalar], absent: &[bool]) -> Option<Scalar> {
    let mut next = 0;
    absent_walk(e, fills, absent, &mut next)
}

fn absent_walk(e: &Expr, fills: &[Scalar], absent: &[bool], next: &mut usize) -> Option<Scalar> {
    match &e.kind {
        ExprKind::Literal(v) => Some(v.widen()),
        // δ and ε are not reads; their value varies with the coordinate.
        ExprKind::Access(a) if crate::transforms::ein::is_reserved(&a.tensor) => None,
        ExprKind::Access(_) => {
            *next += 1;
            absent[*next - 1].then(|| fills[*next - 1].widen())
        }
        ExprKind::Unary(op, x) => {
            let v = absent_walk(x, fills, absent, next)?;
            semantics::eval_unary(*op, v).ok()
        }
        ExprKind::Binary(op, a, b) => {
            // Both sides are walked so the read counter stays in step.
            let va = absent_walk(a, fills, absent, next);
            let vb = absent_walk(b, fills, absent, next);
            match (va, vb) {
                (Some(x), Some(y)) => semantics::eval_binary(*op, x, y).ok(),
                (Some(z), None) | (None, Some(z)) if annihilates(*op, z) => Some(z),
                _ => None,
            }
        }
        ExprKind::Call(name, args) => {
            let vs: Vec<Option<Scalar>> = args
                .iter()
                .map(|a| absent_walk(a, fills, absent, next))
                .collect();
            if vs.iter().all(Option::is_some) {
                let vs: Vec<Scalar> = vs.into_iter().flatten().collect();
                return Builtin::named(name).and_then(|f| f.eval(&vs)).ok();
            }
            let decided = |z: f64| {
                vs.iter()
                    .flatten()
                    .find(|v| matches!(v, Scalar::F64(x) if *x == z))
                    .copied()
            };
            match Builtin::from_name(name) {
                Some(Builtin::Min) => decided(f64::NEG_INFINITY),
                Some(Builtin::Max) => decided(f64::INFINITY),
                _ => None,
            }
        }
        ExprKind::Name(_) | ExprKind::Missing => None,
    }
}

fn annihilates(op: BinaryOp, z: Scalar) -> bool {
    match (op, z) {
        (BinaryOp::Mul, Scalar::F64(x)) => x == 0.0,
        (BinaryOp::Mul, Scalar::I64(0)) => true,
        (BinaryOp::Mul | BinaryOp::BitAnd | BinaryOp::AndAnd, Scalar::Bool(false)) => true,
        (BinaryOp::BitAnd, Scalar::I64(0)) => true,
        (BinaryOp::BitOr | BinaryOp::OrOr, Scalar::Bool(true)) => true,
        (BinaryOp::BitOr, Scalar::I64(-1)) => true,
        _ => false,
    }
}

/// Whether two values are equal once stored in class `c` (a `0` integer fill equals the
/// identity `0.0` of a float sum).
pub fn same_in(c: Class, a: Scalar, b: Scalar) -> bool {
    let (x, y) = (semantics::convert(a, c), semantics::convert(b, c));
    x == y || (x.is_nan() && y.is_nan())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_expr;

    #[test]
    fn products_vanish_where_one_factor_is_absent_sums_where_both_are() {
        let zero = Scalar::F64(0.0);
        let prod = parse_expr("A[i, k] * B[k, j]").unwrap();
        assert_eq!(
            absent_value(&prod, &[zero, zero], &[true, false]),
            Some(zero)
        );
        let sum = parse_expr("A[i, j] + B[i, j]").unwrap();
        assert_eq!(absent_value(&sum, &[zero, zero], &[true, false]), None);
        assert_eq!(absent_value(&sum, &[zero, zero], &[true, true]), Some(zero));
        let shifted = parse_expr("A[i] * 2 + 1").unwrap();
        assert_eq!(
            absent_value(&shifted, &[Scalar::I64(0)], &[true]),
            Some(Scalar::I64(1))
        );
        let lo = parse_expr("min(A[i], x[i])").unwrap();
        assert_eq!(
            absent_value(&lo, &[Scalar::F64(f64::NEG_INFINITY), zero], &[true, false]),
            Some(Scalar::F64(f64::NEG_INFINITY))
        );
    }

    #[test]
    fn classes_follow_the_language() {
        let e = parse_expr("A[i] * B[i] + 1").unwrap();
        assert_eq!(class_of(&e, &[Class::Int, Class::Int]).unwrap(), Class::Int);
        assert_eq!(
            class_of(&e, &[Class::Bool, Class::Float]).unwrap(),
            Class::Float
        );
        let bad = parse_expr("A[i] & B[i]").unwrap();
        assert!(class_of(&bad, &[Class::Float, Class::Int]).is_err());
    }
}
