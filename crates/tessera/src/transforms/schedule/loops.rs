//! `split`, `merge` and `unroll`: they change how iterations are numbered, never their
//! order, so every dependence keeps its direction and they need no dependence check (Table 1
//! of FreeTensor: "always legal"). What can refuse them is their shape: an extent that is not
//! known, a nest that is not perfect, an extent too large to unroll.

use super::names::{Path, find_loop, get, mentions, parent_mut, subst_stmts, used};
use super::{Located, LoopRef};
use crate::error::Result;
use crate::notation::ast::{BinaryOp, Expr, ExprKind, Extent, Program, Span, Stmt, StmtKind};
use crate::types::Scalar;

/// Unrolling copies the body once per iteration; more than this many copies is refused.
pub const UNROLL_LIMIT: i64 = 64;

pub(super) fn lit(v: i64, span: Span) -> Expr {
    Expr::new(ExprKind::Literal(Scalar::I64(v)), span)
}

pub(super) fn as_lit(e: &Expr) -> Option<i64> {
    match &e.kind {
        ExprKind::Literal(Scalar::I64(v)) => Some(*v),
        _ => None,
    }
}

pub(super) fn name(n: &str, span: Span) -> Expr {
    Expr::new(ExprKind::Name(n.to_string()), span)
}

/// `a op b`, folded when both are literals (and `x + 0`, `x * 1`, `0 + x` left as `x`).
pub(super) fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
    let span = a.span;
    match (op, as_lit(&a), as_lit(&b)) {
        (BinaryOp::Add, Some(x), Some(y)) if x.checked_add(y).is_some() => lit(x + y, span),
        (BinaryOp::Sub, Some(x), Some(y)) if x.checked_sub(y).is_some() => lit(x - y, span),
        (BinaryOp::Mul, Some(x), Some(y)) if x.checked_mul(y).is_some() => lit(x * y, span),
        (BinaryOp::Add | BinaryOp::Sub, _, Some(0)) | (BinaryOp::Mul, _, Some(1)) => a,
        (BinaryOp::Add, Some(0), _) | (BinaryOp::Mul, Some(1), _) => b,
        _ => Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), span),
    }
}

/// `div(a, b)` (truncating; only used on non-negative `a`), folded on literals.
pub(super) fn div(a: Expr, b: Expr) -> Expr {
    let span = a.span;
    match (as_lit(&a), as_lit(&b)) {
        (Some(x), Some(y)) if y > 0 => lit(x.div_euclid(y), span),
        (_, Some(1)) => a,
        _ => Expr::new(ExprKind::Call("div".into(), vec![a, b]), span),
    }
}

/// The loop at `path` with a `_` extent replaced by `0:size(A, d) - 1` from a tensor its
/// index indexes directly (what the lowering would infer); `(index, lo, hi, body, span)`.
/// Only this loop's extent: the loops nested in its body keep their `_`, which tells the
/// lowering that the index stays inside every dimension it indexes directly (an explicit
/// range makes every such access check its index, in the innermost loop).
pub(super) fn resolved(s: &Stmt, c: &Located) -> Result<(String, Expr, Expr, Vec<Stmt>, Span)> {
    let one = Program {
        reducers: vec![],
        body: vec![s.clone()],
    };
    let r = crate::transforms::resolve_auto_extents(&one).body.remove(0);
    let original = match &s.kind {
        StmtKind::Loop { body, .. } => body.clone(),
        _ => vec![],
    };
    match r.kind {
        StmtKind::Loop {
            index,
            extent: Extent::Range(lo, hi),
            ..
        } => Ok((index, lo, hi, original, r.span)),
        StmtKind::Loop { index, .. } => Err(c.error(format!(
            "the extent of loop `{index}` is `_` and no tensor indexed by `{index}` alone gives it: write it as `a:b`"
        ))),
        _ => Err(c.error("not a loop")),
    }
}

fn fresh(p: &Program, c: &Located, n: &str) -> Result<()> {
    if used(&p.body, n) {
        Err(c.error(format!(
            "the derived name `{n}` is already used in the program"
        )))
    } else {
        Ok(())
    }
}

