//! Loop-invariant code motion for innermost `for` loops: a computation whose value cannot
//! change while the loop runs (`exp(s[i] + t[j])` inside the loop over the features `f` of an
//! attention layer, `i * n` in an address) is computed once, before the loop, into a variable.
//! The lowering emits each statement's expression whole inside its loop, and backends cannot
//! move most of it out themselves: `exp` and `log` are calls into the runtime, and a load may
//! alias any store of the loop as far as they know.
//!
//! The pass must not change which fault a kernel reports, or make one where there was none:
//! - the loop is wrapped in `if start < stop`, so nothing hoisted runs when the loop would not
//!   (the `else` sets the loop variable to `start`, as a loop that never ran leaves it);
//! - an expression that can fault (a load, a search, a hash lookup) is hoisted only from the
//!   statements the first iteration runs before anything can fail or break, and only where the
//!   statement evaluates it unconditionally; so the first iteration would have evaluated it
//!   first anyway, at the same place relative to every check;
//! - other expressions (arithmetic, `exp`, casts, comparisons: no IR arithmetic traps) are
//!   hoisted from anywhere in the body.
//!
//! Only compound expressions are hoisted (a variable, a constant or a buffer length is already
//! as cheap as a variable), each distinct one once.

use super::effects::{Effects, effects_stmts, invariant, new_var};
use super::{BinOp, Expr, Kernel, Stmt};

pub fn hoist_invariants(k: &mut Kernel) {
    super::innermost::rewrite_innermost_loops(k, &mut hoist_loop);
}

fn hoist_loop(k: &mut Kernel, l: &Stmt) -> Option<Vec<Stmt>> {
    let Stmt::For {
        var,
        start,
        stop,
        body,
    } = l
    else {
        return None;
    };
    let mut fx = Effects::default();
    effects_stmts(std::slice::from_ref(l), &mut fx);
    let mut found: Vec<Expr> = vec![];
    // Loads are safe to move out of the statements before the first that may fail or break.
    let mut loads_ok = true;
    for s in body {
        if may_stop(s) {
            loads_ok = false;
        }
        collect_stmt(s, loads_ok, &fx, &mut found);
    }
    let switches = body.iter().any(|s| is_switch(s, &fx));
    if found.is_empty() && !switches {
        return None;
    }
    let mut hoisted = vec![];
    let mut body = body.clone();
    for e in found {
        let t = new_var(k, "invariant", k.type_of(&e));
        for s in body.iter_mut() {
            replace_stmt(s, &e, &Expr::Var(t));
        }
        hoisted.push(Stmt::Assign(t, e));
    }
    let looped = |body: Vec<Stmt>| Stmt::For {
        var: *var,
        start: start.clone(),
        stop: stop.clone(),
        body,
    };
    hoisted.push(match unswitch(&body, &fx, UNSWITCH_MAX) {
        Some((any, fast)) => {
            // The copy without the checks may have loads to hoist that the checks kept in:
            // with no check before them, the first iteration evaluates them first (a load of
            // `x[i.0 * 4 + i.1, f]` in the loop over `o` of a split loop, whose check of `f`
            // came before it). Its own pass wraps it in `if start < stop` again, harmless.
            let fast_loop = looped(fast);
            let fast = hoist_loop(k, &fast_loop).unwrap_or_else(|| vec![fast_loop]);
            Stmt::If {
                cond: any,
                then: vec![looped(body)],
                otherwise: fast,
            }
        }
        None => looped(body),
    });
    Some(vec![Stmt::If {
        cond: Expr::Binary(BinOp::Lt, Box::new(start.clone()), Box::new(stop.clone())),
        then: hoisted,
        otherwise: vec![Stmt::Assign(*var, start.clone())],
    }])
}

/// The loops the unswitching copies hold at most this many statements: the copy doubles the
/// loop's native code, worth it for a short body whose checks keep it from being vectorised.
const UNSWITCH_MAX: usize = 256;

/// Whether `s` is an `if` without `else` on a loop-invariant condition that cannot fault (a
/// check of a literal index against a dimension, `if c_dim1 <= 0 { fail }`, after hoisting).
fn is_switch(s: &Stmt, fx: &Effects) -> bool {
    matches!(s, Stmt::If { cond, otherwise, .. }
        if otherwise.is_empty() && invariant(cond, fx) && !may_fault(cond))
}

