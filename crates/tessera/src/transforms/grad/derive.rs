//! The derivative table: reverse-mode propagation of a cotangent through one expression.
//!
//! `adjoint(e, g)` lists, for every read of an *active* value in `e` (a tensor element or a
//! `let` variable that depends on a differentiated input), the expression that read contributes
//! to that value's gradient when `e`'s cotangent is `g`. Index expressions are never
//! differentiated: indices are integers, and a comparison, `floor` or `div` is piecewise
//! constant, so its derivative is zero almost everywhere and it only acts as a mask.
//!
//! | expression | cotangent of each operand |
//! |---|---|
//! | `a + b`, `a - b`, `-a` | `g`, `±g` |
//! | `a * b` | `g * b`, `g * a` |
//! | `a / b` | `g / b`, `-(g * a) / (b * b)` |
//! | `min(a, b)` | `ifelse(a <= b, g, 0)`, `ifelse(b < a, g, 0)` (a tie goes to `a`) |
//! | `max(a, b)` | `ifelse(a >= b, g, 0)`, `ifelse(b > a, g, 0)` (a tie goes to `a`) |
//! | `abs(a)` | `ifelse(a >= 0, g, -g)` |
//! | `sqrt(a)`, `exp(a)`, `log(a)` | `g / (2 * sqrt(a))`, `g * exp(a)`, `g / a` |
//! | `ifelse(c, a, b)` | `ifelse(c, g, 0)`, `ifelse(c, 0, g)` (the condition is a mask) |
//! | `copysign(a, b)` | `g * copysign(1, a) * copysign(1, b)`, none (piecewise constant in `b`) |
//! | `logaddexp(a, b)` | `g * exp(a - logaddexp(a, b))`, `g * exp(b - logaddexp(a, b))` |
//! | `mod(a, b)` | `g`, `-g * fld(a, b)` (`mod(a, b) = a - b * fld(a, b)`, piecewise) |
//! | `nextafter(a, b)` | `g`, none (one unit in the last place from `a`) |
//! | comparisons, `&& \|\| ! & \| xor`, `floor`, `div`, `fld`, `signbit`, `lshift`, `rshift` | none (piecewise constant) |
//!
//! `%`, `coalesce`, `d(x)` and functions outside the table are refused when they read an
//! active value, with the place of the expression.

use crate::error::{Error, Result};
use crate::notation::ast::{Access, BinaryOp, Expr, ExprKind, ReducerDef, UnaryOp};
use crate::types::Scalar;
use std::collections::HashSet;

/// Where a contribution goes: a tensor element (the read access) or a 0-d value read by name
/// (a `let` variable or a 0-d tensor).
#[derive(Clone, Debug)]
pub enum Target {
    Element(Access),
    Name(String),
}

/// Does `e` read (as a value, not as an index) any name in `active`?
pub fn reads_active(e: &Expr, active: &HashSet<String>) -> bool {
    match &e.kind {
        ExprKind::Literal(_) | ExprKind::Missing => false,
        ExprKind::Name(n) => active.contains(n),
        ExprKind::Access(a) => active.contains(&a.tensor),
        ExprKind::Unary(_, x) => reads_active(x, active),
        ExprKind::Binary(_, x, y) => reads_active(x, active) || reads_active(y, active),
        ExprKind::Call(n, args) => n != "size" && args.iter().any(|x| reads_active(x, active)),
    }
}

