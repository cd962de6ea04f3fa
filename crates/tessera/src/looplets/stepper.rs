//! Stepper: a variable number of chunks, each ending at `stop` (a sparse list's entries, a
//! run list's runs). The rule loops chunk by chunk, each chunk ending at the smallest stop
//! among the steppers and the extent; one stepper whose chunks do nothing before their entry
//! becomes a walk over the stored coordinates only.

use super::lowerer::Lowerer;
use super::node::{self, LStmt};
use super::rewrite::replace_head;
use super::{Ext, Kind, Looplet, SeekFn, Target};
use crate::error::Result;
use crate::ir::{BufId, Expr, Stmt, build as b};
use crate::types::ElemType;
use std::rc::Rc;

pub struct Stepper {
    /// Move the state to the chunk containing the given coordinate.
    pub seek: SeekFn,
    /// The last coordinate of the current chunk.
    pub stop: Expr,
    /// The chunk's structure (its `Spike::at` is `stop`).
    pub chunk: Looplet,
    /// Advance to the next chunk.
    pub next: Vec<Stmt>,
    /// When the chunks are the positions of a variable that `next` advances by one (a sparse
    /// list's entries, in coordinate order): the engine may then walk the positions with a
    /// counted loop.
    pub positions: Option<Positions>,
    /// `(q, q_stop)` when the chunks are positions `q` that `next` advances by one, below
    /// `q_stop`, and every extent the stepper is lowered over ends at or before the stop of
    /// chunk `q_stop - 1` (a sparse run list's runs, before its fill phase): whenever the
    /// loop's body starts, `q < q_stop` (it would take the chunk past the last to go on).
    /// The loop then tests it too, which changes nothing, and lets a backend read `q`'s
    /// chunk bounds without checks after one test before the loop (`backend::walked`).
    pub within: Option<(Expr, Expr)>,
}

/// The positions a stepper's chunks are (see [`Stepper::positions`]).
#[derive(Clone)]
pub struct Positions {
    /// The first position, as it stands before the walk (the fiber's start).
    pub first: Expr,
    /// The position after the last one.
    pub end: Expr,
    /// The largest stored coordinate (any value below the first one when there is none).
    pub last: Expr,
    /// The largest coordinate the level can store (its dimension minus one): a valid
    /// tensor's `last` never exceeds it, so a walk over an extent reaching it needs no search
    /// for its end, and `last` need not be loaded at all (see `looplets::sequence`).
    pub bound: Expr,
    /// The coordinates, ascending over the positions: chunk `q` stops at `coords[q]`.
    pub coords: BufId,
    /// How far `next` moves the position: 1, or the slice height of a level whose fibers
    /// are interleaved (`SparseSliceList`: a fiber's entries are 8 slots apart, `end - first`
    /// a multiple of 8). A strided walk is counted only when no search is needed to cut it
    /// (the search runs over consecutive positions).
    pub stride: i64,
}

pub fn lower<L: Lowerer + ?Sized>(
    lw: &mut L,
    index: &str,
    ext: Ext,
    mut body: Vec<LStmt>,
) -> Result<Vec<Stmt>> {
    let unspecialised = body.clone();
    let mut steppers = vec![];
    node::visit_accesses_mut(&mut body, &mut |a| {
        if a.head() == Some(index)
            && let Target::Looplet(Looplet::Stepper(s)) = &a.target
        {
            // An access sharing another's stepper advances with it, not again.
            if !steppers.iter().any(|t| Rc::ptr_eq(t, s)) {
                steppers.push(s.clone());
            }
            a.target = Target::Looplet(s.chunk.clone());
        }
        Ok(())
    })?;
    let mut code = vec![];
    for s in &steppers {
        code.extend((s.seek)(&ext.start));
    }
    if ext.is_point() {
        // After seeking, every stepper's current chunk reaches the point: no loop.
        let chunk = lw.lower_loop(index, ext, body)?;
        if chunk.is_empty() {
            return Ok(vec![]);
        }
        code.extend(chunk);
        return Ok(code);
    }
    if let [s] = steppers.as_slice()
        && let Some(walk) = lower_walk(lw, index, &ext, s, &body, &unspecialised)?
    {
        if walk.is_empty() {
            // A walk whose entries do nothing (the other factor is zero over this extent, as
            // in the phases around an interval's piece) needs no seek either: a later loop
            // over this stepper seeks to its own start.
            return Ok(vec![]);
        }
        code.extend(walk);
        return Ok(code);
    }
    let kind = Kind::of_ext(lw.cx(), &ext);
    let i = lw.cx().var(index, kind.ty());
    let e = lw.cx().var(&format!("{index}_step"), kind.ty());
    lw.loop_facts(i, e, &ext);
    code.push(b::assign(i, ext.start.clone()));
    let mut step = ext.stop.clone();
    for s in &steppers {
        step = b::min(s.stop.clone(), step);
    }
    let chunk = lw.lower_loop(
        index,
        Ext {
            start: b::var(i),
            stop: b::var(e),
        },
        body,
    )?;
    if chunk.is_empty() {
        // Every stepper loop seeks to its own start, so skipping one leaves no stale state.
        return Ok(vec![]);
    }
    let mut inner = vec![b::assign(e, step)];
    inner.extend(chunk);
    for s in &steppers {
        // Advance only past a chunk that reached the stepper's entry: the last chunk may
        // be cut short by the extent, and a later seek continues from this position.
        inner.extend(b::if_(b::eq(s.stop.clone(), b::var(e)), s.next.clone()));
    }
    inner.push(b::assign(i, kind.after(&b::var(e))));
    inner.extend(lw.short_circuit_exit(index, b::var(i), &ext.stop, &unspecialised)?);
    let mut cond = b::le(b::var(i), ext.stop);
    for s in &steppers {
        if let Some((q, q_stop)) = &s.within {
            cond = b::and(cond, b::lt(q.clone(), q_stop.clone()));
        }
    }
    code.push(Stmt::While { cond, body: inner });
    Ok(code)
}

