//! Scalar expansion for `fission` (as FreeTensor's fission does it): a tensor that a loop's
//! body declares (`ds .= 0.0`, a fresh value per iteration) and that is used on both sides of
//! the cut would carry each iteration's value from the first loop to the second, which one
//! tensor cannot do. It becomes one tensor per iteration instead: a fresh name with the loop's
//! index prepended to every access (`ds[]` -> `ds.f[f]`), declared once before the loop with
//! the same fill. Every iteration then starts from its own slice holding the fill, which is
//! what the declaration in the body gave it, so the values are unchanged; the dependence check
//! of `fission` runs on the expanded program and finds each iteration's slice its own.

use super::names::{Path, binds, bodies, mentions, used, within};
use crate::notation::ast::{Access, AccessIndex, Expr, ExprKind, Extent, Stmt, StmtKind};
use crate::notation::visit;

/// The result of expanding a loop body's declarations for a cut before `body[split]`.
pub struct Expanded {
    /// The declarations of the expanded tensors, to go before the loop.
    pub decls: Vec<Stmt>,
    /// The body without those declarations, the expanded tensors indexed by the loop index.
    pub body: Vec<Stmt>,
    /// Where the cut falls in the new body.
    pub split: usize,
}

/// Expand the tensors declared directly in `body[..split]` and accessed in `body[split..]`,
/// where that is exact: nothing outside the loop uses the tensor (reads its last value), the
/// body declares it once, accesses it only after the declaration and never through a swizzle, the fill reads neither the index nor a tensor,
/// and nothing in the body rebinds the index. A tensor that fails these stays as it is (the
/// dependence check then refuses the cut, naming it). `program` is the whole program's body,
/// for fresh names.
pub fn expand(program: &[Stmt], at: &Path, index: &str, body: &[Stmt], split: usize) -> Expanded {
    let mut decls = vec![];
    let mut out: Vec<Stmt> = body.to_vec();
    let mut cut = split;
    if binds(body, index) {
        return Expanded {
            decls,
            body: out,
            split,
        };
    }
    let mut taken: Vec<String> = vec![];
    let mut k = 0;
    while k < cut {
        let StmtKind::Declare { tensor, init } = &out[k].kind else {
            k += 1;
            continue;
        };
        let t = tensor.clone();
        let (before, after) = (&out[..k], &out[k + 1..]);
        let crosses = accessed(&out[cut..], &t);
        let exact = crosses
            && dead_outside(program, 0, &mut vec![], at, &t)
            && declarations(&out, &t) == 1
            && !accessed(before, &t)
            && !swizzled(after, &t)
            && !mentions(init, index)
            && !reads_tensor(init);
        if !exact {
            k += 1;
            continue;
        }
        let fresh = fresh_name(program, &taken, &format!("{t}.{index}"));
        taken.push(fresh.clone());
        let decl = out.remove(k);
        decls.push(Stmt::new(
            StmtKind::Declare {
                tensor: fresh.clone(),
                init: init_of(&decl),
            },
            decl.span,
        ));
        cut -= 1;
        out = rename(&out, &t, &fresh, Some(index));
    }
    Expanded {
        decls,
        body: out,
        split: cut,
    }
}

fn init_of(s: &Stmt) -> Expr {
    match &s.kind {
        StmtKind::Declare { init, .. } => init.clone(),
        _ => unreachable!("a declaration"),
    }
}

pub(super) fn fresh_name(program: &[Stmt], taken: &[String], base: &str) -> String {
    let free = |n: &str| !used(program, n) && !taken.iter().any(|t| t == n);
    if free(base) {
        return base.to_string();
    }
    (2..)
        .map(|k| format!("{base}.{k}"))
        .find(|n| free(n))
        .expect("a fresh name")
}

fn accessed(body: &[Stmt], t: &str) -> bool {
    let mut hit = false;
    visit::accesses(body, &mut |a| hit |= a.tensor == t);
    hit
}

/// Whether nothing outside the loop at `at` can read the value the loop's last iteration
/// leaves in `t`: every statement outside it that uses `t` is a loop whose body declares
/// `t` before any other use (a local of that loop too: the gradient program's backward loop
/// re-declares the forward loop's locals), or holds the loop and passes this test inside.
pub(super) fn dead_outside(body: &[Stmt], b: usize, prefix: &mut Path, at: &Path, t: &str) -> bool {
    body.iter().enumerate().all(|(k, s)| {
        prefix.push((b, k));
        let ok = if prefix == at {
            true
        } else if within(at, prefix) {
            bodies(s)
                .into_iter()
                .enumerate()
                .all(|(b2, inner)| dead_outside(inner, b2, prefix, at, t))
        } else {
            !uses(std::slice::from_ref(s), t) || local_of(s, t)
        };
        prefix.pop();
        ok
    })
}

