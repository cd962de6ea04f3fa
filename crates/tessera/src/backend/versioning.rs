//! Loop versioning, shared by the native backends: which accesses of an innermost counted
//! loop can have their bounds checks replaced by one range test before the loop.
//!
//! An access `buf[i + c]` or `buf[w + i + c]` (`i` the loop variable, `w` a variable the loop
//! does not assign, such as a row's start `y * width`, `c` a small constant) touches, over
//! `i` in `[s, e)`, exactly the positions `[s + w + c, e + w + c)`. When that range lies inside
//! the buffer, and the buffer keeps its length during the loop, no access of the loop can
//! fail. A backend emits the loop twice: a copy without those checks, taken when the range
//! tests all pass, and the checked copy otherwise, so a corrupt input still fails at the same
//! access with the same writes done.

use crate::ir::{BinOp, BufId, Expr, Stmt, VarId};
use crate::types::Scalar;
use std::collections::HashSet;

/// The largest constant offset versioning considers (keeps the range tests overflow-free
/// where they are done in 64 bits).
pub const MAX_OFFSET: i64 = 1 << 20;

/// An access `buf[var + base + offset]` whose range a versioned loop tests before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Access {
    pub buf: BufId,
    /// The loop variable.
    pub var: VarId,
    /// A variable the loop keeps, or none.
    pub base: Option<VarId>,
    /// A constant in `-MAX_OFFSET..=MAX_OFFSET`.
    pub offset: i64,
}

impl Access {
    /// Whether `buf[index]` is this access.
    pub fn is(&self, buf: BufId, index: &Expr) -> bool {
        self.buf == buf && loop_offset(index, self.var) == Some((self.base, self.offset))
    }
}

/// The accesses of the body of `for var ...` whose checks can move before the loop: the body
/// has no inner loop (versioning nested loops would multiply the code) and does not assign
/// `var`; the buffer is not grown in the body; the base is not assigned in the body. Empty
/// when the loop cannot be versioned. Sorted, without repeats.
pub fn versionable(var: VarId, body: &[Stmt]) -> Vec<Access> {
    let mut nested = false;
    let mut grown = HashSet::new();
    walk_stmts(body, &mut |s| match s {
        Stmt::For { .. } | Stmt::While { .. } | Stmt::Fill { .. } => nested = true,
        Stmt::Grow { buf, .. } => {
            grown.insert(buf.0);
        }
        _ => {}
    });
    if nested || assigns(body, var) {
        return vec![];
    }
    let mut found = HashSet::new();
    let mut note = |buf: BufId, index: &Expr| {
        if let Some((base, offset)) = loop_offset(index, var)
            && !grown.contains(&buf.0)
            && !base.is_some_and(|w| assigns(body, w))
        {
            found.insert(Access {
                buf,
                var,
                base,
                offset,
            });
        }
    };
    walk_stmts(body, &mut |s| {
        if let Stmt::Store { buf, index, .. } = s {
            note(*buf, index);
        }
    });
    walk_exprs(body, &mut |e| {
        if let Expr::Load { buf, index } = e {
            note(*buf, index);
        }
    });
    let mut v: Vec<Access> = found.into_iter().collect();
    v.sort();
    v
}

/// `index` as `var + w + c`: the loop variable once, at most one other variable `w`, and a
/// small constant `c`, summed in any order (`v - c` too); `None` for any other form.
pub fn loop_offset(index: &Expr, var: VarId) -> Option<(Option<VarId>, i64)> {
    fn terms(e: &Expr, vars: &mut Vec<VarId>, c: &mut i64) -> bool {
        match e {
            Expr::Var(v) => {
                vars.push(*v);
                true
            }
            Expr::Const(Scalar::I64(k)) => {
                *c = c.saturating_add(*k);
                true
            }
            Expr::Binary(BinOp::Add, a, b) => terms(a, vars, c) && terms(b, vars, c),
            Expr::Binary(BinOp::Sub, a, b) => match &**b {
                Expr::Const(Scalar::I64(k)) => {
                    *c = c.saturating_sub(*k);
                    terms(a, vars, c)
                }
                _ => false,
            },
            _ => false,
        }
    }
    let (mut vars, mut c) = (vec![], 0i64);
    if !terms(index, &mut vars, &mut c) || !(-MAX_OFFSET..=MAX_OFFSET).contains(&c) {
        return None;
    }
    let at = vars.iter().position(|v| *v == var)?;
    vars.remove(at);
    match vars[..] {
        [] => Some((None, c)),
        [w] if w != var => Some((Some(w), c)),
        _ => None,
    }
}

