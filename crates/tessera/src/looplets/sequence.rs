//! Sequence: consecutive phases, phase k covering (stop of phase k-1, stop_k] (a band's
//! parts, a mask's inside and outside, a level's stored part and the fill after it). The rule
//! cuts the loop at the phase stops, skips the phases the facts prove empty and lowers the
//! phases of at most one coordinate as points.

use super::lowerer::Lowerer;
use super::node::{self, LStmt};
use super::rewrite::{set_at, take_first};
use super::stepper::Positions;
use super::{Ext, Kind, Looplet, Target};
use crate::error::Result;
use crate::ir::{Expr, Stmt, build as b};

#[derive(Clone)]
pub struct Phase {
    /// The phase's last coordinate; `None` runs to the end of the extent.
    pub stop: Option<Expr>,
    pub body: Looplet,
}

pub fn lower<L: Lowerer + ?Sized>(
    lw: &mut L,
    index: &str,
    ext: Ext,
    mut body: Vec<LStmt>,
) -> Result<Vec<Stmt>> {
    let seq = take_first(&mut body, index, |l| matches!(l, Looplet::Sequence(_)));
    let Some((path, Looplet::Sequence(phases))) = seq else {
        unreachable!("a sequence is present")
    };
    let stops: Vec<Option<Expr>> = phases.iter().map(|p| p.stop.clone()).collect();
    if ext.is_point() {
        return lower_at(lw, index, ext, body, path, phases, &stops);
    }
    let kind = Kind::of_ext(lw.cx(), &ext);
    if let Some(pos) = stored_phase(&phases) {
        // A valid tensor stores no coordinate beyond the level's bound, so `last` does not
        // either (it is -1 for an empty fiber): with the extent reaching the bound, the stored
        // phase needs no `min` and its walk no search for its end.
        if let Expr::Var(last) = pos.last {
            lw.facts_mut()
                .record_range(last, None, Some(pos.bound.clone()));
        }
    }
    let mut code = vec![];
    let mut cur = ext.start.clone();
    let mut emitted = false;
    let n = phases.len();
    for (
        k,
        Phase {
            stop,
            body: looplet,
        },
    ) in phases.into_iter().enumerate()
    {
        // The stored phase of a sparse level walked from coordinate 0 is empty exactly when
        // the fiber stores nothing, which its positions tell without loading `last`; unless
        // something else reads `last`, its load is then dead and pruned (`ir::prune`). That
        // load, a dependent read at each fiber's end, cost SpMV about 12% on a random matrix.
        let positions_guard = match stored_positions(&stop, &looplet) {
            Some(pos) if k == 0 && lw.facts().le(&pos.last, &ext.stop) && is_zero(lw, &cur) => {
                Some(b::lt(pos.first.clone(), pos.end.clone()))
            }
            _ => None,
        };
        let hi = match &stop {
            // A phase ending inside the extent needs no cut.
            Some(s) if lw.facts().le(s, &ext.stop) => s.clone(),
            // A phase reaching past the extent is cut by it alone.
            Some(s) if !lw.facts().le(&ext.stop, s) => b::min(s.clone(), ext.stop.clone()),
            _ => ext.stop.clone(),
        };
        let hi = lw.pin(&mut code, hi, &format!("{index}_phase_stop"));
        let mut b2 = body.clone();
        set_at(&mut b2, &path, Target::Looplet(looplet));
        split_alike(&mut b2, index, &stops, k);
        let phase = Ext {
            start: cur.clone(),
            stop: hi.clone(),
        };
        if lw.facts().empty(&phase.start, &phase.stop) {
            // Nothing to run, and the next phase starts where this one would have.
            continue;
        }
        // A phase of at most one coordinate (the edges a mask cuts) runs at its start,
        // under the guard below: no loop, and its steppers seek once.
        let mut at_point = vec![];
        let run = lw.narrow_guarded(phase.clone(), index, &mut at_point);
        let mut inner = lw.lower_loop(index, run.clone(), b2.clone())?;
        if emitted {
            // Earlier phases may have finished a short-circuiting reduction. Not when none
            // of them ran code: then the guard would only repeat the test the loop makes
            // after its first iteration, and cost a load per fiber (interval overlap: one
            // per query, most of which match nothing).
            inner = lw.short_circuit_guard(index, &run, &b2, inner)?;
        }
        // The point's variable is assigned before the guard: both of its branches read it.
        if !inner.is_empty() {
            inner.splice(0..0, at_point);
        }
        if !inner.is_empty() {
            emitted = true;
        }
        code.extend(match positions_guard {
            Some(c) if !lw.facts().le(&phase.start, &phase.stop) => b::if_(c, inner),
            _ => lw.if_nonempty(&phase, inner),
        });
        if k + 1 < n {
            let next = lw.cx().var(&format!("{index}_phase_start"), kind.ty());
            // After the phase's own stop rather than after `hi`: the two differ only when
            // the phase reaches past the extent, and then every later phase is empty
            // either way. Without the `min`, constant cuts stay constants (`max(0, 0 + 1)`
            // is 1), which proves the shifted accesses of later phases in bounds.
            let after = stop.unwrap_or(hi);
            let start = b::max(cur.clone(), kind.after(&after));
            lw.facts_mut().record(next, &start);
            code.push(b::assign(next, start));
            cur = b::var(next);
        }
    }
    // Phase bounds alone are dead code.
    Ok(if emitted { code } else { vec![] })
}

