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
        // After seeking, the point is the jumper's entry or lies before it.
        let at = ext.start.clone();
        replace_head(&mut body, index, &mut |l| match l {
            Looplet::Jumper(j) => Some(Target::Looplet(Looplet::Switch(vec![
                (b::eq(j.stop.clone(), at.clone()), j.spike.clone()),
                (b::boolean(true), j.walk.clone()),
            ]))),
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
