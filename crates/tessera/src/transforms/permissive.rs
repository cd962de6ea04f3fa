//! Permissive indices and `missing`: `A[~e]` reads `missing` outside `A`'s bounds and a write
//! through it is dropped; `missing` propagates through every operation except
//! `coalesce(a, b)`, which then gives `b`; a statement whose value is `missing` does nothing and
//! an `if` whose condition is `missing` takes its `else` branch.
//!
//! The pass removes every permissive index by splitting the statement on the bounds check:
//!
//! ```text
//! y[i] = coalesce(x[~(i-1)], 0)   →   let _p1 = i - 1
//!                                       if 0 <= _p1 && _p1 < size(x, 0)
//!                                         y[i] = coalesce(x[_p1], 0)
//!                                       else
//!                                         y[i] = 0
//! ```
//!
//! The index goes through a `let` so that the in-bounds access never decides a loop's extent
//! (a permissive access must not), and so that `e` is computed once. An offset index
//! (`i + c`, `i`, see `affine`) stays in place instead, written `i + c` (`i + 0` for a bare
//! index, which likewise never decides an extent): its bounds test is then a mask on `i` and
//! the access an offset wrapper, so the lowering splits the loop at the tensor's edges instead
//! of testing every coordinate (Finch's PermissiveTensor).

use super::affine::{Scope, offset_expr};
use crate::error::{Error, Result};
use crate::notation::ast::{
    Access, AssignOp, BinaryOp, Expr, ExprKind, Extent, Program, Span, Stmt, StmtKind,
};
use crate::notation::visit;
use crate::semantics::Builtin;
use crate::types::Scalar;

/// The most bounds-check splits one program may take. Each split copies the rest of its
/// statement into both branches, so a statement with many permissive reads (nested in each
/// other's indices, say) grows exponentially: the fuzzer's 650-byte statement took seconds
/// here and more would hang. Past this the kernel would be far over the kernel-size budget
/// (`run::DEFAULT_MAX_KERNEL_SIZE`) anyway.
pub const MAX_SPLITS: usize = 4096;

/// The most expression nodes the splits of one program may write (each counted once per
/// split that copies it). Fewer splits of larger statements reach the same size: the fuzzer's
/// 453-byte chain of comparisons took a second here and in the passes after (a libFuzzer
/// timeout under load) within `MAX_SPLITS`.
pub const MAX_COPIED: usize = 1 << 17;

pub fn permissive(p: &Program) -> Result<Program> {
    let mut pass = Pass {
        fresh: 0,
        splits: 0,
        copied: 0,
        scope: vec![],
    };
    Ok(p.with_body(pass.stmts(&p.body)?))
}

struct Pass {
    fresh: usize,
    /// Splits made so far (see [`MAX_SPLITS`]).
    splits: usize,
    /// Expression nodes the splits wrote so far (see [`MAX_COPIED`]).
    copied: usize,
    /// Names bound around the current statement, outermost first; `true` for loop indices.
    scope: Vec<(String, bool)>,
}

/// Where the first permissive index of a statement sits.
struct Site {
    tensor: String,
    dim: usize,
    index: Expr,
    span: Span,
}

impl Pass {
    fn stmts(&mut self, stmts: &[Stmt]) -> Result<Vec<Stmt>> {
        let mut out = vec![];
        for s in stmts {
            out.extend(self.stmt(s)?);
        }
        Ok(out)
    }

