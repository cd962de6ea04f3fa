//! Unrolled scatter loops (issue 18).
//!
//! An innermost loop that updates an element chosen by the data (`bins[div(img[p], 16)] +=
//! 1`, a workspace row's `w[j] += a * b[q]` with `j` read from a coordinate array) cannot be
//! vectorised, and GCC at `-O3` does not unroll it either (`-funroll-loops` is off, and would
//! reach every loop). Such a loop is a handful of instructions per element, so its compare
//! and branch are a large share of each iteration: the masked histogram's pixel loop is five
//! (`movzbl`, `sar`, `incq (bins)`, `inc`, `cmp/jne`) and ran at about one element per cycle.
//! `#pragma GCC unroll 4` before it lets four elements share one compare and branch: the
//! histogram's kernel went from 11.6 to 9.7 us on a magnified Omniglot mask (BENCHMARKS,
//! "Unrolled scatter loops"); two alternating sub-histograms instead of one (the other
//! remedy for updates of the same element one after another) gained less (10.7 us).
//!
//! The pragma changes no value and no order: GCC unrolls the loop as written, each copy
//! running the iterations in turn, with the remainder after them; a body that can leave the
//! loop (a checked access returning its fault) is one GCC's unroller leaves alone.

use crate::ir::{Expr, Stmt, VarId};
use std::collections::HashSet;

/// Iterations per unrolled step by default. Measured on the histogram's pixel loop
/// (AMD EPYC, Zen 5): 2 gave 11.6 -> 11.0 us, 4 gave 9.7-10.2, 8 gave 10.3-10.5 (a longer
/// remainder on runs of a few pixels).
pub const FACTOR: u32 = 4;

/// The largest body (statements, nested ones included) unrolled: a scatter is a load or two,
/// an index computation, a check and the update; larger bodies already amortise the branch.
const MAX_BODY: usize = 12;

/// [`FACTOR`], or `TESSERA_C_UNROLL` (1 or 0: no pragma), for measuring.
pub fn factor_from_env() -> u32 {
    std::env::var("TESSERA_C_UNROLL")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|v| *v <= 64)
        .unwrap_or(FACTOR)
}

/// Whether the loop over `var` with this body is a scatter loop to unroll: innermost, at most
/// [`MAX_BODY`] statements, not assigning `var`, straight-line but for checks (an `if` whose
/// branch ends in `fail`), growing no buffer, and storing to an element whose index reads
/// memory, directly or through a variable the body computes from a load before the store.
///
/// Branches on data are left alone: unrolled, SpGEMM's workspace loop (`if` the slot is new,
/// append its coordinate) ran 2-4% slower on two of three matrices (BENCHMARKS, "Unrolled
/// scatter loops"), each copy of the branch predicted apart from the others.
pub fn scatters(var: VarId, body: &[Stmt]) -> bool {
    let mut size = 0;
    let mut plain = true;
    crate::ir::walk::walk_stmts(body, &mut |s| {
        size += 1;
        match s {
            Stmt::For { .. } | Stmt::While { .. } | Stmt::Chunked(_) | Stmt::Grow { .. } => {
                plain = false
            }
            Stmt::Assign(v, _) if *v == var => plain = false,
            Stmt::If {
                then, otherwise, ..
            } if !(otherwise.is_empty() && matches!(then.last(), Some(Stmt::Fail(_)))) => {
                plain = false
            }
            _ => {}
        }
    });
    plain && size <= MAX_BODY && scatter_in(body, &mut HashSet::new())
}

