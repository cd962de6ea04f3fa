//! Dead one-element fills: `fill(buf, q, q + 1, v)` whose element a later statement of the
//! same list overwrites before anything else reads or changes `buf`.
//!
//! A `SparseList` append makes room for its entry and fills the new value slot with the
//! fill value (the child `Element` level's `assemble`), then the write stores the entry's
//! value over it: `grow(C_val, C_qos + 1); fill(C_val, C_qos, C_qos + 1, 0.0); _v = w_val[j];
//! C_val[C_qos] = _v`. On SpGEMM's short output rows that fill, with its range test, was ~5%
//! of the kernel (BENCHMARKS.md, SpGEMM analysis). The growth stays: the store needs it.
//!
//! The fill goes only where that is provably the same: the statements between the two are
//! assignments, stores, growths, fills and sorts of other buffers, and checks (an `if` whose
//! branches hold only such statements or `fail`), none assigning a variable of `q`; the store
//! writes `buf[q]`, the same expression, and neither its index nor its value reads `buf`.
//! Every path from the fill either reaches the store or stops the kernel with an error (after
//! which no output is read), and the store's own bounds check covers the element the fill's
//! range test did.

use super::effects::{Effects, effects_expr, effects_stmts};
use super::{BinOp, BufId, Expr, Kernel, Stmt, VarId};
use crate::types::Scalar;
use std::collections::HashSet;

/// Drop every dead one-element fill of the kernel.
pub fn drop_dead_fills(k: &mut Kernel) {
    drop_in(&mut k.body);
}

fn drop_in(stmts: &mut Vec<Stmt>) {
    for s in stmts.iter_mut() {
        for b in s.bodies_mut() {
            drop_in(b);
        }
    }
    let dead: Vec<usize> = (0..stmts.len())
        .filter(|&f| overwritten(&stmts[f], &stmts[f + 1..]))
        .collect();
    for f in dead.into_iter().rev() {
        stmts.remove(f);
    }
}

/// Whether `fill` is a one-element fill whose element `rest` overwrites first (see the
/// module's conditions).
fn overwritten(fill: &Stmt, rest: &[Stmt]) -> bool {
    let Stmt::Fill {
        buf, start, stop, ..
    } = fill
    else {
        return false;
    };
    if !is_next(start, stop) {
        return false;
    }
    let mut index_vars = HashSet::new();
    vars_of(start, &mut index_vars);
    for s in rest {
        if let Stmt::Store {
            buf: b,
            index,
            value,
        } = s
            && b == buf
        {
            return index == start && !reads(index, *buf) && !reads(value, *buf);
        }
        if !passes(s, *buf, &index_vars) {
            return false;
        }
    }
    false
}

/// `stop` is `start + 1`.
fn is_next(start: &Expr, stop: &Expr) -> bool {
    matches!(stop, Expr::Binary(BinOp::Add, a, one)
        if **a == *start && **one == Expr::Const(Scalar::I64(1)))
}

/// A statement the fill's store may be moved past: straight-line (or a check), leaving
/// `buf` and the index's variables alone.
fn passes(s: &Stmt, buf: BufId, index_vars: &HashSet<VarId>) -> bool {
    let shape = match s {
        Stmt::Assign(..)
        | Stmt::Store { .. }
        | Stmt::Atomic { .. }
        | Stmt::Grow { .. }
        | Stmt::Fill { .. }
        | Stmt::Sort { .. }
        | Stmt::SortPerm { .. }
        | Stmt::Comment(_) => true,
        Stmt::If {
            then, otherwise, ..
        } => then
            .iter()
            .chain(otherwise)
            .all(|t| matches!(t, Stmt::Fail(_)) || passes(t, buf, index_vars)),
        _ => false,
    };
    if !shape {
        return false;
    }
    let mut fx = Effects::default();
    effects_stmts(std::slice::from_ref(s), &mut fx);
    !fx.changed.contains(&buf)
        && !fx.other_use.contains(&buf)
        && fx.accesses.iter().all(|(b, _)| *b != buf)
        && fx.assigned.is_disjoint(index_vars)
}

