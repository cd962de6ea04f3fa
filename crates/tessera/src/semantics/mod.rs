//! The typing and value rules of the language, shared by the reference evaluator, the
//! simplifier's constant folding and the lowering's typed emission, so that all three agree.
//!
//! Values live in three compute classes (`Bool < Int < Float`). Operands are promoted to a
//! common class before an operation; `Bool` takes part in arithmetic as the integers 0 and 1
//! (`true + true == 2`), as in Julia. Integer arithmetic wraps, and integer division or
//! remainder by zero gives 0 rather than trapping, so that no program can crash a kernel.
//!
//! Floats follow IEEE 754 with two deliberate exceptions, the same in every backend (README,
//! "Semantics"):
//! - zero is a strong annihilator of `*`: a product with a zero factor is zero, even when the
//!   other factor is NaN or infinite. This is what lets a sparse kernel skip the zeros of an
//!   operand (Finch's rule), so the dense semantics adopts it instead of depending on which
//!   zeros a format happens to store;
//! - `min` and `max` propagate NaN from either side and order `-0.0` below `0.0` (IEEE
//!   754-2019 `minimum`/`maximum`, Julia's `min`), so they are commutative.

pub mod builtin;
pub mod frame;
pub mod kernel;

pub use builtin::Builtin;

use crate::notation::ast::{BinaryOp, Expr, ExprKind, Reducer, ReducerDef, UnaryOp};
use crate::types::{Class, ElemType, Scalar};

/// The representative element type of a class.
pub fn class_type(c: Class) -> ElemType {
    match c {
        Class::Bool => ElemType::Bool,
        Class::Int => ElemType::I64,
        Class::Float => ElemType::F64,
    }
}

/// Convert a value to a class (same rules as a narrowing store, see `types.rs`).
pub fn convert(v: Scalar, to: Class) -> Scalar {
    v.widen().cast(class_type(to))
}

fn rank(c: Class) -> u8 {
    match c {
        Class::Bool => 0,
        Class::Int => 1,
        Class::Float => 2,
    }
}

/// The smallest class both operands convert to without loss of kind.
pub fn join(a: Class, b: Class) -> Class {
    if rank(a) >= rank(b) { a } else { b }
}

/// Like `join`, but at least `Int`: the class arithmetic happens in.
fn arith(a: Class, b: Class) -> Class {
    join(join(a, b), Class::Int)
}

/// `(operand class, result class)` of a binary operator, or why the operands are unsuitable.
pub fn binary_classes(op: BinaryOp, a: Class, b: Class) -> Result<(Class, Class), String> {
    use BinaryOp::*;
    let both_bool = a == Class::Bool && b == Class::Bool;
    let any_float = a == Class::Float || b == Class::Float;
    match op {
        Add | Sub | Mul | Rem => {
            let c = arith(a, b);
            Ok((c, c))
        }
        Div => Ok((Class::Float, Class::Float)),
        Eq | Ne if both_bool => Ok((Class::Bool, Class::Bool)),
        Eq | Ne | Lt | Le | Gt | Ge => Ok((arith(a, b), Class::Bool)),
        AndAnd | OrOr if both_bool => Ok((Class::Bool, Class::Bool)),
        AndAnd | OrOr => Err(format!("`{}` needs bool operands", op.symbol())),
        BitAnd | BitOr | Xor if both_bool => Ok((Class::Bool, Class::Bool)),
        BitAnd | BitOr | Xor | Shl | Shr if !any_float => Ok((Class::Int, Class::Int)),
        BitAnd | BitOr | Xor | Shl | Shr => Err(format!(
            "`{}` needs integer or bool operands, not floats",
            op.symbol()
        )),
    }
}

/// `(operand class, result class)` of a unary operator.
pub fn unary_class(op: UnaryOp, c: Class) -> Result<(Class, Class), String> {
    match (op, c) {
        (UnaryOp::Neg, Class::Float) => Ok((Class::Float, Class::Float)),
        (UnaryOp::Neg, _) => Ok((Class::Int, Class::Int)),
        (UnaryOp::Not, Class::Float) => {
            Err("`!` needs a bool or integer operand, not a float".into())
        }
        (UnaryOp::Not, c) => Ok((c, c)),
    }
}

