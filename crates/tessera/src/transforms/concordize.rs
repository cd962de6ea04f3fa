//! Concordization: every access index becomes a loop index bound in the access's own order.
//! An index that is an expression (`A[I[i]]`, `A[i+1]`), a `let` value, or bound out of order
//! (`for j, i: A[i, j]`) is replaced by a fresh index of a single-iteration loop placed right
//! around the statement: `let v = I[i]; for k = v:v ... A[k]`. The level then reaches the
//! coordinate by random access (a lookup, or a seek for sparse levels).
//!
//! An offset index `i + c` (`c` fixed while the loop over `i` runs, see `affine`) in concordant
//! position stays: the lowering shifts the level's looplets by `c` (Finch's offset and toeplitz
//! wrappers), so `A[i + j]` over a sparse `A` walks its stored entries instead of searching for
//! every coordinate.

use super::affine::Scope;
use crate::notation::ast::{Access, Expr, ExprKind, Extent, Program, Span, Stmt, StmtKind};

pub fn concordize(p: &Program) -> Program {
    let mut c = Concordizer {
        scope: vec![],
        fresh: 0,
    };
    p.with_body(c.stmts(&p.body))
}

struct Concordizer {
    /// Names bound around the current statement, outermost first; `true` for loop indices.
    scope: Vec<(String, bool)>,
    fresh: usize,
}

impl Concordizer {
    fn stmts(&mut self, stmts: &[Stmt]) -> Vec<Stmt> {
        stmts.iter().map(|s| self.stmt(s)).collect()
    }

    fn stmt(&mut self, s: &Stmt) -> Stmt {
        let mut wrappers = vec![];
        let kind = match &s.kind {
            StmtKind::Loop {
                index,
                extent,
                body,
                parallel,
            } => {
                let extent = match extent {
                    Extent::Auto => Extent::Auto,
                    Extent::Range(a, b) => {
                        Extent::Range(self.expr(a, &mut wrappers), self.expr(b, &mut wrappers))
                    }
                };
                self.scope.push((index.clone(), true));
                let body = self.stmts(body);
                self.scope.pop();
                StmtKind::Loop {
                    index: index.clone(),
                    extent,
                    body,
                    parallel: *parallel,
                }
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => StmtKind::If {
                cond: self.expr(cond, &mut wrappers),
                then: self.stmts(then),
                otherwise: self.stmts(otherwise),
            },
            StmtKind::Let { name, value, body } => {
                let value = self.expr(value, &mut wrappers);
                self.scope.push((name.clone(), false));
                let body = self.stmts(body);
                self.scope.pop();
                StmtKind::Let {
                    name: name.clone(),
                    value,
                    body,
                }
            }
            StmtKind::Block(b) => StmtKind::Block(self.stmts(b)),
            StmtKind::Assign { lhs, op, rhs } => {
                let lhs = self.access(lhs, &mut wrappers);
                StmtKind::Assign {
                    lhs,
                    op: op.clone(),
                    rhs: self.expr(rhs, &mut wrappers),
                }
            }
            other => other.clone(),
        };
        let mut out = Stmt::new(kind, s.span);
        for (k, v, value, span) in wrappers.into_iter().rev() {
            let name = |n: &str| Expr::new(ExprKind::Name(n.to_string()), span);
            let lp = Stmt::new(
                StmtKind::Loop {
                    index: k,
                    extent: Extent::Range(name(&v), name(&v)),
                    body: vec![out],
                    parallel: crate::notation::ast::LoopMode::Serial,
                },
                span,
            );
            out = Stmt::new(
                StmtKind::Let {
                    name: v,
                    value,
                    body: vec![lp],
                },
                span,
            );
        }
        out
    }

    fn expr(&mut self, e: &Expr, w: &mut Vec<(String, String, Expr, Span)>) -> Expr {
        let kind = match &e.kind {
            ExprKind::Access(a) => ExprKind::Access(self.access(a, w)),
            ExprKind::Unary(op, x) => ExprKind::Unary(*op, Box::new(self.expr(x, w))),
            ExprKind::Binary(op, x, y) => {
                ExprKind::Binary(*op, Box::new(self.expr(x, w)), Box::new(self.expr(y, w)))
            }
            ExprKind::Call(n, args) => {
                ExprKind::Call(n.clone(), args.iter().map(|a| self.expr(a, w)).collect())
            }
            other => other.clone(),
        };
        Expr::new(kind, e.span)
    }

    fn access(&mut self, a: &Access, w: &mut Vec<(String, String, Expr, Span)>) -> Access {
        let mut out = a.clone();
        let mut last_depth: isize = -1;
        let mut broken = false;
        for ix in out.indices.iter_mut() {
            // Indices nested inside this one (e.g. `I[i]` in `A[I[i]]`) come first.
            ix.expr = self.expr(&ix.expr, w);
            let scope = Scope { names: &self.scope };
            let depth = match scope.affine(&ix.expr) {
                Some((n, _)) if !ix.permissive => self
                    .scope
                    .iter()
                    .rposition(|(l, is_loop)| *is_loop && *l == n)
                    .map(|d| d as isize),
                _ => None,
            };
            match depth {
                Some(d) if !broken && d > last_depth => last_depth = d,
                _ => {
                    broken = true;
                    self.fresh += 1;
                    let k = format!("_k{}", self.fresh);
                    let v = format!("_v{}", self.fresh);
                    let span = ix.expr.span;
                    w.push((k.clone(), v, ix.expr.clone(), span));
                    ix.expr = Expr::new(ExprKind::Name(k), span);
                }
            }
        }
        out
    }
}
