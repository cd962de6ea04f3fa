//! Spike: `body` everywhere before coordinate `at`, `tail` at `at` (a stepper's chunk: the
//! fill up to a stored entry, then the entry). The rule lowers the part before the end of
//! the extent and then the end itself as a point; a spike whose point is not known to be the
//! extent's end first becomes a runtime switch.

use super::lowerer::Lowerer;
use super::node::LStmt;
use super::rewrite::replace_head;
use super::{Ext, Kind, Looplet, Target};
use crate::error::Result;
use crate::ir::{Expr, Stmt, build as b};

pub fn lower<L: Lowerer + ?Sized>(
    lw: &mut L,
    index: &str,
    ext: Ext,
    mut body: Vec<LStmt>,
) -> Result<Vec<Stmt>> {
    // A spike whose point is not known to be the extent's end becomes a runtime switch.
    let stop = ext.stop.clone();
    let mut first: Option<Expr> = None;
    replace_head(&mut body, index, &mut |l| {
        if let Looplet::Spike { at, .. } = l
            && *at != stop
            && first.is_none()
        {
            first = Some(at.clone());
        }
        None
    });
    // Every spike at that point (one shared by several accesses) switches with it.
    let mut switched = false;
    replace_head(&mut body, index, &mut |l| match l {
        Looplet::Spike { at, body, tail } if Some(at) == first.as_ref() => {
            switched = true;
            Some(Target::Looplet(Looplet::Switch(vec![
                (
                    b::eq(at.clone(), stop.clone()),
                    Looplet::Spike {
                        at: stop.clone(),
                        body: body.clone(),
                        tail: tail.clone(),
                    },
                ),
                (b::boolean(true), Looplet::Run(body.clone())),
            ])))
        }
        _ => None,
    });
    if switched {
        return lw.lower_loop(index, ext, body);
    }
    let mut before = body.clone();
    replace_head(&mut before, index, &mut |l| match l {
        Looplet::Spike { body, .. } => Some(Target::Looplet(Looplet::Run(body.clone()))),
        _ => None,
    });
    let mut code = vec![];
    let before_stop = Kind::of_ext(lw.cx(), &ext).before(&ext.stop);
    let last = lw.pin(&mut code, before_stop, &format!("{index}_before_stop"));
    let before_ext = lw.narrow(Ext {
        start: ext.start.clone(),
        stop: last.clone(),
    });
    let inner = lw.lower_loop(index, before_ext, before)?;
    if inner.is_empty() {
        code.clear();
    } else {
        code.extend(b::if_(b::le(ext.start.clone(), last), inner));
    }
    replace_head(&mut body, index, &mut |l| match l {
        Looplet::Spike { tail, .. } => Some(Target::Looplet(Looplet::Run(tail.clone()))),
        _ => None,
    });
    let point = Ext {
        start: ext.stop.clone(),
        stop: ext.stop,
    };
    let tail = lw.lower_loop(index, point.clone(), body.clone())?;
    // The part before the tail may have finished a short-circuiting reduction.
    let tail = if code.is_empty() {
        tail
    } else {
        lw.short_circuit_guard(index, &point, &body, tail)?
    };
    code.extend(tail);
    Ok(code)
}