/// `(compute class, result class)` of `old <reducer> new` where `old` has class `elem`.
pub fn reducer_classes(r: &Reducer, elem: Class, rhs: Class) -> Result<(Class, Class), String> {
    match r {
        Reducer::Add | Reducer::Sub | Reducer::Mul => {
            let c = arith(elem, rhs);
            Ok((c, c))
        }
        Reducer::Min | Reducer::Max | Reducer::Choose(_) => {
            let c = join(elem, rhs);
            Ok((c, c))
        }
        Reducer::And | Reducer::Or => {
            if elem == Class::Bool && rhs == Class::Bool {
                Ok((Class::Bool, Class::Bool))
            } else if elem != Class::Float && rhs != Class::Float {
                Ok((Class::Int, Class::Int))
            } else {
                Err("`<<and>>=` and `<<or>>=` need integer or bool operands, not floats".into())
            }
        }
        Reducer::Named(n) => Err(format!("unknown reducer `<<{n}>>=`")),
        // Both operands meet in one class, as for `min`; the body decides the result class.
        Reducer::User(def) => {
            let c = join(elem, rhs);
            let result = body_class(def, &def.body, c)
                .map_err(|m| format!("in the body of reducer `{}`: {m}", def.name))?;
            Ok((c, result))
        }
    }
}

/// The class of (part of) a user reducer's body when both parameters have class `c`.
pub fn body_class(def: &ReducerDef, e: &Expr, c: Class) -> Result<Class, String> {
    match &e.kind {
        ExprKind::Literal(v) => Ok(v.widen().ty().class()),
        ExprKind::Name(n) if def.params.contains(n) => Ok(c),
        ExprKind::Unary(op, x) => Ok(unary_class(*op, body_class(def, x, c)?)?.1),
        ExprKind::Binary(op, x, y) => {
            let (a, b) = (body_class(def, x, c)?, body_class(def, y, c)?);
            Ok(binary_classes(*op, a, b)?.1)
        }
        ExprKind::Call(name, args) if name != Builtin::Size.name() => {
            let classes = args
                .iter()
                .map(|a| body_class(def, a, c))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Builtin::named(name)?.classes(&classes)?.1)
        }
        _ => Err(body_misuse(def, e)),
    }
}

/// Why `e` cannot appear in the body of `def` (it is not a parameter, literal, operator or
/// built-in function).
pub fn body_misuse(def: &ReducerDef, e: &Expr) -> String {
    let [a, b] = &def.params;
    match &e.kind {
        ExprKind::Name(n) => format!("`{n}` is not a parameter of `{}` (`{a}`, `{b}`)", def.name),
        ExprKind::Access(x) => format!(
            "a reducer body cannot read tensors (`{}[...]` in `{}`)",
            x.tensor, def.name
        ),
        ExprKind::Missing => format!("a reducer body cannot use `missing` (in `{}`)", def.name),
        ExprKind::Call(n, _) => format!("a reducer body cannot call `{n}` (in `{}`)", def.name),
        _ => format!("unexpected expression in the body of `{}`", def.name),
    }
}

/// Evaluate a user reducer's body with its parameters bound to `old` and `new`.
pub fn eval_body(def: &ReducerDef, e: &Expr, old: Scalar, new: Scalar) -> Result<Scalar, String> {
    let ev = |x: &Expr| eval_body(def, x, old, new);
    match &e.kind {
        ExprKind::Literal(v) => Ok(v.widen()),
        ExprKind::Name(n) if *n == def.params[0] => Ok(old),
        ExprKind::Name(n) if *n == def.params[1] => Ok(new),
        ExprKind::Unary(op, x) => eval_unary(*op, ev(x)?),
        ExprKind::Binary(op, x, y) => eval_binary(*op, ev(x)?, ev(y)?),
        ExprKind::Call(name, args) if name != Builtin::Size.name() => {
            let vals = args.iter().map(ev).collect::<Result<Vec<_>, _>>()?;
            Builtin::named(name)?.eval(&vals)
        }
        _ => Err(body_misuse(def, e)),
    }
}

/// IEEE 754-2019 `minimum`, the IR's float `Min`: NaN if either operand is NaN, and `-0.0`
/// below `0.0` (for equal operands the sign bits are or-ed, which only matters for zeros).
pub fn min_f(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        f64::from_bits(a.to_bits() | b.to_bits())
    } else if b < a {
        b
    } else {
        a
    }
}

/// IEEE 754-2019 `maximum`, the IR's float `Max` (for equal operands the sign bits are
/// and-ed: `max(-0.0, 0.0) == 0.0`).
pub fn max_f(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        f64::from_bits(a.to_bits() & b.to_bits())
    } else if b > a {
        b
    } else {
        a
    }
}

