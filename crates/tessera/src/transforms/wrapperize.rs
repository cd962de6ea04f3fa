//! Wrapperization of the view syntax: windows and swizzles are compiled away at the AST level,
//! before every other pass, as Finch does.
//!
//! - `swizzle(A, p...)[i...]` addresses dimension `p[k]` of `A` with index `k`, so it is `A`
//!   accessed with its index list permuted (`swizzle(A, 1, 0)[i, j]` is `A[j, i]`); a
//!   non-concordant result is then concordization's business, like any transposed access.
//! - `A[(lo:hi)(i)]` is `A[i + lo]` (just `A[i]` when `lo` is the literal 0). A window is a
//!   dimension of size `hi - lo + 1`, so it can size a loop: a `for i = _` whose index
//!   indexes no tensor directly but does index a window becomes `for i = 0:hi - lo`, with the
//!   first such window's bounds. Those bounds must then be computable before the loop starts:
//!   they may not use `i` or a name bound inside the loop.
//!
//! The sizes of windows that meet another extent of the same index, and windows that leave
//! their tensor, are checked with the tensors' shapes by `dimensionalize::infer_shapes` when
//! the window's size (or its bounds) are the same for every value of the names they use; the
//! reference evaluator checks every window when it runs.

use crate::error::{Error, Result};
use crate::notation::ast::{
    Access, AccessIndex, BinaryOp, Expr, ExprKind, Extent, Program, Span, Stmt, StmtKind,
};
use crate::notation::parse::swizzle_problem;
use crate::notation::visit;
use crate::types::Scalar;

/// Remove every window and swizzle (after checking them).
pub fn wrapperize(p: &Program) -> Result<Program> {
    check_wrappers(p)?;
    Ok(p.with_body(stmts(&p.body)?))
}

/// The static rules of windows and swizzles, shared with the reference evaluator: swizzles are
/// permutations of the access's indices, windows are not permissive and do not use the index
/// they window, and a window that sizes a `_` loop can be computed before that loop.
pub fn check_wrappers(p: &Program) -> Result<()> {
    let mut err = None;
    visit::accesses(&p.body, &mut |a: &Access| {
        if err.is_none() {
            err = check_access(a).err();
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    check_loops(&p.body)
}

fn check_access(a: &Access) -> Result<()> {
    if let Some(perm) = &a.swizzle {
        if let Some(msg) = swizzle_problem(perm) {
            return Err(Error::program(a.span, format!("`{}`: {msg}", a.tensor)));
        }
        if perm.len() != a.indices.len() {
            return Err(Error::program(
                a.span,
                format!(
                    "`swizzle` of {} dimensions of `{}` accessed with {} indices",
                    perm.len(),
                    a.tensor,
                    a.indices.len()
                ),
            ));
        }
    }
    for ix in &a.indices {
        let Some((lo, hi)) = &ix.window else { continue };
        if ix.permissive {
            return Err(Error::unsupported(
                lo.span,
                format!(
                    "a permissive window `~(lo:hi)(i)` on `{}`; write `coalesce` with an `if` on the window's bounds instead",
                    a.tensor
                ),
            ));
        }
        if let ExprKind::Name(i) = &ix.expr.kind
            && let Some(span) = uses_name(lo, i).or_else(|| uses_name(hi, i))
        {
            return Err(Error::program(
                span,
                format!(
                    "the bounds of a window of `{}` use `{i}`, the index the window is indexed by",
                    a.tensor
                ),
            ));
        }
    }
    Ok(())
}

/// Where `e` uses the name `n`, if it does.
fn uses_name(e: &Expr, n: &str) -> Option<Span> {
    let mut at = None;
    visit::expr(e, &mut |x| {
        if at.is_none() && matches!(&x.kind, ExprKind::Name(m) if m == n) {
            at = Some(x.span);
        }
    });
    at
}

fn check_loops(body: &[Stmt]) -> Result<()> {
    for s in body {
        match &s.kind {
            StmtKind::Loop {
                index,
                extent,
                body,
                ..
            } => {
                if *extent == Extent::Auto {
                    auto_window(body, index, s.span)?;
                }
                check_loops(body)?;
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                check_loops(then)?;
                check_loops(otherwise)?;
            }
            StmtKind::Let { body, .. } | StmtKind::Block(body) => check_loops(body)?,
            _ => {}
        }
    }
    Ok(())
}

/// A window `(lo:hi)(index)` in a loop body.
pub struct WindowUse<'a> {
    pub tensor: &'a str,
    /// The tensor's dimension the window is taken from.
    pub dim: usize,
    pub lo: &'a Expr,
    pub hi: &'a Expr,
    pub span: Span,
    /// Loop indices and `let` variables bound between the loop and the access.
    pub bound_inside: Vec<String>,
}

/// Whether `index` indexes some tensor directly (a plain, non-permissive, unwindowed name).
pub fn is_direct(ix: &AccessIndex, index: &str) -> bool {
    !ix.permissive
        && ix.window.is_none()
        && matches!(&ix.expr.kind, ExprKind::Name(n) if n == index)
}

/// Every window indexed by `index` in `body`, in program order.
pub fn window_uses<'a>(body: &'a [Stmt], index: &str) -> Vec<WindowUse<'a>> {
    let mut out = vec![];
    let mut bound = vec![];
    walk(body, index, &mut bound, &mut out);
    out
}