/// Push `(target, contribution)` for every active read of `e` whose cotangent is `g`.
pub fn adjoint(
    e: &Expr,
    g: Expr,
    active: &HashSet<String>,
    out: &mut Vec<(Target, Expr)>,
) -> Result<()> {
    if !reads_active(e, active) {
        return Ok(());
    }
    let f = |x: &Expr| x.clone();
    match &e.kind {
        ExprKind::Literal(_) | ExprKind::Missing => {}
        ExprKind::Name(n) => out.push((Target::Name(n.clone()), g)),
        ExprKind::Access(a) => out.push((Target::Element(a.clone()), g)),
        ExprKind::Unary(UnaryOp::Neg, x) => adjoint(x, neg(g), active, out)?,
        ExprKind::Unary(UnaryOp::Not, _) => {}
        ExprKind::Binary(op, x, y) => match op {
            BinaryOp::Add => {
                adjoint(x, g.clone(), active, out)?;
                adjoint(y, g, active, out)?;
            }
            BinaryOp::Sub => {
                adjoint(x, g.clone(), active, out)?;
                adjoint(y, neg(g), active, out)?;
            }
            BinaryOp::Mul => {
                adjoint(x, mul(g.clone(), f(y)), active, out)?;
                adjoint(y, mul(g, f(x)), active, out)?;
            }
            // The cotangent stays a factor of a product (`g * (1 / y)`, not `g / y`): where
            // the forward value was annihilated by a structural zero (`A[i, j] * (x / y)`
            // outside A's pattern), `g` holds that zero and the contribution is annihilated
            // too, so the backward loop visits the pattern only. A quotient `0 / y` is not
            // zero (it is NaN for y = 0), and would make the loop visit every coordinate.
            BinaryOp::Div => {
                adjoint(x, mul(g.clone(), recip(f(y))), active, out)?;
                let yy = mul(f(y), f(y));
                adjoint(y, mul(g, neg(bin(BinaryOp::Div, f(x), yy))), active, out)?;
            }
            BinaryOp::Rem => {
                return Err(no_derivative(
                    e,
                    "`%` (write the quotient with `div` and `floor`)",
                ));
            }
            // Comparisons and logical or bitwise operators are piecewise constant: masks.
            _ => {}
        },
        ExprKind::Call(name, args) => match (name.as_str(), args.as_slice()) {
            ("min" | "max", [a, b]) => {
                let (first, second) = if name == "min" {
                    (BinaryOp::Le, BinaryOp::Lt)
                } else {
                    (BinaryOp::Ge, BinaryOp::Gt)
                };
                adjoint(a, select(bin(first, f(a), f(b)), g.clone()), active, out)?;
                adjoint(b, select(bin(second, f(b), f(a)), g), active, out)?;
            }
            ("abs", [a]) => {
                let c = bin(BinaryOp::Ge, f(a), zero());
                adjoint(a, call("ifelse", vec![c, g.clone(), neg(g)]), active, out)?;
            }
            ("sqrt", [a]) => {
                let d = mul(lit(2.0), call("sqrt", vec![f(a)]));
                adjoint(a, mul(g, recip(d)), active, out)?;
            }
            ("exp", [a]) => adjoint(a, mul(g, call("exp", vec![f(a)])), active, out)?,
            ("log", [a]) => adjoint(a, mul(g, recip(f(a))), active, out)?,
            ("ifelse", [c, a, b]) => {
                adjoint(a, select(f(c), g.clone()), active, out)?;
                adjoint(b, call("ifelse", vec![f(c), zero(), g]), active, out)?;
            }
            ("floor" | "div" | "round" | "ceil" | "trunc" | "fld" | "signbit", _) => {}
            ("lshift" | "rshift", _) => {}
            ("copysign", [a, _]) => {
                // ±1 for the flip of `a`'s sign; the sign source `b` only selects.
                let sa = call("copysign", vec![lit(1.0), f(a)]);
                let sb = call("copysign", vec![lit(1.0), f(&args[1])]);
                adjoint(a, mul(g, mul(sa, sb)), active, out)?;
            }
            ("logaddexp", [a, b]) => {
                // The softmax weights e^a / (e^a + e^b), from the value (no overflow).
                let l = call("logaddexp", vec![f(a), f(b)]);
                let wa = call("exp", vec![bin(BinaryOp::Sub, f(a), l.clone())]);
                let wb = call("exp", vec![bin(BinaryOp::Sub, f(b), l)]);
                adjoint(a, mul(g.clone(), wa), active, out)?;
                adjoint(b, mul(g, wb), active, out)?;
            }
            ("mod", [a, b]) => {
                adjoint(a, g.clone(), active, out)?;
                let q = call("fld", vec![f(a), f(b)]);
                adjoint(b, mul(g, neg(q)), active, out)?;
            }
            ("nextafter", [a, _]) => adjoint(a, g, active, out)?,
            ("pow", [a, b]) => {
                // d(a^b) = b a^(b-1) da + a^b ln(a) db.
                let pm1 = call("pow", vec![f(a), bin(BinaryOp::Sub, f(b), lit(1.0))]);
                adjoint(a, mul(g.clone(), mul(f(b), pm1)), active, out)?;
                let db = mul(call("pow", vec![f(a), f(b)]), call("log", vec![f(a)]));
                adjoint(b, mul(g, db), active, out)?;
            }
            ("atan2", [y, x]) => {
                // d atan2(y, x) = (x dy - y dx) / (x² + y²).
                let r2 = bin(BinaryOp::Add, mul(f(x), f(x)), mul(f(y), f(y)));
                adjoint(y, mul(g.clone(), mul(f(x), recip(r2.clone()))), active, out)?;
                adjoint(x, mul(g, neg(mul(f(y), recip(r2)))), active, out)?;
            }
            ("hypot", [a, b]) => {
                let h = call("hypot", vec![f(a), f(b)]);
                adjoint(a, mul(g.clone(), mul(f(a), recip(h.clone()))), active, out)?;
                adjoint(b, mul(g, mul(f(b), recip(h))), active, out)?;
            }
            (name, [a]) if let Some(d) = unary_derivative(name, &f(a)) => {
                adjoint(a, mul(g, d), active, out)?
            }
            _ => {
                return Err(no_derivative(
                    e,
                    &format!("`{name}` with {} arguments", args.len()),
                ));
            }
        },
    }
    Ok(())
}