/// Whether a store in `stmts` (in order) has an index reading memory; `loaded` holds the
/// variables assigned from memory so far (an assignment from anything else clears its
/// variable again).
fn scatter_in(stmts: &[Stmt], loaded: &mut HashSet<VarId>) -> bool {
    stmts.iter().any(|s| match s {
        Stmt::Assign(v, e) => {
            if from_memory(e, loaded) {
                loaded.insert(*v);
            } else {
                loaded.remove(v);
            }
            false
        }
        Stmt::Store { index, .. } => from_memory(index, loaded),
        Stmt::If {
            then, otherwise, ..
        } => {
            // A variable loaded in either branch may be one after the `if`.
            let mut other = loaded.clone();
            let found = scatter_in(then, loaded) || scatter_in(otherwise, &mut other);
            loaded.extend(other);
            found
        }
        _ => false,
    })
}

/// Whether `e` loads, or reads a variable in `loaded`.
fn from_memory(e: &Expr, loaded: &HashSet<VarId>) -> bool {
    let mut found = false;
    e.visit(&mut |x| {
        found |= match x {
            Expr::Load { .. } => true,
            Expr::Var(v) => loaded.contains(v),
            _ => false,
        }
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{BinOp, BufId};
    use crate::types::Scalar;

    fn var(v: u32) -> Expr {
        Expr::Var(VarId(v))
    }
    fn load(b: u32, index: Expr) -> Expr {
        Expr::Load {
            buf: BufId(b),
            index: Box::new(index),
        }
    }
    fn add(a: Expr, b: Expr) -> Expr {
        Expr::Binary(BinOp::Add, Box::new(a), Box::new(b))
    }
    fn one() -> Expr {
        Expr::Const(Scalar::I64(1))
    }
    fn bump(index: Expr) -> Stmt {
        Stmt::Store {
            buf: BufId(1),
            index: index.clone(),
            value: add(load(1, index), one()),
        }
    }

    #[test]
    fn an_update_at_a_loaded_index_is_a_scatter() {
        let p = VarId(0);
        // bins[img[p]] += 1, written out and through a variable.
        assert!(scatters(p, &[bump(load(2, var(0)))]));
        let through = [Stmt::Assign(VarId(5), load(2, var(0))), bump(var(5))];
        assert!(scatters(p, &through));
        // ... also behind a check, which fails before the store.
        let checked = [
            Stmt::Assign(VarId(5), load(2, var(0))),
            Stmt::If {
                cond: var(7),
                then: vec![Stmt::Fail(0)],
                otherwise: vec![],
            },
            bump(var(5)),
        ];
        assert!(scatters(p, &checked));
    }

    #[test]
    fn affine_stores_loops_and_large_bodies_are_not() {
        let p = VarId(0);
        // y[p] = y[p] + 1: GCC's own vectoriser's business.
        assert!(!scatters(p, &[bump(var(0))]));
        // A variable reassigned from the loop variable before the store is not loaded.
        let reassigned = [
            Stmt::Assign(VarId(5), load(2, var(0))),
            Stmt::Assign(VarId(5), add(var(0), one())),
            bump(var(5)),
        ];
        assert!(!scatters(p, &reassigned));
        // Not innermost.
        let nested = [Stmt::For {
            var: VarId(3),
            start: one(),
            stop: var(4),
            body: vec![bump(load(2, var(3)))],
        }];
        assert!(!scatters(p, &nested));
        // The body moves the loop variable itself.
        assert!(!scatters(
            p,
            &[bump(load(2, var(0))), Stmt::Assign(p, add(var(0), one()))]
        ));
        // A branch on data (a workspace's new slot) or a grown buffer.
        let branch = [Stmt::If {
            cond: var(7),
            then: vec![bump(load(2, var(0)))],
            otherwise: vec![],
        }];
        assert!(!scatters(p, &branch));
        let grown = [
            Stmt::Grow {
                buf: BufId(1),
                len: var(9),
            },
            bump(load(2, var(0))),
        ];
        assert!(!scatters(p, &grown));
        // Too large to be worth it.
        let large: Vec<Stmt> = (0..MAX_BODY + 1).map(|_| bump(load(2, var(0)))).collect();
        assert!(!scatters(p, &large));
    }
}
