//! Jumper: like a stepper, but when several jumpers coiterate each chunk runs to the
//! *largest* of their stops (leapfrogging, the `gallop` protocol). The jumper that reaches
//! the chunk's end contributes its spike; the others skip ahead (a binary search) and walk
//! their entries inside the chunk.

use super::lowerer::Lowerer;
use super::node::{self, LStmt};
use super::rewrite::replace_head;
use super::{Ext, Kind, Looplet, SeekFn, Target};
use crate::error::Result;
use crate::ir::{Expr, Stmt, build as b};
use crate::types::ElemType;
use std::rc::Rc;

pub struct Jumper {
    /// Move the state to the chunk containing the given coordinate (a binary search).
    pub seek: SeekFn,
    /// The coordinate of the current stored entry.
    pub stop: Expr,
    /// The chunk when this jumper leads it (the chunk ends at `stop`).
    pub spike: Looplet,
    /// The chunk when another jumper leads it (it ends before `stop`): a walk over the
    /// entries inside, which leaves the state past them.
    pub walk: Looplet,
    /// Advance past the current entry (only after a chunk this jumper led).
    pub next: Vec<Stmt>,
}

pub fn lower<L: Lowerer + ?Sized>(
    lw: &mut L,
    index: &str,
    ext: Ext,
    mut body: Vec<LStmt>,
) -> Result<Vec<Stmt>> {
    let unspecialised = body.clone();
    let mut jumpers: Vec<Rc<Jumper>> = vec![];
    node::visit_accesses_mut(&mut body, &mut |a| {
        if a.head() == Some(index)
            && let Target::Looplet(Looplet::Jumper(j)) = &a.target
            && !jumpers.iter().any(|k| Rc::ptr_eq(k, j))
        {
            jumpers.push(j.clone());
        }
        Ok(())
    })?;
    let mut code = vec![];
    for j in &jumpers {
        code.extend((j.seek)(&ext.start));
    }
    if ext.is_point() {
        // After seeking, the point is the jumper's entry or lies before it, inside the
        // current chunk either way: the walk's chunk (a stepper over the same state, whose own
        // seek would search again for nothing) is the structure at the point.
        let at = ext.start.clone();
        replace_head(&mut body, index, &mut |l| match l {
            Looplet::Jumper(j) => Some(Target::Looplet(match &j.walk {
                Looplet::Stepper(s) => s.chunk.clone(),
                walk => Looplet::Switch(vec![
                    (b::eq(j.stop.clone(), at.clone()), j.spike.clone()),
                    (b::boolean(true), walk.clone()),
                ]),
            })),
            _ => None,
        });
        let chunk = lw.lower_loop(index, ext, body)?;
        if chunk.is_empty() {
            return Ok(vec![]);
        }
        code.extend(chunk);
        return Ok(code);
    }
    let kind = Kind::of_ext(lw.cx(), &ext);
    if kind == Kind::Real
        && jumpers.len() > 1
        && let Some(walk) = lower_point_walk(lw, index, &ext, &jumpers, &body, &unspecialised)?
    {
        // The seeks above position the others for the general loop; the point walk seeks
        // each of them at every point instead (only the walked jumper needs its start).
        let lead = walk.0;
        let mut code = (jumpers[lead].seek)(&ext.start);
        if walk.1.is_empty() {
            return Ok(vec![]);
        }
        code.extend(walk.1);
        return Ok(code);
    }
    let i = lw.cx().var(index, kind.ty());
    let e = lw.cx().var(&format!("{index}_jump"), kind.ty());
    lw.loop_facts(i, e, &ext);
    code.push(b::assign(i, ext.start.clone()));
    let lead = jumpers
        .iter()
        .skip(1)
        .fold(jumpers[0].stop.clone(), |m, j| b::max(m, j.stop.clone()));
    // Whether each jumper leads the chunk is decided before the chunk runs: a walk moves
    // its jumper past the chunk's end, so testing `stop == e` afterwards would read the
    // entry after it (past the fiber's end for its last entry).
    let mut inner = vec![b::assign(e, b::min(lead, ext.stop.clone()))];
    let mut led = vec![];
    for j in &jumpers {
        let flag = lw.cx().var(&format!("{index}_led"), ElemType::Bool);
        inner.push(b::assign(flag, b::eq(j.stop.clone(), b::var(e))));
        led.push((Rc::as_ptr(j), flag));
    }
    replace_head(&mut body, index, &mut |l| match l {
        Looplet::Jumper(j) => {
            let flag = led.iter().find(|(p, _)| *p == Rc::as_ptr(j))?.1;
            Some(Target::Looplet(Looplet::Switch(vec![
                (b::var(flag), j.spike.clone()),
                (b::boolean(true), j.walk.clone()),
            ])))
        }
        _ => None,
    });
    let chunk = lw.lower_loop(
        index,
        Ext {
            start: b::var(i),
            stop: b::var(e),
        },
        body,
    )?;
    if chunk.is_empty() {
        return Ok(vec![]);
    }
    inner.extend(chunk);
    for (j, (_, flag)) in jumpers.iter().zip(&led) {
        inner.extend(b::if_(b::var(*flag), j.next.clone()));
    }
    inner.push(b::assign(i, kind.after(&b::var(e))));
    inner.extend(lw.short_circuit_exit(index, b::var(i), &ext.stop, &unspecialised)?);
    code.push(Stmt::While {
        cond: b::le(b::var(i), ext.stop),
        body: inner,
    });
    Ok(code)
}

