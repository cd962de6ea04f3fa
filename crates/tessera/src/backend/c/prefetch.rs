//! Software prefetches of gathered operands (issue 18).
//!
//! An innermost loop over positions `p` whose body loads `x[idx[p]]` (through a variable
//! assigned `idx[p]`, as a SpMV row's `x[j]`) spends its time waiting for `x`'s elements once
//! `x` is larger than the L2: each gather's address depends on a load, so the hardware
//! prefetchers cannot guess it, and the core keeps only as many misses in flight as its
//! window holds iterations. Asking for `x[idx[p + D]]` `D` positions ahead starts those misses
//! early. The positions ahead run on into the next rows, which is what is wanted: a row's end
//! does not stop the stream of entries.
//!
//! Off by default ([`DISTANCE`]): on the machines measured it did not pay.
//!
//! The emitter prints such a loop twice (see `Emitter::unchecked_copy`): with the prefetches
//! when one of the gathered buffers is larger than [`MIN_BYTES`], without them otherwise, so
//! kernels whose operands fit the caches pay one well-predicted branch per loop run and
//! nothing per entry. Only loops whose `idx[p]` is already proven in bounds get them: the
//! read of `idx[min(p + D, len - 1)]` is then inside the buffer too (`p <= len - 1`), and the
//! element read is only used as an address for `__builtin_prefetch`, which cannot fault. No
//! value changes and no check moves, so results and faults are the other copies'.

use crate::ir::walk::{loop_offset, walk_stmts};
use crate::ir::{BufId, Expr, Stmt, VarId};
use std::collections::HashMap;

/// Positions ahead of the loop variable whose gather is requested by default: none. Measured
/// on the 2-core AMD EPYC (2 MiB L2, 32 MiB L3) with D = 16-128, inline and ahead, the
/// prefetches did not pay: at most a few percent on a random 10^6 x 10^6 matrix of 10^7
/// entries, and 5-25% slower on the Erdős–Rényi 2^19 matrix, reverse_perm_1e6 and
/// web-NotreDame (BENCHMARKS.md, "Parallel SpMV", "Software prefetches of gathers"). Every
/// gathered vector there fits the L3, whose latency the out-of-order window already covers.
/// `TESSERA_PREFETCH=32` (or `CBackend::with_prefetch`) turns them on for machines where
/// the gathers miss to memory.
pub const DISTANCE: i64 = 0;

/// The largest distance `TESSERA_PREFETCH` may set (`p + D` stays far from overflow: `p` is
/// a position inside a buffer).
const MAX_DISTANCE: i64 = 1 << 20;

/// See [`Mode`]: inline, as `Ahead` was slower everywhere measured (a second loop per row,
/// with its own mispredicted exit, on rows of 8-10 entries).
pub const MODE: Mode = Mode::Inline;

/// Gathered buffers up to this size (bytes) run the copy without prefetches: the L2 of the
/// machines measured (2 MiB, AMD EPYC), where the gathers hit anyway.
pub const MIN_BYTES: i64 = 2 << 20;

/// Where the prefetches go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// In the loop's body, in a copy of its own.
    Inline,
    /// In a loop of their own before the loop, over the same positions.
    Ahead,
}

/// What the emitter prefetches: `distance` positions ahead (0: nothing), in loops whose
/// gathered buffer holds more than `min_bytes`, placed as `mode` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub distance: i64,
    pub min_bytes: i64,
    pub mode: Mode,
}

impl Config {
    /// [`DISTANCE`], [`MIN_BYTES`] and [`MODE`], or `TESSERA_PREFETCH` (a distance; 0 turns
    /// prefetching off), `TESSERA_PREFETCH_MIN_BYTES` and `TESSERA_PREFETCH_MODE` (`inline`
    /// or `ahead`), for measuring.
    pub fn from_env() -> Config {
        let var = |name: &str, default: i64, max: i64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
                .filter(|v| (0..=max).contains(v))
                .unwrap_or(default)
        };
        let mode = match std::env::var("TESSERA_PREFETCH_MODE").as_deref() {
            Ok("inline") => Mode::Inline,
            Ok("ahead") => Mode::Ahead,
            _ => MODE,
        };
        Config {
            distance: var("TESSERA_PREFETCH", DISTANCE, MAX_DISTANCE),
            min_bytes: var("TESSERA_PREFETCH_MIN_BYTES", MIN_BYTES, i64::MAX),
            mode,
        }
    }

    /// Prefetch `distance` positions ahead (clamped to `0..=2^20`) from buffers above
    /// `min_bytes`, inline.
    pub fn new(distance: i64, min_bytes: i64) -> Config {
        Config {
            distance: distance.clamp(0, MAX_DISTANCE),
            min_bytes: min_bytes.max(0),
            mode: Mode::Inline,
        }
    }
}