/// The derivative of the one-argument function `name` at `x`, for the float functions of
/// `ir::math` whose derivative is not zero almost everywhere.
fn unary_derivative(name: &str, x: &Expr) -> Option<Expr> {
    let x = || x.clone();
    let sq = |e: Expr| mul(e.clone(), e);
    let sub = |a: Expr, b: Expr| bin(BinaryOp::Sub, a, b);
    let add = |a: Expr, b: Expr| bin(BinaryOp::Add, a, b);
    let sqrt = |e: Expr| call("sqrt", vec![e]);
    Some(match name {
        "sin" => call("cos", vec![x()]),
        "cos" => neg(call("sin", vec![x()])),
        // 1 + tan², from the value itself.
        "tan" => add(lit(1.0), sq(call("tan", vec![x()]))),
        "asin" => recip(sqrt(sub(lit(1.0), sq(x())))),
        "acos" => neg(recip(sqrt(sub(lit(1.0), sq(x()))))),
        "atan" => recip(add(lit(1.0), sq(x()))),
        "sinh" => call("cosh", vec![x()]),
        "cosh" => call("sinh", vec![x()]),
        "tanh" => sub(lit(1.0), sq(call("tanh", vec![x()]))),
        "asinh" => recip(sqrt(add(sq(x()), lit(1.0)))),
        "acosh" => recip(sqrt(sub(sq(x()), lit(1.0)))),
        "atanh" => recip(sub(lit(1.0), sq(x()))),
        "expm1" => call("exp", vec![x()]),
        "log1p" => recip(add(lit(1.0), x())),
        "log2" => recip(mul(x(), lit(std::f64::consts::LN_2))),
        "log10" => recip(mul(x(), lit(std::f64::consts::LN_10))),
        _ => return None,
    })
}

/// `1 / e`, so that a cotangent multiplies it (see the `Div` rule).
fn recip(e: Expr) -> Expr {
    bin(BinaryOp::Div, lit(1.0), e)
}

fn no_derivative(e: &Expr, what: &str) -> Error {
    Error::unsupported(
        e.span,
        format!("{what} has no derivative in `grad`, and here it reads a differentiated value"),
    )
}

pub fn lit(v: f64) -> Expr {
    Expr::lit(Scalar::F64(v))
}

pub fn zero() -> Expr {
    lit(0.0)
}

fn is_lit(e: &Expr, v: f64) -> bool {
    matches!(e.kind, ExprKind::Literal(Scalar::F64(x)) if x == v)
}

/// `-g`, folding `--g` so that printed gradients stay readable.
pub fn neg(g: Expr) -> Expr {
    match g.kind {
        ExprKind::Unary(UnaryOp::Neg, x) => *x,
        _ => {
            let span = g.span;
            Expr::new(ExprKind::Unary(UnaryOp::Neg, Box::new(g)), span)
        }
    }
}