fn walk<'a>(body: &'a [Stmt], index: &str, bound: &mut Vec<String>, out: &mut Vec<WindowUse<'a>>) {
    let exprs = |e: &'a Expr, bound: &Vec<String>, out: &mut Vec<WindowUse<'a>>| {
        visit::expr(e, &mut |x| {
            if let ExprKind::Access(a) = &x.kind {
                windows_of(a, index, bound, out);
            }
        })
    };
    for s in body {
        match &s.kind {
            StmtKind::Declare { init, .. } => exprs(init, bound, out),
            StmtKind::Assign { lhs, rhs, .. } => {
                windows_of(lhs, index, bound, out);
                for ix in &lhs.indices {
                    visit::index(ix, &mut |x| {
                        if let ExprKind::Access(a) = &x.kind {
                            windows_of(a, index, bound, out);
                        }
                    });
                }
                exprs(rhs, bound, out);
            }
            StmtKind::Loop {
                index: i,
                extent,
                body,
                ..
            } => {
                if let Extent::Range(a, b) = extent {
                    exprs(a, bound, out);
                    exprs(b, bound, out);
                }
                bound.push(i.clone());
                walk(body, index, bound, out);
                bound.pop();
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                exprs(cond, bound, out);
                walk(then, index, bound, out);
                walk(otherwise, index, bound, out);
            }
            StmtKind::Let { name, value, body } => {
                exprs(value, bound, out);
                bound.push(name.clone());
                walk(body, index, bound, out);
                bound.pop();
            }
            StmtKind::Block(body) => walk(body, index, bound, out),
            StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => {}
        }
    }
}

fn windows_of<'a>(a: &'a Access, index: &str, bound: &[String], out: &mut Vec<WindowUse<'a>>) {
    for (k, ix) in a.indices.iter().enumerate() {
        if let Some((lo, hi)) = &ix.window
            && !ix.permissive
            && matches!(&ix.expr.kind, ExprKind::Name(n) if n == index)
        {
            out.push(WindowUse {
                tensor: &a.tensor,
                dim: a.dim_of(k),
                lo,
                hi,
                span: a.span,
                bound_inside: bound.to_vec(),
            });
        }
    }
}

/// Whether the window's bounds can be computed where its loop starts (they use no name bound
/// inside the loop).
pub fn hoistable(w: &WindowUse) -> bool {
    w.bound_inside
        .iter()
        .all(|n| uses_name(w.lo, n).is_none() && uses_name(w.hi, n).is_none())
}

/// The window that sizes `for index = _` (at `span`) when no tensor is indexed by `index`
/// directly: the first one, whose bounds must not use names bound inside the loop.
pub fn auto_window<'a>(body: &'a [Stmt], index: &str, span: Span) -> Result<Option<WindowUse<'a>>> {
    let mut direct = false;
    visit::accesses(body, &mut |a: &Access| {
        direct |= a.indices.iter().any(|ix| is_direct(ix, index));
    });
    if direct {
        return Ok(None);
    }
    let Some(w) = window_uses(body, index).into_iter().next() else {
        return Ok(None);
    };
    for n in &w.bound_inside {
        if let Some(at) = uses_name(w.lo, n).or_else(|| uses_name(w.hi, n)) {
            return Err(Error::program(
                at,
                format!(
                    "this window of `{}` sizes the loop over `{index}` at {span} but uses `{n}`, which is bound inside that loop",
                    w.tensor
                ),
            ));
        }
    }
    Ok(Some(w))
}

