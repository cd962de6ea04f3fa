//! Wrapper tensors in the lowering: index comparisons become mask tensors with fixed looplets,
//! and offset accesses (`A[i + c]`) read the level's looplets shifted by `c`.

use super::emit::emit_index;
use super::node::{self, LAccess, LExpr, LStmt, Mode};
use crate::error::Result;
use crate::ir::cx::{Cx, KernelError, KernelErrorKind};
use crate::ir::{Expr, Stmt, build as b};
use crate::looplets::extent::Kind;
use crate::looplets::{Ext, Fiber, Jumper, Looplet, Phase, Stepper, Target};
use crate::symbolic::bounds::Facts;
use crate::types::Scalar;
use std::rc::Rc;

/// The name mask accesses show in messages (not an identifier, so it never equals a user
/// tensor's; what makes an access a mask is `LAccess::mask`).
const MASK_NAME: &str = "(mask)";

/// Replace every mask on `index` by a mask access whose looplet is a sequence of runs:
/// `!inside` before `lo`, `inside` from `lo` to `hi`, `!inside` after. Lowering the sequence
/// cuts the loop at the bounds; the simplifier then drops the phases where an `if` on the
/// mask is false, so `if i <= j` over `j` iterates `j = i..` only and `i == j` is one point.
/// A mask whose bounds cannot be computed here stays a comparison.
pub fn unfurl_masks(body: &mut [LStmt], index: &str) -> Result<()> {
    node::visit_exprs_mut(body, &mut |e| {
        let LExpr::Mask(m) = e else { return Ok(()) };
        if !matches!(&m.index, LExpr::Index(n) if n == index) {
            return Ok(());
        }
        let bound = |x: &Option<LExpr>| x.as_ref().map(|x| emit_index(x, m.span)).transpose();
        let (Ok(lo), Ok(hi)) = (bound(&m.lo), bound(&m.hi)) else {
            return Ok(());
        };
        let run = |v: bool| Looplet::Run(Box::new(Target::Fill(Scalar::Bool(v))));
        let mut phases = vec![];
        if let Some(lo) = lo {
            phases.push(Phase {
                stop: Some(b::sub(lo, b::int(1))),
                body: run(!m.inside),
            });
        }
        phases.push(Phase {
            stop: hi.clone(),
            body: run(m.inside),
        });
        if hi.is_some() {
            phases.push(Phase {
                stop: None,
                body: run(!m.inside),
            });
        }
        *e = LExpr::Access(Box::new(LAccess {
            tensor: MASK_NAME.to_string(),
            mask: true,
            target: Target::Looplet(Looplet::Sequence(phases)),
            indices: vec![index.to_string()],
            protocols: vec![None],
            offsets: vec![None],
            mode: Mode::Read,
            span: m.span,
        }));
        Ok(())
    })
}

/// Whether an access headed by `index` satisfies `pred` (a mask still to be lowered, an
/// offset access still to be unfurled).
pub fn any_head(body: &mut [LStmt], index: &str, pred: impl Fn(&LAccess) -> bool) -> bool {
    let mut found = false;
    let _ = node::visit_accesses_mut(body, &mut |a| {
        found |= a.head() == Some(index) && pred(a);
        Ok(())
    });
    found
}

/// The run-time check that an offset access stays inside its dimension over the whole extent
/// (once per entry into the loop, not per coordinate); none where the facts prove it.
pub fn offset_check(
    cx: &mut Cx,
    facts: &Facts,
    a: &LAccess,
    f: &Fiber,
    ext: &Ext,
    c: &Expr,
) -> Vec<Stmt> {
    let dim = f.tensor.first_dim_of_level(f.level) + f.sub;
    let size = f.tensor.dim_of_level(f.level, f.sub);
    let first = b::add(ext.start.clone(), c.clone());
    let last = b::add(ext.stop.clone(), c.clone());
    if facts.le(&b::int(0), &first) && facts.lt(&last, &size) {
        return vec![];
    }
    let msg =
        cx.error(KernelError::new(&a.tensor, KernelErrorKind::ShiftOutOfBounds { dim }).at(a.span));
    let outside = b::or(b::lt(first, b::int(0)), b::le(size, last));
    let nonempty = if ext.is_point() {
        b::boolean(true)
    } else {
        b::le(ext.start.clone(), ext.stop.clone())
    };
    b::if_(b::and(nonempty, outside), vec![Stmt::Fail(msg)])
}