/// Loop unswitching: while its condition is false, an `if` of [`is_switch`] does nothing, and
/// whether every such condition is false is known before the loop. Returns that the loop must
/// keep them (the disjunction of their conditions) and the body without them, for a copy of
/// the loop that runs when it need not: exactly what the loop did, with its checks outside.
pub(super) fn unswitch(body: &[Stmt], fx: &Effects, max: usize) -> Option<(Expr, Vec<Stmt>)> {
    let mut any: Option<Expr> = None;
    let mut fast = vec![];
    for s in body {
        match s {
            Stmt::If { cond, .. } if is_switch(s, fx) => {
                any = Some(match any {
                    None => cond.clone(),
                    Some(a) => Expr::Binary(BinOp::Or, Box::new(a), Box::new(cond.clone())),
                });
            }
            s => fast.push(s.clone()),
        }
    }
    let size = Kernel::body_size(body);
    any.filter(|_| size <= max).map(|a| (a, fast))
}

/// Whether `s` may end the loop early or fail (a `Fail` or `Break` anywhere in it).
fn may_stop(s: &Stmt) -> bool {
    matches!(s, Stmt::Fail(_) | Stmt::Break) || s.bodies().into_iter().flatten().any(may_stop)
}

/// Collect the hoistable expressions of `s`: its own expressions are evaluated whenever it
/// runs (loads allowed if `loads_ok`); those of its branches only sometimes (no loads).
fn collect_stmt(s: &Stmt, loads_ok: bool, fx: &Effects, found: &mut Vec<Expr>) {
    for e in s.own_exprs() {
        collect_expr(e, loads_ok, fx, found);
    }
    for body in s.bodies() {
        for inner in body {
            collect_stmt(inner, false, fx, found);
        }
    }
}

fn collect_expr(e: &Expr, loads_ok: bool, fx: &Effects, found: &mut Vec<Expr>) {
    let compound = !matches!(e, Expr::Const(_) | Expr::Var(_) | Expr::Len(_));
    if compound && invariant(e, fx) && (loads_ok || !may_fault(e)) {
        if !found.contains(e) {
            found.push(e.clone());
        }
        return;
    }
    for c in e.children() {
        collect_expr(c, loads_ok, fx, found);
    }
}

/// Whether evaluating `e` can fault: it reads a buffer.
fn may_fault(e: &Expr) -> bool {
    let mut reads = false;
    e.visit(&mut |x| {
        reads |= matches!(
            x,
            Expr::Load { .. } | Expr::SearchGe { .. } | Expr::HashFind { .. }
        );
    });
    reads
}

fn replace_stmt(s: &mut Stmt, from: &Expr, to: &Expr) {
    for e in s.own_exprs_mut() {
        replace_expr(e, from, to);
    }
    for body in s.bodies_mut() {
        for inner in body.iter_mut() {
            replace_stmt(inner, from, to);
        }
    }
}

