//! Appends in counted loops grown once: `for q = s..e { grow(buf, c + 1); ...; c = c + 1 }`,
//! a loop that appends one element at the cursor `c` on every iteration, grows `buf` to
//! `c + (e - s)` before the loop instead of testing its capacity on every iteration.
//!
//! A sparse product's copy-out (each row's listed workspace slots appended to a `SparseList`
//! output's coordinates and values) tested two capacities per entry; on short rows that was
//! 8-13% of the product (BENCHMARKS.md, SpGEMM analysis).
//!
//! The pass applies only where the growths inside become no-ops (anything else stays as it is):
//! - the `grow(buf, c + 1)` is a statement of the loop body itself, not nested, before the
//!   body's one assignment to `c`, `c = c + 1`, itself a statement of the body: in iteration
//!   `k` the cursor is `c0 + k` at the growth, so no growth inside asks for more than
//!   `c0 + (e - s)`, and buffers only ever grow;
//! - nothing else in the body assigns `c`, the loop variable, or a variable of `s` or `e`,
//!   and neither bound reads memory (`s` and `e` evaluated before the loop are then its
//!   bounds, whatever the growth did), and no `break` leaves the
//!   loop: every iteration appends, so the loop ends with `buf` as long as the growth before
//!   it made it, and no loop that stops early has grown its buffer for the iterations it
//!   skipped. (A failing iteration stops the kernel; a failed kernel's outputs are not read.)
//!
//! Elements a growth adds are zero either way, and a buffer's length beyond its level's
//! count is never read as data. `TESSERA_NO_GROW_HOIST` (any value) turns the pass off, for
//! measuring (`run::late_passes`).

use super::{BinOp, BufId, Expr, Kernel, Stmt, VarId, walk};
use crate::ir::build as b;
use crate::types::Scalar;
use std::collections::HashSet;

/// Hoist the growths of every loop of the shape above.
pub fn hoist_growths(k: &mut Kernel) {
    hoist_in(&mut k.body);
}

fn hoist_in(stmts: &mut Vec<Stmt>) {
    for s in stmts.iter_mut() {
        for body in s.bodies_mut() {
            hoist_in(body);
        }
    }
    let mut out = Vec::with_capacity(stmts.len());
    for mut s in std::mem::take(stmts) {
        if let Stmt::For {
            var,
            start,
            stop,
            body,
        } = &mut s
        {
            let grown = hoistable(*var, start, stop, body);
            if !grown.is_empty() {
                let trip = b::sub(stop.clone(), start.clone());
                let mut before = vec![];
                for (buf, cursor, _) in &grown {
                    before.push(Stmt::Grow {
                        buf: *buf,
                        len: b::add(b::var(*cursor), trip.clone()),
                    });
                }
                out.extend(b::if_(b::lt(start.clone(), stop.clone()), before));
                // Only the growths before their cursor's step: one after it asks for one more.
                let mut at = 0;
                body.retain(|t| {
                    let keep = !grown.iter().any(|&(g, c, step)| {
                        at < step
                            && matches!(t, Stmt::Grow { buf, len } if *buf == g && is_next(len, c))
                    });
                    at += 1;
                    keep
                });
            }
        }
        out.push(s);
    }
    *stmts = out;
}

/// The `(buffer, cursor, index of the cursor's step in the body)` of the loop's growths that
/// can go before it.
fn hoistable(var: VarId, start: &Expr, stop: &Expr, body: &[Stmt]) -> Vec<(BufId, VarId, usize)> {
    if breaks(body) {
        return vec![];
    }
    let mut assigned = HashSet::new();
    walk::assigned(body, &mut assigned);
    let mut bound_vars = HashSet::new();
    let mut reads_memory = false;
    for e in [start, stop] {
        e.visit(&mut |x| match x {
            Expr::Var(v) => {
                bound_vars.insert(*v);
            }
            // The loop evaluates its bounds after the growth: one that reads a buffer (its
            // length, say) could see it grown.
            Expr::Load { .. } | Expr::Len(_) | Expr::SearchGe { .. } | Expr::HashFind { .. } => {
                reads_memory = true
            }
            _ => {}
        });
    }
    if reads_memory || assigned.contains(&var) || !assigned.is_disjoint(&bound_vars) {
        return vec![];
    }
    let mut found = vec![];
    for (at, s) in body.iter().enumerate() {
        let Stmt::Grow { buf, len } = s else {
            continue;
        };
        let Some(cursor) = next_of(len) else {
            continue;
        };
        // The cursor's one assignment, `c = c + 1`, after the growth, at the top level.
        let steps: Vec<usize> = body
            .iter()
            .enumerate()
            .filter(|(_, t)| matches!(t, Stmt::Assign(v, e) if *v == cursor && is_next(e, cursor)))
            .map(|(k, _)| k)
            .collect();
        if steps.len() != 1 || steps[0] < at || count_assignments(body, cursor) != 1 {
            continue;
        }
        if !found.contains(&(*buf, cursor, steps[0])) {
            found.push((*buf, cursor, steps[0]));
        }
    }
    found
}

