//! Walks over the AST shared by the passes (read-only, two that rewrite expressions in place,
//! and one that rebuilds statements within a scope).

use super::ast::{
    Access, AccessIndex, AssignOp, Expr, ExprKind, Extent, Program, Reducer, ReducerDef, Span,
    Stmt, StmtKind,
};

/// Every expression in the statements (pre-order), including extents and access indices.
pub fn exprs<'a>(stmts: &'a [Stmt], f: &mut dyn FnMut(&'a Expr)) {
    for s in stmts {
        match &s.kind {
            StmtKind::Declare { init, .. } => expr(init, f),
            StmtKind::Assign { lhs, rhs, .. } => {
                for ix in &lhs.indices {
                    index(ix, f);
                }
                expr(rhs, f);
            }
            StmtKind::Loop { extent, body, .. } => {
                if let Extent::Range(a, b) = extent {
                    expr(a, f);
                    expr(b, f);
                }
                exprs(body, f);
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                expr(cond, f);
                exprs(then, f);
                exprs(otherwise, f);
            }
            StmtKind::Let { value, body, .. } => {
                expr(value, f);
                exprs(body, f);
            }
            StmtKind::Block(b) => exprs(b, f),
            StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => {}
        }
    }
}

pub fn expr<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Access(a) => {
            for ix in &a.indices {
                index(ix, f);
            }
        }
        ExprKind::Unary(_, x) => expr(x, f),
        ExprKind::Binary(_, x, y) => {
            expr(x, f);
            expr(y, f);
        }
        // The tensor named by `size` is not read. (The name is `semantics::Builtin::Size`'s;
        // the notation sits below `semantics` and sees calls by name only.)
        // Nor is the tensor named by `sample` an expression (its entries are read, as by
        // an access of an input).
        ExprKind::Call(n, args) if n == "size" || n == "sample" => {
            for a in args.iter().skip(1) {
                expr(a, f);
            }
        }
        ExprKind::Call(_, args) => {
            for a in args {
                expr(a, f);
            }
        }
        ExprKind::Literal(_) | ExprKind::Missing | ExprKind::Name(_) => {}
    }
}

/// The expressions of one access index: a window's bounds, then the index itself.
pub fn index<'a>(ix: &'a AccessIndex, f: &mut dyn FnMut(&'a Expr)) {
    if let Some((lo, hi)) = &ix.window {
        expr(lo, f);
        expr(hi, f);
    }
    expr(&ix.expr, f);
}

/// Every access, written or read.
pub fn accesses<'a>(stmts: &'a [Stmt], f: &mut dyn FnMut(&'a Access)) {
    writes(stmts, f);
    exprs(stmts, &mut |e| {
        if let ExprKind::Access(a) = &e.kind {
            f(a)
        }
    });
}

/// Every statement, nested ones included (pre-order: a statement before its bodies).
pub fn stmts<'a>(list: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt)) {
    for s in list {
        f(s);
        match &s.kind {
            StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
                stmts(body, f)
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                stmts(then, f);
                stmts(otherwise, f);
            }
            _ => {}
        }
    }
}

/// Every access written by an assignment (directly or in nested statements).
pub fn writes<'a>(list: &'a [Stmt], f: &mut dyn FnMut(&'a Access)) {
    stmts(list, &mut |s| {
        if let StmtKind::Assign { lhs, .. } = &s.kind {
            f(lhs)
        }
    });
}

/// Names of the tensors read and written (directly or in nested statements).
pub fn reads_writes(stmts: &[Stmt]) -> (Vec<String>, Vec<String>) {
    let mut reads = vec![];
    let mut writes = vec![];
    self::stmts(stmts, &mut |s| match &s.kind {
        StmtKind::Assign { lhs, .. } => writes.push(lhs.tensor.clone()),
        StmtKind::Declare { tensor, .. } => writes.push(tensor.clone()),
        _ => {}
    });
    exprs(stmts, &mut |e| match &e.kind {
        ExprKind::Access(a) => reads.push(a.tensor.clone()),
        ExprKind::Name(n) => reads.push(n.clone()),
        _ => {}
    });
    (reads, writes)
}

/// Every span of the program, in a fixed order (reducers, then the body, pre-order). The AST's
/// equality ignores spans (so `parse(print(p)) == p`); this list tells apart programs that
/// differ only in where things are written, which the kernel cache must do because a kernel's
/// faults name the places of its statements.
pub fn spans(p: &Program) -> Vec<Span> {
    let mut out = vec![];
    for r in &p.reducers {
        reducer_spans(r, &mut out);
    }
    stmt_spans(&p.body, &mut out);
    out
}

fn reducer_spans(r: &ReducerDef, out: &mut Vec<Span>) {
    out.push(r.span);
    expr_spans(&r.body, out);
}

fn stmt_spans(stmts: &[Stmt], out: &mut Vec<Span>) {
    for s in stmts {
        out.push(s.span);
        match &s.kind {
            StmtKind::Declare { init, .. } => expr_spans(init, out),
            StmtKind::Assign { lhs, op, rhs } => {
                access_spans(lhs, out);
                if let AssignOp::Reduce(Reducer::User(def)) = op {
                    reducer_spans(def, out);
                }
                expr_spans(rhs, out);
            }
            StmtKind::Loop { extent, body, .. } => {
                if let Extent::Range(a, b) = extent {
                    expr_spans(a, out);
                    expr_spans(b, out);
                }
                stmt_spans(body, out);
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                expr_spans(cond, out);
                stmt_spans(then, out);
                stmt_spans(otherwise, out);
            }
            StmtKind::Let { value, body, .. } => {
                expr_spans(value, out);
                stmt_spans(body, out);
            }
            StmtKind::Block(b) => stmt_spans(b, out),
            StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => {}
        }
    }
}

