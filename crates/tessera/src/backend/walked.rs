//! Versioning of a walk: `while (... & q < e) { .. buf[q] .. q = q + 1 .. }`, the loop over a
//! run-length fiber's runs (`levels::sparse_run_list`), whose position `q` advances by one
//! when a run ends. The body starts only with `q < e`, and until the first statement that
//! assigns `q` the body reads `buf[q]` at that value; `q` only grows. So with `q >= 0` and
//! `e <= len(buf)` tested once before the loop, every such read is in bounds
//! ([`At::Walked`]): a backend emits the loop twice, the copy without those checks taken when
//! the test passes, the checked copy otherwise (bad positions still fail at the same read).

use crate::backend::versioning::{self, Access, At};
use crate::ir::walk::{walk_exprs, walk_stmts};
use crate::ir::{BinOp, BufId, Expr, Stmt, VarId};
use crate::types::Scalar;
use std::collections::BTreeSet;

/// The reads of `while (cond) body` that the test `q >= 0 && e <= len(buf)` before the loop
/// covers (module docs), sorted; empty when none.
///
/// `q < e` must be a conjunct of `cond` with `e` not assigned in the body, and every
/// assignment of `q` in the body `q = q + 1`, not inside a loop nested in the body (so `q`
/// grows by a bounded step per iteration, never wrapping). A buffer is taken only when the
/// body neither writes nor grows it, every read of it indexed by `q` comes before the first
/// statement assigning `q` (or is that statement's `if` condition), and the condition does
/// not read it at `q`.
pub fn walked(cond: &Expr, body: &[Stmt]) -> Vec<Access> {
    // A parallel range sets variables of its own (its chunk bounds, row cursors), which
    // `assigned` does not see: not looked into.
    let mut chunked = false;
    walk_stmts(body, &mut |s| chunked |= matches!(s, Stmt::Chunked(_)));
    if chunked {
        return vec![];
    }
    let mut out = vec![];
    for (q, e) in bounds(cond) {
        if assigned(body, e) || !only_increments(body, q, false) {
            continue;
        }
        // The statements before the first assignment of `q`, and that one's own expressions
        // when it is an `if` (its condition is evaluated before its branches).
        let first = body
            .iter()
            .position(|s| assigned(std::slice::from_ref(s), q));
        let (before, at) = match first {
            Some(i) => (&body[..i], Some(&body[i])),
            None => (body, None),
        };
        let mut early = BTreeSet::new();
        walk_exprs(before, &mut |x| note(x, q, &mut early));
        if let Some(Stmt::If { cond: c, .. }) = at {
            c.visit(&mut |x| note(x, q, &mut early));
        }
        let mut in_cond = BTreeSet::new();
        cond.visit(&mut |x| note(x, q, &mut in_cond));
        let changed = changed_bufs(body);
        for buf in early {
            // A read of `buf[q]` after `q` may have moved would be unchecked too: such a
            // buffer keeps its checks.
            if in_cond.contains(&buf)
                || changed.contains(&buf)
                || reads_late(&body[before.len()..], q, buf)
            {
                continue;
            }
            out.push(Access {
                buf,
                at: At::Walked { var: q, stop: e },
            });
        }
    }
    out.sort();
    out.dedup();
    out
}

/// [`walked`] for a loop of at most [`versioning::MAX_OUTER_BODY`] statements (it is emitted
/// twice, so this bounds what a kernel grows by); empty for a larger one.
pub fn walked_versionable(cond: &Expr, body: &[Stmt]) -> Vec<Access> {
    let mut size = 0;
    walk_stmts(body, &mut |_| size += 1);
    if size > versioning::MAX_OUTER_BODY {
        return vec![];
    }
    walked(cond, body)
}

/// The pairs `(q, e)` of conjuncts `q < e` of a condition.
fn bounds(cond: &Expr) -> Vec<(VarId, VarId)> {
    match cond {
        Expr::Binary(BinOp::And, a, b) => [bounds(a), bounds(b)].concat(),
        Expr::Binary(BinOp::Lt, a, b) => match (&**a, &**b) {
            (Expr::Var(q), Expr::Var(e)) if q != e => vec![(*q, *e)],
            _ => vec![],
        },
        _ => vec![],
    }
}

fn is_read_at(x: &Expr, q: VarId) -> Option<BufId> {
    match x {
        Expr::Load { buf, index } if matches!(**index, Expr::Var(v) if v == q) => Some(*buf),
        _ => None,
    }
}

fn note(x: &Expr, q: VarId, set: &mut BTreeSet<BufId>) {
    if let Some(b) = is_read_at(x, q) {
        set.insert(b);
    }
}

/// Whether `rest` (the body from the first statement assigning `q` on) reads `buf[q]`
/// anywhere but in that first statement's `if` condition.
fn reads_late(rest: &[Stmt], q: VarId, buf: BufId) -> bool {
    let mut late = false;
    let mut hit = |x: &Expr| late |= is_read_at(x, q) == Some(buf);
    for (i, s) in rest.iter().enumerate() {
        match s {
            Stmt::If {
                then, otherwise, ..
            } if i == 0 => {
                walk_exprs(then, &mut hit);
                walk_exprs(otherwise, &mut hit);
            }
            _ => walk_exprs(std::slice::from_ref(s), &mut hit),
        }
    }
    late
}