/// The IR's float `Mul`: IEEE multiplication, except that a zero factor gives `+0.0` whatever
/// the other factor is (a strong zero: `0 * NaN == 0 * Inf == -2 * 0 == 0.0`). The sign is
/// fixed because the compiler folds `x * 0` to `+0.0` without knowing `x`, and a division by
/// the product would otherwise tell the two apart (`1 / (-2 * 0)`). Only a NaN or zero
/// product can differ from IEEE, so kernels test for those rare cases after multiplying.
pub fn mul_f(a: f64, b: f64) -> f64 {
    let p = a * b;
    if (p.is_nan() || p == 0.0) && (a == 0.0 || b == 0.0) {
        0.0
    } else {
        p
    }
}

fn int_div(a: i64, b: i64) -> i64 {
    if b == 0 { 0 } else { a.wrapping_div(b) }
}

fn int_rem(a: i64, b: i64) -> i64 {
    if b == 0 { 0 } else { a.wrapping_rem(b) }
}

/// Evaluate a binary operator on two values.
pub fn eval_binary(op: BinaryOp, a: Scalar, b: Scalar) -> Result<Scalar, String> {
    use BinaryOp::*;
    let (operand, _) = binary_classes(op, a.ty().class(), b.ty().class())?;
    let (x, y) = (convert(a, operand), convert(b, operand));
    Ok(match (operand, x, y) {
        (_, Scalar::Bool(p), Scalar::Bool(q)) => Scalar::Bool(match op {
            Eq => p == q,
            Ne => p != q,
            AndAnd | BitAnd => p && q,
            OrOr | BitOr => p || q,
            Xor => p ^ q,
            _ => unreachable!("binary_classes gives Bool operands only to logical operators"),
        }),
        (_, Scalar::I64(p), Scalar::I64(q)) => match op {
            Add => Scalar::I64(p.wrapping_add(q)),
            Sub => Scalar::I64(p.wrapping_sub(q)),
            Mul => Scalar::I64(p.wrapping_mul(q)),
            Rem => Scalar::I64(int_rem(p, q)),
            BitAnd => Scalar::I64(p & q),
            BitOr => Scalar::I64(p | q),
            Xor => Scalar::I64(p ^ q),
            Shl => Scalar::I64(p.wrapping_shl((q & 63) as u32)),
            Shr => Scalar::I64(p.wrapping_shr((q & 63) as u32)),
            Eq => Scalar::Bool(p == q),
            Ne => Scalar::Bool(p != q),
            Lt => Scalar::Bool(p < q),
            Le => Scalar::Bool(p <= q),
            Gt => Scalar::Bool(p > q),
            Ge => Scalar::Bool(p >= q),
            _ => unreachable!("binary_classes gives Int operands only to integer operators"),
        },
        (_, Scalar::F64(p), Scalar::F64(q)) => match op {
            Add => Scalar::F64(p + q),
            Sub => Scalar::F64(p - q),
            Mul => Scalar::F64(mul_f(p, q)),
            Div => Scalar::F64(p / q),
            Rem => Scalar::F64(p % q),
            Eq => Scalar::Bool(p == q),
            Ne => Scalar::Bool(p != q),
            Lt => Scalar::Bool(p < q),
            Le => Scalar::Bool(p <= q),
            Gt => Scalar::Bool(p > q),
            Ge => Scalar::Bool(p >= q),
            _ => unreachable!("binary_classes gives Float operands only to arithmetic operators"),
        },
        _ => unreachable!("convert gives both operands the operand class"),
    })
}

/// Evaluate a unary operator.
pub fn eval_unary(op: UnaryOp, a: Scalar) -> Result<Scalar, String> {
    let (operand, _) = unary_class(op, a.ty().class())?;
    Ok(match (op, convert(a, operand)) {
        (UnaryOp::Neg, Scalar::I64(x)) => Scalar::I64(x.wrapping_neg()),
        (UnaryOp::Neg, Scalar::F64(x)) => Scalar::F64(-x),
        (UnaryOp::Not, Scalar::Bool(x)) => Scalar::Bool(!x),
        (UnaryOp::Not, Scalar::I64(x)) => Scalar::I64(!x),
        _ => unreachable!("unary_class admits only these combinations"),
    })
}

