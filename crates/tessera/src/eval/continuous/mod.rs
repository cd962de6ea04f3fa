//! The continuous reference evaluator (issue 14): runs a source program over piecewise-constant
//! tensors whose dimensions may be real, independently of the compiler. It is the oracle of
//! the real-valued lowering, so it is simple and exact rather than fast.
//!
//! - Integer loops, `if`, `let`, reducers, masks, permissive `~` and `coalesce` follow the
//!   dense evaluator's rules (the value rules are [`crate::semantics`]').
//! - A real loop over `[a, b]` (`_` is the whole line) is cut into the fewest cells on which
//!   every access it drives is constant (seed §1.4): each position of a real dimension that
//!   names the index and otherwise only names bound outside the loop partitions the line into
//!   the accessed pieces (only those matching the access's other positions known at the loop)
//!   and the fill between them, mapped back through `g(x) = c*x + o` (a piece endpoint `e`
//!   gives `x = (e - o) / c`, its ε flipped when `c < 0`); the cells are the common
//!   refinement of these partitions clipped to `[a, b]`, pinpoints `[p, p]` or intervals of
//!   positive length ([`cells`]). The body runs once per cell, `x` bound to the pinpoint or a
//!   point inside the interval.
//! - A statement reduces over the enclosing real loops that do not index its left-hand side.
//!   `+=`/`-=` with `d(x)` weigh each cell by its measure (a pinpoint's is 0), multiplying the
//!   measures of every loop `d` names; `+=`, `-=`, `*=` and non-idempotent user reducers without
//!   `d(x)` count pinpoints only and skip gaps (a positive-length piece contributes nothing to
//!   a counting sum, the implementation semantics of seed §1.7); `max= min= &= |=`, `choose`,
//!   idempotent user reducers and `=` apply once per cell whatever its length.
//! - A write whose left-hand side a real loop on a gap indexes, `A[g(x)]`, writes the whole
//!   image of the gap, `(g(lo), g(hi))`, as one piece.
//! - Where the body's values may vary inside a gap — the gap's index read as a plain value
//!   (`A[x] = x`, `if x > 2`), or an access position that names it together with a name bound
//!   inside its loop (`A[x + y]` inside `for y`, evaluated on a gap of `x`) — a write that would
//!   change its output is refused, naming the place of the read. Where the write is annihilated
//!   or masked out (a loop driven by pinpoints) nothing is refused.
//!
//! Static errors come first: [`crate::transforms::check::check_with_real_dims`] (the compiler's
//! checks: unknown names, ranks, reused loop names, floats in integer places, arities),
//! [`crate::transforms::real::check_real`] (loop kinds, `d`, invertible positions) and [`crate::transforms::resolve_reducers`]; every input's pieces must be disjoint.
//! Limits: coordinates are `f64`, so cuts computed through an affine inverse are rounded (tests
//! use exactly representable values); the lifecycle check (reading and writing one tensor in
//! one scope) is not applied; a position like `A[x + c]` with `c` a `let` bound inside the loop
//! of `x` counts as varying on gaps (its cuts are not known where the loop starts).

mod cells;
mod machine;
mod pieces;
#[cfg(test)]
mod tests;

pub use cells::{Cell, cells};
pub use pieces::{Coord, PieceTensor, Point, meet, samples};

use crate::error::{Error, Result};
use crate::notation::ast::Program;
use crate::transforms::check::{Signature, Signatures, check_with_real_dims};
use crate::transforms::real::{RealDims, check_real};
use std::collections::BTreeMap;

/// Run `program` on the tensors of `env` (by name), updating them in place.
pub fn run(program: &Program, env: &mut BTreeMap<String, PieceTensor>) -> Result<()> {
    for (name, t) in env.iter() {
        t.validate(name)?;
    }
    let kinds = {
        let is_real = |t: &str, d: usize| {
            env.get(t)
                .and_then(|t| t.real.get(d).copied())
                .unwrap_or(false)
        };
        let signatures: Signatures = env
            .iter()
            .map(|(n, t)| {
                let sig = Signature {
                    rank: t.rank(),
                    elem: t.elem,
                };
                (n.clone(), sig)
            })
            .collect();
        check_with_real_dims(program, &signatures, &is_real)?;
        let class_of = |t: &str| env.get(t).map(|t| t.elem.class());
        check_real(
            program,
            &RealDims {
                is_real: &is_real,
                class_of: &class_of,
            },
        )
        .map_err(Error::from)?
    };
    let program = crate::transforms::resolve_reducers(program)?;
    let mut order = vec![];
    cells::loops(&program.body, &mut order);
    let real: Vec<bool> = kinds
        .loops
        .iter()
        .map(|l| l.kind == crate::transforms::real::IndexKind::Real)
        .collect();
    let real_loops = order
        .iter()
        .zip(&real)
        .filter(|(_, r)| **r)
        .map(|(s, _)| *s as *const _)
        .collect();
    machine::Machine::new(env, real_loops).stmts(&program.body)
}