/// Whether `s` is a loop whose body declares `t` directly before any other use of it, or
/// whose body uses it only in such loops, and whose extent does not read it.
fn local_of(s: &Stmt, t: &str) -> bool {
    let StmtKind::Loop { body, extent, .. } = &s.kind else {
        return false;
    };
    if let Extent::Range(lo, hi) = extent {
        let mut hit = false;
        for e in [lo, hi] {
            visit::expr(e, &mut |x| {
                hit |= matches!(&x.kind, ExprKind::Access(a) if a.tensor == t)
            });
        }
        if hit {
            return false;
        }
    }
    // Or every statement using it is such a loop itself (`for i = _, f = _` declaring it in
    // the body of `f`): each use follows a declaration of the same iteration.
    body.iter()
        .find(|x| uses(std::slice::from_ref(*x), t))
        .is_some_and(|x| matches!(&x.kind, StmtKind::Declare { tensor, .. } if tensor == t))
        || body
            .iter()
            .all(|x| !uses(std::slice::from_ref(x), t) || local_of(x, t))
}

pub(super) fn uses(body: &[Stmt], t: &str) -> bool {
    accessed(body, t) || declarations(body, t) > 0
}

fn swizzled(body: &[Stmt], t: &str) -> bool {
    let mut hit = false;
    visit::accesses(body, &mut |a| hit |= a.tensor == t && a.swizzle.is_some());
    hit
}

pub(super) fn declarations(body: &[Stmt], t: &str) -> usize {
    let mut n = 0;
    visit::stmts(body, &mut |s| {
        if matches!(&s.kind, StmtKind::Declare { tensor, .. } if tensor == t) {
            n += 1;
        }
    });
    n
}

fn reads_tensor(e: &Expr) -> bool {
    let mut hit = false;
    visit::expr(e, &mut |x| hit |= matches!(x.kind, ExprKind::Access(_)));
    hit
}

/// Every access of `t` in `body` as an access of `to` with `index` first (no index added when
/// `index` is `None`); declarations, freezes and thaws of `t` become those of `to`.
pub(super) fn rename(body: &[Stmt], t: &str, to: &str, index: Option<&str>) -> Vec<Stmt> {
    body.iter().map(|s| rename_stmt(s, t, to, index)).collect()
}

fn rename_access(a: &Access, t: &str, to: &str, index: Option<&str>) -> Access {
    let mut a = a.clone();
    for ix in &mut a.indices {
        ix.expr = rename_expr(&ix.expr, t, to, index);
        if let Some((lo, hi)) = &ix.window {
            ix.window = Some((rename_expr(lo, t, to, index), rename_expr(hi, t, to, index)));
        }
    }
    if a.tensor == t {
        a.tensor = to.to_string();
        if let Some(index) = index {
            a.indices.insert(
                0,
                AccessIndex {
                    expr: Expr::new(ExprKind::Name(index.to_string()), a.span),
                    permissive: false,
                    protocol: None,
                    window: None,
                },
            );
        }
    }
    a
}

fn rename_expr(e: &Expr, t: &str, to: &str, index: Option<&str>) -> Expr {
    let r = |x: &Expr| rename_expr(x, t, to, index);
    let kind = match &e.kind {
        ExprKind::Access(a) => ExprKind::Access(rename_access(a, t, to, index)),
        ExprKind::Unary(op, x) => ExprKind::Unary(*op, Box::new(r(x))),
        ExprKind::Binary(op, x, y) => ExprKind::Binary(*op, Box::new(r(x)), Box::new(r(y))),
        ExprKind::Call(f, args) => ExprKind::Call(f.clone(), args.iter().map(r).collect()),
        k => k.clone(),
    };
    Expr::new(kind, e.span)
}

fn rename_stmt(s: &Stmt, t: &str, to: &str, index: Option<&str>) -> Stmt {
    let e = |x: &Expr| rename_expr(x, t, to, index);
    let b = |x: &[Stmt]| rename(x, t, to, index);
    let kind = match &s.kind {
        StmtKind::Declare { tensor, init } => StmtKind::Declare {
            tensor: if tensor == t { to } else { tensor }.to_string(),
            init: e(init),
        },
        StmtKind::Assign { lhs, op, rhs } => StmtKind::Assign {
            lhs: rename_access(lhs, t, to, index),
            op: op.clone(),
            rhs: e(rhs),
        },
        StmtKind::Loop {
            index: i,
            extent,
            body,
            parallel,
        } => StmtKind::Loop {
            index: i.clone(),
            extent: match extent {
                Extent::Auto => Extent::Auto,
                Extent::Range(lo, hi) => Extent::Range(e(lo), e(hi)),
            },
            body: b(body),
            parallel: *parallel,
        },
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => StmtKind::If {
            cond: e(cond),
            then: b(then),
            otherwise: b(otherwise),
        },
        StmtKind::Let { name, value, body } => StmtKind::Let {
            name: name.clone(),
            value: e(value),
            body: b(body),
        },
        StmtKind::Block(x) => StmtKind::Block(b(x)),
        StmtKind::Freeze { tensor } if tensor == t => StmtKind::Freeze {
            tensor: to.to_string(),
        },
        StmtKind::Thaw { tensor } if tensor == t => StmtKind::Thaw {
            tensor: to.to_string(),
        },
        k => k.clone(),
    };
    Stmt::new(kind, s.span)
}