/// Whether the statements assign `var` (also as an inner loop's counter).
pub fn assigns(stmts: &[Stmt], var: VarId) -> bool {
    let mut found = false;
    walk_stmts(stmts, &mut |s| match s {
        Stmt::Assign(v, _) | Stmt::For { var: v, .. } => found |= *v == var,
        _ => {}
    });
    found
}

/// Every statement, nested ones after the statement that holds them.
pub fn walk_stmts(stmts: &[Stmt], f: &mut dyn FnMut(&Stmt)) {
    for s in stmts {
        f(s);
        match s {
            Stmt::If {
                then, otherwise, ..
            } => {
                walk_stmts(then, f);
                walk_stmts(otherwise, f);
            }
            Stmt::For { body, .. } | Stmt::While { body, .. } => walk_stmts(body, f),
            // A range inside a kernel is its serial loop (the C backend's buffers it grows
            // must not be declared constant).
            Stmt::Chunked(c) => walk_stmts(&c.body, f),
            _ => {}
        }
    }
}

/// Every expression (and sub-expression) in the statements.
pub fn walk_exprs(stmts: &[Stmt], f: &mut dyn FnMut(&Expr)) {
    walk_stmts(stmts, &mut |s| {
        for e in s.own_exprs() {
            e.visit(f);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build as b;

    #[test]
    fn loop_offsets_are_recognised() {
        let (i, w) = (VarId(3), VarId(5));
        let add = |x: Expr, y: Expr| Expr::Binary(BinOp::Add, Box::new(x), Box::new(y));
        let sub = |x: Expr, y: Expr| Expr::Binary(BinOp::Sub, Box::new(x), Box::new(y));
        assert_eq!(loop_offset(&b::var(i), i), Some((None, 0)));
        assert_eq!(loop_offset(&b::var(w), i), None);
        assert_eq!(loop_offset(&sub(b::var(i), b::int(2)), i), Some((None, -2)));
        assert_eq!(loop_offset(&add(b::var(i), b::int(1 << 40)), i), None);
        assert_eq!(
            loop_offset(&add(b::var(w), b::var(i)), i),
            Some((Some(w), 0))
        );
        assert_eq!(
            loop_offset(&add(add(b::var(w), b::var(i)), b::int(-1)), i),
            Some((Some(w), -1))
        );
        // The loop variable twice, a subtracted variable, a second base: not of the form.
        assert_eq!(loop_offset(&add(b::var(i), b::var(i)), i), None);
        assert_eq!(loop_offset(&sub(b::var(i), b::var(w)), i), None);
        assert_eq!(
            loop_offset(&add(add(b::var(w), b::var(VarId(6))), b::var(i)), i),
            None
        );
    }

    #[test]
    fn loops_that_grow_nest_or_move_their_base_are_not_versioned() {
        let (i, w) = (VarId(0), VarId(1));
        let store = b::store(BufId(1), b::add(b::var(w), b::var(i)), b::int(1));
        assert_eq!(versionable(i, std::slice::from_ref(&store)).len(), 1);
        let moved = vec![store.clone(), Stmt::Assign(w, b::int(3))];
        assert!(versionable(i, &moved).is_empty());
        let grown = vec![
            Stmt::Grow {
                buf: BufId(1),
                len: b::int(8),
            },
            store.clone(),
        ];
        assert!(versionable(i, &grown).is_empty());
        let counted = vec![store, Stmt::Assign(i, b::int(0))];
        assert!(versionable(i, &counted).is_empty());
    }
}