fn binary(op: BinaryOp, a: Expr, b: Expr) -> Expr {
    let span = a.span;
    Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), span)
}

fn is_zero(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Literal(Scalar::I64(0)))
}

fn stmts(body: &[Stmt]) -> Result<Vec<Stmt>> {
    body.iter().map(stmt).collect()
}

fn stmt(s: &Stmt) -> Result<Stmt> {
    let kind = match &s.kind {
        StmtKind::Declare { tensor, init } => StmtKind::Declare {
            tensor: tensor.clone(),
            init: expr(init),
        },
        StmtKind::Assign { lhs, op, rhs } => StmtKind::Assign {
            lhs: access(lhs),
            op: op.clone(),
            rhs: expr(rhs),
        },
        StmtKind::Loop {
            index,
            extent,
            body,
            parallel,
        } => {
            let extent = match extent {
                Extent::Range(a, b) => Extent::Range(expr(a), expr(b)),
                Extent::Auto => match auto_window(body, index, s.span)? {
                    Some(w) => {
                        let (lo, hi) = (expr(w.lo), expr(w.hi));
                        let zero = Expr::new(ExprKind::Literal(Scalar::I64(0)), s.span);
                        let last = if is_zero(&lo) {
                            hi
                        } else {
                            binary(BinaryOp::Sub, hi, lo)
                        };
                        Extent::Range(zero, last)
                    }
                    None => Extent::Auto,
                },
            };
            StmtKind::Loop {
                index: index.clone(),
                extent,
                body: stmts(body)?,
                parallel: *parallel,
            }
        }
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => StmtKind::If {
            cond: expr(cond),
            then: stmts(then)?,
            otherwise: stmts(otherwise)?,
        },
        StmtKind::Let { name, value, body } => StmtKind::Let {
            name: name.clone(),
            value: expr(value),
            body: stmts(body)?,
        },
        StmtKind::Block(body) => StmtKind::Block(stmts(body)?),
        k @ (StmtKind::Freeze { .. } | StmtKind::Thaw { .. }) => k.clone(),
    };
    Ok(Stmt::new(kind, s.span))
}

fn expr(e: &Expr) -> Expr {
    let kind = match &e.kind {
        ExprKind::Access(a) => ExprKind::Access(access(a)),
        ExprKind::Unary(op, x) => ExprKind::Unary(*op, Box::new(expr(x))),
        ExprKind::Binary(op, x, y) => ExprKind::Binary(*op, Box::new(expr(x)), Box::new(expr(y))),
        ExprKind::Call(n, args) => ExprKind::Call(n.clone(), args.iter().map(expr).collect()),
        k => k.clone(),
    };
    Expr::new(kind, e.span)
}

