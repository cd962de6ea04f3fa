//! Versions and tapes: which values the backward pass needs, and how it gets them back.
//!
//! The language keeps versions simple. A tensor read and written inside one loop must be
//! declared inside that loop (`transforms::lifecycle`), so the only values overwritten between
//! their forward use and the backward pass (FreeTensor's WAR dependences) are the *locals* of a
//! loop body: one version per iteration of the loops around their declaration. FreeTensor's
//! symbolic version number of such a value is the iteration vector of those loops, so a tape is
//! a global tensor indexed by the enclosing loop indices and then by the local's own indices
//! (`t_tape[i, j]` for a scalar `t` declared in `for i, for j`). Inside one body a local has a
//! single version: a second write after a read, a redeclaration, or an overwrite `=` that
//! several iterations of an inner loop repeat is refused with its place (`grad` checks this).
//! Values declared at global scope have one version for the whole run and are read from the
//! forward pass itself.
//!
//! Each needed local is either taped (the forward body ends by copying it into its tape, and
//! the backward body starts by copying it back) or recomputed (the backward body replays the
//! statements of the forward body that write it). [`Tapes::Auto`] tapes a local whose
//! computation contains a loop (a reduction: replaying it costs a loop) and recomputes one
//! computed by loop-free statements (Fig. 15's `t = a[i] * b[i]`: cheaper to recompute than to
//! store, as FreeTensor's selective materialisation decides); `All` tapes every needed local
//! and `None` recomputes every one.

use crate::notation::ast::{
    Access, AccessIndex, AssignOp, Expr, ExprKind, Extent, Span, Stmt, StmtKind,
};
use crate::types::Scalar;
use std::collections::HashSet;

/// Which needed loop-body locals the gradient program stores in tapes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tapes {
    /// Tape the locals whose computation contains a loop, recompute the rest (the default).
    #[default]
    Auto,
    /// Tape every local the backward pass reads.
    All,
    /// Recompute every local the backward pass reads.
    None,
}

/// A tape the gradient program writes in its forward part and reads in its backward part: a
/// global workspace the caller creates (`api::grad` does).
#[derive(Clone, Debug, PartialEq)]
pub struct Tape {
    /// The tape tensor's name.
    pub name: String,
    /// The local it saves.
    pub local: String,
    /// How many leading dimensions are versions (the loops around the local's declaration).
    pub versions: usize,
    /// The tape's rank: `versions` plus the local's rank.
    pub rank: usize,
    /// The local's declared value, the tape's fill.
    pub fill: Scalar,
}

pub(crate) fn index(name: &str) -> AccessIndex {
    AccessIndex {
        expr: Expr::name(name),
        permissive: false,
        protocol: None,
        window: None,
    }
}

pub(crate) fn access(tensor: &str, indices: Vec<AccessIndex>, span: Span) -> Access {
    Access {
        tensor: tensor.to_string(),
        indices,
        swizzle: None,
        span,
    }
}

pub(crate) fn read(a: Access) -> Expr {
    let span = a.span;
    Expr::new(ExprKind::Access(a), span)
}

pub(crate) fn stmt(kind: StmtKind, span: Span) -> Stmt {
    Stmt::new(kind, span)
}

pub(crate) fn overwrite(lhs: Access, rhs: Expr, span: Span) -> Stmt {
    stmt(
        StmtKind::Assign {
            lhs,
            op: AssignOp::Overwrite,
            rhs,
        },
        span,
    )
}

/// `for q0 = _, q1 = _ ...` around `body` (nothing around it for no names).
pub(crate) fn loops(names: &[String], body: Stmt) -> Stmt {
    names.iter().rev().fold(body, |b, n| {
        let span = b.span;
        stmt(
            StmtKind::Loop {
                index: n.clone(),
                extent: Extent::Auto,
                body: vec![b],
                parallel: crate::notation::ast::LoopMode::Serial,
            },
            span,
        )
    })
}

