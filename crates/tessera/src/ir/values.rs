//! Loads that a statement list repeats, named so that `recheck` loads them once.
//!
//! The lowering writes each access where its statement reads it: GAT's gradient reads
//! `t[j]` four times in each of the five statements that finish its partial sums, each load
//! with its own bounds check, and a store to another output between two statements keeps
//! either backend from reusing a load (the C compiler must assume any two buffers may
//! overlap; Cranelift does not merge loads). `recheck` shares a value only when a variable
//! holds it, so this pass gives those loads variables: in a statement that reads some load
//! again (in itself, or in a later statement of its list before anything changes the
//! buffer or a variable of the index), every load becomes `_ld = buf[index]` just before the
//! statement, in the order the backends evaluate them (an index's loads before the load,
//! operands left to right, a store's index before its value), so the same load faults first
//! with the same state. `recheck` then turns the repeats into copies of the first.
//!
//! Left alone: conditions and loop bounds, bodies of parallel ranges, and the bodies of
//! loops marked for SIMD lanes (a backend's lane code wants them as they are).
//!
//! [`name_repeated_values`] does the same for the calls of float functions that are then
//! repeated (GAT's `exp(max(s + t, 0.2 * (s + t)))` in each statement, now of the same
//! variables; arithmetic the compilers merge themselves, calls they do not): one that a later
//! statement (or the same one) evaluates again, with no variable it reads assigned in between,
//! is assigned to a variable just before its first statement and read from it after. Pure expressions read no buffer and never fault (the IR's integer division
//! by zero is zero), so evaluating one a statement earlier changes nothing but the time; an
//! operand of a select is evaluated whichever is selected, as the IR defines a select.

use super::effects::{Effects, effects_stmts, new_var};
use super::{BinOp, Expr, Kernel, Stmt, UnOp, VarId};

/// How far ahead in a list a repeat is looked for (statements).
const WINDOW: usize = 64;

pub fn name_repeated_loads(k: &mut Kernel) {
    every_list(k, list);
}

/// Run `f` on every statement list of `k`, innermost first, but the bodies of parallel
/// ranges and of loops marked for SIMD lanes.
fn every_list(k: &mut Kernel, f: fn(&mut Kernel, &mut Vec<Stmt>)) {
    fn go(
        k: &mut Kernel,
        stmts: &mut Vec<Stmt>,
        lanes: &[VarId],
        f: fn(&mut Kernel, &mut Vec<Stmt>),
    ) {
        for s in stmts.iter_mut() {
            let skip = match s {
                Stmt::Chunked(_) => true,
                Stmt::For { var, .. } => lanes.contains(var),
                _ => false,
            };
            if !skip {
                for b in s.bodies_mut() {
                    go(k, b, lanes, f);
                }
            }
        }
        f(k, stmts);
    }
    let mut body = std::mem::take(&mut k.body);
    let lanes = k.vectorized.clone();
    go(k, &mut body, &lanes, f);
    k.body = body;
}

/// Each statement's effects.
fn effects_of(stmts: &[Stmt]) -> Vec<Effects> {
    stmts
        .iter()
        .map(|s| {
            let mut fx = Effects::default();
            effects_stmts(std::slice::from_ref(s), &mut fx);
            fx
        })
        .collect()
}

fn list(k: &mut Kernel, stmts: &mut Vec<Stmt>) {
    let loads: Vec<Vec<Expr>> = stmts.iter().map(own_loads).collect();
    if loads.iter().all(|l| l.is_empty()) {
        return;
    }
    let effects = effects_of(stmts);
    let mut name = vec![false; stmts.len()];
    for a in 0..stmts.len() {
        for (x, l) in loads[a].iter().enumerate() {
            if loads[a][x + 1..].contains(l) {
                name[a] = true;
            }
            if changes(&effects[a], l) {
                continue;
            }
            for b in a + 1..stmts.len().min(a + 1 + WINDOW) {
                if loads[b].contains(l) {
                    name[a] = true;
                    name[b] = true;
                    break;
                }
                if changes(&effects[b], l) {
                    break;
                }
            }
        }
    }
    if !name.contains(&true) {
        return;
    }
    let mut out = Vec::with_capacity(stmts.len());
    for (s, named) in std::mem::take(stmts).into_iter().zip(name) {
        let mut s = s;
        if named {
            for e in s.own_exprs_mut() {
                split_loads(k, e, &mut out);
            }
        }
        out.push(s);
    }
    *stmts = out;
}

/// The loads a statement evaluates itself, if it is an assignment, a store or an update.
fn own_loads(s: &Stmt) -> Vec<Expr> {
    let mut out = vec![];
    if matches!(
        s,
        Stmt::Assign(..) | Stmt::Store { .. } | Stmt::Atomic { .. }
    ) {
        for e in s.own_exprs() {
            e.visit(&mut |x| {
                if matches!(x, Expr::Load { .. }) {
                    out.push(x.clone());
                }
            });
        }
    }
    out
}