/// Whether the statements assign `v` (as a variable or a loop counter), at any depth.
fn assigned(stmts: &[Stmt], v: VarId) -> bool {
    crate::backend::versioning::assigns(stmts, v)
}

/// Whether every assignment of `q` is `q = q + 1` and none sits in a loop nested in the body
/// (`nested`: inside such a loop already).
fn only_increments(stmts: &[Stmt], q: VarId, nested: bool) -> bool {
    stmts.iter().all(|s| match s {
        Stmt::Assign(v, value) if *v == q => !nested && is_increment(value, q),
        Stmt::For { var, body, .. } => *var != q && only_increments(body, q, true),
        Stmt::While { body, .. } => only_increments(body, q, true),
        _ => s
            .bodies()
            .into_iter()
            .all(|b| only_increments(b, q, nested)),
    })
}

fn is_increment(value: &Expr, q: VarId) -> bool {
    match value {
        Expr::Binary(BinOp::Add, a, b) => matches!(
            (&**a, &**b),
            (Expr::Var(v), Expr::Const(Scalar::I64(1))) | (Expr::Const(Scalar::I64(1)), Expr::Var(v))
                if *v == q
        ),
        _ => false,
    }
}

/// Buffers the statements write, grow, fill or sort: their length or contents may change.
fn changed_bufs(stmts: &[Stmt]) -> BTreeSet<BufId> {
    let mut set = BTreeSet::new();
    walk_stmts(stmts, &mut |s| match s {
        Stmt::Store { buf, .. }
        | Stmt::Atomic { buf, .. }
        | Stmt::Grow { buf, .. }
        | Stmt::Fill { buf, .. }
        | Stmt::Sort { buf, .. }
        | Stmt::SortPerm { perm: buf, .. } => {
            set.insert(*buf);
        }
        Stmt::Chunked(c) => {
            set.extend(c.private.iter().map(|p| p.buf));
            set.extend(c.scratch.iter().copied());
            set.extend(c.rows.iter().flat_map(|r| r.arrays.iter().copied()));
        }
        _ => {}
    });
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build as b;

    const Q: VarId = VarId(0);
    const E: VarId = VarId(1);
    const X: VarId = VarId(2);
    const RIGHT: BufId = BufId(0);
    const OUT: BufId = BufId(1);

    fn cond() -> Expr {
        b::and(b::le(b::var(X), b::int(9)), b::lt(b::var(Q), b::var(E)))
    }

    fn step() -> Stmt {
        Stmt::Assign(Q, b::add(b::var(Q), b::int(1)))
    }

    fn read(into: VarId) -> Stmt {
        Stmt::Assign(into, b::load(RIGHT, b::var(Q)))
    }

    #[test]
    fn reads_before_the_step_are_covered() {
        let mut body = vec![read(X)];
        body.extend(b::if_(
            b::eq(b::load(RIGHT, b::var(Q)), b::var(X)),
            vec![step()],
        ));
        let found = walked(&cond(), &body);
        assert_eq!(
            found,
            vec![Access {
                buf: RIGHT,
                at: At::Walked { var: Q, stop: E },
            }]
        );
    }

    #[test]
    fn what_the_test_cannot_vouch_for_keeps_its_checks() {
        // A read after the step may be at `e`.
        let late = vec![read(X), step(), read(X)];
        // No `q < e` in the condition.
        let plain = b::le(b::var(X), b::int(9));
        // `e` moves, `q` moves by other than one, or moves inside a nested loop.
        let moves_e = vec![read(X), Stmt::Assign(E, b::int(3))];
        let jumps = vec![read(X), Stmt::Assign(Q, b::add(b::var(Q), b::int(2)))];
        let nested = vec![
            read(X),
            Stmt::For {
                var: VarId(3),
                start: b::int(0),
                stop: b::int(2),
                body: vec![step()],
            },
        ];
        // The loop writes the buffer.
        let written = vec![read(X), b::store(RIGHT, b::int(0), b::int(1)), step()];
        // The condition reads it at `q`.
        let in_cond = b::and(cond(), b::lt(b::load(RIGHT, b::var(Q)), b::int(5)));
        assert!(walked(&cond(), &late).is_empty());
        assert!(walked(&plain, &[read(X), step()]).is_empty());
        assert!(walked(&cond(), &moves_e).is_empty());
        assert!(walked(&cond(), &jumps).is_empty());
        assert!(walked(&cond(), &nested).is_empty());
        assert!(walked(&cond(), &written).is_empty());
        assert!(walked(&in_cond, &[read(X), step()]).is_empty());
        // Another buffer's writes do not matter.
        let other = vec![read(X), b::store(OUT, b::int(0), b::var(X)), step()];
        assert_eq!(walked(&cond(), &other).len(), 1);
    }
}
