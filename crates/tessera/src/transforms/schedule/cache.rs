//! `cache(i, T)` (`precompute`) and `cache_reduce(i, T)`: a dense workspace `T.cache` for the
//! part of `T` one iteration of loop `i` touches (FreeTensor's `cache` / `cache_reduction`).
//!
//! Bounds (FreeTensor Fig. 14, restricted to what the notation's indices usually are): every
//! access of `T` in the body must index each dimension by `o + v` or `o`, where `v` is the
//! index of a loop inside the body (the same one in every access) and `o` an expression of
//! names bound outside the body (the same in every access). A dimension with `v` becomes a
//! workspace dimension over `v`'s extent (`T.cache[v - lo]` stands for `T[o + v]`); one
//! without is fixed during the iteration and dropped (`y[i]` inside loop `i` caches into the
//! 0-d `y.cache[]`).
//!
//! - `cache`: declare `T.cache`, copy the region in, redirect every access of the body, copy
//!   the region back out if the body writes `T`. Every access sees the values it saw before,
//!   in the same order, so it is always legal (FreeTensor Table 1).
//! - `cache_reduce`: the body may only reduce into `T`, with one reducer that is commutative
//!   and associative and has an identity (`+=`, `*=`, `&=`, `|=`, a user reducer declaring
//!   them); the workspace starts at the identity and is reduced into `T` once after the body.
//!   This regroups the reduction (FreeTensor assumes the same), so float sums may round
//!   differently.
//!
//! The workspace is a tensor of the program like any other: the caller gives it (its format,
//! dense or not, is the caller's choice; `--out T.cache@FORMAT` on the command line).

use super::loops::{bin, lit, name, resolved};
use super::names::{find_loop, get, mentions, parent_mut, used};
use super::{Located, LoopRef};
use crate::error::Result;
use crate::notation::ast::{
    Access, AccessIndex, AssignOp, BinaryOp, Expr, ExprKind, Extent, Program, Reducer, Stmt,
    StmtKind,
};
use crate::types::Scalar;

/// One workspace dimension: the inner loop index and its extent.
struct Dim {
    offset: Expr,
    inner: Option<(String, Expr, Expr)>,
}

/// Names bound inside the body, with the extents of the loops among them.
fn bound_inside(body: &[Stmt]) -> Vec<(String, Option<(Expr, Expr)>)> {
    let mut out = vec![];
    crate::notation::visit::stmts(body, &mut |s| match &s.kind {
        StmtKind::Loop {
            index,
            extent: Extent::Range(a, b),
            ..
        } => out.push((index.clone(), Some((a.clone(), b.clone())))),
        StmtKind::Loop { index, .. } => out.push((index.clone(), None)),
        StmtKind::Let { name, .. } => out.push((name.clone(), None)),
        _ => {}
    });
    out
}

/// `e` as (offset, inner index): `v`, `o + v`, `v + o`, or `o`.
fn split_index(
    e: &Expr,
    inner: &[(String, Option<(Expr, Expr)>)],
) -> Option<(Expr, Option<String>)> {
    let is_inner = |x: &Expr| match &x.kind {
        ExprKind::Name(n) => inner.iter().any(|(m, _)| m == n).then(|| n.clone()),
        _ => None,
    };
    let free = |x: &Expr| !inner.iter().any(|(m, _)| mentions(x, m));
    if let Some(v) = is_inner(e) {
        return Some((lit(0, e.span), Some(v)));
    }
    if let ExprKind::Binary(BinaryOp::Add, a, b) = &e.kind {
        if let Some(v) = is_inner(b)
            && free(a)
        {
            return Some(((**a).clone(), Some(v)));
        }
        if let Some(v) = is_inner(a)
            && free(b)
        {
            return Some(((**b).clone(), Some(v)));
        }
    }
    free(e).then(|| (e.clone(), None))
}

fn accesses_of<'a>(body: &'a [Stmt], t: &str) -> Vec<&'a Access> {
    let mut out = vec![];
    crate::notation::visit::accesses(body, &mut |a| {
        if a.tensor == t {
            out.push(a)
        }
    });
    out
}

fn identity(r: &Reducer, p: &Program) -> Option<Scalar> {
    match r {
        Reducer::Add => Some(Scalar::I64(0)),
        Reducer::Mul => Some(Scalar::I64(1)),
        Reducer::And => Some(Scalar::Bool(true)),
        Reducer::Or => Some(Scalar::Bool(false)),
        Reducer::User(d) if d.commutative && d.associative => d.identity,
        Reducer::Named(n) => p
            .reducers
            .iter()
            .find(|d| d.name == *n && d.commutative && d.associative)
            .and_then(|d| d.identity),
        _ => None,
    }
}