/// Whether a statement with effects `fx` may change the value of the load `l` (its buffer,
/// or a variable its index reads).
fn changes(fx: &Effects, l: &Expr) -> bool {
    let mut hit = false;
    l.visit(&mut |x| {
        hit |= match x {
            Expr::Var(v) => fx.assigned.contains(v),
            Expr::Load { buf, .. } | Expr::Len(buf) => fx.changed.contains(buf),
            Expr::SearchGe { buf, .. } | Expr::HashFind { table: buf, .. } => {
                fx.changed.contains(buf)
            }
            _ => false,
        }
    });
    hit
}

/// Replace every load of `e` by a new variable assigned just before (pushed to `out`), in
/// evaluation order: children first, left to right.
fn split_loads(k: &mut Kernel, e: &mut Expr, out: &mut Vec<Stmt>) {
    for c in e.children_mut() {
        split_loads(k, c, out);
    }
    if let Expr::Load { buf, .. } = e {
        let v = new_var(k, "_ld", k.buf_elem(*buf));
        out.push(Stmt::Assign(v, e.clone()));
        *e = Expr::Var(v);
    }
}

/// Name the pure expressions a statement list repeats (see the module's documentation).
pub fn name_repeated_values(k: &mut Kernel) {
    every_list(k, values);
}

fn values(k: &mut Kernel, stmts: &mut Vec<Stmt>) {
    let all = std::mem::take(stmts);
    let effects = effects_of(&all);
    let mut avail: Vec<(Expr, VarId)> = vec![];
    let mut out: Vec<Stmt> = Vec::with_capacity(all.len());
    for (a, s) in all.iter().enumerate() {
        let mut s = s.clone();
        if is_plain(&s) {
            for e in s.own_exprs_mut() {
                substitute(e, &avail);
            }
            // The outermost repeated calls first, each named once.
            loop {
                let mut found: Option<Expr> = None;
                for e in s.own_exprs() {
                    repeated(e, &s, (&all, &effects), a, &mut found);
                }
                let Some(x) = found else {
                    break;
                };
                let v = new_var(k, "_cv", k.type_of(&x));
                out.push(Stmt::Assign(v, x.clone()));
                avail.push((x, v));
                for e in s.own_exprs_mut() {
                    substitute(e, &avail);
                }
            }
        }
        avail.retain(|(x, _)| !reads_any_var(x, &effects[a]));
        out.push(s);
    }
    *stmts = out;
}

fn is_plain(s: &Stmt) -> bool {
    matches!(
        s,
        Stmt::Assign(..) | Stmt::Store { .. } | Stmt::Atomic { .. }
    )
}

/// Replace, outermost first, every subexpression of `e` a variable of `avail` holds.
fn substitute(e: &mut Expr, avail: &[(Expr, VarId)]) {
    if let Some((_, v)) = avail.iter().find(|(x, _)| x == e) {
        *e = Expr::Var(*v);
        return;
    }
    for c in e.children_mut() {
        substitute(c, avail);
    }
}

/// The first (outermost, leftmost) pure call in `e` (a function the backends call, which
/// neither compiler merges: `exp`, `log` and the other float functions) that `s`, the `a`-th
/// statement of `all`, holds twice, or that a later statement evaluates again before a
/// variable it reads changes.
fn repeated(
    e: &Expr,
    s: &Stmt,
    (all, effects): (&[Stmt], &[Effects]),
    a: usize,
    found: &mut Option<Expr>,
) {
    if found.is_some() {
        return;
    }
    if is_call(e) && pure(e) {
        let mut in_s = 0;
        for o in s.own_exprs() {
            o.visit(&mut |x| in_s += usize::from(x == e));
        }
        let mut again = in_s > 1;
        if !again && !reads_any_var(e, &effects[a]) {
            for b in a + 1..all.len().min(a + 1 + WINDOW) {
                if is_plain(&all[b]) {
                    for o in all[b].own_exprs() {
                        o.visit(&mut |x| again |= x == e);
                    }
                }
                if again || reads_any_var(e, &effects[b]) {
                    break;
                }
            }
        }
        if again {
            *found = Some(e.clone());
            return;
        }
    }
    for c in e.children() {
        repeated(c, s, (all, effects), a, found);
    }
}

fn is_call(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Unary(UnOp::Exp | UnOp::Log | UnOp::Math(_), _) | Expr::Binary(BinOp::Math(_), _, _)
    )
}