/// `old <r> new`, stored back into an element of type `elem`.
pub fn apply_reducer(
    r: &Reducer,
    old: Scalar,
    new: Scalar,
    elem: ElemType,
) -> Result<Scalar, String> {
    let (compute, _) = reducer_classes(r, old.ty().class(), new.ty().class())?;
    let (o, n) = (convert(old, compute), convert(new, compute));
    let out = match r {
        Reducer::Add => eval_binary(BinaryOp::Add, o, n)?,
        Reducer::Sub => eval_binary(BinaryOp::Sub, o, n)?,
        Reducer::Mul => eval_binary(BinaryOp::Mul, o, n)?,
        Reducer::And => eval_binary(BinaryOp::BitAnd, o, n)?,
        Reducer::Or => eval_binary(BinaryOp::BitOr, o, n)?,
        Reducer::Min => Builtin::Min.eval(&[o, n])?,
        Reducer::Max => Builtin::Max.eval(&[o, n])?,
        // Numeric equality, as `==` in a program and every backend's compare: `-0.0` counts
        // as `0.0`, and a NaN never matches (so `<<choose(NaN)>>=` never replaces).
        Reducer::Choose(z) => {
            let equal = eval_binary(BinaryOp::Eq, o, convert(*z, compute))?;
            if equal == Scalar::Bool(true) { n } else { o }
        }
        Reducer::Named(n) => return Err(format!("unknown reducer `<<{n}>>=`")),
        Reducer::User(def) => eval_body(def, &def.body, o, n)
            .map_err(|m| format!("in the body of reducer `{}`: {m}", def.name))?,
    };
    Ok(out.cast(elem))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval_call(name: &str, args: &[Scalar]) -> Result<Scalar, String> {
        Builtin::named(name)?.eval(args)
    }

    fn call_classes(name: &str, args: &[Class]) -> Result<(Vec<Class>, Class), String> {
        Builtin::named(name)?.classes(args)
    }

    #[test]
    fn promotion_and_division() {
        assert_eq!(
            eval_binary(BinaryOp::Add, Scalar::Bool(true), Scalar::Bool(true)),
            Ok(Scalar::I64(2))
        );
        assert_eq!(
            eval_binary(BinaryOp::Div, Scalar::I64(7), Scalar::I64(2)),
            Ok(Scalar::F64(3.5))
        );
        assert_eq!(
            eval_call("div", &[Scalar::I64(-7), Scalar::I64(2)]),
            Ok(Scalar::I64(-3))
        );
        assert_eq!(
            eval_call("div", &[Scalar::F64(-7.0), Scalar::I64(2)]),
            Ok(Scalar::F64(-3.0))
        );
        assert_eq!(
            eval_binary(BinaryOp::Rem, Scalar::I64(5), Scalar::I64(0)),
            Ok(Scalar::I64(0))
        );
        assert_eq!(
            eval_binary(BinaryOp::Mul, Scalar::I64(i64::MAX), Scalar::I64(2)),
            Ok(Scalar::I64(-2))
        );
    }

    #[test]
    fn type_errors_are_reported() {
        assert!(eval_binary(BinaryOp::AndAnd, Scalar::I64(1), Scalar::Bool(true)).is_err());
        assert!(eval_binary(BinaryOp::Shl, Scalar::F64(1.0), Scalar::I64(1)).is_err());
        assert!(call_classes("min", &[Class::Int]).is_err());
        assert!(call_classes("nope", &[]).is_err());
        assert!(reducer_classes(&Reducer::Named("f".into()), Class::Int, Class::Int).is_err());
    }

    fn user(text: &str) -> Reducer {
        let p = crate::notation::parse::parse_program(text).unwrap();
        Reducer::User(std::sync::Arc::new(p.reducers[0].clone()))
    }

    #[test]
    fn user_reducers_type_and_apply_their_body() {
        let sat = user("reducer sat(a, b) = min(a + b, 255)");
        assert_eq!(
            reducer_classes(&sat, Class::Int, Class::Bool),
            Ok((Class::Int, Class::Int))
        );
        assert_eq!(
            apply_reducer(&sat, Scalar::U8(250), Scalar::U8(9), ElemType::U8),
            Ok(Scalar::U8(255))
        );
        assert_eq!(
            apply_reducer(&sat, Scalar::U8(2), Scalar::Bool(true), ElemType::U8),
            Ok(Scalar::U8(3))
        );
        // The parameters may have other names; `b` is the new value.
        let last = user("reducer last(old, new) = new");
        assert_eq!(
            apply_reducer(&last, Scalar::I64(1), Scalar::F64(2.5), ElemType::F64),
            Ok(Scalar::F64(2.5))
        );
        // A float body into an integer element truncates like any store.
        let half = user("reducer half(a, b) = (a + b) / 2");
        assert_eq!(
            reducer_classes(&half, Class::Int, Class::Int),
            Ok((Class::Int, Class::Float))
        );
        assert_eq!(
            apply_reducer(&half, Scalar::I64(3), Scalar::I64(4), ElemType::I64),
            Ok(Scalar::I64(3))
        );
        let both = user("reducer both(a, b) = a && b");
        assert_eq!(
            reducer_classes(&both, Class::Bool, Class::Bool),
            Ok((Class::Bool, Class::Bool))
        );
        assert_eq!(
            reducer_classes(&both, Class::Float, Class::Bool),
            Err("in the body of reducer `both`: `&&` needs bool operands".into())
        );
    }

    #[test]
    fn reducers_store_into_the_element_type() {
        let r = apply_reducer(
            &Reducer::Add,
            Scalar::I32(3),
            Scalar::F64(1.5),
            ElemType::I32,
        );
        assert_eq!(r, Ok(Scalar::I32(4)));
        let c = apply_reducer(
            &Reducer::Choose(Scalar::I64(-1)),
            Scalar::I64(-1),
            Scalar::I64(5),
            ElemType::I64,
        );
        assert_eq!(c, Ok(Scalar::I64(5)));
        let k = apply_reducer(
            &Reducer::Choose(Scalar::I64(-1)),
            Scalar::I64(2),
            Scalar::I64(5),
            ElemType::I64,
        );
        assert_eq!(k, Ok(Scalar::I64(2)));
    }

    fn f(s: Result<Scalar, String>) -> f64 {
        s.unwrap().as_f64()
    }

    #[test]
    fn min_and_max_propagate_nan_from_either_side() {
        let (nan, one) = (Scalar::F64(f64::NAN), Scalar::F64(1.0));
        for name in ["min", "max"] {
            assert!(f(eval_call(name, &[nan, one])).is_nan(), "{name}");
            assert!(f(eval_call(name, &[one, nan])).is_nan(), "{name}");
        }
        for r in [Reducer::Min, Reducer::Max] {
            assert!(f(apply_reducer(&r, Scalar::F64(2.0), nan, ElemType::F64)).is_nan());
            assert!(f(apply_reducer(&r, nan, Scalar::F64(2.0), ElemType::F64)).is_nan());
        }
        // Signed zeros are ordered, so both argument orders give the same bits.
        let (neg, pos) = (Scalar::F64(-0.0), Scalar::F64(0.0));
        for (a, b) in [(neg, pos), (pos, neg)] {
            assert_eq!(eval_call("min", &[a, b]), Ok(neg));
            assert_eq!(eval_call("max", &[a, b]), Ok(pos));
        }
        // Integers are unaffected.
        assert_eq!(
            eval_call("min", &[Scalar::I64(3), Scalar::I64(-2)]),
            Ok(Scalar::I64(-2))
        );
    }

    #[test]
    fn zero_annihilates_products_of_floats() {
        for other in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let p = eval_binary(BinaryOp::Mul, Scalar::F64(0.0), Scalar::F64(other));
            assert_eq!(p, Ok(Scalar::F64(0.0)), "0 * {other}");
            let q = eval_binary(BinaryOp::Mul, Scalar::F64(other), Scalar::I64(0));
            assert_eq!(q, Ok(Scalar::F64(0.0)), "{other} * 0");
        }
        // A zero factor gives +0.0 whatever the signs (IEEE would give -0.0 here).
        for (a, b) in [(0.0, -2.0), (-0.0, 3.0), (-0.0, -0.0)] {
            let r = eval_binary(BinaryOp::Mul, Scalar::F64(a), Scalar::F64(b));
            assert!(
                matches!(r, Ok(Scalar::F64(p)) if p == 0.0 && p.is_sign_positive()),
                "{a} * {b}: {r:?}"
            );
        }
        let r = apply_reducer(
            &Reducer::Mul,
            Scalar::F64(0.0),
            Scalar::F64(f64::NAN),
            ElemType::F64,
        );
        assert_eq!(r, Ok(Scalar::F64(0.0)));
        assert!(
            f(eval_binary(
                BinaryOp::Mul,
                Scalar::F64(f64::INFINITY),
                Scalar::F64(f64::NAN)
            ))
            .is_nan()
        );
    }

    #[test]
    fn choose_compares_numerically() {
        let choose0 = Reducer::Choose(Scalar::I64(0));
        let r = apply_reducer(&choose0, Scalar::F64(-0.0), Scalar::F64(5.0), ElemType::F64);
        assert_eq!(r, Ok(Scalar::F64(5.0)));
        let nan = Reducer::Choose(Scalar::F64(f64::NAN));
        let k = apply_reducer(&nan, Scalar::F64(f64::NAN), Scalar::F64(5.0), ElemType::F64);
        assert!(f(k).is_nan());
    }
}
