//! Addressing loops and statements, paths into the AST, and index substitution.
//!
//! A path is the list of steps from the program's body to a statement: each step is (which
//! body of the parent: 0 for a loop's, `let`'s, block's or `if`'s then-branch, 1 for an
//! `if`'s else-branch; the position in that body). The first step's body number is 0 (the
//! program's body).

use super::{Located, LoopRef, StmtRef};
use crate::error::Result;
use crate::notation::ast::{Expr, ExprKind, Stmt, StmtKind};

pub type Path = Vec<(usize, usize)>;

/// The bodies a statement holds, in path order.
pub fn bodies(s: &Stmt) -> Vec<&Vec<Stmt>> {
    match &s.kind {
        StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
            vec![body]
        }
        StmtKind::If {
            then, otherwise, ..
        } => vec![then, otherwise],
        _ => vec![],
    }
}

fn bodies_mut(s: &mut Stmt) -> Vec<&mut Vec<Stmt>> {
    match &mut s.kind {
        StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
            vec![body]
        }
        StmtKind::If {
            then, otherwise, ..
        } => vec![then, otherwise],
        _ => vec![],
    }
}

/// Every statement with its path, pre-order (program order).
pub fn walk<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt, &Path)) {
    walk_body(body, 0, &mut vec![], f)
}

fn walk_body<'a>(
    body: &'a [Stmt],
    b: usize,
    prefix: &mut Path,
    f: &mut dyn FnMut(&'a Stmt, &Path),
) {
    for (k, s) in body.iter().enumerate() {
        prefix.push((b, k));
        f(s, prefix);
        for (b2, inner) in bodies(s).into_iter().enumerate() {
            walk_body(inner, b2, prefix, f);
        }
        prefix.pop();
    }
}

/// The statement at a path.
pub fn get<'a>(body: &'a [Stmt], path: &[(usize, usize)]) -> &'a Stmt {
    let (first, rest) = path.split_first().expect("a non-empty path");
    let mut s = &body[first.1];
    for (b, k) in rest {
        s = &bodies(s)[*b][*k];
    }
    s
}

/// The body holding the statement at `path` (the statement is at `path.last().1` in it).
pub fn parent_mut<'a>(body: &'a mut Vec<Stmt>, path: &[(usize, usize)]) -> &'a mut Vec<Stmt> {
    let mut cur = body;
    for (k, (_, i)) in path.iter().enumerate().take(path.len() - 1) {
        let b = path[k + 1].0;
        cur = bodies_mut(&mut cur[*i]).swap_remove(b);
    }
    cur
}

/// The paths of the loops named `r.name`, in program order.
fn loops_named(body: &[Stmt], name: &str) -> Vec<Path> {
    let mut out = vec![];
    walk_body(body, 0, &mut vec![], &mut |s, p| {
        if matches!(&s.kind, StmtKind::Loop { index, .. } if index == name) {
            out.push(p.clone());
        }
    });
    out
}

/// Every loop name, for error messages.
fn loop_names(body: &[Stmt]) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    walk_body(body, 0, &mut vec![], &mut |s, _| {
        if let StmtKind::Loop { index, .. } = &s.kind
            && !out.contains(index)
        {
            out.push(index.clone());
        }
    });
    out
}

/// The path of the loop `r` addresses; an unknown or ambiguous name is an error.
pub fn find_loop(body: &[Stmt], c: &Located, r: &LoopRef) -> Result<Path> {
    let found = loops_named(body, &r.name);
    match (r.occurrence, found.len()) {
        (_, 0) => Err(c.error(format!(
            "no loop `{}` (the loops are: {})",
            r.name,
            loop_names(body).join(", ")
        ))),
        (None, 1) => Ok(found[0].clone()),
        (None, n) => Err(c.error(format!(
            "{n} loops are named `{}`: say which with `{}#1` ... `{}#{n}` (program order)",
            r.name, r.name, r.name
        ))),
        (Some(k), n) if k <= n => Ok(found[k - 1].clone()),
        (Some(k), n) => Err(c.error(format!(
            "`{}#{k}`: there are only {n} loops named `{}`",
            r.name, r.name
        ))),
    }
}

