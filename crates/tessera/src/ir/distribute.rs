//! Loop distribution: an innermost loop that both folds values into variables and stores to
//! memory becomes two loops over the same range, the folds first, then the stores.
//!
//! A gradient program's backward loops have this shape (SubdivNet's loop over the outputs
//! `o`: `dx += dy[o] * w0[o]; dw0[o] += dy[o] * x; ds1 += dy[o] * w1[o]; dw1[o] += ...`).
//! Together, neither half runs well: the backends must assume the stores may alias every
//! load, so each statement reloads what the previous one stored around, and the folds' chains
//! and the stores' strong-zero products share one scalar loop. Apart, the fold loop writes no
//! memory, so its products become IEEE multiplies (`ieee_mul`, which runs next), and the
//! store loop is a plain elementwise loop a C compiler can vectorise.
//!
//! What makes it exact: each half keeps its statements in their order and runs every
//! iteration in the original order, so only the interleaving of the two halves changes. That
//! is invisible when
//! - no variable one half assigns is read by the other (the folds' variables feed no store;
//!   a temporary a store reads is assigned with the stores);
//! - the folds read no buffer the stores write;
//! - the range is evaluated once, before both loops, and the loop variable ends where it did.
//!
//! Faults: the halves would reach a bad access at a different moment than the loop did. So
//! the two loops run only behind one test that every access of the body, over the whole
//! range, is in bounds; otherwise the original loop runs (and reports its fault where it
//! always did). The test is only possible when every index is the loop variable plus a
//! loop-invariant part that loads nothing (`f * n + o`) or is loop-invariant altogether; a
//! gather (`x[idx[q]]`) leaves the loop as it is.
//!
//! A vectorised loop (`Kernel::vectorized`) stays vectorised: its halves keep its variable,
//! and a subset of a loop's statements carries no dependence the whole did not.

use super::effects::{Effects, effects_stmts, invariant, new_var};
// The largest constant offset the range test accepts (with `BOUND`, no overflow).
use super::walk::MAX_OFFSET;
use super::{BinOp, BufId, Expr, Kernel, Stmt, VarId};
use crate::ir::build as b;
use crate::types::{ElemType, Scalar};
use std::collections::HashSet;

/// The bound on invariant index parts and range ends under which the range test's sums stay
/// far from overflow (2^40 elements is beyond any buffer this runtime can allocate).
const BOUND: i64 = 1 << 40;

pub fn distribute_loops(k: &mut Kernel) {
    super::innermost::rewrite_innermost_loops(k, &mut distribute);
}

/// An access `buf[var + part + c]` (`stride` 1) or `buf[part + c]` (`stride` 0).
struct Access {
    buf: BufId,
    part: Option<Expr>,
    c: i64,
    stride: i64,
}

