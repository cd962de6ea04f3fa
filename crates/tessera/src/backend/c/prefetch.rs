//! Software prefetches of gathered operands and gathered ranges (issue 18).
//!
//! **Gathered ranges** (on by default, [`RANGE_DISTANCE`]): a loop over positions `q` whose
//! body starts an inner loop at `s = ptr[idx[q]]` and streams `y[s..]` from there (Gustavson's
//! SpGEMM: row `k = A_idx[q]` of `B`, read from `B_ptr[k]`) waits for the first lines of each
//! such row: the rows are wherever `A`'s coordinates say, so no hardware prefetcher predicts
//! them. The loop then first asks for `y[ptr[idx[q + D]]]`, the start of the range `D`
//! positions ahead, behind its own bounds tests (`q + D` inside `idx`, `idx[q + D]` inside
//! `ptr`), the address computed as an integer, so nothing can fault and no value changes.
//! Measured on the Intel Xeon VM (C = A A, D = 4, mins of alternating rounds): bcsstk16 -9%,
//! usroads -6%, ca-HepPh -5%, Fashion-MNIST's graph -3%; but +1-4% on banded matrices whose
//! rows of `B` follow each other and whose arrays fit the L2 (cryg10000, bayer10), so the loop
//! is printed twice and the copy with the prefetches runs when a streamed buffer is larger
//! than [`RANGE_MIN_BYTES`] (those two then within noise).
//!
//! **Gathered operands**:
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

/// Positions ahead whose range start is requested in loops over gathered ranges (module
/// docs): 4 took more off the random products than 8, and cost the banded ones less.
/// `TESSERA_PREFETCH_RANGES` sets another (0: off), for measuring.
pub const RANGE_DISTANCE: i64 = 4;

/// Streamed buffers up to this size (bytes) run the copy without range prefetches: a quarter
/// of the Intel VM's L2 (4 MiB), half the AMD EPYC's; the products measured faster with them
/// had a streamed buffer of 1.3-2.6 MB, those slower of 0.4-0.8 MB.
pub const RANGE_MIN_BYTES: i64 = 1 << 20;

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

/// What the emitter prefetches: gathers `distance` positions ahead (0: nothing), in loops
/// whose gathered buffer holds more than `min_bytes`, placed as `mode` says; the starts of
/// gathered ranges `ranges` positions ahead (0: nothing), in loops streaming a buffer of more
/// than `range_min_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub distance: i64,
    pub min_bytes: i64,
    pub mode: Mode,
    pub ranges: i64,
    pub range_min_bytes: i64,
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
            ranges: var("TESSERA_PREFETCH_RANGES", RANGE_DISTANCE, MAX_DISTANCE),
            range_min_bytes: RANGE_MIN_BYTES,
        }
    }

    /// Prefetch gathers `distance` positions ahead (clamped to `0..=2^20`) from buffers above
    /// `min_bytes`, inline; ranges as by default.
    pub fn new(distance: i64, min_bytes: i64) -> Config {
        Config {
            distance: distance.clamp(0, MAX_DISTANCE),
            min_bytes: min_bytes.max(0),
            mode: Mode::Inline,
            ranges: RANGE_DISTANCE,
            range_min_bytes: RANGE_MIN_BYTES,
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

/// A gathered range: an inner loop over `var` from `ptr[idx[q]]`, `q` the outer loop's
/// variable, streaming the buffers `streams` at `var`.
#[derive(Clone, Debug, PartialEq)]
pub struct Range {
    pub idx: BufId,
    pub ptr: BufId,
    pub streams: Vec<BufId>,
}

/// The gathered ranges of a loop over `q` (module docs): statements of the body itself (not
/// nested) `k = idx[q]` and then `s = ptr[k]`, a loop over `s` starting where `s` is
/// (anywhere in the body), and the buffers that loop loads at `s`. What else assigns `k` or
/// `s` does not matter: a prefetch changes no value, so a wrong guess costs only its time.
pub fn ranges(q: VarId, body: &[Stmt]) -> Vec<Range> {
    // `k = idx[q]` before `s = ptr[k]` among the body's own statements.
    let mut from_q: HashMap<VarId, BufId> = HashMap::new();
    let mut starts: Vec<(VarId, BufId, BufId)> = vec![];
    for s in body {
        let Stmt::Assign(v, e) = s else {
            continue;
        };
        from_q.remove(v);
        let Expr::Load { buf, index } = e else {
            continue;
        };
        match &**index {
            Expr::Var(w) if *w == q => {
                from_q.insert(*v, *buf);
            }
            Expr::Var(k) => {
                if let Some(&idx) = from_q.get(k)
                    && idx != *buf
                {
                    starts.push((*v, idx, *buf));
                }
            }
            _ => {}
        }
    }
    let mut found = vec![];
    for (s, idx, ptr) in starts {
        let mut streams: Vec<BufId> = vec![];
        walk_stmts(body, &mut |st| {
            let Stmt::For {
                var, start, body, ..
            } = st
            else {
                return;
            };
            if *var != s || *start != Expr::Var(s) {
                return;
            }
            let mut exprs = vec![];
            walk_stmts(body, &mut |x| {
                exprs.extend(x.own_exprs().into_iter().cloned())
            });
            for e in &exprs {
                e.visit(&mut |x| {
                    if let Expr::Load { buf, index } = x
                        && **index == Expr::Var(s)
                        && !streams.contains(buf)
                    {
                        streams.push(*buf);
                    }
                });
            }
        });
        if !streams.is_empty() {
            found.push(Range { idx, ptr, streams });
        }
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

    #[test]
    fn a_loop_starting_rows_at_gathered_positions_streams_them() {
        // k = idx[q]; s = ptr[k]; e = ptr[k + 1]; for s = s..e { acc += val[s] * y[col[s]] }
        let (q, k, s, e, acc) = (VarId(0), VarId(1), VarId(2), VarId(3), VarId(4));
        let inner = |start: Expr| Stmt::For {
            var: s,
            start,
            stop: Expr::Var(e),
            body: vec![b::assign(
                acc,
                b::add(
                    Expr::Var(acc),
                    b::mul(load(5, Expr::Var(s)), load(7, load(6, Expr::Var(s)))),
                ),
            )],
        };
        let body = |idx_at: Expr, start: Expr| {
            vec![
                b::assign(k, load(1, idx_at)),
                b::assign(s, load(2, Expr::Var(k))),
                b::assign(e, load(2, b::add(Expr::Var(k), b::int(1)))),
                Stmt::If {
                    cond: b::lt(Expr::Var(s), Expr::Var(e)),
                    then: vec![inner(start)],
                    otherwise: vec![],
                },
            ]
        };
        assert_eq!(
            ranges(q, &body(Expr::Var(q), Expr::Var(s))),
            vec![Range {
                idx: BufId(1),
                ptr: BufId(2),
                streams: vec![BufId(5), BufId(6)],
            }]
        );
        // `k` from something other than the loop variable, or an inner loop starting
        // elsewhere: no range.
        assert!(ranges(q, &body(Expr::Var(acc), Expr::Var(s))).is_empty());
        assert!(ranges(q, &body(Expr::Var(q), b::int(0))).is_empty());
        // `k` reassigned between the two loads: `s` is no longer `ptr[idx[q]]`.
        let mut moved = body(Expr::Var(q), Expr::Var(s));
        moved.insert(1, b::assign(k, b::int(3)));
        assert!(ranges(q, &moved).is_empty());
    }
}