/// One stepper whose chunks are spikes over a part that does nothing (a sparse list read
/// where the statement vanishes on its fill): visit the stored coordinates only,
/// `while i <= stop { e = entry; if e > stop break; tail at e; next; i = e + 1 }`, without
/// the generic chunk's `min` and the tests of whether the chunk reached its entry.
fn lower_walk<L: Lowerer + ?Sized>(
    lw: &mut L,
    index: &str,
    ext: &Ext,
    s: &Rc<Stepper>,
    body: &[LStmt],
    unspecialised: &[LStmt],
) -> Result<Option<Vec<Stmt>>> {
    let Looplet::Spike {
        at,
        body: gap,
        tail,
    } = &s.chunk
    else {
        return Ok(None);
    };
    if *at != s.stop {
        return Ok(None);
    }
    let kind = Kind::of_ext(lw.cx(), ext);
    let i = lw.cx().var(index, kind.ty());
    let e = lw.cx().var(&format!("{index}_entry"), kind.ty());
    lw.loop_facts(i, e, ext);
    let mut before = body.to_vec();
    replace_head(&mut before, index, &mut |l| match l {
        Looplet::Spike { .. } => Some(Target::Looplet(Looplet::Run(gap.clone()))),
        _ => None,
    });
    let gap_ext = Ext {
        start: b::var(i),
        stop: kind.before(&b::var(e)),
    };
    if !lw.lower_loop(index, gap_ext, before)?.is_empty() {
        return Ok(None);
    }
    let mut at_entry = body.to_vec();
    replace_head(&mut at_entry, index, &mut |l| match l {
        Looplet::Spike { .. } => Some(Target::Looplet(Looplet::Run(tail.clone()))),
        _ => None,
    });
    let point = Ext {
        start: b::var(e),
        stop: b::var(e),
    };
    let chunk = lw.lower_loop(index, point, at_entry)?;
    if chunk.is_empty() {
        return Ok(Some(vec![]));
    }
    // Positions advanced one by one become a counted loop over those whose coordinate is
    // inside the extent (found once, by a search only when the extent ends before the
    // last entry); backends can free such a loop of per-access bounds checks.
    if let (Some(pos), [Stmt::Assign(q, step)]) = (&s.positions, s.next.as_slice())
        && *step == b::add(b::var(*q), b::int(pos.stride))
        && pos.stride > 1
        && kind == Kind::Integer
        && lw.facts().le(&pos.last, &ext.stop)
    {
        // Every stored coordinate is inside the extent: a counted loop over the fiber's
        // entries, the position moved by the stride at the end of each.
        let n = lw.cx().var(&format!("{index}_entries"), ElemType::I64);
        let k = lw.cx().var(&format!("{index}_entry_number"), ElemType::I64);
        let mut inner = vec![b::assign(e, s.stop.clone())];
        inner.extend(chunk);
        let next = kind.after(&b::var(e));
        inner.extend(lw.short_circuit_exit(index, next, &ext.stop, unspecialised)?);
        inner.extend(s.next.clone());
        return Ok(Some(vec![
            b::assign(
                n,
                b::bin(
                    crate::ir::BinOp::Div,
                    b::sub(pos.end.clone(), b::var(*q)),
                    b::int(pos.stride),
                ),
            ),
            Stmt::For {
                var: k,
                start: b::int(0),
                stop: b::var(n),
                body: inner,
            },
        ]));
    }
    if let (Some(pos), [Stmt::Assign(q, step)]) = (&s.positions, s.next.as_slice())
        && *step == b::add(b::var(*q), b::int(1))
        && pos.stride == 1
        && kind == Kind::Integer
    {
        let end = lw.cx().var(&format!("{index}_entries_end"), ElemType::I64);
        let mut inner = vec![b::assign(e, s.stop.clone())];
        inner.extend(chunk);
        let next = kind.after(&b::var(e));
        inner.extend(lw.short_circuit_exit(index, next, &ext.stop, unspecialised)?);
        let mut code = vec![b::assign(end, pos.end.clone())];
        // No search when every stored coordinate is inside the extent (a sequence's stored
        // phase ends at `last`, or the extent reaches the level's bound).
        let reaches_last = lw.facts().le(&pos.last, &ext.stop);
        code.extend(b::if_(
            match reaches_last {
                true => b::boolean(false),
                false => b::lt(ext.stop.clone(), pos.last.clone()),
            },
            vec![b::assign(
                end,
                Expr::SearchGe {
                    buf: pos.coords,
                    lo: Box::new(b::var(*q)),
                    hi: Box::new(pos.end.clone()),
                    key: Box::new(ext.end_after()),
                },
            )],
        ));
        lw.walked(*q, index);
        code.push(Stmt::For {
            var: *q,
            start: b::var(*q),
            stop: b::var(end),
            body: inner,
        });
        return Ok(Some(code));
    }
    let mut inner = vec![b::assign(e, s.stop.clone())];
    inner.extend(b::if_(
        b::lt(ext.stop.clone(), b::var(e)),
        vec![Stmt::Break],
    ));
    inner.extend(chunk);
    inner.extend(s.next.clone());
    inner.push(b::assign(i, kind.after(&b::var(e))));
    inner.extend(lw.short_circuit_exit(index, b::var(i), &ext.stop, unspecialised)?);
    Ok(Some(vec![
        b::assign(i, ext.start.clone()),
        Stmt::While {
            cond: b::le(b::var(i), ext.stop.clone()),
            body: inner,
        },
    ]))
}