    fn stmt(&mut self, s: &Stmt) -> Result<Vec<Stmt>> {
        let span = s.span;
        let kind = match &s.kind {
            StmtKind::Assign { lhs, op, rhs } => return self.assign(lhs, op, rhs, span),
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                if let Some(site) = first_site_expr(cond) {
                    return self.split(site, span, |name, inside| {
                        let c = if inside {
                            with_index(cond, name)
                        } else {
                            without_access(cond)
                        };
                        Some(Stmt::new(
                            StmtKind::If {
                                cond: c,
                                then: then.clone(),
                                otherwise: otherwise.clone(),
                            },
                            span,
                        ))
                    });
                }
                match propagate(cond) {
                    None => return self.stmts(otherwise),
                    Some(c) => StmtKind::If {
                        cond: c,
                        then: self.stmts(then)?,
                        otherwise: self.stmts(otherwise)?,
                    },
                }
            }
            StmtKind::Loop {
                index,
                extent,
                body,
                parallel,
            } => {
                if let Extent::Range(a, b) = extent
                    && (has_permissive(a)
                        || has_permissive(b)
                        || propagate(a).is_none()
                        || propagate(b).is_none())
                {
                    return Err(Error::unsupported(
                        span,
                        "a loop bound cannot be `missing` or use a permissive `~` index",
                    ));
                }
                self.scope.push((index.clone(), true));
                let body = self.stmts(body);
                self.scope.pop();
                StmtKind::Loop {
                    index: index.clone(),
                    extent: extent.clone(),
                    body: body?,
                    parallel: *parallel,
                }
            }
            StmtKind::Let { name, value, body } => {
                // A permissive read in the value splits the whole `let` on its bounds check,
                // as for any statement; the variable is then `missing` where the value is.
                if let Some(site) = first_site_expr(value) {
                    return self.split(site, span, |index, inside| {
                        let value = if inside {
                            with_index(value, index)
                        } else {
                            without_access(value)
                        };
                        Some(Stmt::new(
                            StmtKind::Let {
                                name: name.clone(),
                                value,
                                body: body.clone(),
                            },
                            span,
                        ))
                    });
                }
                let Some(value) = propagate(value) else {
                    return self.stmts(&missing_name(body, name));
                };
                self.scope.push((name.clone(), false));
                let body = self.stmts(body);
                self.scope.pop();
                StmtKind::Let {
                    name: name.clone(),
                    value,
                    body: body?,
                }
            }
            StmtKind::Block(b) => StmtKind::Block(self.stmts(b)?),
            other => other.clone(),
        };
        Ok(vec![Stmt::new(kind, span)])
    }

    fn assign(&mut self, lhs: &Access, op: &AssignOp, rhs: &Expr, span: Span) -> Result<Vec<Stmt>> {
        let site = first_site_access(lhs).or_else(|| first_site_expr(rhs));
        let Some(site) = site else {
            if lhs.indices.iter().any(|ix| propagate(&ix.expr).is_none()) {
                return Ok(vec![]);
            }
            return Ok(match propagate(rhs) {
                None => vec![],
                Some(rhs) => vec![Stmt::new(
                    StmtKind::Assign {
                        lhs: lhs.clone(),
                        op: op.clone(),
                        rhs,
                    },
                    span,
                )],
            });
        };
        let in_lhs = first_site_access(lhs).is_some();
        self.split(site, span, |name, inside| {
            if !inside && in_lhs {
                // An out-of-bounds write is dropped.
                return None;
            }
            let (lhs, rhs) = if in_lhs {
                (access_with_index(lhs, name), rhs.clone())
            } else if inside {
                (lhs.clone(), with_index(rhs, name))
            } else {
                (lhs.clone(), without_access(rhs))
            };
            Some(Stmt::new(
                StmtKind::Assign {
                    lhs,
                    op: op.clone(),
                    rhs,
                },
                span,
            ))
        })
    }

    /// `let _pN = index; if in_bounds { make(inside) } else { make(outside) }` (without the
    /// `let` for an offset index), each branch then passed through again for the reads left.
    /// `make` decides the site itself (`None`: the statement does nothing there); the same
    /// check elsewhere in the statement is decided with it ([`decide`]).
    fn split(
        &mut self,
        site: Site,
        span: Span,
        mut make: impl FnMut(&Expr, bool) -> Option<Stmt>,
    ) -> Result<Vec<Stmt>> {
        self.splits += 1;
        if self.splits > MAX_SPLITS {
            return Err(too_many_splits(
                span,
                &format!("into more than {MAX_SPLITS} cases"),
            ));
        }
        let scope = Scope { names: &self.scope };
        let (var, name) = match scope.affine(&site.index) {
            Some((i, offset)) => {
                let zero = Expr::new(ExprKind::Literal(Scalar::I64(0)), site.span);
                (
                    offset_expr(&i, &Some(offset.unwrap_or(zero)), site.span),
                    None,
                )
            }
            None => {
                self.fresh += 1;
                let name = format!("_p{}", self.fresh);
                (
                    Expr::new(ExprKind::Name(name.clone()), site.span),
                    Some(name),
                )
            }
        };
        let size = Expr::new(
            ExprKind::Call(
                Builtin::Size.name().into(),
                vec![
                    Expr::new(ExprKind::Name(site.tensor.clone()), site.span),
                    Expr::lit(Scalar::I64(site.dim as i64)),
                ],
            ),
            site.span,
        );
        let bin = |op, a: Expr, b: Expr| {
            Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), site.span)
        };
        let cond = bin(
            BinaryOp::AndAnd,
            bin(BinaryOp::Le, Expr::lit(Scalar::I64(0)), var.clone()),
            bin(BinaryOp::Lt, var.clone(), size),
        );
        let check = Check::of(&site);
        let mut branch = |pass: &mut Pass, inside: bool| -> Result<Vec<Stmt>> {
            let Some(s) = make(&var, inside) else {
                return Ok(vec![]);
            };
            match &check {
                Some(c) => pass.stmts(&decide(std::slice::from_ref(&s), c, inside.then_some(&var))),
                None => pass.stmt(&s),
            }
        };
        let then = branch(self, true)?;
        let otherwise = branch(self, false)?;
        let mut nodes = 0;
        visit::exprs(&then, &mut |_| nodes += 1);
        visit::exprs(&otherwise, &mut |_| nodes += 1);
        self.copied += nodes;
        if self.copied > MAX_COPIED {
            return Err(too_many_splits(
                span,
                &format!("into cases of more than {MAX_COPIED} expression nodes in all"),
            ));
        }
        let body = vec![Stmt::new(
            StmtKind::If {
                cond,
                then,
                otherwise,
            },
            span,
        )];
        Ok(match name {
            None => body,
            Some(name) => vec![Stmt::new(
                StmtKind::Let {
                    name,
                    value: site.index,
                    body,
                },
                span,
            )],
        })
    }
}