/// Point read of the other jumpers (on a real loop): when one jumper's chunks are pinpoints
/// (a spike at each entry) over a part where the statement does nothing (the other factor of
/// a product with its fill), only its points matter. Walk them, and read every other jumper
/// at each point: a seek (a forward search from its current position, which the points'
/// order keeps valid) and its chunk at the point, one test, instead of the leapfrog loop's
/// two-jumper chunks around a single point. Returns the walked jumper and the code.
fn lower_point_walk<L: Lowerer + ?Sized>(
    lw: &mut L,
    index: &str,
    ext: &Ext,
    jumpers: &[Rc<Jumper>],
    body: &[LStmt],
    unspecialised: &[LStmt],
) -> Result<Option<(usize, Vec<Stmt>)>> {
    for (k, p) in jumpers.iter().enumerate() {
        let Looplet::Spike {
            at,
            body: gap,
            tail,
        } = &p.spike
        else {
            continue;
        };
        if *at != p.stop {
            continue;
        }
        let kind = Kind::Real;
        let i = lw.cx().var(index, kind.ty());
        let e = lw.cx().var(&format!("{index}_point"), kind.ty());
        lw.loop_facts(i, e, ext);
        // Between the points the statement must vanish, whatever the other jumpers hold.
        let mut before = body.to_vec();
        replace_head(&mut before, index, &mut |l| match l {
            Looplet::Jumper(j) if Rc::ptr_eq(j, p) => {
                Some(Target::Looplet(Looplet::Run(gap.clone())))
            }
            _ => None,
        });
        let gap_ext = Ext {
            start: b::var(i),
            stop: kind.before(&b::var(e)),
        };
        if !lw.lower_loop(index, gap_ext, before)?.is_empty() {
            continue;
        }
        let mut at_point = body.to_vec();
        replace_head(&mut at_point, index, &mut |l| match l {
            Looplet::Jumper(j) if Rc::ptr_eq(j, p) => {
                Some(Target::Looplet(Looplet::Run(tail.clone())))
            }
            _ => None,
        });
        let point = Ext {
            start: b::var(e),
            stop: b::var(e),
        };
        let chunk = lw.lower_loop(index, point, at_point)?;
        if chunk.is_empty() {
            return Ok(Some((k, vec![])));
        }
        let mut inner = vec![b::assign(e, p.stop.clone())];
        inner.extend(b::if_(
            b::lt(ext.stop.clone(), b::var(e)),
            vec![Stmt::Break],
        ));
        inner.extend(chunk);
        inner.extend(p.next.clone());
        inner.push(b::assign(i, kind.after(&b::var(e))));
        inner.extend(lw.short_circuit_exit(index, b::var(i), &ext.stop, unspecialised)?);
        return Ok(Some((
            k,
            vec![
                b::assign(i, ext.start.clone()),
                Stmt::While {
                    cond: b::le(b::var(i), ext.stop.clone()),
                    body: inner,
                },
            ],
        )));
    }
    Ok(None)
}