/// `a * b`, dropping a literal factor `1.0`.
pub fn mul(a: Expr, b: Expr) -> Expr {
    if is_lit(&a, 1.0) {
        return b;
    }
    if is_lit(&b, 1.0) {
        return a;
    }
    bin(BinaryOp::Mul, a, b)
}

pub fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
    let span = a.span;
    Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), span)
}

pub fn call(name: &str, args: Vec<Expr>) -> Expr {
    let span = args.first().map(|a| a.span).unwrap_or_default();
    Expr::new(ExprKind::Call(name.to_string(), args), span)
}

/// A user reducer's declared derivative with its two parameters replaced at once by
/// `(result, element)`: the derivative body holds only parameters, literals, operators and
/// calls (`transforms::reducers` checks it), and a simultaneous replacement cannot capture a
/// loop index that happens to share a parameter's name.
pub fn reducer_derivative(def: &ReducerDef, d: &Expr, result: &Expr, element: &Expr) -> Expr {
    let sub = |x: &Expr| Box::new(reducer_derivative(def, x, result, element));
    let kind = match &d.kind {
        ExprKind::Name(n) if *n == def.params[0] => return result.clone(),
        ExprKind::Name(n) if *n == def.params[1] => return element.clone(),
        ExprKind::Unary(op, x) => ExprKind::Unary(*op, sub(x)),
        ExprKind::Binary(op, x, y) => ExprKind::Binary(*op, sub(x), sub(y)),
        ExprKind::Call(name, args) => ExprKind::Call(
            name.clone(),
            args.iter()
                .map(|a| reducer_derivative(def, a, result, element))
                .collect(),
        ),
        other => other.clone(),
    };
    Expr::new(kind, d.span)
}

/// `ifelse(c, g, 0.0)`: the cotangent where the mask `c` holds.
pub fn select(c: Expr, g: Expr) -> Expr {
    call("ifelse", vec![c, g, zero()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_expr;

    fn contributions(e: &str, active: &[&str]) -> Vec<String> {
        let e = parse_expr(e).unwrap();
        let active = active.iter().map(|s| s.to_string()).collect();
        let mut out = vec![];
        adjoint(&e, Expr::name("g"), &active, &mut out).unwrap();
        out.into_iter()
            .map(|(t, c)| match t {
                Target::Element(a) => format!("{a}: {c}"),
                Target::Name(n) => format!("{n}: {c}"),
            })
            .collect()
    }

    #[test]
    fn product_rule_and_quotient_rule() {
        assert_eq!(
            contributions("(x1[] + x2[]) * x3[]", &["x1", "x2", "x3"]),
            [
                "x1[]: g * x3[]",
                "x2[]: g * x3[]",
                "x3[]: g * (x1[] + x2[])"
            ]
        );
        assert_eq!(
            contributions("a[i] / b[i]", &["a", "b"]),
            // The cotangent stays a factor of the product (see the `Div` rule).
            [
                "a[i]: g * (1.0 / b[i])",
                "b[i]: g * -(a[i] / (b[i] * b[i]))"
            ]
        );
    }

    #[test]
    fn inactive_reads_and_indices_get_nothing() {
        assert_eq!(
            contributions("A[I[i], j] * x[j]", &["x"]),
            ["x[j]: g * A[I[i], j]"]
        );
        assert!(contributions("c[i] > 0.0", &["c"]).is_empty());
    }

    #[test]
    fn masks_and_selections() {
        assert_eq!(
            contributions("max(a[i], 0.0)", &["a"]),
            ["a[i]: ifelse(a[i] >= 0.0, g, 0.0)"]
        );
        assert_eq!(
            contributions("ifelse(c[i] > 0.0, a[i], b[i])", &["a", "b", "c"]),
            [
                "a[i]: ifelse(c[i] > 0.0, g, 0.0)",
                "b[i]: ifelse(c[i] > 0.0, 0.0, g)"
            ]
        );
    }

    #[test]
    fn functions_outside_the_table_name_their_place() {
        let e = parse_expr("a[i] % 2.0").unwrap();
        let active = ["a".to_string()].into_iter().collect();
        let err = adjoint(&e, Expr::name("g"), &active, &mut vec![]).unwrap_err();
        assert!(err.to_string().starts_with("1:"), "{err}");
        assert!(err.to_string().contains("no derivative"), "{err}");
    }
}