/// Rewrite every access of `t` into the workspace.
fn redirect(body: &[Stmt], t: &str, ws: &str, dims: &[Dim]) -> Vec<Stmt> {
    fn expr(e: &Expr, t: &str, ws: &str, dims: &[Dim]) -> Expr {
        let kind = match &e.kind {
            ExprKind::Access(a) if a.tensor == t => ExprKind::Access(target(a, ws, dims)),
            ExprKind::Access(a) => {
                let mut a = a.clone();
                for ix in &mut a.indices {
                    ix.expr = expr(&ix.expr, t, ws, dims);
                }
                ExprKind::Access(a)
            }
            ExprKind::Unary(op, x) => ExprKind::Unary(*op, Box::new(expr(x, t, ws, dims))),
            ExprKind::Binary(op, x, y) => ExprKind::Binary(
                *op,
                Box::new(expr(x, t, ws, dims)),
                Box::new(expr(y, t, ws, dims)),
            ),
            ExprKind::Call(f, args) => ExprKind::Call(
                f.clone(),
                args.iter().map(|a| expr(a, t, ws, dims)).collect(),
            ),
            k => k.clone(),
        };
        Expr::new(kind, e.span)
    }
    body.iter()
        .map(|s| {
            let kind = match &s.kind {
                StmtKind::Assign { lhs, op, rhs } => StmtKind::Assign {
                    lhs: if lhs.tensor == t {
                        target(lhs, ws, dims)
                    } else {
                        let ExprKind::Access(a) = expr(
                            &Expr::new(ExprKind::Access(lhs.clone()), lhs.span),
                            t,
                            ws,
                            dims,
                        )
                        .kind
                        else {
                            unreachable!("an access stays an access")
                        };
                        a
                    },
                    op: op.clone(),
                    rhs: expr(rhs, t, ws, dims),
                },
                StmtKind::Loop {
                    index,
                    extent,
                    body,
                    parallel,
                } => StmtKind::Loop {
                    parallel: *parallel,
                    index: index.clone(),
                    extent: match extent {
                        Extent::Range(a, b) => {
                            Extent::Range(expr(a, t, ws, dims), expr(b, t, ws, dims))
                        }
                        Extent::Auto => Extent::Auto,
                    },
                    body: redirect(body, t, ws, dims),
                },
                StmtKind::If {
                    cond,
                    then,
                    otherwise,
                } => StmtKind::If {
                    cond: expr(cond, t, ws, dims),
                    then: redirect(then, t, ws, dims),
                    otherwise: redirect(otherwise, t, ws, dims),
                },
                StmtKind::Let { name, value, body } => StmtKind::Let {
                    name: name.clone(),
                    value: expr(value, t, ws, dims),
                    body: redirect(body, t, ws, dims),
                },
                StmtKind::Block(b) => StmtKind::Block(redirect(b, t, ws, dims)),
                StmtKind::Declare { tensor, init } => StmtKind::Declare {
                    tensor: tensor.clone(),
                    init: expr(init, t, ws, dims),
                },
                k => k.clone(),
            };
            Stmt::new(kind, s.span)
        })
        .collect()
}

/// `T[o + v, ...]` → `T.cache[v - lo, ...]` (dimensions without an inner index dropped).
fn target(a: &Access, ws: &str, dims: &[Dim]) -> Access {
    let mut indices = vec![];
    for (k, ix) in a.indices.iter().enumerate() {
        if let Some((v, lo, _)) = &dims[a.dim_of(k)].inner {
            let _ = ix;
            indices.push(plain(bin(BinaryOp::Sub, name(v, a.span), lo.clone())));
        }
    }
    Access {
        tensor: ws.to_string(),
        indices,
        swizzle: None,
        span: a.span,
    }
}

fn plain(e: Expr) -> AccessIndex {
    AccessIndex {
        expr: e,
        permissive: false,
        protocol: None,
        window: None,
    }
}

/// A nest over the workspace's dimensions around one assignment between `T` and the cache.
fn copy(
    t: &str,
    ws: &str,
    dims: &[Dim],
    op: AssignOp,
    into_cache: bool,
    span: crate::span::Span,
) -> Stmt {
    let full = Access {
        tensor: t.to_string(),
        indices: dims
            .iter()
            .map(|d| match &d.inner {
                Some((v, _, _)) => plain(bin(BinaryOp::Add, d.offset.clone(), name(v, span))),
                None => plain(d.offset.clone()),
            })
            .collect(),
        swizzle: None,
        span,
    };
    let cached = Access {
        tensor: ws.to_string(),
        indices: dims
            .iter()
            .filter_map(|d| d.inner.as_ref())
            .map(|(v, lo, _)| plain(bin(BinaryOp::Sub, name(v, span), lo.clone())))
            .collect(),
        swizzle: None,
        span,
    };
    let (lhs, rhs) = if into_cache {
        (cached, full)
    } else {
        (full, cached)
    };
    let mut s = Stmt::new(
        StmtKind::Assign {
            lhs,
            op,
            rhs: Expr::new(ExprKind::Access(rhs), span),
        },
        span,
    );
    for d in dims.iter().rev() {
        if let Some((v, lo, hi)) = &d.inner {
            s = Stmt::new(
                StmtKind::Loop {
                    index: v.clone(),
                    extent: Extent::Range(lo.clone(), hi.clone()),
                    body: vec![s],
                    parallel: crate::notation::ast::LoopMode::Serial,
                },
                span,
            );
        }
    }
    s
}

