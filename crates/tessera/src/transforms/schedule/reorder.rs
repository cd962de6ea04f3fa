//! `reorder(a, b, ...)`: permute a perfect nest. The loops named must be nested directly in
//! each other, with nothing between them but `let`s; they take the order written, outermost
//! first.
//!
//! Legality (FreeTensor Table 1): for every pair of conflicting instances in the nest's body,
//! the instance that runs first must still run first: the first non-`=` direction over the
//! shared loops in the new order must agree with the one in the old order. A dependence
//! carried by a loop outside the nest keeps its order whatever the nest does (FreeTensor
//! #474), and two reductions of one kind commute.
//!
//! Statements between the loops (FreeTensor #117) are refused: in the new order they would
//! run once per iteration of a different set of loops. `let`s between them (FreeTensor #466)
//! are moved into the innermost body, which evaluates them once per innermost iteration
//! instead of once per outer one: the same value unless the nest writes something they read,
//! which is refused. A guard `if` without `else` between them (what `split` leaves) moves in
//! the same way.

use super::deps::{Analysis, Dir, first_is_x};
use super::names::{find_loop, get, mentions};
use super::{Located, LoopRef};
use crate::error::Result;
use crate::notation::ast::{Expr, Extent, Program, Span, Stmt, StmtKind};
use crate::notation::visit;

/// A loop of the nest: index, extent, place, path.
type NestLoop = (String, Extent, Span, Vec<(usize, usize)>);

pub fn reorder(p: &Program, c: &Located, list: &[LoopRef]) -> Result<Program> {
    let mut paths = vec![];
    for r in list {
        let path = find_loop(&p.body, c, r)?;
        if paths.contains(&path) {
            return Err(c.error(format!("loop `{r}` is named twice")));
        }
        paths.push(path);
    }
    let outer_path = paths
        .iter()
        .min_by_key(|p| p.len())
        .expect("two loops")
        .clone();
    // Walk down the nest from the outermost loop named, collecting the loops in depth order
    // and the `let`s between them.
    let mut nest: Vec<NestLoop> = vec![];
    // The `let`s (with their names) and guards (without) between the loops, outermost first.
    let mut lets: Vec<(Option<String>, Expr, Span)> = vec![];
    let mut cur = get(&p.body, &outer_path);
    let mut cur_path = outer_path.clone();
    let inner_body: Vec<Stmt> = loop {
        let StmtKind::Loop {
            index,
            extent,
            body,
            ..
        } = &cur.kind
        else {
            unreachable!("the walk stops at loops")
        };
        nest.push((index.clone(), extent.clone(), cur.span, cur_path.clone()));
        if nest.len() == list.len() {
            break body.clone();
        }
        let mut b = body;
        cur_path.push((0, 0));
        loop {
            match &b[..] {
                [one] if matches!(one.kind, StmtKind::Let { .. }) => {
                    let StmtKind::Let { name, value, body } = &one.kind else {
                        unreachable!()
                    };
                    lets.push((Some(name.clone()), value.clone(), one.span));
                    b = body;
                    cur_path.push((0, 0));
                }
                // A guard without `else` (what `split` leaves around its inner body) moves
                // in like a `let`: the same condition, evaluated deeper.
                [one] if matches!(&one.kind, StmtKind::If { otherwise, .. } if otherwise.is_empty()) =>
                {
                    let StmtKind::If { cond, then, .. } = &one.kind else {
                        unreachable!()
                    };
                    lets.push((None, cond.clone(), one.span));
                    b = then;
                    cur_path.push((0, 0));
                }
                [one] if matches!(one.kind, StmtKind::Loop { .. }) => {
                    if !paths.contains(&cur_path) {
                        let StmtKind::Loop { index: k, .. } = &one.kind else {
                            unreachable!()
                        };
                        return Err(c.error(format!(
                            "loop `{k}` lies between the loops named; name it too, or reorder loops that are directly nested"
                        )));
                    }
                    cur = one;
                    break;
                }
                _ => {
                    let between = b
                        .iter()
                        .find(|s| !matches!(s.kind, StmtKind::Loop { .. }))
                        .or(b.first());
                    return Err(match between {
                        Some(s) => c.error(format!(
                            "`reorder` needs perfectly nested loops: `{}`{} sits beside the loops inside `{index}`",
                            s.to_string().lines().next().unwrap_or("").trim(),
                            place(s.span)
                        )),
                        None => c.error(format!("loop `{index}` has an empty body")),
                    });
                }
            }
        }
    };
    // Every loop named was met on the way down.
    if nest.len() != list.len() || paths.iter().any(|p| !nest.iter().any(|n| n.3 == *p)) {
        return Err(c.error("the loops named are not one nest"));
    }
    let (_, written) = visit::reads_writes(&inner_body);
    let names: Vec<&String> = nest
        .iter()
        .map(|n| &n.0)
        .chain(lets.iter().filter_map(|l| l.0.as_ref()))
        .collect();
    for (idx, ext, span, _) in &nest {
        if let Extent::Range(a, b) = ext {
            for e in [a, b] {
                if let Some(n) = names.iter().find(|n| mentions(e, n)) {
                    return Err(c.error(format!(
                        "the extent of `{idx}`{} depends on `{n}`: the nest is not rectangular",
                        place(*span)
                    )));
                }
                if let Some(t) = reads_of(e).into_iter().find(|t| written.contains(t)) {
                    return Err(c.error(format!(
                        "the extent of `{idx}` reads `{t}`, which the nest writes"
                    )));
                }
            }
        }
    }
    for (n, v, span) in &lets {
        if let Some(t) = reads_of(v).into_iter().find(|t| written.contains(t)) {
            let what = match n {
                Some(n) => format!("`let {n}`"),
                None => format!("the condition `{v}`"),
            };
            return Err(c.error(format!(
                "{what}{} reads `{t}`, which the nest writes: moved into the innermost loop it would see other values",
                place(*span)
            )));
        }
    }
    // The new order: the loops in the order named.
    let order: Vec<usize> = list
        .iter()
        .zip(&paths)
        .map(|(_, path)| nest.iter().position(|n| n.3 == *path).expect("in the nest"))
        .collect();
    check(
        p,
        c,
        &nest.iter().map(|n| n.3.clone()).collect::<Vec<_>>(),
        &order,
    )?;
    let mut body = inner_body;
    for (n, v, span) in lets.into_iter().rev() {
        let kind = match n {
            Some(name) => StmtKind::Let {
                name,
                value: v,
                body,
            },
            None => StmtKind::If {
                cond: v,
                then: body,
                otherwise: vec![],
            },
        };
        body = vec![Stmt::new(kind, span)];
    }
    for &k in order.iter().rev() {
        let (index, extent, span, _) = nest[k].clone();
        body = vec![Stmt::new(
            StmtKind::Loop {
                index,
                extent,
                body,
                parallel: crate::notation::ast::LoopMode::Serial,
            },
            span,
        )];
    }
    let mut out = p.body.clone();
    let parent = super::names::parent_mut(&mut out, &outer_path);
    let at = outer_path.last().expect("a path").1;
    parent[at] = body.pop().expect("the new nest");
    Ok(p.with_body(out))
}

