//! Give every `_` extent an explicit range, `0:size(A, d) - 1`, from a tensor that the loop's
//! index indexes directly. This runs before concordization, which moves indices into
//! single-iteration loops and would otherwise hide the tensor that sizes the loop.

use crate::notation::ast;
use crate::notation::ast::{BinaryOp, Expr, ExprKind, Extent, Program, Stmt, StmtKind};
use crate::semantics::Builtin;
use crate::transforms::wrapperize::is_direct;
use crate::types::Scalar;

pub fn resolve_auto_extents(p: &Program) -> Program {
    p.with_body(stmts(&p.body))
}

fn stmts(body: &[Stmt]) -> Vec<Stmt> {
    body.iter().map(stmt).collect()
}

fn stmt(s: &Stmt) -> Stmt {
    let kind = match &s.kind {
        StmtKind::Loop {
            index,
            extent,
            body,
            parallel,
        } => {
            let extent = match extent {
                Extent::Auto => match find_dim_source(body, index) {
                    Some((tensor, d)) => {
                        let at = |k| Expr::new(k, s.span);
                        let size = at(ExprKind::Call(
                            Builtin::Size.name().into(),
                            vec![
                                at(ExprKind::Name(tensor)),
                                at(ExprKind::Literal(Scalar::I64(d as i64))),
                            ],
                        ));
                        let last = at(ExprKind::Binary(
                            BinaryOp::Sub,
                            Box::new(size),
                            Box::new(at(ExprKind::Literal(Scalar::I64(1)))),
                        ));
                        Extent::Range(at(ExprKind::Literal(Scalar::I64(0))), last)
                    }
                    // Left for the lowering to report with its own message.
                    None => Extent::Auto,
                },
                e => e.clone(),
            };
            StmtKind::Loop {
                index: index.clone(),
                extent,
                body: stmts(body),
                parallel: *parallel,
            }
        }
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => StmtKind::If {
            cond: cond.clone(),
            then: stmts(then),
            otherwise: stmts(otherwise),
        },
        StmtKind::Let { name, value, body } => StmtKind::Let {
            name: name.clone(),
            value: value.clone(),
            body: stmts(body),
        },
        StmtKind::Block(b) => StmtKind::Block(stmts(b)),
        k => k.clone(),
    };
    Stmt::new(kind, s.span)
}

/// A tensor and dimension that index `index` directly somewhere in `body`: one the body only
/// reads when there is one. A tensor the body writes may be an output whose shape is inferred
/// from this very loop; once a schedule rewrites the loop (`split(i, 4)` turns `y[i, o]` into
/// `y[i.0 * 4 + i.1, o]`), nothing would size that output any more, while an input's size is
/// known before anything runs. Every direct use must agree (dimensionalization checks), so
/// the choice never changes the extent.
pub fn find_dim_source(body: &[Stmt], index: &str) -> Option<(String, usize)> {
    let (_, writes) = crate::notation::visit::reads_writes(body);
    let mut found = None;
    let mut fallback = None;
    crate::notation::visit::accesses(body, &mut |a: &ast::Access| {
        if found.is_none() {
            for (d, ix) in a.indices.iter().enumerate() {
                if is_direct(ix, index) {
                    if writes.contains(&a.tensor) {
                        fallback.get_or_insert((a.tensor.clone(), d));
                    } else {
                        found = Some((a.tensor.clone(), d));
                    }
                    break;
                }
            }
        }
    });
    found.or(fallback)
}
