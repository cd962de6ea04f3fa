//! `parallelize(i)`: run loop `i`'s iterations at once (`for i = parallel(...)`), when the
//! dependence analysis finds no dependence carried by `i` other than reductions of one
//! commutative and associative kind. Which outputs then need per-thread copies, and which
//! writes are races after all (a sparse output whose rows are not the loop's, an overwrite of
//! a shared location), is decided when the program is lowered for its formats
//! (`transforms::parallel`), as for a loop written `parallel` in the program.
//! `parallelize(i, atomics)` / `parallelize(i, copies)` also fix how those reductions combine
//! on several threads for this loop (`Folds`), whatever `Runner::set_atomics` says.
//!
//! Tensors the loop's iterations declare before using them (a row's workspace, Gustavson's
//! `w .= 0`) count as one per iteration (`deps`' private tensors): the executor gives each
//! chunk of iterations its own copy (`Plan::scratch`), and the race check refuses a
//! declaration it cannot give one for.
//!
//! `vectorize(i)`: run loop `i`'s iterations in SIMD lanes (`for i = vectorize(...)`), when
//! `i` is an innermost loop that carries no dependence and whose reductions lanes can
//! combine exactly up to reassociation (`deps::Analysis::vector_blocker`). Whether its range is
//! dense is a question of formats, checked when the program is lowered (`run::vector_check`).

use super::loops::replace;
use super::names::{find_loop, get};
use super::{Located, LoopRef, deps};
use crate::error::Result;
use crate::notation::ast::{Folds, LoopMode, Program, StmtKind};

pub fn parallelize(p: &Program, c: &Located, target: &LoopRef, folds: Folds) -> Result<Program> {
    let path = find_loop(&p.body, c, target)?;
    if let Some(dep) = deps::Analysis::new(p).carried_by(&path, true) {
        return Err(c.broken(
            format!(
                "loop `{}` carries a dependence, so its iterations cannot run at once",
                target.name
            ),
            dep,
        ));
    }
    let mut s = get(&p.body, &path).clone();
    if let StmtKind::Loop { parallel, .. } = &mut s.kind {
        if *parallel == LoopMode::Vector {
            return Err(c.error(format!(
                "loop `{}` is vectorised; a loop runs on threads or in lanes, not both",
                target.name
            )));
        }
        *parallel = LoopMode::Parallel(folds);
    }
    Ok(replace(p, &path, vec![s]))
}

pub fn vectorize(p: &Program, c: &Located, target: &LoopRef) -> Result<Program> {
    let path = find_loop(&p.body, c, target)?;
    let mut s = get(&p.body, &path).clone();
    let StmtKind::Loop { body, parallel, .. } = &mut s.kind else {
        return Err(c.error(format!("`{target}` is not a loop")));
    };
    let mut inner = None;
    super::names::walk(body, &mut |st, _| {
        if let StmtKind::Loop { index, .. } = &st.kind {
            inner.get_or_insert_with(|| index.clone());
        }
    });
    if let Some(inner) = inner {
        return Err(c.error(format!(
            "loop `{}` is not innermost (loop `{inner}` is inside it); only an innermost loop runs in lanes",
            target.name
        )));
    }
    if parallel.is_parallel() {
        return Err(c.error(format!(
            "loop `{}` is parallel; a loop runs on threads or in lanes, not both",
            target.name
        )));
    }
    if let Some(dep) = deps::Analysis::new(p).vector_blocker(&path) {
        return Err(c.broken(
            format!(
                "loop `{}` carries a dependence (or a reduction lanes cannot combine), so its iterations cannot run in lanes",
                target.name
            ),
            dep,
        ));
    }
    *parallel = LoopMode::Vector;
    Ok(replace(p, &path, vec![s]))
}