pub(super) fn replace_expr(e: &mut Expr, from: &Expr, to: &Expr) {
    if e == from {
        *e = to.clone();
        return;
    }
    for c in e.children_mut() {
        replace_expr(c, from, to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build as b;
    use crate::ir::{BufId, UnOp, VarId};
    use crate::types::ElemType;

    /// Buffers y, x, s (f64); variables j (the loop), i (outside).
    fn kernel(body: Vec<Stmt>) -> Kernel {
        let f = ElemType::F64;
        b::test_kernel(
            &[("y", f), ("x", f), ("s", f)],
            false,
            &[("j", ElemType::I64), ("i", ElemType::I64)],
            body,
        )
    }

    const Y: BufId = BufId(0);
    const X: BufId = BufId(1);
    const S: BufId = BufId(2);
    const J: VarId = VarId(0);
    const I: VarId = VarId(1);

    fn exp_s_i() -> Expr {
        Expr::Unary(UnOp::Exp, Box::new(b::load(S, b::var(I))))
    }

    fn loop_of(body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var: J,
            start: b::int(0),
            stop: b::int(8),
            body,
        }
    }

    /// `y[j] = y[j] + x[j] * exp(s[i])`
    fn update() -> Stmt {
        b::store(
            Y,
            b::var(J),
            b::add(
                b::load(Y, b::var(J)),
                b::mul(b::load(X, b::var(J)), exp_s_i()),
            ),
        )
    }

    #[test]
    fn an_invariant_call_is_computed_once_before_a_loop_that_runs() {
        let mut k = kernel(vec![loop_of(vec![update()])]);
        hoist_invariants(&mut k);
        let shown = k.to_string();
        assert!(
            shown.contains("if (0 < 8) {\n    invariant = exp(s[i]);"),
            "{shown}"
        );
        assert!(
            shown.contains("y[j] = y[j] + (x[j] * invariant);"),
            "{shown}"
        );
        // A loop that does not run leaves its variable at `start`, as before.
        assert!(shown.contains("} else {\n    j = 0;\n  }"), "{shown}");
        assert!(k.check().is_ok());
    }

    #[test]
    fn loads_after_a_possible_failure_stay_in_the_loop() {
        let check = b::if_(b::lt(b::var(I), b::int(0)), vec![Stmt::Fail(0)]);
        let mut k = kernel(vec![loop_of([check, vec![update()]].concat())]);
        hoist_invariants(&mut k);
        let shown = k.to_string();
        // In the loop that keeps the check, that is; the unswitched copy without it has no
        // failure before the load, so there the load moves out (after the `else`).
        let (checked, fast) = shown.split_once("} else {").expect("unswitched");
        assert!(!checked.contains("= exp(s[i])"), "{shown}");
        assert!(
            checked.contains("y[j] = y[j] + (x[j] * exp(s[i]));"),
            "{shown}"
        );
        assert!(fast.contains("= exp(s[i]);"), "{shown}");
        // Arithmetic that cannot fault moves anyway (here the check's condition).
        assert!(shown.contains("invariant_2 = i < 0;"), "{shown}");
        let scaled = b::store(Y, b::var(J), b::mul(b::var(I), b::int(3)));
        let check = b::if_(b::lt(b::var(I), b::int(0)), vec![Stmt::Fail(0)]);
        let mut k = kernel(vec![loop_of([check, vec![scaled]].concat())]);
        k.bufs[0].elem = ElemType::I64;
        hoist_invariants(&mut k);
        assert!(k.to_string().contains("= i * 3;"), "{k}");
    }

    /// The `for` loops of `body`, outermost first, nested ones included.
    fn loops(body: &[Stmt]) -> Vec<&Stmt> {
        let mut out = vec![];
        for s in body {
            if matches!(s, Stmt::For { .. }) {
                out.push(s);
            }
            for b in s.bodies() {
                out.extend(loops(b));
            }
        }
        out
    }

    fn fails(body: &[Stmt]) -> bool {
        body.iter()
            .any(|s| matches!(s, Stmt::Fail(_)) || s.bodies().into_iter().any(|b| fails(b)))
    }

    #[test]
    fn invariant_checks_are_unswitched_out_of_a_copy_of_the_loop() {
        // `if i < 0 { fail }` each iteration: the loop runs as it was when `i < 0`, and as a
        // copy without the check otherwise.
        let check = b::if_(b::lt(b::var(I), b::int(0)), vec![Stmt::Fail(0)]);
        let mut k = kernel(vec![loop_of([check, vec![update()]].concat())]);
        hoist_invariants(&mut k);
        let found = loops(&k.body);
        assert_eq!(found.len(), 2, "{k}");
        let bodies: Vec<&Vec<Stmt>> = found
            .iter()
            .map(|l| match l {
                Stmt::For { body, .. } => body,
                _ => unreachable!(),
            })
            .collect();
        assert!(fails(bodies[0]), "the checked loop keeps its check:\n{k}");
        assert!(!fails(bodies[1]), "the copy has none:\n{k}");
        assert!(
            k.to_string().contains("if (invariant_2) {"),
            "the copy runs only when the check cannot fire:\n{k}"
        );
        // A check whose condition changes in the loop stays in the only loop.
        let check = b::if_(b::lt(b::var(J), b::int(0)), vec![Stmt::Fail(0)]);
        let mut k = kernel(vec![loop_of([check, vec![update()]].concat())]);
        hoist_invariants(&mut k);
        assert_eq!(loops(&k.body).len(), 1, "{k}");
    }

    #[test]
    fn values_that_change_in_the_loop_stay() {
        // `s` is written in the loop, `j` is the loop's own variable.
        let write_s = b::store(S, b::var(I), b::load(X, b::var(J)));
        let mut k = kernel(vec![loop_of(vec![write_s, update()])]);
        hoist_invariants(&mut k);
        assert!(!k.to_string().contains("invariant"), "{k}");
    }
}