pub fn cache(
    p: &Program,
    c: &Located,
    target_loop: &LoopRef,
    t: &str,
    reduce: bool,
) -> Result<Program> {
    let path = find_loop(&p.body, c, target_loop)?;
    let (i, lo, hi, body, span) = resolved(get(&p.body, &path), c)?;
    let accs = accesses_of(&body, t);
    if accs.is_empty() {
        return Err(c.error(format!("loop `{i}` does not access `{t}`")));
    }
    let ws = format!("{t}.cache");
    if used(&p.body, &ws) {
        return Err(c.error(format!("the workspace name `{ws}` is already used")));
    }
    let inner = bound_inside(&body);
    let rank = accs[0].indices.len();
    let mut dims: Vec<Option<(Expr, Option<String>)>> = vec![None; rank];
    for a in &accs {
        if a.indices.len() != rank {
            return Err(c.error(format!("`{t}` is accessed with different ranks")));
        }
        for (k, ix) in a.indices.iter().enumerate() {
            let d = a.dim_of(k);
            let got = (ix.window.is_none() && !ix.permissive)
                .then(|| split_index(&ix.expr, &inner))
                .flatten()
                .ok_or_else(|| {
                    c.error(format!(
                        "cannot bound `{a}`: index `{}` is not `o + v` with `v` a loop inside `{i}`",
                        ix.expr
                    ))
                })?;
            match &dims[d] {
                None => dims[d] = Some(got),
                Some(prev) if *prev == got => {}
                Some(_) => {
                    return Err(c.error(format!(
                        "the accesses of `{t}` index dimension {d} differently; one workspace cannot hold them"
                    )));
                }
            }
        }
    }
    let mut ws_dims = vec![];
    for d in dims.into_iter().map(|d| d.expect("every dimension seen")) {
        let inner = match d.1 {
            None => None,
            Some(v) => {
                let (a, b) = inner
                    .iter()
                    .find(|(m, _)| *m == v)
                    .and_then(|(_, e)| e.clone())
                    .ok_or_else(|| c.error(format!("the extent of loop `{v}` is not known")))?;
                if inner
                    .iter()
                    .any(|(m, _)| mentions(&a, m) || mentions(&b, m))
                {
                    return Err(c.error(format!(
                        "the extent of `{v}` depends on another loop inside `{i}`"
                    )));
                }
                if inner.iter().filter(|(m, _)| *m == v).count() > 1 {
                    return Err(c.error(format!("several loops inside `{i}` are named `{v}`")));
                }
                Some((v, a, b))
            }
        };
        ws_dims.push(Dim { offset: d.0, inner });
    }
    let (_, written) = crate::notation::visit::reads_writes(&body);
    let mut new_body = vec![];
    if reduce {
        let mut op = None;
        let mut other = false;
        crate::notation::visit::stmts(&body, &mut |s| {
            if let StmtKind::Assign { lhs, op: o, .. } = &s.kind
                && lhs.tensor == t
            {
                match (o, &op) {
                    (AssignOp::Reduce(r), None) => op = Some(r.clone()),
                    (AssignOp::Reduce(r), Some(prev)) if r == prev => {}
                    _ => other = true,
                }
            }
        });
        let reads = accs.len() != {
            let mut n = 0;
            crate::notation::visit::writes(&body, &mut |a| n += usize::from(a.tensor == t));
            n
        };
        let Some(r) = op.filter(|_| !other && !reads) else {
            return Err(c.error(format!(
                "`cache_reduce` needs every access of `{t}` in `{i}` to reduce into it with one reducer"
            )));
        };
        let id = identity(&r, p).ok_or_else(|| {
            c.error(format!(
                "the reducer `{r}` has no identity or is not commutative and associative"
            ))
        })?;
        new_body.push(Stmt::new(
            StmtKind::Declare {
                tensor: ws.clone(),
                init: Expr::new(ExprKind::Literal(id), span),
            },
            span,
        ));
        new_body.extend(redirect(&body, t, &ws, &ws_dims));
        new_body.push(copy(t, &ws, &ws_dims, AssignOp::Reduce(r), false, span));
    } else {
        new_body.push(Stmt::new(
            StmtKind::Declare {
                tensor: ws.clone(),
                init: lit(0, span),
            },
            span,
        ));
        new_body.push(copy(t, &ws, &ws_dims, AssignOp::Overwrite, true, span));
        new_body.extend(redirect(&body, t, &ws, &ws_dims));
        if written.iter().any(|w| w == t) {
            new_body.push(copy(t, &ws, &ws_dims, AssignOp::Overwrite, false, span));
        }
    }
    let lp = Stmt::new(
        StmtKind::Loop {
            index: i,
            extent: Extent::Range(lo, hi),
            body: new_body,
            parallel: crate::notation::ast::LoopMode::Serial,
        },
        span,
    );
    let mut out = p.body.clone();
    let at = path.last().expect("a path").1;
    parent_mut(&mut out, &path)[at] = lp;
    Ok(p.with_body(out))
}
