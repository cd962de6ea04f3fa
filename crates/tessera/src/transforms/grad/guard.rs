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
use std::collections::{HashMap, HashSet};

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

/// The backward of a let body whose gradient `dname` passes a kink before it reaches
/// anything: `body` (the let body's backward, `dname` declared first) writes only `dname` and
/// its own locals, and `tail` (the propagation) is `let`s around updates that are all zero
/// whenever some conditions that do not read `dname` say so (`ifelse(c, ..dname.., 0.0)` is
/// zero when `!c`, whatever `dname` is, NaN included). Then the `let`s that do not read
/// `dname` come first and both `body` and the rest of `tail` run under `if !(zero) ... end`:
/// where the kink is flat (SoftRas's clamped sigmoid, `exp` and a division per pixel),
/// the gradient is not computed at all. The skipped updates would each add `+0.0` (a select
/// of the literal, or a strong-zero product of it), so the result is the same bit for bit
/// (see the module comment). `None` where this does not apply.
pub(crate) fn kink_guard(
    dname: &str,
    body: &[Stmt],
    tail: &[Stmt],
    span: Span,
) -> Option<Vec<Stmt>> {
    if !enabled() {
        return None;
    }
    let mut own = HashSet::from([dname.to_string()]);
    declared(body, &mut own);
    if !writes_only(body, &own) {
        return None;
    }
    // The let chain `contributions` builds, and the updates inside it.
    let mut lets: Vec<(String, Expr)> = vec![];
    let mut inner = tail;
    while let [one] = inner
        && let StmtKind::Let { name, value, body } = &one.kind
    {
        lets.push((name.clone(), value.clone()));
        inner = body;
    }
    let mut dependent = HashSet::from([dname.to_string()]);
    let mut conds: HashMap<String, Option<Expr>> = HashMap::new();
    let (mut free, mut bound) = (vec![], vec![]);
    for (name, value) in lets {
        if super::derive::reads_active(&value, &dependent) {
            conds.insert(name.clone(), zero_when(&value, &dependent, &conds));
            dependent.insert(name.clone());
            bound.push((name, value));
        } else {
            free.push((name, value));
        }
    }
    let mut all: Option<Expr> = None;
    for s in inner {
        let StmtKind::Assign {
            op: AssignOp::Reduce(Reducer::Add),
            rhs,
            ..
        } = &s.kind
        else {
            return None;
        };
        let c = zero_when(rhs, &dependent, &conds)?;
        all = Some(match all {
            None => c,
            Some(a) => bin(BinaryOp::AndAnd, a, c),
        });
    }
    let zero = all?;
    if is_true(&zero) {
        return None;
    }
    let not_zero = Expr::new(
        ExprKind::Unary(crate::notation::ast::UnaryOp::Not, Box::new(zero)),
        span,
    );
    let mut then: Vec<Stmt> = body.to_vec();
    then.extend(wrap(bound, inner.to_vec(), span));
    let guarded = vec![tape::stmt(
        StmtKind::If {
            cond: not_zero,
            then,
            otherwise: vec![],
        },
        span,
    )];
    Some(wrap(free, guarded, span))
}

/// `out` inside the `let`s, the first outermost.
pub(crate) fn wrap(lets: Vec<(String, Expr)>, mut out: Vec<Stmt>, span: Span) -> Vec<Stmt> {
    for (name, value) in lets.into_iter().rev() {
        out = vec![tape::stmt(
            StmtKind::Let {
                name,
                value,
                body: out,
            },
            span,
        )];
    }
    out
}

fn is_true(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Literal(crate::types::Scalar::Bool(true)))
}

fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
    let span = a.span;
    if is_true(&a) && op == BinaryOp::OrOr || is_true(&b) && op == BinaryOp::AndAnd {
        return a;
    }
    if is_true(&b) && op == BinaryOp::OrOr || is_true(&a) && op == BinaryOp::AndAnd {
        return b;
    }
    Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), span)
}

