//! Repeated loads and checks within a statement list, done once.
//!
//! The lowering emits every access of a statement on its own: a gather `dx[adj[i, j], f]`
//! loads `adj[i, j]` into a fresh variable and checks it against the dimension (a `fail`
//! path that saves the kernel's state), and the next statement reading `x[adj[i, j], f]` does
//! both again. A gradient's scatter loop (SubdivNet's backward over the three neighbours)
//! repeats that for each of its five updates, and neither backend removes it: the checks'
//! failure paths differ, and the JIT does not merge loads.
//!
//! Within one statement list, in order, this pass keeps:
//! - which variable holds the value of which pure expression (`_v12 = adj[i * 3 + j]` after
//!   `_v10 = adj[i * 3 + j]` becomes `_v12 = _v10`), and which variables are copies of
//!   which (`_v13 = f`), substituting the first for the others in the statements that follow,
//!   so equal addresses are written the same way for the backends;
//! - which conditions are known false: those of an `if` whose `then` ends in `fail` or
//!   `break` (the list goes on only when the condition was false); a later `if` whose
//!   condition is the same expression is replaced by its `else`.
//!
//! Every fact is dropped as soon as a statement assigns a variable it reads or changes a
//! buffer it loads (a nested statement by everything it may do), and nested lists start
//! with no facts; the bodies of parallel ranges (`Chunked`) are left alone. So the kernel
//! computes the same values and reports the same fault: a removed load or check is one that
//! ran before on the same operands and passed.

use super::effects::{Effects, effects_stmts};
use super::{BufId, Expr, Kernel, Stmt, VarId};
use std::collections::HashMap;

pub fn remove_rechecks(k: &mut Kernel) {
    list(&mut k.body);
}

#[derive(Default)]
struct Facts {
    /// `(e, v)`: `v` holds the value of `e` (written with the representatives of copies).
    values: Vec<(Expr, VarId)>,
    /// `w -> v`: `w` holds the same value as `v` (a representative, never itself a copy).
    copies: HashMap<VarId, VarId>,
    /// Conditions that are false here.
    known_false: Vec<Expr>,
}

impl Facts {
    fn substitute(&self, e: &mut Expr) {
        if self.copies.is_empty() {
            return;
        }
        if let Expr::Var(w) = e {
            if let Some(v) = self.copies.get(w) {
                *w = *v;
            }
            return;
        }
        for c in e.children_mut() {
            self.substitute(c);
        }
    }

    /// Drop every fact that reads `v` or holds its value.
    fn assigned(&mut self, v: VarId) {
        self.values.retain(|(e, w)| *w != v && !reads_var(e, v));
        self.copies.retain(|w, r| *w != v && *r != v);
        self.known_false.retain(|e| !reads_var(e, v));
    }

    /// Drop every fact that reads `b` (its elements or length).
    fn changed(&mut self, b: BufId) {
        self.values.retain(|(e, _)| !reads_buf(e, b));
        self.known_false.retain(|e| !reads_buf(e, b));
    }

    fn forget(&mut self, fx: &Effects) {
        for v in &fx.assigned {
            self.assigned(*v);
        }
        for b in &fx.changed {
            self.changed(*b);
        }
    }
}

fn reads_var(e: &Expr, v: VarId) -> bool {
    let mut found = false;
    e.visit(&mut |x| found |= matches!(x, Expr::Var(w) if *w == v));
    found
}

fn reads_buf(e: &Expr, b: BufId) -> bool {
    let mut found = false;
    e.visit(&mut |x| {
        found |= match x {
            Expr::Load { buf, .. }
            | Expr::Len(buf)
            | Expr::SearchGe { buf, .. }
            | Expr::HashFind { table: buf, .. } => *buf == b,
            _ => false,
        }
    });
    found
}

/// Whether the rest of a list runs only when this `then` branch did not: it ends by leaving
/// the kernel or the loop.
fn leaves(then: &[Stmt]) -> bool {
    matches!(then.last(), Some(Stmt::Fail(_) | Stmt::Break))
}

