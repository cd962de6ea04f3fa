//! Algebraic properties of reducers and operators, declared in one place so the simplifier
//! uses them instead of hard-wiring cases.

//!
//! User reducers (`Reducer::User`) contribute the properties their definition declares. Those
//! are trusted: a declared identity, annihilator or idempotence is used as given.

use crate::notation::ast::Reducer;
use crate::semantics::convert;
use crate::types::{Class, Scalar};

/// A declared property value in class `class`, if the conversion loses nothing (an identity
/// `0.5` says nothing about integer reductions, an identity `255` nothing about bool ones).
fn in_class(v: Scalar, class: Class) -> Option<Scalar> {
    let w = v.widen();
    let c = convert(w, class);
    (convert(c, w.ty().class()) == w).then_some(c)
}

/// `x op id == x` for every x: assignments of the identity are no-ops.
pub fn identity(r: &Reducer, class: Class) -> Option<Scalar> {
    Some(match (r, class) {
        (Reducer::Add | Reducer::Sub, Class::Float) => Scalar::F64(0.0),
        (Reducer::Add | Reducer::Sub, _) => Scalar::I64(0),
        (Reducer::Mul, Class::Float) => Scalar::F64(1.0),
        (Reducer::Mul, _) => Scalar::I64(1),
        (Reducer::Or, Class::Bool) => Scalar::Bool(false),
        (Reducer::Or, Class::Int) => Scalar::I64(0),
        (Reducer::And, Class::Bool) => Scalar::Bool(true),
        (Reducer::And, Class::Int) => Scalar::I64(-1),
        (Reducer::Min, Class::Float) => Scalar::F64(f64::INFINITY),
        (Reducer::Min, Class::Int) => Scalar::I64(i64::MAX),
        (Reducer::Min, Class::Bool) => Scalar::Bool(true),
        (Reducer::Max, Class::Float) => Scalar::F64(f64::NEG_INFINITY),
        (Reducer::Max, Class::Int) => Scalar::I64(i64::MIN),
        (Reducer::Max, Class::Bool) => Scalar::Bool(false),
        (Reducer::Choose(z), _) => z.widen(),
        (Reducer::User(def), c) => return def.identity.and_then(|v| in_class(v, c)),
        _ => return None,
    })
}

/// `x op a == a` for every x: once a reduction holds its annihilator, further reductions
/// change nothing (`*` and 0, `or` and true, integer `min` and its smallest value). Zero is
/// one for float `*` too, as the strong zero of `semantics::mul_f` makes `0 * NaN == 0`.
/// Float `min` and `max` have none: they propagate NaN, so `min(-Inf, NaN)` is NaN.
pub fn annihilator(r: &Reducer, class: Class) -> Option<Scalar> {
    Some(match (r, class) {
        (Reducer::Mul, Class::Float) => Scalar::F64(0.0),
        (Reducer::Mul, Class::Int) => Scalar::I64(0),
        (Reducer::Or, Class::Bool) => Scalar::Bool(true),
        (Reducer::Or, Class::Int) => Scalar::I64(-1),
        (Reducer::And, Class::Bool) => Scalar::Bool(false),
        (Reducer::And, Class::Int) => Scalar::I64(0),
        (Reducer::Min, Class::Int) => Scalar::I64(i64::MIN),
        (Reducer::Min, Class::Bool) => Scalar::Bool(false),
        (Reducer::Max, Class::Int) => Scalar::I64(i64::MAX),
        (Reducer::Max, Class::Bool) => Scalar::Bool(true),
        (Reducer::User(def), c) => return def.annihilator.and_then(|v| in_class(v, c)),
        _ => return None,
    })
}

/// `(x op v) op v == x op v`: repeating the reduction changes nothing.
pub fn is_idempotent(r: &Reducer) -> bool {
    match r {
        Reducer::Min | Reducer::Max | Reducer::And | Reducer::Or | Reducer::Choose(_) => true,
        Reducer::User(def) => def.idempotent,
        _ => false,
    }
}

/// Whether a literal is the zero of its class (an annihilator of `*`).
pub fn is_zero(s: &Scalar) -> bool {
    match s.widen() {
        Scalar::I64(0) => true,
        Scalar::F64(v) => v == 0.0,
        _ => false,
    }
}

pub fn is_one(s: &Scalar) -> bool {
    match s.widen() {
        Scalar::I64(1) => true,
        Scalar::F64(v) => v == 1.0,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::build::{add, reducer};
    use std::sync::Arc;

    #[test]
    fn user_reducers_declare_their_properties() {
        let sat = Reducer::User(Arc::new(
            reducer("sat", add("a", "b"))
                .identity(0)
                .annihilator(255)
                .idempotent(),
        ));
        assert_eq!(identity(&sat, Class::Int), Some(Scalar::I64(0)));
        assert_eq!(identity(&sat, Class::Float), Some(Scalar::F64(0.0)));
        assert_eq!(identity(&sat, Class::Bool), Some(Scalar::Bool(false)));
        assert_eq!(annihilator(&sat, Class::Int), Some(Scalar::I64(255)));
        // 255 is no bool: the promise says nothing about bool reductions.
        assert_eq!(annihilator(&sat, Class::Bool), None);
        assert!(is_idempotent(&sat));
        let half = Reducer::User(Arc::new(reducer("half", "b").identity(0.5)));
        assert_eq!(identity(&half, Class::Float), Some(Scalar::F64(0.5)));
        assert_eq!(identity(&half, Class::Int), None);
        assert_eq!(annihilator(&half, Class::Float), None);
        assert!(!is_idempotent(&half));
    }
}
