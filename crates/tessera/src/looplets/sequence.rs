//! Sequence: consecutive phases, phase k covering (stop of phase k-1, stop_k] (a band's
//! parts, a mask's inside and outside, a level's stored part and the fill after it). The rule
//! cuts the loop at the phase stops, skips the phases the facts prove empty and lowers the
//! phases of at most one coordinate as points.

use super::lowerer::Lowerer;
use super::node::{self, LStmt};
use super::rewrite::{set_at, take_first};
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
        let hi = match &stop {
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
        if !inner.is_empty() {
            inner.splice(0..0, at_point);
        }
        if k > 0 {
            // Earlier phases may have finished a short-circuiting reduction.
            inner = lw.short_circuit_guard(index, &run, &b2, inner)?;
        }
        if !inner.is_empty() {
            emitted = true;
        }
        code.extend(lw.if_nonempty(&phase, inner));
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