/// No buffer read (so nothing that may fault or change under a store).
fn pure(e: &Expr) -> bool {
    let mut ok = true;
    e.visit(&mut |x| {
        ok &= !matches!(
            x,
            Expr::Load { .. } | Expr::Len(_) | Expr::SearchGe { .. } | Expr::HashFind { .. }
        )
    });
    ok
}

fn reads_any_var(e: &Expr, fx: &Effects) -> bool {
    let mut hit = false;
    e.visit(&mut |x| hit |= matches!(x, Expr::Var(v) if fx.assigned.contains(v)));
    hit
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::BufId;
    use crate::ir::build as b;
    use crate::types::ElemType;

    /// Buffers t, d (f64); variables j, x, y (j i64).
    fn kernel(body: Vec<Stmt>) -> Kernel {
        b::test_kernel(
            &[("t", ElemType::F64), ("d", ElemType::F64)],
            false,
            &[
                ("j", ElemType::I64),
                ("x", ElemType::F64),
                ("y", ElemType::F64),
            ],
            body,
        )
    }

    const T: BufId = BufId(0);
    const D: BufId = BufId(1);
    const J: VarId = VarId(0);
    const X: VarId = VarId(1);
    const Y: VarId = VarId(2);

    fn t_j() -> Expr {
        b::load(T, b::var(J))
    }

    /// A load read twice in one statement and again after a store to another buffer is
    /// named in both statements; `recheck` then loads it once.
    #[test]
    fn repeats_across_a_store_to_another_buffer_are_named() {
        let mut k = kernel(vec![
            Stmt::Assign(X, b::add(t_j(), t_j())),
            Stmt::Store {
                buf: D,
                index: b::var(J),
                value: b::add(b::load(D, b::var(J)), t_j()),
            },
            Stmt::Assign(Y, b::mul(t_j(), b::var(X))),
        ]);
        name_repeated_loads(&mut k);
        crate::ir::recheck::remove_rechecks(&mut k);
        let mut loads_of_t = 0;
        crate::ir::walk::walk_stmts(&k.body, &mut |s| {
            for e in s.own_exprs() {
                e.visit(&mut |x| {
                    loads_of_t += usize::from(matches!(x, Expr::Load { buf, .. } if *buf == T));
                });
            }
        });
        assert_eq!(loads_of_t, 1, "{k}");
    }

    /// A store to the loaded buffer, or an assignment of the index, ends the repeat.
    #[test]
    fn a_change_in_between_keeps_both_loads() {
        for change in [
            Stmt::Store {
                buf: T,
                index: b::int(0),
                value: b::var(X),
            },
            Stmt::Assign(J, b::int(1)),
        ] {
            let mut k = kernel(vec![Stmt::Assign(X, t_j()), change, Stmt::Assign(Y, t_j())]);
            let before = k.clone();
            name_repeated_loads(&mut k);
            assert_eq!(k, before);
        }
    }

    /// Loads are named in evaluation order: a gather's index first, then left to right.
    #[test]
    fn loads_are_named_in_evaluation_order() {
        let gather = b::load(T, b::cast(ElemType::I64, b::load(D, b::var(J))));
        let mut k = kernel(vec![Stmt::Assign(
            X,
            b::add(gather.clone(), b::add(t_j(), gather)),
        )]);
        name_repeated_loads(&mut k);
        let order: Vec<BufId> = k
            .body
            .iter()
            .filter_map(|s| match s {
                Stmt::Assign(_, Expr::Load { buf, .. }) => Some(*buf),
                _ => None,
            })
            .collect();
        assert_eq!(order, [D, T, T, D, T], "{k}");
    }

    /// A call two statements repeat is computed once, before the first; one whose operand
    /// is assigned in between is not.
    #[test]
    fn repeated_pure_expressions_are_computed_once() {
        let big = || Expr::Unary(UnOp::Exp, Box::new(b::add(b::var(X), b::var(Y))));
        let mut k = kernel(vec![
            Stmt::Store {
                buf: D,
                index: b::var(J),
                value: big(),
            },
            Stmt::Store {
                buf: T,
                index: b::var(J),
                value: b::add(big(), b::var(X)),
            },
            Stmt::Assign(X, big()),
            Stmt::Assign(Y, big()),
        ]);
        name_repeated_values(&mut k);
        let assigns_of_big = k
            .body
            .iter()
            .filter(|s| matches!(s, Stmt::Assign(_, e) if *e == big()))
            .count();
        // Named once before the first store; the last statement's operands changed.
        assert_eq!(assigns_of_big, 2, "{k}");
        assert!(
            matches!(&k.body[0], Stmt::Assign(_, e) if *e == big()),
            "{k}"
        );
        assert!(
            matches!(k.body.last(), Some(Stmt::Assign(Y, e)) if *e == big()),
            "{k}"
        );
    }
}
