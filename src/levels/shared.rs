//! Compile-time pieces several level formats share: the fill-only declaration rule of sparse
//! levels and the `ptr` offset array that turns per-fiber counts into offsets at freeze.

use super::LevelRef;
use crate::error::{Error, Result};
use crate::ir::{BufId, Expr, Stmt, build as b};
use crate::looplets::{Jumper, Looplet, Phase, Stepper, Target};
use crate::lower::ctx::Cx;
use crate::notation::ast::Protocol;
use crate::types::{ElemType, Scalar};
use std::rc::Rc;

/// Sparse levels do not store the coordinates they leave out, so those read as the fill: a
/// declaration to any other value cannot be represented.
pub fn declare_to_fill(l: &LevelRef, init: Scalar) -> Result<()> {
    if init.cast(l.tensor.elem) != l.tensor.fill {
        return Err(Error::tensor(
            &l.tensor.name,
            format!(
                "a sparse tensor can only be declared with its fill value {}, not {init}",
                l.tensor.fill
            ),
        ));
    }
    Ok(())
}

/// `ptr[1..=count] += ptr[0..count]`: per-fiber counts (kept in `ptr[p + 1]` while writing)
/// become offsets.
pub fn prefix_sum(cx: &mut Cx, ptr: BufId, count: Expr) -> Stmt {
    let p = cx.var("p", ElemType::I64);
    Stmt::For {
        var: p,
        start: b::int(1),
        stop: b::add(count, b::int(1)),
        body: vec![b::store(
            ptr,
            b::var(p),
            b::add(
                b::load(ptr, b::var(p)),
                b::load(ptr, b::sub(b::var(p), b::int(1))),
            ),
        )],
    }
}

/// The read looplets of a level whose fiber is a sorted list of chunks up to coordinate
/// `last`, then fill: the preamble, a stepper over the chunks (a jumper under `gallop`, whose
/// walk is the same stepper), and a fill run after `last`.
pub fn chunks_then_fill(
    preamble: Vec<Stmt>,
    stepper: Stepper,
    protocol: Option<Protocol>,
    last: Expr,
    fill: Target,
) -> Looplet {
    let chunks = match protocol {
        Some(Protocol::Gallop) => Looplet::Jumper(Rc::new(Jumper {
            seek: stepper.seek.clone(),
            stop: stepper.stop.clone(),
            spike: stepper.chunk.clone(),
            next: stepper.next.clone(),
            walk: Looplet::Stepper(Rc::new(stepper)),
        })),
        _ => Looplet::Stepper(Rc::new(stepper)),
    };
    Looplet::Thunk {
        preamble,
        body: Box::new(Target::Looplet(Looplet::Sequence(vec![
            Phase {
                stop: Some(last),
                body: chunks,
            },
            Phase {
                stop: None,
                body: Looplet::Run(Box::new(fill)),
            },
        ]))),
        epilogue: vec![],
    }
}
