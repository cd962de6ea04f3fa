//! Folding of boolean flags the lowering sets to constants. Writers raise a `dirty` flag where
//! a leaf is written and test it when they close (`dirty = false; ... dirty = true; if dirty`);
//! once the looplets are lowered, most of those tests are decided where they stand. Folding
//! them here (the dead assignments then go with `ir::prune`) keeps every copy of a loop body
//! that a split makes a few lines shorter and gives the backend less to compile.

use crate::ir::{BinOp, Expr, Stmt, UnOp, VarId, build as b};
use crate::types::Scalar;
use std::collections::{HashMap, HashSet};

/// Known values of boolean variables at a point of the code.
type Known = HashMap<VarId, bool>;

pub fn fold_flags(body: &mut Vec<Stmt>) {
    let mut known = Known::new();
    block(body, &mut known);
}

fn block(stmts: &mut Vec<Stmt>, known: &mut Known) {
    let old = std::mem::take(stmts);
    for s in old {
        stmt(s, known, stmts);
    }
}

fn stmt(s: Stmt, known: &mut Known, out: &mut Vec<Stmt>) {
    match s {
        Stmt::Assign(v, e) => {
            let e = fold(&e, known);
            match e {
                Expr::Const(Scalar::Bool(c)) => {
                    known.insert(v, c);
                }
                _ => {
                    known.remove(&v);
                }
            }
            out.push(Stmt::Assign(v, e));
        }
        Stmt::If {
            cond,
            mut then,
            mut otherwise,
        } => match fold(&cond, known) {
            Expr::Const(Scalar::Bool(c)) => {
                for s in if c { then } else { otherwise } {
                    stmt(s, known, out);
                }
            }
            cond => {
                let mut k2 = known.clone();
                block(&mut then, known);
                block(&mut otherwise, &mut k2);
                known.retain(|v, c| k2.get(v) == Some(c));
                out.extend(b::if_else(cond, then, otherwise));
            }
        },
        Stmt::For {
            var,
            start,
            stop,
            mut body,
        } => {
            forget_assigned(&body, known);
            let mut inner = known.clone();
            block(&mut body, &mut inner);
            out.push(Stmt::For {
                var,
                start,
                stop,
                body,
            });
        }
        Stmt::While { cond, mut body } => {
            forget_assigned(&body, known);
            let mut inner = known.clone();
            block(&mut body, &mut inner);
            out.push(Stmt::While { cond, body });
        }
        s => out.push(s),
    }
}

/// A loop body runs again after itself: what it assigns is unknown throughout it and after.
fn forget_assigned(body: &[Stmt], known: &mut Known) {
    let mut assigned = HashSet::new();
    assigned_in(body, &mut assigned);
    known.retain(|v, _| !assigned.contains(v));
}

fn assigned_in(stmts: &[Stmt], out: &mut HashSet<VarId>) {
    for s in stmts {
        match s {
            Stmt::Assign(v, _) => {
                out.insert(*v);
            }
            Stmt::If {
                then, otherwise, ..
            } => {
                assigned_in(then, out);
                assigned_in(otherwise, out);
            }
            Stmt::For { var, body, .. } => {
                out.insert(*var);
                assigned_in(body, out);
            }
            Stmt::While { body, .. } => assigned_in(body, out),
            _ => {}
        }
    }
}

/// The expression with known flags replaced and the logic folded (through the IR builders,
/// which fold constant operands).
fn fold(e: &Expr, known: &Known) -> Expr {
    match e {
        Expr::Var(v) => match known.get(v) {
            Some(c) => b::boolean(*c),
            None => e.clone(),
        },
        Expr::Unary(UnOp::Not, a) => b::not(fold(a, known)),
        Expr::Binary(op @ (BinOp::And | BinOp::Or), a, c) => {
            b::bin(*op, fold(a, known), fold(c, known))
        }
        _ => e.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_fold_where_they_are_decided() {
        let (d, x) = (VarId(0), VarId(1));
        let commit = vec![b::assign(x, b::int(1))];
        let mut body = vec![
            b::assign(d, b::boolean(false)),
            b::assign(d, b::boolean(true)),
        ];
        body.extend(b::if_(
            b::and(b::var(d), b::lt(b::var(x), b::int(3))),
            commit.clone(),
        ));
        fold_flags(&mut body);
        assert_eq!(
            body[2],
            Stmt::If {
                cond: b::lt(b::var(x), b::int(3)),
                then: commit.clone(),
                otherwise: vec![]
            }
        );
        // Set in one branch only, or inside a loop: unknown afterwards.
        let mut body = vec![b::assign(d, b::boolean(false))];
        body.extend(b::if_(b::var(x), vec![b::assign(d, b::boolean(true))]));
        body.push(Stmt::While {
            cond: b::not(b::var(d)),
            body: vec![b::assign(d, b::boolean(true))],
        });
        body.extend(b::if_(b::var(d), commit.clone()));
        let before = body.clone();
        fold_flags(&mut body);
        assert_eq!(body, before);
    }
}
