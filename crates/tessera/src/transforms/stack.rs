//! A stack that fits a program's nesting.
//!
//! Every pass over a program recurses once per nested statement. Programs a user writes are
//! at most `MAX_NESTING` deep (the parser refuses deeper ones), but a field's probe site
//! expands into one nested `let` per weight, sample and partial sum (`transforms::fields`):
//! a value, gradient and Hessian of a 3-d `c4hexic` field is over 400 levels, and a product
//! of fields or a vector field several times that. The entry points that take a program
//! (compiling, the shape checks of a run, the evaluator, the EIN normaliser) run such a
//! program on a stack sized for it, so depth is never a crash.

use crate::notation::ast::{Program, Stmt, StmtKind};

/// Nesting past which a program runs on a stack of its own: about what the 2 MiB stack of
/// a spawned thread holds with room to spare.
const SHALLOW: usize = 96;
/// The stack each level of nesting may take, generously (a deep pass frame is a few KiB).
const PER_LEVEL: usize = 32 << 10;
/// The levels every fitted stack holds at least (256 MiB of address space, mapped lazily).
const FLOOR: usize = 8192;

/// How deeply the statements of `body` nest (an empty body is 0), without recursion.
pub fn nesting(body: &[Stmt]) -> usize {
    let mut deepest = 0;
    let mut todo: Vec<(&Stmt, usize)> = body.iter().map(|s| (s, 1)).collect();
    while let Some((s, d)) = todo.pop() {
        deepest = deepest.max(d);
        let children: [&[Stmt]; 2] = match &s.kind {
            StmtKind::Loop { body, .. } | StmtKind::Let { body, .. } | StmtKind::Block(body) => {
                [body, &[]]
            }
            StmtKind::If {
                then, otherwise, ..
            } => [then, otherwise],
            StmtKind::Declare { .. }
            | StmtKind::Assign { .. }
            | StmtKind::Freeze { .. }
            | StmtKind::Thaw { .. } => [&[], &[]],
        };
        for list in children {
            todo.extend(list.iter().map(|s| (s, d + 1)));
        }
    }
    deepest
}

/// `f()`, on a fresh stack when `p` declares fields (whose expansion nests deeply) or already
/// nests deeply; the stack is mapped lazily, so only the depth used costs memory.
pub fn fitting<T>(p: &Program, f: impl FnOnce() -> T) -> T {
    let depth = nesting(&p.body);
    let deep = depth > SHALLOW || super::fields::has_fields(p);
    if !deep {
        return f();
    }
    // The expansion of fields is not measured before it is made: the floor covers a few
    // thousand levels of it. An entry point called from another (compiling lowers EIN) is
    // already on such a stack and keeps it.
    let size = depth.max(FLOOR).saturating_mul(PER_LEVEL);
    stacker::maybe_grow(size, size, f)
}

/// `f()` on a stack for [`FLOOR`] levels of nesting: for a command that handles programs
/// end to end (`tessera run`), whose own walks over an expanded program are deep too.
pub fn deep<T>(f: impl FnOnce() -> T) -> T {
    stacker::maybe_grow(FLOOR * PER_LEVEL, FLOOR * PER_LEVEL, f)
}