/// One bounds check: dimension `dim` of `tensor` read permissively at `index`. Every read of
/// the same check in a statement has the same answer wherever the index's names mean the
/// same, so one split decides them all: a 3 x 3 stencil's nine reads through `~(y - 1)`,
/// `~(y + 1)`, `~(x - 1)` and `~(x + 1)` take four splits (16 cases), not nine (512).
struct Check {
    tensor: String,
    dim: usize,
    index: Expr,
    /// The names the index reads: below a loop or `let` that binds one of them again, the
    /// same text is another index.
    names: Vec<String>,
}

impl Check {
    /// The check of a site whose index is arithmetic of names and literals only. An index
    /// that reads a tensor (`x[~I[i]]`) can change between two reads as the statement's own
    /// writes go, so only its first site is decided (by the caller).
    fn of(site: &Site) -> Option<Check> {
        let mut names = vec![];
        pure_names(&site.index, &mut names).then(|| Check {
            tensor: site.tensor.clone(),
            dim: site.dim,
            index: site.index.clone(),
            names,
        })
    }

    fn matches(&self, a: &Access) -> bool {
        a.tensor == self.tensor
            && a.indices
                .get(self.dim)
                .is_some_and(|ix| ix.permissive && ix.expr == self.index)
    }
}

/// Whether `e` is built from names, literals, operators and calls other than `sample` (which
/// reads a tensor); the names it reads are pushed onto `out`.
fn pure_names(e: &Expr, out: &mut Vec<String>) -> bool {
    match &e.kind {
        ExprKind::Name(n) => {
            out.push(n.clone());
            true
        }
        ExprKind::Literal(_) => true,
        ExprKind::Unary(_, x) => pure_names(x, out),
        ExprKind::Binary(_, x, y) => pure_names(x, out) && pure_names(y, out),
        ExprKind::Call(f, args) => {
            f != Builtin::Sample.name() && args.iter().all(|a| pure_names(a, out))
        }
        _ => false,
    }
}

/// `stmts` with every read of `check` decided: in bounds (`inside` is the index to read at,
/// no longer permissive) or outside (the read is `missing`, a write through it is dropped).
/// Below a loop or `let` that rebinds a name of the index nothing changes.
fn decide(stmts: &[Stmt], check: &Check, inside: Option<&Expr>) -> Vec<Stmt> {
    visit::rewrite_scoped(stmts, &|n| check.names.iter().any(|m| m == n), &|e| {
        decide_expr(e, check, inside)
    })
}