fn distribute(k: &mut Kernel, l: &Stmt) -> Option<Vec<Stmt>> {
    let Stmt::For {
        var,
        start,
        stop,
        body,
    } = l
    else {
        return None;
    };
    // Loop-invariant checks (`if i.0 * 4 + 1 >= n { fail }`, of an index a jam or a split
    // computes) keep the body from being straight-line: unswitched here, as `hoist` would
    // (the original loop runs when any check holds), the copy without them may distribute.
    let mut fx = Effects::default();
    effects_stmts(std::slice::from_ref(l), &mut fx);
    // No size limit: the checks are what makes the body long, and the copy pays only if
    // it distributes.
    if std::env::var_os("TESSERA_NO_DISTRIBUTE_UNSWITCH").is_none()
        && let Some((any, fast)) = super::hoist::unswitch(body, &fx, usize::MAX)
        && fast.len() < body.len()
    {
        let fast_loop = Stmt::For {
            var: *var,
            start: start.clone(),
            stop: stop.clone(),
            body: fast,
        };
        let split = distribute(k, &fast_loop)?;
        return Some(b::if_else(any, vec![l.clone()], split));
    }
    // Straight-line folds and stores only, none assigning the loop variable.
    if !body.iter().all(|s| match s {
        Stmt::Assign(v, _) => v != var,
        Stmt::Store { .. } | Stmt::Comment(_) => true,
        _ => false,
    }) {
        return None;
    }
    let (folds, stores) = split(body)?;
    // Worth it only with a fold (a variable carried from one iteration to the next) and a
    // store to memory.
    let carried = folds.iter().any(|s| match s {
        Stmt::Assign(v, e) => reads_var(e, *v),
        _ => false,
    });
    if !carried || !stores.iter().any(|s| matches!(s, Stmt::Store { .. })) {
        return None;
    }
    // The folds must not read what the stores write.
    let written: HashSet<BufId> = stores
        .iter()
        .filter_map(|s| match s {
            Stmt::Store { buf, .. } => Some(*buf),
            _ => None,
        })
        .collect();
    let mut folds_read_written = false;
    for s in &folds {
        for e in s.own_exprs() {
            e.visit(&mut |x| {
                if let Expr::Load { buf, .. } | Expr::Len(buf) = x {
                    folds_read_written |= written.contains(buf);
                }
            });
        }
    }
    if folds_read_written {
        return None;
    }
    let mut fx = Effects::default();
    effects_stmts(std::slice::from_ref(l), &mut fx);
    let accesses = accesses(body, *var, &fx)?;

    // ts = start; tp = stop; parts; if (all in bounds) { folds; stores } else { original }
    let mut out = vec![];
    let ts = new_var(k, "dist_start", ElemType::I64);
    let tp = new_var(k, "dist_stop", ElemType::I64);
    out.push(b::assign(ts, start.clone()));
    out.push(b::assign(tp, stop.clone()));
    let within = |e: Expr| b::and(b::le(b::int(-BOUND), e.clone()), b::le(e, b::int(BOUND)));
    let mut cond = b::and(within(b::var(ts)), within(b::var(tp)));
    // Each distinct invariant part in a variable, tested once.
    let mut parts: Vec<(Expr, VarId)> = vec![];
    for a in &accesses {
        let part = match &a.part {
            Some(p) => {
                let v = match parts.iter().find(|(q, _)| q == p) {
                    Some((_, v)) => *v,
                    None => {
                        let v = new_var(k, "dist_part", ElemType::I64);
                        out.push(b::assign(v, p.clone()));
                        cond = b::and(cond, within(b::var(v)));
                        parts.push((p.clone(), v));
                        v
                    }
                };
                b::add(b::var(v), b::int(a.c))
            }
            None => b::int(a.c),
        };
        let len = Expr::Len(a.buf);
        let in_bounds = if a.stride == 0 {
            b::and(b::le(b::int(0), part.clone()), b::lt(part, len))
        } else {
            b::and(
                b::le(b::int(0), b::add(b::var(ts), part.clone())),
                b::lt(b::add(b::sub(b::var(tp), b::int(1)), part), len),
            )
        };
        cond = b::and(cond, in_bounds);
    }
    let range = |body: Vec<Stmt>| Stmt::For {
        var: *var,
        start: b::var(ts),
        stop: b::var(tp),
        body,
    };
    // An empty range fails the test for an access past the end; the original loop then
    // does nothing, as the two would have.
    out.extend(b::if_else(
        cond,
        vec![range(folds), range(stores)],
        vec![range(body.clone())],
    ));
    Some(out)
}

/// The body's statements as (folds, stores): each `Store` with the assignments whose
/// variables it reads (transitively), in their order; every other assignment as a fold.
/// `None` when a variable is assigned in both halves or read across them.
fn split(body: &[Stmt]) -> Option<(Vec<Stmt>, Vec<Stmt>)> {
    let assigned: HashSet<VarId> = body
        .iter()
        .filter_map(|s| match s {
            Stmt::Assign(v, _) => Some(*v),
            _ => None,
        })
        .collect();
    // Variables the store half needs, to a fixed point.
    let mut needed: HashSet<VarId> = HashSet::new();
    loop {
        let before = needed.len();
        for s in body {
            let in_stores = match s {
                Stmt::Store { .. } => true,
                Stmt::Assign(v, _) => needed.contains(v),
                _ => false,
            };
            if in_stores {
                for e in s.own_exprs() {
                    e.visit(&mut |x| {
                        if let Expr::Var(v) = x
                            && assigned.contains(v)
                        {
                            needed.insert(*v);
                        }
                    });
                }
            }
        }
        if needed.len() == before {
            break;
        }
    }
    let (mut folds, mut stores) = (vec![], vec![]);
    for s in body {
        match s {
            Stmt::Store { .. } => stores.push(s.clone()),
            Stmt::Assign(v, _) if needed.contains(v) => stores.push(s.clone()),
            Stmt::Assign(..) => folds.push(s.clone()),
            _ => {}
        }
    }
    // A fold reading a store-half variable would see its final value.
    let fold_reads_store_var = folds.iter().any(|s| {
        s.own_exprs()
            .iter()
            .any(|e| needed.iter().any(|v| reads_var(e, *v)))
    });
    (!fold_reads_store_var).then_some((folds, stores))
}