pub(crate) fn replace(p: &Program, path: &Path, with: Vec<Stmt>) -> Program {
    let mut body = p.body.clone();
    let parent = parent_mut(&mut body, path);
    let at = path.last().expect("a path").1;
    parent.splice(at..=at, with);
    p.with_body(body)
}

/// `split(i, F)`: `for i.0 = 0:div(n - 1, F), i.1 = 0:F - 1` with `i = lo + i.0 * F + i.1`
/// and a guard `i.0 * F + i.1 <= n - 1` unless the extent is a literal multiple of `F`.
pub fn split(p: &Program, c: &Located, target: &LoopRef, f: i64) -> Result<Program> {
    let path = find_loop(&p.body, c, target)?;
    let (index, lo, hi, body, span) = resolved(get(&p.body, &path), c)?;
    let (outer, inner) = (format!("{index}.0"), format!("{index}.1"));
    fresh(p, c, &outer)?;
    fresh(p, c, &inner)?;
    let last = bin(BinaryOp::Sub, hi, lo.clone());
    let offset = bin(
        BinaryOp::Add,
        bin(BinaryOp::Mul, name(&outer, span), lit(f, span)),
        name(&inner, span),
    );
    let value = bin(BinaryOp::Add, lo, offset.clone());
    let mut new_body = subst_stmts(&body, &index, &value);
    let exact = as_lit(&last).is_some_and(|l| (l + 1) % f == 0);
    if !exact {
        let cond = Expr::new(
            ExprKind::Binary(BinaryOp::Le, Box::new(offset), Box::new(last.clone())),
            span,
        );
        new_body = vec![Stmt::new(
            StmtKind::If {
                cond,
                then: new_body,
                otherwise: vec![],
            },
            span,
        )];
    }
    let inner_loop = Stmt::new(
        StmtKind::Loop {
            index: inner,
            extent: Extent::Range(lit(0, span), lit(f - 1, span)),
            body: new_body,
            parallel: crate::notation::ast::LoopMode::Serial,
        },
        span,
    );
    let outer_loop = Stmt::new(
        StmtKind::Loop {
            index: outer,
            extent: Extent::Range(lit(0, span), div(last, lit(f, span))),
            body: vec![inner_loop],
            parallel: crate::notation::ast::LoopMode::Serial,
        },
        span,
    );
    Ok(replace(p, &path, vec![outer_loop]))
}

/// `merge(i, j)`: `for i = a:b` whose body is exactly `for j = c:d` becomes `for i.j =
/// 0:(b - a + 1) * (d - c + 1) - 1` with `i = a + div(i.j, m)`, `j = c + i.j % m`, `m = d - c
/// + 1`: the same iterations in the same order.
pub fn merge(p: &Program, c: &Located, outer: &LoopRef, inner: &LoopRef) -> Result<Program> {
    let path = find_loop(&p.body, c, outer)?;
    let (i, lo1, hi1, body, span) = resolved(get(&p.body, &path), c)?;
    let [only] = &body[..] else {
        return Err(c.error(format!(
            "`merge` needs `{inner}` to be the only statement of loop `{i}`"
        )));
    };
    let (j, lo2, hi2, inner_body, _) = match &only.kind {
        StmtKind::Loop { index, .. } if *index == inner.name => resolved(only, c)?,
        _ => {
            return Err(c.error(format!(
                "`merge` needs `{inner}` to be the only statement of loop `{i}`"
            )));
        }
    };
    if let Some(occ) = inner.occurrence {
        let inner_path = find_loop(&p.body, c, inner)?;
        let mut want = path.clone();
        want.push((0, 0));
        if inner_path != want {
            return Err(c.error(format!(
                "`{}#{occ}` is not directly inside `{outer}`",
                inner.name
            )));
        }
    }
    if mentions(&lo2, &i) || mentions(&hi2, &i) {
        return Err(c.error(format!(
            "the extent of `{j}` depends on `{i}`: the nest is not rectangular"
        )));
    }
    let merged = format!("{i}.{j}");
    fresh(p, c, &merged)?;
    let n1 = bin(
        BinaryOp::Add,
        bin(BinaryOp::Sub, hi1, lo1.clone()),
        lit(1, span),
    );
    let n2 = bin(
        BinaryOp::Add,
        bin(BinaryOp::Sub, hi2, lo2.clone()),
        lit(1, span),
    );
    let m = name(&merged, span);
    let iv = bin(BinaryOp::Add, lo1, div(m.clone(), n2.clone()));
    let jv = bin(
        BinaryOp::Add,
        lo2,
        Expr::new(
            ExprKind::Binary(BinaryOp::Rem, Box::new(m), Box::new(n2.clone())),
            span,
        ),
    );
    let new_body = subst_stmts(&subst_stmts(&inner_body, &j, &jv), &i, &iv);
    let total = bin(BinaryOp::Sub, bin(BinaryOp::Mul, n1, n2), lit(1, span));
    let s = Stmt::new(
        StmtKind::Loop {
            index: merged,
            extent: Extent::Range(lit(0, span), total),
            body: new_body,
            parallel: crate::notation::ast::LoopMode::Serial,
        },
        span,
    );
    Ok(replace(p, &path, vec![s]))
}