/// `to[pre..., q...] = from[q...]`, or the reverse, in loops over the local's indices `q`.
pub(crate) fn copy(
    to: &str,
    to_prefix: &[String],
    from: &str,
    from_prefix: &[String],
    qs: &[String],
    span: Span,
) -> Stmt {
    let ix = |pre: &[String]| pre.iter().chain(qs).map(|n| index(n)).collect::<Vec<_>>();
    let body = overwrite(
        access(to, ix(to_prefix), span),
        read(access(from, ix(from_prefix), span)),
        span,
    );
    loops(qs, body)
}

/// Does the statement write any of `names`, directly or nested?
pub(crate) fn writes_any(s: &Stmt, names: &HashSet<String>) -> bool {
    let (_, w) = crate::notation::visit::reads_writes(std::slice::from_ref(s));
    w.iter().any(|t| names.contains(t))
}

/// Does the statement contain a loop?
pub(crate) fn has_loop(s: &Stmt) -> bool {
    match &s.kind {
        StmtKind::Loop { .. } => true,
        StmtKind::If {
            then, otherwise, ..
        } => then.iter().chain(otherwise).any(has_loop),
        StmtKind::Let { body, .. } | StmtKind::Block(body) => body.iter().any(has_loop),
        _ => false,
    }
}

/// The part of a forward statement that recomputes the tensors in `keep`: assignments to
/// them, and everything declared inside the statement (the nested locals they are computed
/// from); assignments to anything else are dropped, and so are loops and branches left empty.
pub(crate) fn replay(s: &Stmt, keep: &HashSet<String>) -> Option<Stmt> {
    let mut inner = keep.clone();
    collect_declared(std::slice::from_ref(s), &mut inner);
    replay_in(s, &inner)
}

fn collect_declared(stmts: &[Stmt], out: &mut HashSet<String>) {
    for s in stmts {
        match &s.kind {
            StmtKind::Declare { tensor, .. } => {
                out.insert(tensor.clone());
            }
            StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
                collect_declared(body, out)
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                collect_declared(then, out);
                collect_declared(otherwise, out);
            }
            _ => {}
        }
    }
}

fn replay_list(stmts: &[Stmt], keep: &HashSet<String>) -> Vec<Stmt> {
    stmts.iter().filter_map(|s| replay_in(s, keep)).collect()
}

fn replay_in(s: &Stmt, keep: &HashSet<String>) -> Option<Stmt> {
    let kind = match &s.kind {
        StmtKind::Declare { tensor, .. } => return keep.contains(tensor).then(|| s.clone()),
        StmtKind::Assign { lhs, .. } => return keep.contains(&lhs.tensor).then(|| s.clone()),
        StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => return None,
        StmtKind::Loop {
            index,
            extent,
            body,
            parallel,
        } => {
            let body = replay_list(body, keep);
            if body.is_empty() {
                return None;
            }
            StmtKind::Loop {
                index: index.clone(),
                extent: extent.clone(),
                body,
                parallel: *parallel,
            }
        }
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => {
            let (then, otherwise) = (replay_list(then, keep), replay_list(otherwise, keep));
            if then.is_empty() && otherwise.is_empty() {
                return None;
            }
            StmtKind::If {
                cond: cond.clone(),
                then,
                otherwise,
            }
        }
        StmtKind::Let { name, value, body } => {
            let body = replay_list(body, keep);
            if body.is_empty() {
                return None;
            }
            StmtKind::Let {
                name: name.clone(),
                value: value.clone(),
                body,
            }
        }
        StmtKind::Block(body) => {
            let body = replay_list(body, keep);
            if body.is_empty() {
                return None;
            }
            StmtKind::Block(body)
        }
    };
    Some(Stmt::new(kind, s.span))
}

/// Every name an expression or statement list refers to (tensors, indices, variables).
pub(crate) fn names_in(stmts: &[Stmt], out: &mut HashSet<String>) {
    crate::notation::visit::exprs(stmts, &mut |e| match &e.kind {
        ExprKind::Name(n) => {
            out.insert(n.clone());
        }
        ExprKind::Access(a) => {
            out.insert(a.tensor.clone());
        }
        _ => {}
    });
    crate::notation::visit::accesses(stmts, &mut |a| {
        out.insert(a.tensor.clone());
    });
}