/// A looplet over tensor coordinates `k` seen as a looplet over loop coordinates `i = k - c`.
/// On a real loop (`kind` Real) the coordinates and `c` are `Limit` points and move by Limit
/// arithmetic, so a half-open end keeps its ε: `[a, b)` read at `i + c` is `[a - c, b - c)`.
pub fn shift(l: &Looplet, c: &Expr, kind: Kind) -> Looplet {
    if *c == b::int(0) {
        return l.clone();
    }
    let back = |x: &Expr| kind.sub(x, c);
    let c = c.clone();
    match l {
        Looplet::Run(t) => Looplet::Run(Box::new(shift_target(t, &c, kind))),
        Looplet::Lookup(f) => {
            let f = f.clone();
            Looplet::Lookup(Rc::new(move |i: &Expr| {
                shift_target(&f(&kind.add(i, &c)), &c, kind)
            }))
        }
        Looplet::Spike { at, body, tail } => Looplet::Spike {
            at: back(at),
            body: Box::new(shift_target(body, &c, kind)),
            tail: Box::new(shift_target(tail, &c, kind)),
        },
        Looplet::Sequence(phases) => Looplet::Sequence(
            phases
                .iter()
                .map(|p| Phase {
                    stop: p.stop.as_ref().map(back),
                    body: shift(&p.body, &c, kind),
                })
                .collect(),
        ),
        Looplet::Stepper(s) => {
            let seek = s.seek.clone();
            let c2 = c.clone();
            Looplet::Stepper(Rc::new(Stepper {
                seek: Rc::new(move |i: &Expr| seek(&kind.add(i, &c2))),
                stop: back(&s.stop),
                chunk: shift(&s.chunk, &c, kind),
                next: s.next.clone(),
                // Shifted coordinates no longer match the level's own (its search keys and
                // last coordinate): the engine walks a shifted list chunk by chunk.
                positions: None,
                within: None,
            }))
        }
        Looplet::Jumper(j) => {
            let seek = j.seek.clone();
            let c2 = c.clone();
            Looplet::Jumper(Rc::new(Jumper {
                seek: Rc::new(move |i: &Expr| seek(&kind.add(i, &c2))),
                stop: back(&j.stop),
                spike: shift(&j.spike, &c, kind),
                walk: shift(&j.walk, &c, kind),
                next: j.next.clone(),
            }))
        }
        Looplet::Switch(cases) => Looplet::Switch(
            cases
                .iter()
                .map(|(cond, l)| (cond.clone(), shift(l, &c, kind)))
                .collect(),
        ),
        Looplet::AcceptRun(f) => {
            let f = f.clone();
            Looplet::AcceptRun(Rc::new(move |a: &Expr, z: &Expr| {
                shift_target(&f(&kind.add(a, &c), &kind.add(z, &c)), &c, kind)
            }))
        }
        Looplet::Thunk {
            preamble,
            body,
            epilogue,
        } => Looplet::Thunk {
            preamble: preamble.clone(),
            body: Box::new(shift_target(body, &c, kind)),
            epilogue: epilogue.clone(),
        },
    }
}

/// Only looplets over the same index move; fibers and fills below it do not.
fn shift_target(t: &Target, c: &Expr, kind: Kind) -> Target {
    match t {
        Target::Looplet(l) => Target::Looplet(shift(l, c, kind)),
        other => other.clone(),
    }
}