/// The access without views: windows become offsets, then the swizzle permutes the indices.
fn access(a: &Access) -> Access {
    let mut indices: Vec<AccessIndex> = a
        .indices
        .iter()
        .map(|ix| {
            let inner = expr(&ix.expr);
            let expr = match &ix.window {
                Some((lo, _)) if is_zero(lo) => inner,
                Some((lo, _)) => binary(BinaryOp::Add, inner, expr(lo)),
                None => inner,
            };
            AccessIndex {
                expr,
                permissive: ix.permissive,
                protocol: ix.protocol,
                window: None,
            }
        })
        .collect();
    if let Some(perm) = &a.swizzle {
        // Index k addresses dimension perm[k]; `check_wrappers` made perm a permutation.
        let mut slots: Vec<Option<AccessIndex>> = vec![None; indices.len()];
        for (k, ix) in indices.drain(..).enumerate() {
            slots[perm[k]] = Some(ix);
        }
        indices = slots.into_iter().flatten().collect();
    }
    Access {
        tensor: a.tensor.clone(),
        indices,
        swizzle: None,
        span: a.span,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_program;

    fn wrap(text: &str) -> Result<String> {
        wrapperize(&parse_program(text).unwrap()).map(|p| p.to_string())
    }

    #[test]
    fn swizzles_permute_the_indices() {
        assert_eq!(
            wrap("for i = _, j = _\n  y[i] += swizzle(A, 1, 0)[i, j] * x[j]\nend").unwrap(),
            "for i = _, j = _\n  y[i] += A[j, i] * x[j]\nend\n"
        );
        // Index k goes to dimension perm[k]: (i, j, k) into dimensions (2, 0, 1).
        assert_eq!(
            wrap("s[] += swizzle(B, 2, 0, 1)[i, j, k]").unwrap(),
            "s[] += B[j, k, i]\n"
        );
        // Nested swizzles compose: swapping twice is the identity.
        assert_eq!(
            wrap("s[] += swizzle(swizzle(A, 1, 0), 1, 0)[i, j]").unwrap(),
            "s[] += A[i, j]\n"
        );
        assert_eq!(
            wrap("swizzle(C, 1, 0)[i, gallop(j)] = A[i, j]").unwrap(),
            "C[gallop(j), i] = A[i, j]\n"
        );
    }

    #[test]
    fn windows_become_offsets_and_size_their_loops() {
        assert_eq!(
            wrap("for i = _\n  y[i] = A[(2:4)(i)]\nend").unwrap(),
            "for i = _\n  y[i] = A[i + 2]\nend\n"
        );
        assert_eq!(
            wrap("for i = _\n  s[] += A[(2:n - 1)(i)]\nend").unwrap(),
            "for i = 0:n - 1 - 2\n  s[] += A[i + 2]\nend\n"
        );
        assert_eq!(
            wrap("for i = _\n  s[] += A[(0:size(A, 0) - 2)(i)]\nend").unwrap(),
            "for i = 0:size(A, 0) - 2\n  s[] += A[i]\nend\n"
        );
        // Sliding windows: the bounds use an outer index.
        assert_eq!(
            wrap("for j = _, i = _\n  y[j] += A[(j:j + 2)(i)] * w[i]\nend").unwrap(),
            "for j = _, i = _\n  y[j] += A[i + j] * w[i]\nend\n"
        );
        assert_eq!(
            wrap("for j = 0:3, i = _\n  y[j] += A[(j:j + 2)(i)]\nend").unwrap(),
            "for j = 0:3, i = 0:j + 2 - j\n  y[j] += A[i + j]\nend\n"
        );
        // Windows of swizzled views index the view's dimension.
        assert_eq!(
            wrap("for i = _, j = _\n  s[] += swizzle(A, 1, 0)[(1:2)(i), j]\nend").unwrap(),
            "for i = 0:2 - 1, j = _\n  s[] += A[j, i + 1]\nend\n"
        );
        // Windows inside window bounds.
        assert_eq!(
            wrap("for i = _\n  s[] += A[(B[(1:1)(k)]:3)(i)]\nend").unwrap(),
            "for i = 0:3 - B[k + 1]\n  s[] += A[i + B[k + 1]]\nend\n"
        );
    }

    #[test]
    fn bad_views_are_errors() {
        let e = |t: &str| wrap(t).unwrap_err().to_string();
        assert_eq!(
            e(
                "for i = _\n  s[] += A[(0:k)(i)]\nend\nfor i = _, k = _\n  s[] += A[(0:k)(i)] * B[k]\nend"
            ),
            "5:15: this window of `A` sizes the loop over `i` at 4:1 but uses `k`, which is bound inside that loop"
        );
        assert_eq!(
            e("for i = _\n  let t = 2\n    s[] += A[(t:4)(i)]\n  end\nend"),
            "3:15: this window of `A` sizes the loop over `i` at 1:1 but uses `t`, which is bound inside that loop"
        );
        assert_eq!(
            e("s[] += A[(i:4)(i)]"),
            "1:11: the bounds of a window of `A` use `i`, the index the window is indexed by"
        );
        assert_eq!(
            e("s[] += A[~(0:4)(i)]"),
            "1:12: unsupported: a permissive window `~(lo:hi)(i)` on `A`; write `coalesce` with an `if` on the window's bounds instead"
        );
        use crate::notation::build::*;
        let with_perm = |perm: &[usize]| {
            let a = access("A", [idx("i"), idx("j")]).swizzled(perm);
            wrapperize(&program([assign(access("s", []), Reducer::Add, read(a))]))
                .unwrap_err()
                .to_string()
        };
        // A built program has no text: the message names the tensor, not `0:0`.
        assert_eq!(
            with_perm(&[0, 0]),
            "`A`: swizzle dimensions (0, 0) are not a permutation of 0..2"
        );
        assert_eq!(
            with_perm(&[0]),
            "`swizzle` of 1 dimensions of `A` accessed with 2 indices"
        );
    }
}