fn access_spans(a: &Access, out: &mut Vec<Span>) {
    out.push(a.span);
    for ix in &a.indices {
        if let Some((lo, hi)) = &ix.window {
            expr_spans(lo, out);
            expr_spans(hi, out);
        }
        expr_spans(&ix.expr, out);
    }
}

// Unlike `expr`, this visits `size`'s tensor argument too: it has a place like any other.
fn expr_spans(e: &Expr, out: &mut Vec<Span>) {
    out.push(e.span);
    match &e.kind {
        ExprKind::Access(a) => access_spans(a, out),
        ExprKind::Unary(_, x) => expr_spans(x, out),
        ExprKind::Binary(_, x, y) => {
            expr_spans(x, out);
            expr_spans(y, out);
        }
        ExprKind::Call(_, args) => args.iter().for_each(|a| expr_spans(a, out)),
        ExprKind::Literal(_) | ExprKind::Missing | ExprKind::Name(_) => {}
    }
}

/// Call `f` on every expression node of `list` (a node before its operands).
pub fn exprs_mut(list: &mut [Stmt], f: &mut dyn FnMut(&mut Expr)) {
    for s in list {
        match &mut s.kind {
            StmtKind::Declare { init, .. } => expr_mut(init, f),
            StmtKind::Assign { lhs, rhs, .. } => {
                for ix in &mut lhs.indices {
                    expr_mut(&mut ix.expr, f);
                    if let Some((lo, hi)) = &mut ix.window {
                        expr_mut(lo, f);
                        expr_mut(hi, f);
                    }
                }
                expr_mut(rhs, f);
            }
            StmtKind::Loop { extent, body, .. } => {
                if let Extent::Range(a, b) = extent {
                    expr_mut(a, f);
                    expr_mut(b, f);
                }
                exprs_mut(body, f);
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                expr_mut(cond, f);
                exprs_mut(then, f);
                exprs_mut(otherwise, f);
            }
            StmtKind::Let { value, body, .. } => {
                expr_mut(value, f);
                exprs_mut(body, f);
            }
            StmtKind::Block(body) => exprs_mut(body, f),
            StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => {}
        }
    }
}

/// Call `f` on every node of `e` (a node before its operands).
pub fn expr_mut(e: &mut Expr, f: &mut dyn FnMut(&mut Expr)) {
    f(e);
    match &mut e.kind {
        ExprKind::Access(a) => {
            for ix in &mut a.indices {
                expr_mut(&mut ix.expr, f);
                if let Some((lo, hi)) = &mut ix.window {
                    expr_mut(lo, f);
                    expr_mut(hi, f);
                }
            }
        }
        ExprKind::Unary(_, x) => expr_mut(x, f),
        ExprKind::Binary(_, x, y) => {
            expr_mut(x, f);
            expr_mut(y, f);
        }
        ExprKind::Call(_, args) => args.iter_mut().for_each(|a| expr_mut(a, f)),
        ExprKind::Name(_) | ExprKind::Literal(_) | ExprKind::Missing => {}
    }
}

/// `stmts` with `f` applied to every expression, up to where a loop or `let` binds a name
/// for which `bound` holds. A write whose target `f` makes something other than an access
/// (`missing`) is dropped.
pub fn rewrite_scoped(
    stmts: &[Stmt],
    bound: &dyn Fn(&str) -> bool,
    f: &dyn Fn(&Expr) -> Expr,
) -> Vec<Stmt> {
    let mut out = vec![];
    for s in stmts {
        let kind = match &s.kind {
            StmtKind::Assign { lhs, op, rhs } => {
                let target = f(&Expr::new(ExprKind::Access(lhs.clone()), lhs.span));
                let ExprKind::Access(lhs) = target.kind else {
                    continue;
                };
                StmtKind::Assign {
                    lhs,
                    op: op.clone(),
                    rhs: f(rhs),
                }
            }
            StmtKind::Declare { tensor, init } => StmtKind::Declare {
                tensor: tensor.clone(),
                init: f(init),
            },
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => StmtKind::If {
                cond: f(cond),
                then: rewrite_scoped(then, bound, f),
                otherwise: rewrite_scoped(otherwise, bound, f),
            },
            StmtKind::Let { name, value, body } => StmtKind::Let {
                name: name.clone(),
                value: f(value),
                body: if bound(name) {
                    body.clone()
                } else {
                    rewrite_scoped(body, bound, f)
                },
            },
            StmtKind::Loop {
                index,
                extent,
                body,
                parallel,
            } => StmtKind::Loop {
                index: index.clone(),
                extent: match extent {
                    Extent::Range(a, b) => Extent::Range(f(a), f(b)),
                    Extent::Auto => Extent::Auto,
                },
                body: if bound(index) {
                    body.clone()
                } else {
                    rewrite_scoped(body, bound, f)
                },
                parallel: *parallel,
            },
            StmtKind::Block(b) => StmtKind::Block(rewrite_scoped(b, bound, f)),
            other => other.clone(),
        };
        out.push(Stmt::new(kind, s.span));
    }
    out
}