/// Refuse the permutation when a dependence changes which instance runs first. `nest` holds
/// the loops' paths in depth order; loop `order[k]` of the nest goes to depth `k`.
fn check(p: &Program, c: &Located, nest: &[Vec<(usize, usize)>], order: &[usize]) -> Result<()> {
    let a = Analysis::new(p);
    let ids: Vec<usize> = nest
        .iter()
        .map(|path| {
            a.loops
                .iter()
                .position(|l| l.path == *path)
                .expect("analysed")
        })
        .collect();
    let innermost = *ids.last().expect("a nest");
    let inside = |x: &super::deps::Acc| x.loops.contains(&innermost);
    let bad = |x: &super::deps::Acc, y: &super::deps::Acc, common: &[usize], v: &[Dir]| {
        let old = first_is_x(x, y, v);
        let new_v: Vec<Dir> = common
            .iter()
            .map(|l| match ids.iter().position(|i| i == l) {
                Some(depth) => {
                    let moved = ids[order[depth]];
                    v[common.iter().position(|m| *m == moved).expect("shared")]
                }
                None => v[common.iter().position(|m| m == l).expect("shared")],
            })
            .collect();
        old != first_is_x(x, y, &new_v)
    };
    match a.find(&inside, &inside, true, &bad) {
        Some(dep) => Err(c.broken("the new loop order reverses a dependence", dep)),
        None => Ok(()),
    }
}

pub(super) fn reads_of(e: &Expr) -> Vec<String> {
    let mut out = vec![];
    visit::expr(e, &mut |x| match &x.kind {
        crate::notation::ast::ExprKind::Access(a) => out.push(a.tensor.clone()),
        crate::notation::ast::ExprKind::Name(n) => out.push(n.clone()),
        _ => {}
    });
    out
}

pub(super) fn place(s: Span) -> String {
    if s.is_known() {
        format!(" at {s}")
    } else {
        String::new()
    }
}