/// A condition, reading none of `dependent`, under which `e` is `±0.0` whatever the values
/// of `dependent` are (`conds`: those of the dependent `let`s); `None` when there is none.
fn zero_when(
    e: &Expr,
    dependent: &HashSet<String>,
    conds: &HashMap<String, Option<Expr>>,
) -> Option<Expr> {
    let t = || Expr::lit(crate::types::Scalar::Bool(true));
    match &e.kind {
        ExprKind::Literal(crate::types::Scalar::F64(x)) if *x == 0.0 => Some(t()),
        ExprKind::Name(n) => conds.get(n).cloned().flatten(),
        ExprKind::Unary(crate::notation::ast::UnaryOp::Neg, x) => zero_when(x, dependent, conds),
        ExprKind::Binary(BinaryOp::Mul, a, b) => {
            match (
                zero_when(a, dependent, conds),
                zero_when(b, dependent, conds),
            ) {
                (Some(x), Some(y)) => Some(bin(BinaryOp::OrOr, x, y)),
                (x, y) => x.or(y),
            }
        }
        ExprKind::Binary(BinaryOp::Add | BinaryOp::Sub, a, b) => Some(bin(
            BinaryOp::AndAnd,
            zero_when(a, dependent, conds)?,
            zero_when(b, dependent, conds)?,
        )),
        ExprKind::Call(f, args)
            if f == "ifelse"
                && args.len() == 3
                && !super::derive::reads_active(&args[0], dependent) =>
        {
            let c = args[0].clone();
            let not_c = Expr::new(
                ExprKind::Unary(crate::notation::ast::UnaryOp::Not, Box::new(c.clone())),
                c.span,
            );
            match (
                zero_when(&args[1], dependent, conds),
                zero_when(&args[2], dependent, conds),
            ) {
                // `c && x || !c` is `x || !c`, and `c || !c && y` is `c || y`.
                (Some(x), Some(y)) if is_true(&y) => Some(bin(BinaryOp::OrOr, x, not_c)),
                (Some(x), Some(y)) if is_true(&x) => Some(bin(BinaryOp::OrOr, c, y)),
                (Some(x), Some(y)) => Some(bin(
                    BinaryOp::OrOr,
                    bin(BinaryOp::AndAnd, c, x),
                    bin(BinaryOp::AndAnd, not_c, y),
                )),
                (Some(x), None) => Some(bin(BinaryOp::AndAnd, c, x)),
                (None, Some(y)) => Some(bin(BinaryOp::AndAnd, not_c, y)),
                (None, None) => None,
            }
        }
        _ => None,
    }
}

fn declared(stmts: &[Stmt], out: &mut HashSet<String>) {
    for s in stmts {
        match &s.kind {
            StmtKind::Declare { tensor, .. } => {
                out.insert(tensor.clone());
            }
            StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
                declared(body, out)
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                declared(then, out);
                declared(otherwise, out);
            }
            _ => {}
        }
    }
}

fn writes_only(stmts: &[Stmt], own: &HashSet<String>) -> bool {
    stmts.iter().all(|s| match &s.kind {
        StmtKind::Assign { lhs, .. } => own.contains(&lhs.tensor),
        StmtKind::Declare { tensor, .. } => own.contains(tensor),
        StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
            writes_only(body, own)
        }
        StmtKind::If {
            then, otherwise, ..
        } => writes_only(then, own) && writes_only(otherwise, own),
        StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => false,
    })
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

    /// A `vectorize` loop's body keeps its lanes: no guard in it.
    #[test]
    fn vectorised_loops_get_no_guards() {
        let t = backward(
            "y .= 0.0\nfor i = vectorize(_)\n  let a = x[i] * x[i + 1]\n    y[i] = min(a, 1.0)\n  end\nend\n",
        );
        assert!(!t.contains("if "), "{t}");
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