/// `a` with its reads of `check` decided, in its indices too; the caller handles `a` itself
/// matching outside.
fn decide_access(a: &Access, check: &Check, inside: Option<&Expr>) -> Access {
    let mut out = a.clone();
    for ix in out.indices.iter_mut() {
        ix.expr = decide_expr(&ix.expr, check, inside);
        if let Some((lo, hi)) = &mut ix.window {
            *lo = decide_expr(lo, check, inside);
            *hi = decide_expr(hi, check, inside);
        }
    }
    if let (Some(at), true) = (inside, check.matches(a)) {
        out.indices[check.dim].permissive = false;
        out.indices[check.dim].expr = at.clone();
    }
    out
}

fn decide_expr(e: &Expr, check: &Check, inside: Option<&Expr>) -> Expr {
    let d = |x: &Expr| Box::new(decide_expr(x, check, inside));
    let kind = match &e.kind {
        ExprKind::Access(a) if inside.is_none() && check.matches(a) => ExprKind::Missing,
        ExprKind::Access(a) => ExprKind::Access(decide_access(a, check, inside)),
        ExprKind::Unary(op, x) => ExprKind::Unary(*op, d(x)),
        ExprKind::Binary(op, x, y) => ExprKind::Binary(*op, d(x), d(y)),
        ExprKind::Call(f, args) => ExprKind::Call(
            f.clone(),
            args.iter().map(|a| decide_expr(a, check, inside)).collect(),
        ),
        other => other.clone(),
    };
    Expr::new(kind, e.span)
}

fn too_many_splits(span: Span, how: &str) -> Error {
    Error::unsupported(
        span,
        format!(
            "this statement's permissive (`~`) reads split it on their bounds checks {how} \
             (each read copies the rest of the statement into both branches); compute some of \
             them into a workspace or a `let` in separate statements first"
        ),
    )
}

/// `stmts` with `name` (a `let` variable whose value is `missing`) read as `missing`, up to
/// where a loop or `let` binds the name again.
fn missing_name(stmts: &[Stmt], name: &str) -> Vec<Stmt> {
    visit::rewrite_scoped(stmts, &|n| n == name, &|e| name_to_missing(e, name))
}

fn name_to_missing(e: &Expr, name: &str) -> Expr {
    let kind = match &e.kind {
        ExprKind::Name(n) if n == name => ExprKind::Missing,
        ExprKind::Unary(op, x) => ExprKind::Unary(*op, Box::new(name_to_missing(x, name))),
        ExprKind::Binary(op, x, y) => ExprKind::Binary(
            *op,
            Box::new(name_to_missing(x, name)),
            Box::new(name_to_missing(y, name)),
        ),
        ExprKind::Call(f, args) => ExprKind::Call(
            f.clone(),
            args.iter().map(|a| name_to_missing(a, name)).collect(),
        ),
        ExprKind::Access(a) => {
            let mut a = a.clone();
            for ix in a.indices.iter_mut() {
                ix.expr = name_to_missing(&ix.expr, name);
                if let Some((lo, hi)) = &mut ix.window {
                    *lo = name_to_missing(lo, name);
                    *hi = name_to_missing(hi, name);
                }
            }
            ExprKind::Access(a)
        }
        other => other.clone(),
    };
    Expr::new(kind, e.span)
}

fn has_permissive(e: &Expr) -> bool {
    first_site_expr(e).is_some()
}

fn first_site_access(a: &Access) -> Option<Site> {
    for ix in &a.indices {
        if let Some(s) = first_site_expr(&ix.expr) {
            return Some(s);
        }
    }
    a.indices
        .iter()
        .enumerate()
        .find(|(_, ix)| ix.permissive)
        .map(|(d, ix)| Site {
            tensor: a.tensor.clone(),
            dim: d,
            index: ix.expr.clone(),
            span: ix.expr.span,
        })
}

fn first_site_expr(e: &Expr) -> Option<Site> {
    match &e.kind {
        ExprKind::Access(a) => first_site_access(a),
        ExprKind::Unary(_, x) => first_site_expr(x),
        ExprKind::Binary(_, x, y) => first_site_expr(x).or_else(|| first_site_expr(y)),
        ExprKind::Call(_, args) => args.iter().find_map(first_site_expr),
        _ => None,
    }
}

