//! Dead-variable pruning: the lowering declares state for every looplet it might need (search
//! bounds, phase ends, flags) and the simplifier often makes them unused. Removing assignments
//! to variables nobody reads, then the variables themselves, keeps `tessera code` readable and
//! gives the backends less to compile. Expressions have no effects, so dropping one is safe.

use super::{Expr, Kernel, Stmt, VarId};
use std::collections::HashSet;

pub fn prune_dead_vars(k: &mut Kernel) {
    loop {
        let mut read = HashSet::new();
        reads_in(&k.body, &mut read);
        if !drop_dead(&mut k.body, &read) {
            break;
        }
    }
    compact(k);
}

fn reads_in(stmts: &[Stmt], read: &mut HashSet<VarId>) {
    for s in stmts {
        // The runner reads where a range's appended outputs ended (`ir::split`).
        if let Stmt::Chunked(c) = s {
            read.extend(
                c.rows
                    .iter()
                    .flat_map(|r| [Some(r.cursor), r.last])
                    .flatten(),
            );
        }
        for e in s.own_exprs() {
            expr_reads(e, read);
        }
        for body in s.bodies() {
            reads_in(body, read);
        }
    }
}

fn expr_reads(e: &Expr, read: &mut HashSet<VarId>) {
    e.visit(&mut |x| {
        if let Expr::Var(v) = x {
            read.insert(*v);
        }
    });
}

/// Remove assignments to unread variables and statements left empty; returns whether
/// anything changed.
fn drop_dead(stmts: &mut Vec<Stmt>, read: &HashSet<VarId>) -> bool {
    let mut changed = false;
    for s in stmts.iter_mut() {
        changed |= match s {
            Stmt::If {
                then, otherwise, ..
            } => drop_dead(then, read) | drop_dead(otherwise, read),
            Stmt::For { body, .. } | Stmt::While { body, .. } => drop_dead(body, read),
            Stmt::Chunked(c) => drop_dead(&mut c.body, read),
            _ => false,
        };
    }
    let before = stmts.len();
    stmts.retain(|s| match s {
        Stmt::Assign(v, _) => read.contains(v),
        Stmt::If {
            then, otherwise, ..
        } => !(then.is_empty() && otherwise.is_empty()),
        // A counted loop always ends; a `while` with an empty body may be how a kernel
        // spins on a condition, so it stays.
        Stmt::For { body, .. } => !body.is_empty(),
        _ => true,
    });
    changed || stmts.len() != before
}

/// Renumber the variables still mentioned so the kernel declares only those.
fn compact(k: &mut Kernel) {
    let mut used = vec![false; k.vars.len()];
    let mut mark = |v: VarId| used[v.0 as usize] = true;
    visit_vars(&mut k.body, &mut |v| {
        mark(*v);
    });
    let mut new_id = vec![0u32; k.vars.len()];
    let mut vars = vec![];
    for (old, decl) in k.vars.iter().enumerate() {
        if used[old] {
            new_id[old] = vars.len() as u32;
            vars.push(decl.clone());
        }
    }
    visit_vars(&mut k.body, &mut |v| *v = VarId(new_id[v.0 as usize]));
    k.vars = vars;
    // The marks of vectorised loops follow their variables (a loop pruned away drops its).
    k.vectorized = k
        .vectorized
        .iter()
        .filter(|v| used[v.0 as usize])
        .map(|v| VarId(new_id[v.0 as usize]))
        .collect();
}

fn visit_vars(stmts: &mut [Stmt], f: &mut dyn FnMut(&mut VarId)) {
    for s in stmts {
        if let Stmt::Assign(v, _) | Stmt::For { var: v, .. } = s {
            f(v);
        }
        if let Stmt::Chunked(c) = s {
            f(&mut c.lo);
            f(&mut c.hi);
            for v in &mut c.scratch_state {
                f(v);
            }
            for r in &mut c.rows {
                f(&mut r.cursor);
                if let Some(v) = &mut r.last {
                    f(v);
                }
            }
        }
        for e in s.own_exprs_mut() {
            expr_vars(e, f);
        }
        for body in s.bodies_mut() {
            visit_vars(body, f);
        }
    }
}

fn expr_vars(e: &mut Expr, f: &mut dyn FnMut(&mut VarId)) {
    match e {
        Expr::Var(v) => f(v),
        e => e.children_mut().into_iter().for_each(|c| expr_vars(c, f)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build as b;
    use crate::ir::{BufDecl, VarDecl};
    use crate::types::ElemType;

    #[test]
    fn unread_chains_disappear_and_vars_are_renumbered() {
        let var = |name: &str| VarDecl {
            name: name.into(),
            ty: ElemType::I64,
            cold: false,
        };
        let (a, dead1, dead2, i) = (VarId(0), VarId(1), VarId(2), VarId(3));
        let mut k = Kernel {
            name: "k".into(),
            bufs: vec![BufDecl {
                name: "out".into(),
                elem: ElemType::I64,
                growable: false,
                tensor: None,
                scratch: false,
            }],
            vars: vec![var("a"), var("dead1"), var("dead2"), var("i")],
            body: vec![
                b::assign(a, b::int(3)),
                b::assign(dead1, b::var(a)),
                // dead2 reads dead1, and nobody reads dead2: both go.
                b::assign(dead2, b::add(b::var(dead1), b::int(1))),
                Stmt::If {
                    cond: b::lt(b::var(a), b::int(5)),
                    then: vec![b::assign(dead2, b::int(0))],
                    otherwise: vec![],
                },
                Stmt::For {
                    var: i,
                    start: b::int(0),
                    stop: b::var(a),
                    body: vec![b::store(crate::ir::BufId(0), b::var(i), b::var(a))],
                },
            ],
            errors: vec![],
            bounded: vec![],
            not_nan: vec![],
            vectorized: vec![],
        };
        prune_dead_vars(&mut k);
        k.check().unwrap();
        let names: Vec<&str> = k.vars.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["a", "i"]);
        assert_eq!(k.body.len(), 2, "{k}");
    }
}
