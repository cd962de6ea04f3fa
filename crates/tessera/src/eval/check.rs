//! Static checks: the errors the compiler reports while lowering, which it reports even for
//! code that would never run (a loop of extent 0, an untaken branch). Checking them before
//! execution keeps the evaluator from accepting programs the compiler rejects.

use super::Env;
use crate::error::{Error, Result};
use crate::notation::ast::{
    Access, BUILTIN_FUNCTIONS, Expr, ExprKind, Extent, Program, Span, Stmt, StmtKind,
};
use crate::types::Scalar;

pub fn check(p: &Program, env: &Env) -> Result<()> {
    Checker { env, bound: vec![] }.stmts(&p.body)
}

/// The rank of tensor `name`, or the error for an unknown tensor.
pub fn rank(env: &Env, name: &str, span: Span) -> Result<usize> {
    env.tensors
        .get(name)
        .map(|t| t.shape.len())
        .ok_or_else(|| Error::program(span, format!("unknown tensor `{name}`")))
}

/// The tensor and dimension of a well-formed `size(A, d)`.
pub fn size_args<'e>(env: &Env, args: &'e [Expr], span: Span) -> Result<(&'e str, usize)> {
    let usage = || {
        Error::program(
            span,
            "`size` takes a tensor name and a dimension number, `size(A, 0)`",
        )
    };
    let [t, d] = args else { return Err(usage()) };
    let (ExprKind::Name(t), ExprKind::Literal(Scalar::I64(d))) = (&t.kind, &d.kind) else {
        return Err(usage());
    };
    let r = rank(env, t, span)?;
    if *d < 0 || *d as usize >= r {
        return Err(Error::program(
            span,
            format!("`{t}` has no dimension {d} (it has {r})"),
        ));
    }
    Ok((t, *d as usize))
}

struct Checker<'a> {
    env: &'a Env,
    /// Loop indices and `let` variables in scope.
    bound: Vec<String>,
}

impl Checker<'_> {
    fn stmts(&mut self, stmts: &[Stmt]) -> Result<()> {
        stmts.iter().try_for_each(|s| self.stmt(s))
    }

    fn scoped(&mut self, name: &str, body: &[Stmt]) -> Result<()> {
        self.bound.push(name.to_string());
        let r = self.stmts(body);
        self.bound.pop();
        r
    }

    fn stmt(&mut self, s: &Stmt) -> Result<()> {
        match &s.kind {
            StmtKind::Declare { tensor, init } => {
                rank(self.env, tensor, s.span)?;
                self.expr(init)
            }
            // Unknown reducers are reported by `resolve_reducers`, which runs before.
            StmtKind::Assign { lhs, rhs, .. } => {
                self.access(lhs)?;
                self.expr(rhs)
            }
            StmtKind::Loop {
                index,
                extent,
                body,
            } => {
                if let Extent::Range(a, b) = extent {
                    self.expr(a)?;
                    self.expr(b)?;
                }
                self.scoped(index, body)
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                self.expr(cond)?;
                self.stmts(then)?;
                self.stmts(otherwise)
            }
            StmtKind::Let { name, value, body } => {
                self.expr(value)?;
                self.scoped(name, body)
            }
            StmtKind::Block(body) => self.stmts(body),
            StmtKind::Freeze { tensor } | StmtKind::Thaw { tensor } => {
                rank(self.env, tensor, s.span).map(|_| ())
            }
        }
    }

    fn access(&mut self, a: &Access) -> Result<()> {
        let r = rank(self.env, &a.tensor, a.span)?;
        if a.indices.len() != r {
            return Err(Error::DimensionMismatch {
                span: a.span,
                msg: format!(
                    "`{}` has {r} dimensions but is accessed with {} indices",
                    a.tensor,
                    a.indices.len()
                ),
            });
        }
        for ix in &a.indices {
            if let Some((lo, hi)) = &ix.window {
                self.expr(lo)?;
                self.expr(hi)?;
            }
            self.expr(&ix.expr)?;
        }
        Ok(())
    }

    fn expr(&mut self, e: &Expr) -> Result<()> {
        match &e.kind {
            ExprKind::Literal(_) | ExprKind::Missing => Ok(()),
            ExprKind::Name(n) => {
                if self.bound.iter().any(|b| b == n) {
                    return Ok(());
                }
                match self.env.tensors.get(n) {
                    Some(t) if t.shape.is_empty() => Ok(()),
                    Some(t) => Err(Error::program(
                        e.span,
                        format!(
                            "`{n}` has {} dimensions: read it with indices, `{n}[...]`",
                            t.shape.len()
                        ),
                    )),
                    None => Err(Error::program(e.span, format!("unknown name `{n}`"))),
                }
            }
            ExprKind::Access(a) => self.access(a),
            ExprKind::Unary(_, x) => self.expr(x),
            ExprKind::Binary(_, x, y) => {
                self.expr(x)?;
                self.expr(y)
            }
            ExprKind::Call(name, args) if name == "size" => {
                size_args(self.env, args, e.span).map(|_| ())
            }
            ExprKind::Call(name, args) => {
                let Some((_, arity)) = BUILTIN_FUNCTIONS.iter().find(|(n, _)| n == name) else {
                    return Err(Error::program(e.span, format!("unknown function `{name}`")));
                };
                if args.len() != *arity {
                    return Err(Error::program(
                        e.span,
                        format!("`{name}` takes {arity} argument(s), got {}", args.len()),
                    ));
                }
                args.iter().try_for_each(|a| self.expr(a))
            }
        }
    }
}