/// The path of the statement `r` addresses.
pub fn find_stmt(body: &[Stmt], c: &Located, r: &StmtRef) -> Result<Path> {
    if let StmtRef::Loop(l) = r {
        return find_loop(body, c, l);
    }
    let mut found = vec![];
    walk_body(body, 0, &mut vec![], &mut |s, p| {
        let hit = match r {
            StmtRef::Line(l) => s.span.line == *l,
            StmtRef::Writes(t) => match &s.kind {
                StmtKind::Assign { lhs, .. } => lhs.tensor == *t,
                StmtKind::Declare { tensor, .. } => tensor == t,
                _ => false,
            },
            StmtRef::Loop(_) => unreachable!("found as a loop above"),
        };
        if hit {
            found.push(p.clone());
        }
    });
    match (r, found.len()) {
        (_, 0) => Err(c.error(format!("no statement `{r}`"))),
        // A line may hold a loop and the statements of a one-line body: the outermost is meant.
        (StmtRef::Line(_), _) => Ok(found[0].clone()),
        (StmtRef::Writes(t), 1) => {
            let _ = t;
            Ok(found[0].clone())
        }
        (StmtRef::Writes(t), n) => Err(c.error(format!(
            "{n} statements write `{t}`: name one by its line, `@LINE`"
        ))),
        (StmtRef::Loop(_), _) => unreachable!("found as a loop above"),
    }
}

/// Replace the name `from` by `to` in an expression (not under a binder of the same name:
/// the language has none inside expressions).
pub fn subst_expr(e: &Expr, from: &str, to: &Expr) -> Expr {
    let kind = match &e.kind {
        ExprKind::Name(n) if n == from => return to.clone(),
        ExprKind::Access(a) => {
            let mut a = a.clone();
            for ix in &mut a.indices {
                ix.expr = subst_expr(&ix.expr, from, to);
                if let Some((lo, hi)) = &ix.window {
                    ix.window = Some((subst_expr(lo, from, to), subst_expr(hi, from, to)));
                }
            }
            ExprKind::Access(a)
        }
        ExprKind::Unary(op, x) => ExprKind::Unary(*op, Box::new(subst_expr(x, from, to))),
        ExprKind::Binary(op, x, y) => ExprKind::Binary(
            *op,
            Box::new(subst_expr(x, from, to)),
            Box::new(subst_expr(y, from, to)),
        ),
        ExprKind::Call(f, args) => ExprKind::Call(
            f.clone(),
            args.iter().map(|a| subst_expr(a, from, to)).collect(),
        ),
        k => k.clone(),
    };
    Expr::new(kind, e.span)
}

/// Replace the index `from` by `to` in statements; stops at a `let` or loop rebinding `from`.
pub fn subst_stmts(body: &[Stmt], from: &str, to: &Expr) -> Vec<Stmt> {
    crate::notation::visit::rewrite_scoped(body, &|n| n == from, &|e| subst_expr(e, from, to))
}

/// Whether an expression mentions a name.
pub fn mentions(e: &Expr, name: &str) -> bool {
    let mut hit = false;
    crate::notation::visit::expr(e, &mut |x| {
        if matches!(&x.kind, ExprKind::Name(n) if n == name) {
            hit = true;
        }
    });
    hit
}

/// Whether any expression in the statements mentions a name (as an index or variable).
pub fn stmts_mention(body: &[Stmt], name: &str) -> bool {
    let mut hit = false;
    crate::notation::visit::exprs(body, &mut |x| {
        if matches!(&x.kind, ExprKind::Name(n) if n == name) {
            hit = true;
        }
    });
    hit
}

/// Whether a name is bound anywhere in the statements (a loop index or a `let`).
pub fn binds(body: &[Stmt], name: &str) -> bool {
    let mut hit = false;
    crate::notation::visit::stmts(body, &mut |s| match &s.kind {
        StmtKind::Loop { index, .. } if index == name => hit = true,
        StmtKind::Let { name: n, .. } if n == name => hit = true,
        _ => {}
    });
    hit
}

/// Whether a tensor or index name is used anywhere (for fresh derived names).
pub fn used(body: &[Stmt], name: &str) -> bool {
    if binds(body, name) || stmts_mention(body, name) {
        return true;
    }
    let (r, w) = crate::notation::visit::reads_writes(body);
    r.iter().chain(w.iter()).any(|t| t == name)
}

/// Whether a path lies inside (or is) the statement at `outer`.
pub fn within(path: &[(usize, usize)], outer: &[(usize, usize)]) -> bool {
    path.len() >= outer.len() && path[..outer.len()] == *outer
}