/// The positions of a sparse level's stored phase (`levels::shared::chunks_then_fill`): the
/// first of `phases`, a stepper over positions stopping at their last coordinate.
fn stored_phase(phases: &[Phase]) -> Option<&Positions> {
    phases
        .first()
        .and_then(|p| stored_positions(&p.stop, &p.body))
}

/// The positions of a phase that is a stepper over positions stopping at their last
/// coordinate.
fn stored_positions<'a>(stop: &Option<Expr>, body: &'a Looplet) -> Option<&'a Positions> {
    match (stop, body) {
        (Some(stop), Looplet::Stepper(s)) => s.positions.as_ref().filter(|p| p.last == *stop),
        _ => None,
    }
}

/// Whether the facts pin `e` to 0.
fn is_zero<L: Lowerer + ?Sized>(lw: &L, e: &Expr) -> bool {
    let zero = b::int(0);
    lw.facts().le(e, &zero) && lw.facts().le(&zero, e)
}

/// A sequence at one point runs the phase holding it: the first whose stop is not before
/// the point (phase k starts after every earlier stop). Only that phase runs, so no
/// phase bounds are computed.
fn lower_at<L: Lowerer + ?Sized>(
    lw: &mut L,
    index: &str,
    ext: Ext,
    body: Vec<LStmt>,
    path: usize,
    phases: Vec<Phase>,
    stops: &[Option<Expr>],
) -> Result<Vec<Stmt>> {
    let at = ext.start.clone();
    let mut cases: Vec<(Expr, Vec<Stmt>)> = vec![];
    for (k, phase) in phases.into_iter().enumerate() {
        let cond = match &phase.stop {
            Some(s) if lw.facts().lt(s, &at) => continue,
            Some(s) if !lw.facts().le(&at, s) => b::le(at.clone(), s.clone()),
            _ => b::boolean(true),
        };
        let mut b2 = body.clone();
        set_at(&mut b2, &path, Target::Looplet(phase.body));
        split_alike(&mut b2, index, stops, k);
        let inner = lw.lower_loop(index, ext.clone(), b2)?;
        let last = cond == b::boolean(true);
        cases.push((cond, inner));
        if last {
            break;
        }
    }
    let mut code = vec![];
    for (cond, inner) in cases.into_iter().rev() {
        code = b::if_else(cond, inner, code);
    }
    Ok(code)
}

/// Sequences with the same phase boundaries as the one being lowered (the same mask in both
/// branches of an `if`, or tested twice) split with it: phase `k` of each takes its place,
/// rather than every copy cutting every phase again.
fn split_alike(body: &mut [LStmt], index: &str, stops: &[Option<Expr>], k: usize) {
    let _ = node::visit_accesses_mut(body, &mut |a| {
        if a.head() == Some(index)
            && let Target::Looplet(Looplet::Sequence(ps)) = &a.target
            && ps.len() == stops.len()
            && ps.iter().zip(stops).all(|(p, s)| p.stop == *s)
        {
            let t = Target::Looplet(ps[k].body.clone());
            a.target = t;
        }
        Ok(())
    });
}
