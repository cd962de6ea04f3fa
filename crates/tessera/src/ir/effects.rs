//! What a loop body does to variables and buffers, for the passes that move code across a
//! loop's boundary (`promote`, `hoist`): which values stay the same while it runs.

use super::{BufId, Expr, Kernel, Stmt, VarDecl, VarId};
use crate::types::ElemType;
use std::collections::HashSet;

/// What a loop body does, for deciding which elements stay put while it runs.
#[derive(Default)]
pub(super) struct Effects {
    pub assigned: HashSet<VarId>,
    /// Buffers written, grown, filled or sorted.
    pub changed: HashSet<BufId>,
    /// Buffers used other than by plain loads and stores (length, search, sort, hash).
    pub other_use: HashSet<BufId>,
    /// Every load or store index per buffer.
    pub accesses: Vec<(BufId, Expr)>,
}

pub(super) fn effects_stmts(stmts: &[Stmt], fx: &mut Effects) {
    for s in stmts {
        match s {
            Stmt::Assign(v, _) | Stmt::For { var: v, .. } => {
                fx.assigned.insert(*v);
            }
            Stmt::Chunked(c) => {
                fx.assigned.extend([c.lo, c.hi]);
                // Private copies are written by the chunks.
                fx.changed.extend(c.private.iter().map(|p| p.buf));
                fx.changed.extend(c.scratch.iter().copied());
                // Row fragments are concatenated into these arrays, and the cursors set.
                fx.changed
                    .extend(c.rows.iter().flat_map(|r| r.arrays.iter().copied()));
                fx.assigned.extend(
                    c.rows
                        .iter()
                        .flat_map(|r| [Some(r.cursor), r.last])
                        .flatten(),
                );
                fx.assigned.extend(c.scratch_state.iter().copied());
            }
            Stmt::Store { buf, index, .. } => {
                fx.changed.insert(*buf);
                fx.accesses.push((*buf, index.clone()));
            }
            // An indivisible update reads and writes its element in one instruction: no pass
            // may keep that element in a variable.
            Stmt::Atomic { buf, .. }
            | Stmt::Grow { buf, .. }
            | Stmt::Fill { buf, .. }
            | Stmt::Sort { buf, .. } => {
                fx.changed.insert(*buf);
                fx.other_use.insert(*buf);
                if let Stmt::Sort { flags: Some(f), .. } = s {
                    fx.other_use.insert(*f);
                }
            }
            Stmt::SortPerm { keys, perm, .. } => {
                fx.changed.insert(*perm);
                fx.other_use.extend([*keys, *perm]);
            }
            _ => {}
        }
        for e in s.own_exprs() {
            effects_expr(e, fx);
        }
        for body in s.bodies() {
            effects_stmts(body, fx);
        }
    }
}

pub(super) fn effects_expr(e: &Expr, fx: &mut Effects) {
    e.visit(&mut |x| match x {
        Expr::Load { buf, index } => fx.accesses.push((*buf, (**index).clone())),
        Expr::Len(b) | Expr::SearchGe { buf: b, .. } | Expr::HashFind { table: b, .. } => {
            fx.other_use.insert(*b);
        }
        _ => {}
    });
}

/// Whether `e` has the same value throughout a loop with these effects.
pub(super) fn invariant(e: &Expr, fx: &Effects) -> bool {
    let here = match e {
        Expr::Var(v) => !fx.assigned.contains(v),
        Expr::Load { buf, .. }
        | Expr::Len(buf)
        | Expr::SearchGe { buf, .. }
        | Expr::HashFind { table: buf, .. } => !fx.changed.contains(buf),
        _ => true,
    };
    here && e.children().into_iter().all(|c| invariant(c, fx))
}

/// A fresh variable of `ty`'s compute type.
pub(super) fn new_var(k: &mut Kernel, name: &str, ty: ElemType) -> VarId {
    k.vars.push(VarDecl {
        name: name.to_string(),
        ty: ty.compute(),
        cold: false,
    });
    VarId(k.vars.len() as u32 - 1)
}
