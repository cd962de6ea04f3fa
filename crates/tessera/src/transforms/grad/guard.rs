//! Zero-adjoint guards: a `let` variable's gradient that is zero skips its propagation.
//!
//! The backward of `let x = value ... end` accumulates `dx` over the body, then propagates it
//! (`contributions`): statements `dy[...] += rhs` where every `rhs` is a product with `dx[]`
//! as a factor (or a select, a negation, a sum of such). Past a kink (the derivative of
//! `min`, `max`, a clamp, `ifelse`: `ifelse(c, g, 0.0)`) `dx` is often exactly zero on whole
//! regions of the iteration space (SoftRas: a face's sigmoid is clamped flat for most pixels,
//! so every adjoint of the pixel body is zero), and the propagation then adds `+0.0` products
//! (float products are strong-zero: a zero factor gives `+0.0`) to its targets. Here it
//! becomes `if dx[] != 0.0 ... end` when it is at least two updates, and is dropped when
//! nothing in the body ever adds to `dx` (a variable used only in a condition, such as
//! SoftRas's edge functions `c0`: its gradient is always zero).
//!
//! Why the result is the same bit for bit: skipping `t += z` with `z = ±0.0` changes `t` only
//! when `t` is `-0.0` (`-0.0 + 0.0 = +0.0`); every target here is a gradient, declared
//! `.= 0.0` and then only added to (a sum that starts at `+0.0` is never `-0.0` in
//! round-to-nearest: `x + y = -0.0` needs both `-0.0`), except the seeded cotangents of the
//! outputs, whose `-0.0` could then stay `-0.0`; those are only ever factors of strong-zero
//! products or terms of sums into gradients, where `-0.0` and `+0.0` give the same result.
//! NaN passes the guard (`NaN != 0.0`), so NaN and infinite cotangents propagate as before.

use super::tape;
use crate::notation::ast::{AssignOp, BinaryOp, Expr, ExprKind, Reducer, Span, Stmt, StmtKind};
use std::collections::HashSet;

/// `TESSERA_NO_ZERO_GUARDS=1` leaves every propagation unguarded, for measuring.
pub(crate) fn enabled() -> bool {
    !std::env::var("TESSERA_NO_ZERO_GUARDS").is_ok_and(|v| v == "1")
}

/// The propagation `tail` of the gradient `dname` (a 0-d local declared in `body`, the let
/// body's backward statements), guarded or dropped as the module comment says.
pub(crate) fn guard(dname: &str, body: &[Stmt], tail: Vec<Stmt>, span: Span) -> Vec<Stmt> {
    if !enabled() {
        return tail;
    }
    let mut zero = HashSet::from([dname.to_string()]);
    if !tail.iter().all(|s| zero_stmt(s, &mut zero)) {
        return tail;
    }
    if !adds_to(body, dname) {
        return vec![];
    }
    // One update is as cheap as the test; a guard pays where data make the gradient zero,
    // which only a select (a kink's derivative) does.
    if updates(&tail) < 2 || !has_select(body) {
        return tail;
    }
    let g = tape::read(tape::access(dname, vec![], span));
    let cond = Expr::new(
        ExprKind::Binary(BinaryOp::Ne, Box::new(g), Box::new(super::derive::zero())),
        span,
    );
    vec![tape::stmt(
        StmtKind::If {
            cond,
            then: tail,
            otherwise: vec![],
        },
        span,
    )]
}

/// Whether `s` only adds values that are `±0.0` when the names in `zero` (gradients read as
/// `d[]` or `d`, and `let` variables bound to such values) are; `let`s it binds to such
/// values join `zero`.
fn zero_stmt(s: &Stmt, zero: &mut HashSet<String>) -> bool {
    match &s.kind {
        StmtKind::Assign {
            lhs,
            op: AssignOp::Reduce(Reducer::Add),
            rhs,
        } => !zero.contains(&lhs.tensor) && zero_expr(rhs, zero),
        StmtKind::Let { name, value, body } => {
            let z = zero_expr(value, zero);
            let added = z && zero.insert(name.clone());
            let ok = body.iter().all(|s| zero_stmt(s, zero));
            if added {
                zero.remove(name);
            }
            ok
        }
        StmtKind::If {
            then, otherwise, ..
        } => then.iter().chain(otherwise).all(|s| zero_stmt(s, zero)),
        _ => false,
    }
}

