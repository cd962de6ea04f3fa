//! `swap`, `fission` and `fuse`: they move statement instances past each other, so each is
//! refused when a dependence between the instances it moves would be reversed.
//!
//! - `swap(S1, S2)` exchanges adjacent statements: the instances of one iteration of the
//!   enclosing loops change order, so a dependence with `=` on every shared loop is broken; one
//!   carried by an enclosing loop is not (FreeTensor #474).
//! - `fission(i, after S)` runs every iteration of the first part before any of the second:
//!   broken by a dependence from the second part in an earlier iteration of `i` to the first
//!   part in a later one (with `=` on the loops outside `i`). The tensors its body declares
//!   and both parts use are first expanded to one per iteration ([`super::expand`]), so a
//!   per-iteration workspace (a gradient's `ds[]`) does not itself forbid the cut.
//! - `fuse(i, j)` is fission's inverse and is checked as fission of the fused loop: broken by a
//!   dependence from the second loop's body in an earlier iteration to the first's in a later.

use super::deps::{Acc, Analysis, Dir};
use super::loops::{name, resolved};
use super::names::{Path, binds, find_loop, find_stmt, get, parent_mut, subst_stmts};
use super::reorder::{place, reads_of};
use super::{Located, LoopRef, StmtRef};
use crate::error::Result;
use crate::notation::ast::{Extent, Program, Stmt, StmtKind};
use crate::notation::visit;

/// The position, in the body of the statement at `parent`, of the step that leads to `x`.
fn step(x: &Acc, parent: &[(usize, usize)]) -> Option<usize> {
    (super::names::within(&x.stmt, parent) && x.stmt.len() > parent.len())
        .then(|| x.stmt[parent.len()].1)
}

pub fn swap(p: &Program, c: &Located, a: &StmtRef, b: &StmtRef) -> Result<Program> {
    let (pa, pb) = (find_stmt(&p.body, c, a)?, find_stmt(&p.body, c, b)?);
    let same_block = pa.len() == pb.len()
        && pa[..pa.len() - 1] == pb[..pb.len() - 1]
        && pa.last().map(|s| s.0) == pb.last().map(|s| s.0);
    let (ka, kb) = (pa.last().expect("a path").1, pb.last().expect("a path").1);
    if !same_block || ka.abs_diff(kb) != 1 {
        return Err(c.error(format!(
            "`{a}`{} and `{b}`{} are not adjacent statements of one block",
            place(get(&p.body, &pa).span),
            place(get(&p.body, &pb).span)
        )));
    }
    let (first, second) = if ka < kb { (&pa, &pb) } else { (&pb, &pa) };
    let an = Analysis::new(p);
    let in_first = |x: &Acc| Analysis::inside(x, first);
    let in_second = |x: &Acc| Analysis::inside(x, second);
    let bad = |_: &Acc, _: &Acc, _: &[usize], v: &[Dir]| v.iter().all(|d| *d == Dir::Eq);
    if let Some(dep) = an.find(&in_first, &in_second, false, &bad) {
        return Err(c.broken("swapping the statements reverses a dependence", dep));
    }
    let mut body = p.body.clone();
    parent_mut(&mut body, first).swap(ka, kb);
    Ok(p.with_body(body))
}

/// Refuse when a first-part instance in a later iteration of the loop at `lp` depends on a
/// second-part instance in an earlier one (with `=` on the loops outside it). The parts are
/// the statements of the loop's body before `split` and from `split` on.
fn check_parts(an: &Analysis, c: &Located, lp: &Path, split: usize, what: &str) -> Result<()> {
    let id = an
        .loops
        .iter()
        .position(|l| l.path == *lp)
        .expect("the loop is analysed");
    let first = |x: &Acc| step(x, lp).is_some_and(|k| k < split);
    let second = |x: &Acc| step(x, lp).is_some_and(|k| k >= split);
    let bad = |_: &Acc, _: &Acc, common: &[usize], v: &[Dir]| {
        let at = common.iter().position(|l| *l == id).expect("shared");
        v[..at].iter().all(|d| *d == Dir::Eq) && v[at] == Dir::Gt
    };
    match an.find(&first, &second, false, &bad) {
        Some(dep) => Err(c.broken(what.to_string(), dep)),
        None => Ok(()),
    }
}