/// The C text of `index` (`var + base + offset`, `ir::walk::loop_offset`) with the C name
/// `p` for `var`.
pub fn index_at(index: &Expr, var: VarId, p: &str) -> String {
    match loop_offset(index, var) {
        Some((None, c)) => format!("t_add({p}, INT64_C({c}))"),
        Some((Some(w), c)) => format!("t_add(t_add({p}, v{}), INT64_C({c}))", w.0),
        None => unreachable!("gathers() keeps loop offsets only"),
    }
}

/// A gather to prefetch: `x[idx[index]]`, `index` being `var + base + offset` for the loop
/// variable `var` (`ir::walk::loop_offset`).
#[derive(Clone, Debug, PartialEq)]
pub struct Gather {
    pub x: BufId,
    pub idx: BufId,
    pub index: Expr,
}

/// The gathers of an innermost loop over `var` (no loop inside its body) worth prefetching:
/// loads `x[v]` where `v` is assigned exactly once in the body, from `idx[var + ...]`, and
/// loads `x[idx[var + ...]]` written out. Each pair `(x, index into idx)` once, in order.
pub fn gathers(var: VarId, body: &[Stmt]) -> Vec<Gather> {
    let mut innermost = true;
    let mut sources: HashMap<VarId, Vec<Expr>> = HashMap::new();
    walk_stmts(body, &mut |s| match s {
        Stmt::For { .. } | Stmt::While { .. } | Stmt::Chunked(_) => innermost = false,
        Stmt::Assign(v, e) => sources.entry(*v).or_default().push(e.clone()),
        _ => {}
    });
    if !innermost {
        return vec![];
    }
    // `idx[var + ...]` itself, when `e` is that load.
    let stored = |e: &Expr| match e {
        Expr::Load { buf, index } if loop_offset(index, var).is_some() => {
            Some((*buf, (**index).clone()))
        }
        _ => None,
    };
    let mut found: Vec<Gather> = vec![];
    let mut exprs = vec![];
    walk_stmts(body, &mut |s| {
        exprs.extend(s.own_exprs().into_iter().cloned())
    });
    for e in &exprs {
        e.visit(&mut |x| {
            let Expr::Load { buf, index } = x else { return };
            let source = match &**index {
                Expr::Var(v) if *v != var => match sources.get(v).map(|s| &s[..]) {
                    Some([one]) => stored(one),
                    _ => None,
                },
                other => stored(other),
            };
            if let Some((idx, index)) = source {
                let g = Gather {
                    x: *buf,
                    idx,
                    index,
                };
                if idx != *buf && !found.contains(&g) {
                    found.push(g);
                }
            }
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build as b;

    fn load(buf: u32, index: Expr) -> Expr {
        Expr::Load {
            buf: BufId(buf),
            index: Box::new(index),
        }
    }

    #[test]
    fn a_row_loop_gathers_through_its_coordinate() {
        // j = idx[p]; acc = acc + val[p] * x[j]
        let (p, j, acc) = (VarId(0), VarId(1), VarId(2));
        let body = vec![
            b::assign(j, load(2, Expr::Var(p))),
            b::assign(
                acc,
                b::add(
                    Expr::Var(acc),
                    b::mul(load(3, Expr::Var(p)), load(4, Expr::Var(j))),
                ),
            ),
        ];
        assert_eq!(
            gathers(p, &body),
            vec![Gather {
                x: BufId(4),
                idx: BufId(2),
                index: Expr::Var(p)
            }]
        );
    }

    #[test]
    fn dense_loops_and_outer_loops_have_none() {
        let (p, j, acc) = (VarId(0), VarId(1), VarId(2));
        // y[p] = a[p] * x[p]: no indirection.
        let dense = vec![b::store(
            BufId(1),
            Expr::Var(p),
            b::mul(load(2, Expr::Var(p)), load(3, Expr::Var(p))),
        )];
        assert!(gathers(p, &dense).is_empty());
        // j assigned twice: which value reaches the gather is not known.
        let twice = vec![
            b::assign(j, load(2, Expr::Var(p))),
            b::assign(j, b::int(0)),
            b::assign(acc, load(4, Expr::Var(j))),
        ];
        assert!(gathers(p, &twice).is_empty());
        // An index read at something other than the loop variable.
        let other = vec![
            b::assign(j, load(2, Expr::Var(acc))),
            b::assign(acc, load(4, Expr::Var(j))),
        ];
        assert!(gathers(p, &other).is_empty());
        // An outer loop: its inner loop gets the prefetches, if any, not it.
        let row = vec![
            b::assign(j, load(2, Expr::Var(p))),
            b::assign(acc, load(4, Expr::Var(j))),
        ];
        let outer = vec![Stmt::For {
            var: VarId(3),
            start: b::int(0),
            stop: b::int(4),
            body: row,
        }];
        assert!(gathers(p, &outer).is_empty());
    }
}