fn vars_of(e: &Expr, out: &mut HashSet<VarId>) {
    e.visit(&mut |x| {
        if let Expr::Var(v) = x {
            out.insert(*v);
        }
    });
}

/// `e` loads from, or otherwise looks at, `buf`.
fn reads(e: &Expr, buf: BufId) -> bool {
    let mut fx = Effects::default();
    effects_expr(e, &mut fx);
    fx.other_use.contains(&buf) || fx.accesses.iter().any(|(b, _)| *b == buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build as b;

    fn fill(buf: BufId, q: VarId) -> Stmt {
        Stmt::Fill {
            buf,
            start: b::var(q),
            stop: b::add(b::var(q), b::int(1)),
            value: Expr::Const(Scalar::F64(0.0)),
        }
    }

    fn if_(cond: Expr, then: Vec<Stmt>) -> Stmt {
        Stmt::If {
            cond,
            then,
            otherwise: vec![],
        }
    }

    fn run(mut body: Vec<Stmt>) -> Vec<Stmt> {
        drop_in(&mut body);
        body
    }

    #[test]
    fn a_fill_overwritten_after_loads_and_checks_goes() {
        let (val, other, q, t) = (BufId(1), BufId(2), VarId(0), VarId(1));
        let body = run(vec![
            Stmt::Grow {
                buf: val,
                len: b::add(b::var(q), b::int(1)),
            },
            fill(val, q),
            b::assign(t, b::load(other, b::var(t))),
            if_(b::lt(b::var(t), b::int(0)), vec![Stmt::Fail(0)]),
            b::store(val, b::var(q), b::var(t)),
        ]);
        assert_eq!(body.len(), 4);
        assert!(!body.iter().any(|s| matches!(s, Stmt::Fill { .. })));
    }

    #[test]
    fn a_fill_whose_element_may_be_read_or_missed_stays() {
        let (val, other, q, t) = (BufId(1), BufId(2), VarId(0), VarId(1));
        let store = || b::store(val, b::var(q), b::var(t));
        let cases = [
            // The element read before the store.
            vec![fill(val, q), b::assign(t, b::load(val, b::var(q))), store()],
            // The store's value reads it.
            vec![
                fill(val, q),
                b::store(val, b::var(q), b::load(val, b::var(q))),
            ],
            // The index moves before the store.
            vec![
                fill(val, q),
                b::assign(q, b::add(b::var(q), b::int(1))),
                store(),
            ],
            // The store may be skipped.
            vec![fill(val, q), if_(b::var(t), vec![Stmt::Break]), store()],
            // The store is conditional.
            vec![fill(val, q), if_(b::var(t), vec![store()])],
            // Another element.
            vec![fill(val, q), b::store(val, b::var(t), b::int(1))],
            // A wider fill.
            vec![
                Stmt::Fill {
                    buf: val,
                    start: b::var(q),
                    stop: b::add(b::var(q), b::int(2)),
                    value: Expr::Const(Scalar::F64(0.0)),
                },
                store(),
            ],
            // A loop between.
            vec![
                fill(val, q),
                Stmt::For {
                    var: t,
                    start: b::int(0),
                    stop: b::int(3),
                    body: vec![b::store(other, b::var(t), b::int(0))],
                },
                store(),
            ],
            // The length looked at between.
            vec![fill(val, q), b::assign(t, Expr::Len(val)), store()],
        ];
        for case in cases {
            let n = case.len();
            assert_eq!(run(case).len(), n);
        }
    }

    #[test]
    fn fills_inside_loop_bodies_are_found() {
        let (val, q, t) = (BufId(1), VarId(0), VarId(1));
        let body = run(vec![Stmt::While {
            cond: b::boolean(true),
            body: vec![
                fill(val, q),
                b::store(val, b::var(q), b::var(t)),
                b::assign(q, b::add(b::var(q), b::int(1))),
                Stmt::Break,
            ],
        }]);
        let Stmt::While { body, .. } = &body[0] else {
            panic!("the loop stays")
        };
        assert_eq!(body.len(), 3);
    }
}