/// `e` is `c + 1` for a variable `c`: that variable.
fn next_of(e: &Expr) -> Option<VarId> {
    match e {
        Expr::Binary(BinOp::Add, a, one) if **one == Expr::Const(Scalar::I64(1)) => match **a {
            Expr::Var(v) => Some(v),
            _ => None,
        },
        _ => None,
    }
}

fn is_next(e: &Expr, c: VarId) -> bool {
    next_of(e) == Some(c)
}

/// Assignments to `v` anywhere in `body` (loops' own variables included).
fn count_assignments(body: &[Stmt], v: VarId) -> usize {
    let mut n = 0;
    walk::walk_stmts(body, &mut |s| match s {
        Stmt::Assign(w, _) | Stmt::For { var: w, .. } if *w == v => n += 1,
        _ => {}
    });
    n
}

/// A `break` that leaves the loop whose body this is (not one of a nested loop).
fn breaks(body: &[Stmt]) -> bool {
    body.iter().any(|s| match s {
        Stmt::Break => true,
        Stmt::For { .. } | Stmt::While { .. } | Stmt::Chunked(_) => false,
        other => other.bodies().into_iter().any(|b| breaks(b)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(buf: BufId, c: VarId) -> Vec<Stmt> {
        vec![
            Stmt::Grow {
                buf,
                len: b::add(b::var(c), b::int(1)),
            },
            b::store(buf, b::var(c), b::int(7)),
            b::assign(c, b::add(b::var(c), b::int(1))),
        ]
    }

    fn for_(var: VarId, stop: Expr, body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var,
            start: b::int(0),
            stop,
            body,
        }
    }

    fn grows_inside(s: &[Stmt]) -> usize {
        let mut n = 0;
        walk::walk_stmts(s, &mut |t| {
            if let Stmt::For { body, .. } = t {
                n += body
                    .iter()
                    .filter(|x| matches!(x, Stmt::Grow { .. }))
                    .count();
            }
        });
        n
    }

    #[test]
    fn an_append_on_every_iteration_grows_before_the_loop() {
        let (buf, c, q, e) = (BufId(1), VarId(0), VarId(1), VarId(2));
        let mut body = vec![for_(q, b::var(e), append(buf, c))];
        hoist_in(&mut body);
        assert_eq!(body.len(), 2, "{body:?}");
        let Stmt::If { then, .. } = &body[0] else {
            panic!("a guarded growth first: {body:?}")
        };
        assert!(matches!(&then[0], Stmt::Grow { buf: g, len } if *g == buf
            && *len == b::add(b::var(c), b::sub(b::var(e), b::int(0)))));
        assert_eq!(grows_inside(&body), 0);
    }

    #[test]
    fn appends_that_may_not_happen_keep_their_growth() {
        let (buf, c, q, e, t) = (BufId(1), VarId(0), VarId(1), VarId(2), VarId(3));
        let conditional = {
            let mut a = append(buf, c);
            let step = a.pop().unwrap();
            a.push(Stmt::If {
                cond: b::var(t),
                then: vec![step],
                otherwise: vec![],
            });
            a
        };
        let with_break = {
            let mut a = append(buf, c);
            a.push(Stmt::If {
                cond: b::var(t),
                then: vec![Stmt::Break],
                otherwise: vec![],
            });
            a
        };
        let twice = {
            let mut a = append(buf, c);
            a.extend(append(buf, c));
            a
        };
        let step_first = {
            let mut a = append(buf, c);
            a.rotate_right(1);
            a
        };
        let bound_moves = {
            let mut a = append(buf, c);
            a.push(b::assign(e, b::add(b::var(e), b::int(1))));
            a
        };
        for case in [conditional, with_break, twice, step_first, bound_moves] {
            let mut body = vec![for_(q, b::var(e), case)];
            let before = body.clone();
            hoist_in(&mut body);
            assert_eq!(format!("{body:?}"), format!("{before:?}"));
        }
    }

    #[test]
    fn a_growth_after_the_step_stays_in_the_loop() {
        let (buf, c, q, e) = (BufId(1), VarId(0), VarId(1), VarId(2));
        let mut inner = append(buf, c);
        inner.push(Stmt::Grow {
            buf,
            len: b::add(b::var(c), b::int(1)),
        });
        let mut body = vec![for_(q, b::var(e), inner)];
        hoist_in(&mut body);
        assert_eq!(body.len(), 2, "{body:?}");
        let Stmt::For { body: inside, .. } = &body[1] else {
            panic!("the loop second: {body:?}")
        };
        assert!(
            matches!(inside.last(), Some(Stmt::Grow { .. })),
            "{inside:?}"
        );
        assert_eq!(grows_inside(&body), 1);
    }

    #[test]
    fn a_break_of_an_inner_loop_does_not_count() {
        let (buf, c, q, r, e) = (BufId(1), VarId(0), VarId(1), VarId(2), VarId(3));
        let mut inner = append(buf, c);
        inner.push(for_(r, b::int(3), vec![Stmt::Break]));
        let mut body = vec![for_(q, b::var(e), inner)];
        hoist_in(&mut body);
        assert_eq!(body.len(), 2);
    }
}