fn list(stmts: &mut Vec<Stmt>) {
    let mut facts = Facts::default();
    let mut out = Vec::with_capacity(stmts.len());
    let mut todo: std::collections::VecDeque<Stmt> = std::mem::take(stmts).into();
    while let Some(mut s) = todo.pop_front() {
        // Statements whose own expressions run once, where they stand (not a loop's bounds
        // or a `while` condition, evaluated again after the body ran).
        if matches!(
            s,
            Stmt::Assign(..)
                | Stmt::Store { .. }
                | Stmt::Atomic { .. }
                | Stmt::If { .. }
                | Stmt::Grow { .. }
                | Stmt::Fill { .. }
        ) {
            for e in s.own_exprs_mut() {
                facts.substitute(e);
            }
        }
        match &mut s {
            Stmt::Assign(w, e) => {
                let w = *w;
                if !matches!(e, Expr::Var(_) | Expr::Const(_))
                    && let Some((_, v)) = facts.values.iter().find(|(x, v)| x == e && *v != w)
                {
                    *e = Expr::Var(*v);
                }
                let e = e.clone();
                facts.assigned(w);
                match e {
                    Expr::Var(v) if v != w => {
                        facts.copies.insert(w, v);
                    }
                    Expr::Var(_) | Expr::Const(_) => {}
                    e if !reads_var(&e, w) => facts.values.push((e, w)),
                    _ => {}
                }
                out.push(s);
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } if facts.known_false.contains(cond) => {
                let _ = then;
                for t in std::mem::take(otherwise).into_iter().rev() {
                    todo.push_front(t);
                }
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                list(then);
                list(otherwise);
                let cond = cond.clone();
                let leaves = leaves(then);
                let mut fx = Effects::default();
                effects_stmts(std::slice::from_ref(&s), &mut fx);
                facts.forget(&fx);
                if leaves
                    && !fx.assigned.iter().any(|v| reads_var(&cond, *v))
                    && !fx.changed.iter().any(|b| reads_buf(&cond, *b))
                {
                    facts.known_false.push(cond);
                }
                out.push(s);
            }
            Stmt::Break | Stmt::Fail(_) => {
                facts = Facts::default();
                out.push(s);
            }
            Stmt::Comment(_) => out.push(s),
            _ => {
                // A parallel range's body is left as it is: other threads may write what it
                // loads between two of its loads.
                if !matches!(s, Stmt::Chunked(_)) {
                    for b in s.bodies_mut() {
                        list(b);
                    }
                }
                let mut fx = Effects::default();
                effects_stmts(std::slice::from_ref(&s), &mut fx);
                facts.forget(&fx);
                out.push(s);
            }
        }
    }
    *stmts = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build as b;
    use crate::types::ElemType;

    /// Buffers idx (i64), y (f64); variables i, a, c, d (i64).
    fn kernel(body: Vec<Stmt>) -> Kernel {
        b::test_kernel(
            &[("idx", ElemType::I64), ("y", ElemType::F64)],
            false,
            &[
                ("i", ElemType::I64),
                ("a", ElemType::I64),
                ("c", ElemType::I64),
                ("d", ElemType::I64),
            ],
            body,
        )
    }

    const IDX: BufId = BufId(0);
    const Y: BufId = BufId(1);
    const I: VarId = VarId(0);
    const A: VarId = VarId(1);
    const C: VarId = VarId(2);
    const D: VarId = VarId(3);

    fn gather() -> Expr {
        b::load(IDX, b::var(I))
    }

    /// `if v < 0 { fail }`: the lowering's check of a gathered index.
    fn check(v: VarId) -> Stmt {
        Stmt::If {
            cond: b::lt(b::var(v), b::int(0)),
            then: vec![Stmt::Fail(0)],
            otherwise: vec![],
        }
    }

    fn store(v: VarId) -> Stmt {
        Stmt::Store {
            buf: Y,
            index: b::var(v),
            value: Expr::Const(crate::types::Scalar::F64(1.0)),
        }
    }

    fn run(body: Vec<Stmt>) -> Vec<Stmt> {
        let mut k = kernel(body);
        remove_rechecks(&mut k);
        k.body
    }

    #[test]
    fn a_second_gather_and_its_check_reuse_the_first() {
        let out = run(vec![
            Stmt::Assign(A, gather()),
            check(A),
            store(A),
            Stmt::Assign(C, gather()),
            check(C),
            store(C),
        ]);
        assert_eq!(
            out,
            vec![
                Stmt::Assign(A, gather()),
                check(A),
                store(A),
                Stmt::Assign(C, b::var(A)),
                store(A),
            ]
        );
    }

    /// A store to the gathered buffer, or a new value of the index, is a new gather.
    #[test]
    fn writes_in_between_keep_the_second_gather() {
        let into_idx = Stmt::Store {
            buf: IDX,
            index: b::int(0),
            value: b::int(5),
        };
        let body = vec![
            Stmt::Assign(A, gather()),
            check(A),
            into_idx,
            Stmt::Assign(C, gather()),
            check(C),
        ];
        assert_eq!(run(body.clone()), body);
        let body = vec![
            Stmt::Assign(A, gather()),
            check(A),
            Stmt::Assign(I, b::add(b::var(I), b::int(1))),
            Stmt::Assign(C, gather()),
            check(C),
        ];
        assert_eq!(run(body.clone()), body);
        // The first variable overwritten: its check says nothing of the second's value.
        let body = vec![
            Stmt::Assign(A, gather()),
            check(A),
            Stmt::Assign(A, b::int(-3)),
            Stmt::Assign(C, gather()),
            check(C),
        ];
        assert_eq!(run(body.clone()), body);
    }

    /// Nested statements forget what they may change, and a check whose `then` goes on (no
    /// `fail` or `break` at its end) proves nothing.
    #[test]
    fn nested_writes_and_checks_that_go_on() {
        let looped = Stmt::For {
            var: D,
            start: b::int(0),
            stop: b::int(3),
            body: vec![Stmt::Assign(A, b::var(D))],
        };
        let body = vec![
            Stmt::Assign(A, gather()),
            check(A),
            looped,
            Stmt::Assign(C, gather()),
            check(C),
        ];
        assert_eq!(run(body.clone()), body);
        let soft = Stmt::If {
            cond: b::lt(b::var(A), b::int(0)),
            then: vec![store(I)],
            otherwise: vec![],
        };
        let body = vec![Stmt::Assign(A, gather()), soft.clone(), soft.clone()];
        assert_eq!(run(body.clone()), body);
    }

    /// A check inside a loop is not known before it (the facts of a list stay in it).
    #[test]
    fn facts_stay_in_their_list() {
        let body = vec![
            Stmt::If {
                cond: b::var(I),
                then: vec![Stmt::Assign(A, gather()), check(A)],
                otherwise: vec![],
            },
            Stmt::Assign(A, gather()),
            check(A),
        ];
        assert_eq!(run(body.clone()), body);
    }
}