fn reads_var(e: &Expr, v: VarId) -> bool {
    let mut found = false;
    e.visit(&mut |x| found |= *x == Expr::Var(v));
    found
}

/// Every load and store of the body in the form the range test handles, or `None`.
fn accesses(body: &[Stmt], var: VarId, fx: &Effects) -> Option<Vec<Access>> {
    let mut found: Vec<(BufId, Expr)> = vec![];
    let mut searches = false;
    for s in body {
        if let Stmt::Store { buf, index, .. } = s {
            found.push((*buf, index.clone()));
        }
        for e in s.own_exprs() {
            e.visit(&mut |x| match x {
                Expr::Load { buf, index } => found.push((*buf, (**index).clone())),
                // Searches and hash lookups read their buffers at places no test bounds.
                Expr::SearchGe { .. } | Expr::HashFind { .. } => searches = true,
                _ => {}
            });
        }
    }
    if searches {
        return None;
    }
    // One test per distinct access (a gradient loop reads its cotangent in every statement).
    let mut distinct: Vec<(BufId, Expr)> = vec![];
    for a in found {
        if !distinct.contains(&a) {
            distinct.push(a);
        }
    }
    distinct
        .into_iter()
        .map(|(buf, index)| affine(&index, var, fx).map(|a| Access { buf, ..a }))
        .collect()
}

/// `index` as `var + part + c` or `part + c`, `part` loop-invariant and free of loads.
fn affine(index: &Expr, var: VarId, fx: &Effects) -> Option<Access> {
    fn terms(
        e: &Expr,
        var: VarId,
        fx: &Effects,
        vars: &mut i64,
        parts: &mut Vec<Expr>,
        c: &mut i64,
    ) -> bool {
        match e {
            Expr::Var(v) if *v == var => {
                *vars += 1;
                true
            }
            Expr::Const(Scalar::I64(k)) => {
                *c = c.saturating_add(*k);
                true
            }
            Expr::Binary(BinOp::Add, a, b) => {
                terms(a, var, fx, vars, parts, c) && terms(b, var, fx, vars, parts, c)
            }
            Expr::Binary(BinOp::Sub, a, b) if matches!(**b, Expr::Const(Scalar::I64(_))) => {
                let Expr::Const(Scalar::I64(k)) = **b else {
                    unreachable!("matched above")
                };
                *c = c.saturating_sub(k);
                terms(a, var, fx, vars, parts, c)
            }
            _ => {
                let mut loads = false;
                e.visit(&mut |x| {
                    loads |= matches!(
                        x,
                        Expr::Load { .. } | Expr::SearchGe { .. } | Expr::HashFind { .. }
                    )
                });
                let ok = !loads && invariant(e, fx) && !reads_var(e, var);
                if ok {
                    parts.push(e.clone());
                }
                ok
            }
        }
    }
    let (mut vars, mut parts, mut c) = (0, vec![], 0);
    if !terms(index, var, fx, &mut vars, &mut parts, &mut c)
        || vars > 1
        || !(-MAX_OFFSET..=MAX_OFFSET).contains(&c)
    {
        return None;
    }
    let part = parts.into_iter().reduce(b::add);
    Some(Access {
        buf: BufId(0),
        part,
        c,
        stride: vars,
    })
}