/// The access holding the first permissive index, with that index replaced by `name`.
fn access_with_index(a: &Access, name: &Expr) -> Access {
    let mut out = a.clone();
    if let Some(k) = out.indices.iter().position(|ix| has_permissive(&ix.expr)) {
        out.indices[k].expr = with_index(&out.indices[k].expr, name);
        return out;
    }
    let k = out
        .indices
        .iter()
        .position(|ix| ix.permissive)
        .expect("the site is in this access");
    out.indices[k].permissive = false;
    out.indices[k].expr = name.clone();
    out
}

/// Rewrite the first permissive site of `e` (in evaluation order) with `f`.
fn rewrite_first(e: &Expr, f: &mut dyn FnMut(&Access) -> Expr) -> (Expr, bool) {
    let kind = match &e.kind {
        ExprKind::Access(a) if first_site_access(a).is_some() => {
            let nested = a.indices.iter().any(|ix| has_permissive(&ix.expr));
            if !nested {
                return (f(a), true);
            }
            let mut out = a.clone();
            for ix in out.indices.iter_mut() {
                let (x, done) = rewrite_first(&ix.expr, f);
                ix.expr = x;
                if done {
                    break;
                }
            }
            ExprKind::Access(out)
        }
        ExprKind::Unary(op, x) => {
            let (x, done) = rewrite_first(x, f);
            return (Expr::new(ExprKind::Unary(*op, Box::new(x)), e.span), done);
        }
        ExprKind::Binary(op, x, y) => {
            let (x, done) = rewrite_first(x, f);
            if done {
                return (
                    Expr::new(ExprKind::Binary(*op, Box::new(x), y.clone()), e.span),
                    true,
                );
            }
            let (y, done) = rewrite_first(y, f);
            return (
                Expr::new(ExprKind::Binary(*op, Box::new(x), Box::new(y)), e.span),
                done,
            );
        }
        ExprKind::Call(n, args) => {
            let mut out = vec![];
            let mut done = false;
            for a in args {
                if done {
                    out.push(a.clone());
                } else {
                    let (x, d) = rewrite_first(a, f);
                    done = d;
                    out.push(x);
                }
            }
            return (Expr::new(ExprKind::Call(n.clone(), out), e.span), done);
        }
        _ => return (e.clone(), false),
    };
    (Expr::new(kind, e.span), true)
}

fn with_index(e: &Expr, name: &Expr) -> Expr {
    rewrite_first(e, &mut |a| {
        Expr::new(ExprKind::Access(access_with_index(a, name)), e.span)
    })
    .0
}

fn without_access(e: &Expr) -> Expr {
    rewrite_first(e, &mut |a| Expr::new(ExprKind::Missing, a.span)).0
}

/// `missing` propagated upward: `None` if the whole expression is `missing`.
pub fn propagate(e: &Expr) -> Option<Expr> {
    let kind = match &e.kind {
        ExprKind::Missing => return None,
        ExprKind::Unary(op, x) => ExprKind::Unary(*op, Box::new(propagate(x)?)),
        ExprKind::Binary(op, x, y) => {
            ExprKind::Binary(*op, Box::new(propagate(x)?), Box::new(propagate(y)?))
        }
        ExprKind::Call(n, args) if n == Builtin::Coalesce.name() && args.len() == 2 => {
            match propagate(&args[0]) {
                None => return propagate(&args[1]),
                Some(a) => match propagate(&args[1]) {
                    Some(b) => ExprKind::Call(n.clone(), vec![a, b]),
                    // Without permissive reads left, the first argument is never missing.
                    None => return Some(a),
                },
            }
        }
        ExprKind::Call(n, args) => ExprKind::Call(
            n.clone(),
            args.iter().map(propagate).collect::<Option<_>>()?,
        ),
        ExprKind::Access(a) => {
            let mut out = a.clone();
            for ix in out.indices.iter_mut() {
                ix.expr = propagate(&ix.expr)?;
            }
            ExprKind::Access(out)
        }
        _ => return Some(e.clone()),
    };
    Some(Expr::new(kind, e.span))
}