/// `unroll(i)`: a loop with a literal extent of at most [`UNROLL_LIMIT`] iterations becomes a
/// block of copies of its body with `i` replaced by each value.
pub fn unroll(p: &Program, c: &Located, target: &LoopRef) -> Result<Program> {
    let path = find_loop(&p.body, c, target)?;
    let (i, lo, hi, body, span) = resolved(get(&p.body, &path), c)?;
    let (Some(a), Some(b)) = (as_lit(&lo), as_lit(&hi)) else {
        return Err(c.error(format!(
            "`unroll` needs a constant extent; `{i}` runs over `{lo}:{hi}`"
        )));
    };
    let n = (b as i128 - a as i128 + 1).max(0);
    if n > UNROLL_LIMIT as i128 {
        return Err(c.error(format!(
            "`{i}` has {n} iterations; `unroll` copies at most {UNROLL_LIMIT}"
        )));
    }
    let mut copies = vec![];
    for v in a..=b {
        copies.extend(subst_stmts(&body, &i, &lit(v, span)));
    }
    Ok(replace(
        p,
        &path,
        vec![Stmt::new(StmtKind::Block(copies), span)],
    ))
}

#[cfg(test)]
mod tests {
    use super::super::schedule;
    use crate::notation::parse::parse_program;

    fn p(t: &str) -> crate::notation::ast::Program {
        parse_program(t).unwrap()
    }

    #[test]
    fn split_names_the_parts_and_guards_the_tail() {
        let q = schedule(&p("for i = 0:9\n  y[i] = x[i]\nend\n"), "split(i, 4)").unwrap();
        let text = q.to_string();
        assert!(text.contains("for i.0 = 0:2, i.1 = 0:3"), "{text}");
        assert!(text.contains("if i.0 * 4 + i.1 <= 9"), "{text}");
        assert_eq!(parse_program(&text).unwrap(), q);
        let q = schedule(&p("for i = 0:7\n  y[i] = x[i]\nend\n"), "split(i, 4)").unwrap();
        assert!(!q.to_string().contains("if"), "{q}");
    }

    #[test]
    fn merge_and_unroll() {
        let q = schedule(
            &p("for i = 0:2, j = 1:4\n  y[i, j] = x[i, j]\nend\n"),
            "merge(i, j)",
        )
        .unwrap();
        let text = q.to_string();
        assert!(text.contains("for i.j = 0:11"), "{text}");
        assert_eq!(parse_program(&text).unwrap(), q);
        let q = schedule(&p("for i = 0:2\n  y[i] = x[i]\nend\n"), "unroll(i)").unwrap();
        assert!(q.to_string().contains("y[2] = x[2]"), "{q}");
        assert!(schedule(&p("for i = _\n  y[i] = x[i]\nend\n"), "unroll(i)").is_err());
    }
}