/// Whether `e` is `±0.0` whenever the names in `zero` are (products are strong-zero).
fn zero_expr(e: &Expr, zero: &HashSet<String>) -> bool {
    match &e.kind {
        ExprKind::Literal(crate::types::Scalar::F64(x)) => *x == 0.0,
        ExprKind::Name(n) => zero.contains(n),
        ExprKind::Access(a) => a.indices.is_empty() && zero.contains(&a.tensor),
        ExprKind::Unary(crate::notation::ast::UnaryOp::Neg, x) => zero_expr(x, zero),
        ExprKind::Binary(BinaryOp::Mul, a, b) => zero_expr(a, zero) || zero_expr(b, zero),
        ExprKind::Binary(BinaryOp::Add | BinaryOp::Sub, a, b) => {
            zero_expr(a, zero) && zero_expr(b, zero)
        }
        ExprKind::Call(f, args) if f == "ifelse" && args.len() == 3 => {
            zero_expr(&args[1], zero) && zero_expr(&args[2], zero)
        }
        _ => false,
    }
}

/// Whether a statement in `stmts` adds to (or otherwise writes) the 0-d `d`, apart from
/// declaring it.
fn adds_to(stmts: &[Stmt], d: &str) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Assign { lhs, .. } => lhs.tensor == d,
        StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
            adds_to(body, d)
        }
        StmtKind::If {
            then, otherwise, ..
        } => adds_to(then, d) || adds_to(otherwise, d),
        StmtKind::Declare { .. } | StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => false,
    })
}

/// The assignments in `stmts`, nested ones included.
fn updates(stmts: &[Stmt]) -> usize {
    stmts
        .iter()
        .map(|s| match &s.kind {
            StmtKind::Assign { .. } => 1,
            StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
                updates(body)
            }
            StmtKind::If {
                then, otherwise, ..
            } => updates(then) + updates(otherwise),
            _ => 0,
        })
        .sum()
}

/// Whether an `ifelse` appears in `stmts` (in a value, a condition or an update).
fn has_select(stmts: &[Stmt]) -> bool {
    fn expr(e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Call(f, args) => f == "ifelse" || args.iter().any(expr),
            ExprKind::Unary(_, x) => expr(x),
            ExprKind::Binary(_, a, b) => expr(a) || expr(b),
            _ => false,
        }
    }
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Assign { rhs, .. } => expr(rhs),
        StmtKind::Declare { init, .. } => expr(init),
        StmtKind::Let { value, body, .. } => expr(value) || has_select(body),
        StmtKind::Loop { body, .. } | StmtKind::Block(body) => has_select(body),
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => expr(cond) || has_select(then) || has_select(otherwise),
        StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => false,
    })
}

#[cfg(test)]
mod tests {
    use crate::notation::parse::parse_program;
    use crate::transforms::grad::grad;

    fn backward(text: &str) -> String {
        let gp = grad(&parse_program(text).unwrap(), &["x"], &["y"]).unwrap();
        gp.program.to_string()
    }

    /// A clamped value's gradient guards its two updates; without a kink, with one update,
    /// nothing is guarded.
    #[test]
    fn guards_only_what_a_kink_can_make_zero() {
        let t = backward(
            "y .= 0.0\nfor i = _\n  let a = x[i] * x[i + 1]\n    y[i] = min(a, 1.0)\n  end\nend\n",
        );
        assert!(t.contains("if da[] != 0.0"), "{t}");
        let t = backward(
            "y .= 0.0\nfor i = _\n  let a = x[i] * x[i + 1]\n    y[i] = a * a\n  end\nend\n",
        );
        assert!(!t.contains("if "), "no kink: {t}");
        let t = backward(
            "y .= 0.0\nfor i = _\n  let a = x[i] * 3.0\n    y[i] = min(a, 1.0)\n  end\nend\n",
        );
        assert!(!t.contains("if "), "one update: {t}");
    }

    /// A variable only a condition reads has a gradient nothing adds to: not propagated.
    #[test]
    fn a_gradient_nothing_adds_to_is_not_propagated() {
        let t = backward(
            "y .= 0.0\nfor i = _\n  let c = x[i] - x[i + 1]\n    y[i] = ifelse(c > 0.0, x[i], 0.0)\n  end\nend\n",
        );
        assert!(
            t.contains("dc .= 0.0") && !t.contains("dc[] *") && !t.contains("+= dc[]"),
            "{t}"
        );
    }
}