pub fn fission(p: &Program, c: &Located, target: &LoopRef, after: &StmtRef) -> Result<Program> {
    let lp = find_loop(&p.body, c, target)?;
    let sp = find_stmt(&p.body, c, after)?;
    let StmtKind::Loop {
        index,
        extent,
        body,
        parallel,
    } = &get(&p.body, &lp).kind
    else {
        unreachable!("find_loop finds loops")
    };
    if sp.len() != lp.len() + 1 || sp[..lp.len()] != lp[..] {
        return Err(c.error(format!(
            "`{after}` is not a statement directly in the body of loop `{target}`"
        )));
    }
    let k = sp.last().expect("a path").1;
    if k + 1 >= body.len() {
        return Err(c.error(format!(
            "`{after}` is the last statement of loop `{target}`: nothing to split off"
        )));
    }
    if let Extent::Range(a, b) = extent {
        let (_, written) = visit::reads_writes(&body[..=k]);
        let mut reads = reads_of(a);
        reads.extend(reads_of(b));
        if let Some(t) = written.iter().find(|t| reads.contains(t)) {
            return Err(c.error(format!(
                "the extent of `{index}` reads `{t}`, which the first part writes"
            )));
        }
    }
    // The tensors the body declares and both parts use become one per iteration (see
    // [`super::expand`]); the dependence check then runs on the expanded program, where the
    // loop follows their declarations.
    let ex = super::expand::expand(&p.body, &lp, index, body, k + 1);
    if ex.split == 0 {
        return Err(c.error(format!(
            "only declarations precede the cut in loop `{target}`: nothing to split off"
        )));
    }
    let span = get(&p.body, &lp).span;
    let part = |b: &[Stmt]| {
        Stmt::new(
            StmtKind::Loop {
                index: index.clone(),
                extent: extent.clone(),
                body: b.to_vec(),
                parallel: *parallel,
            },
            span,
        )
    };
    let at = lp.last().expect("a path").1;
    let mut expanded = p.body.clone();
    let mut whole = ex.decls.clone();
    whole.push(part(&ex.body));
    parent_mut(&mut expanded, &lp).splice(at..=at, whole);
    let mut moved = lp.clone();
    moved.last_mut().expect("a path").1 += ex.decls.len();
    let candidate = p.with_body(expanded);
    let an = Analysis::new(&candidate);
    check_parts(
        &an,
        c,
        &moved,
        ex.split,
        "splitting the loop reverses a dependence",
    )?;
    let mut out = p.body.clone();
    let mut parts = ex.decls;
    parts.push(part(&ex.body[..ex.split]));
    parts.push(part(&ex.body[ex.split..]));
    parent_mut(&mut out, &lp).splice(at..=at, parts);
    Ok(p.with_body(out))
}

pub fn fuse(p: &Program, c: &Located, first: &LoopRef, second: &LoopRef) -> Result<Program> {
    let (p1, p2) = (
        find_loop(&p.body, c, first)?,
        find_loop(&p.body, c, second)?,
    );
    let adjacent = p1.len() == p2.len()
        && p1[..p1.len() - 1] == p2[..p2.len() - 1]
        && p1.last().map(|s| s.0) == p2.last().map(|s| s.0)
        && p1.last().expect("a path").1 + 1 == p2.last().expect("a path").1;
    if !adjacent {
        return Err(c.error(format!(
            "`fuse` needs loop `{second}` to follow loop `{first}` directly in one block"
        )));
    }
    let auto = |path: &Path| {
        matches!(
            &get(&p.body, path).kind,
            StmtKind::Loop {
                extent: Extent::Auto,
                ..
            }
        )
    };
    // Two `_` extents fuse into one `_`: the lowering infers it from every tensor the fused
    // index indexes and refuses tensors that disagree (a dimension mismatch, not a result).
    let both_auto = auto(&p1) && auto(&p2);
    let raw = |path: &Path| match &get(&p.body, path).kind {
        StmtKind::Loop { index, body, .. } => (index.clone(), body.clone()),
        _ => unreachable!("find_loop finds loops"),
    };
    let span = get(&p.body, &p1).span;
    let (i, j, body1, body2, extent) = if both_auto {
        let ((i, body1), (j, body2)) = (raw(&p1), raw(&p2));
        (i, j, body1, body2, Extent::Auto)
    } else {
        let (i, lo1, hi1, body1, _) = resolved(get(&p.body, &p1), c)?;
        let (j, lo2, hi2, body2, _) = resolved(get(&p.body, &p2), c)?;
        if lo1 != lo2 || hi1 != hi2 {
            return Err(c.error(format!(
                "the extents differ: `{i}` runs over `{lo1}:{hi1}`, `{j}` over `{lo2}:{hi2}`"
            )));
        }
        (i, j, body1, body2, Extent::Range(lo1, hi1))
    };
    let body2 = if i == j {
        body2
    } else {
        if binds(&body2, &i) {
            return Err(c.error(format!("the body of `{j}` binds `{i}` itself")));
        }
        subst_stmts(&body2, &j, &name(&i, span))
    };
    let split = body1.len();
    let mut body = body1;
    body.extend(body2);
    let fused = Stmt::new(
        StmtKind::Loop {
            index: i,
            extent,
            body,
            parallel: crate::notation::ast::LoopMode::Serial,
        },
        span,
    );
    let mut out = p.body.clone();
    let at = p1.last().expect("a path").1;
    parent_mut(&mut out, &p1).splice(at..=at + 1, [fused]);
    let candidate = p.with_body(out);
    let an = Analysis::new(&candidate);
    check_parts(&an, c, &p1, split, "fusing the loops reverses a dependence")?;
    Ok(candidate)
}
