//! Splitting a kernel around the parallel ranges ([`Chunked`]) at its top level, so that the
//! chunks of each can run as separate calls on several threads.
//!
//! The kernel `pre; Chunked(c); post` becomes the kernels `pre'`, `c'`, `post'` over the same
//! buffers plus a few of their own: an environment per compute type (`env_i64`, `env_f64`,
//! `env_bool`) that carries every variable from one segment to the next, and `chunk` (the
//! chunk's `lo` and `hi`). A serial segment loads the environment (after the first), runs, then
//! stores it; before a range it also evaluates the range's bounds into `lo` and `hi`, which the
//! runner reads back to cut the chunks. A chunk segment loads the environment, takes `lo` and
//! `hi` from `chunk`, and runs the range's body; what its other variables end with is lost,
//! and the split is refused when a later segment reads such a variable before assigning it
//! (the kernel then runs whole, serially).
//!
//! The split is refused too when a chunk body could move memory another chunk sees: growing,
//! filling or sorting a buffer that is not its own (the race check leaves only dense outputs,
//! which are sized before the loop, so this is a safety net). Buffer 0 (the dimensions and the
//! slot a failing bounds check reports through), the private outputs, the iterations'
//! workspaces (`Chunked::scratch`) and the entry arrays of appended sparse outputs
//! (`Chunked::rows`) are per chunk, and so are the environments: a chunk segment ends by
//! storing its variables into its own copies, from which the runner takes each appended
//! output's cursor and last fiber (after concatenating the fragments) and the workspaces'
//! state (`Chunked::scratch_state`, the last chunk's), so those variables are not lost.

use super::{BufDecl, BufId, Chunked, Expr, Kernel, Stmt, VarId, build as b};
use crate::types::ElemType;
use std::collections::HashSet;

/// One kernel of a split.
#[derive(Clone, Debug)]
pub enum Segment {
    Serial(Kernel),
    Chunks {
        kernel: Kernel,
        /// Where the range's bounds are in `env_i64` after the previous segment.
        lo_slot: usize,
        hi_slot: usize,
        range: Box<Chunked>,
        /// Per [`Chunked::rows`] entry, where its cursor and its last fiber (if any) are in
        /// `env_i64`: the runner sets them after the chunks, as the serial loop leaves them.
        rows: Vec<(usize, Option<usize>)>,
        /// Where the workspaces' state variables (`Chunked::scratch_state`) are, as
        /// (environment 0, 1 or 2 for i64, f64, bool; slot): they take the last chunk's values.
        scratch_state: Vec<(usize, usize)>,
    },
}

/// A kernel split around its top-level parallel ranges. Every segment takes the original
/// buffers followed by [`Split::extra`].
#[derive(Clone, Debug)]
pub struct Split {
    pub segments: Vec<Segment>,
    /// The segments' own buffers, appended after the kernel's: `env_i64`, `env_f64`,
    /// `env_bool` (one slot per variable of the type) and `chunk` (2 slots).
    pub extra: Vec<(BufDecl, usize)>,
    /// The number of the `chunk` buffer.
    pub chunk_buf: BufId,
}

/// Split `k`, or `None` if it has no parallel range at its top level or cannot be split
/// safely (then it runs whole).
pub fn split(k: &Kernel) -> Option<Split> {
    if !k.body.iter().any(|s| matches!(s, Stmt::Chunked(_))) {
        return None;
    }
    // Each variable's slot in its type's environment.
    let mut slots = vec![];
    let mut counts = [0usize; 3];
    for v in &k.vars {
        let t = match v.ty {
            ElemType::I64 => 0,
            ElemType::F64 => 1,
            ElemType::Bool => 2,
            _ => return None,
        };
        slots.push((t, counts[t]));
        counts[t] += 1;
    }
    let n = k.bufs.len() as u32;
    let env = [BufId(n), BufId(n + 1), BufId(n + 2)];
    let chunk_buf = BufId(n + 3);
    let decl = |name: &str, elem| BufDecl {
        name: name.into(),
        elem,
        growable: false,
        tensor: None,
        scratch: false,
    };
    let extra = vec![
        (decl("env_i64", ElemType::I64), counts[0]),
        (decl("env_f64", ElemType::F64), counts[1]),
        (decl("env_bool", ElemType::Bool), counts[2]),
        (decl("chunk", ElemType::I64), 2),
    ];
    let load_all = || -> Vec<Stmt> {
        (0..k.vars.len())
            .map(|v| {
                let (t, s) = slots[v];
                b::assign(VarId(v as u32), b::load(env[t], b::int(s as i64)))
            })
            .collect()
    };
    let store_all = || -> Vec<Stmt> {
        (0..k.vars.len())
            .map(|v| {
                let (t, s) = slots[v];
                b::store(env[t], b::int(s as i64), b::var(VarId(v as u32)))
            })
            .collect()
    };
    let with_body = |body: Vec<Stmt>| {
        let mut bufs = k.bufs.clone();
        bufs.extend(extra.iter().map(|(d, _)| d.clone()));
        Kernel {
            name: k.name.clone(),
            bufs,
            vars: k.vars.clone(),
            body,
            errors: k.errors.clone(),
            bounded: k.bounded.clone(),
            not_nan: k.not_nan.clone(),
            vectorized: k.vectorized.clone(),
        }
    };
    // The top level cut at each range: serial runs and ranges alternate.
    let mut parts: Vec<Result<Vec<Stmt>, Chunked>> = vec![Ok(vec![])];
    for s in &k.body {
        match s {
            Stmt::Chunked(c) => {
                parts.push(Err((**c).clone()));
                parts.push(Ok(vec![]));
            }
            s => match parts.last_mut() {
                Some(Ok(run)) => run.push(s.clone()),
                _ => unreachable!("a serial run follows every range"),
            },
        }
    }
    // Refuse what chunks cannot do independently.
    let mut lost: HashSet<VarId> = HashSet::new();
    for p in &parts {
        match p {
            Err(c) => {
                let own: HashSet<BufId> = c
                    .private
                    .iter()
                    .map(|p| p.buf)
                    .chain(c.scratch.iter().copied())
                    .chain(c.rows.iter().flat_map(|r| r.arrays.iter().copied()))
                    .chain([BufId(0)])
                    .collect();
                if !chunk_body_ok(&c.body, &own) {
                    return None;
                }
                super::walk::assigned(&c.body, &mut lost);
                // The runner sets the appended outputs' cursors and the workspaces' state
                // after the chunks, from the environments they stored.
                for r in &c.rows {
                    lost.remove(&r.cursor);
                    if let Some(v) = r.last {
                        lost.remove(&v);
                    }
                }
                for v in &c.scratch_state {
                    lost.remove(v);
                }
            }
            Ok(run) => {
                if exposed_reads(run).iter().any(|v| lost.contains(v)) {
                    return None;
                }
                // Variables this run assigns at its top level carry on normally.
                for s in run {
                    if let Stmt::Assign(v, _) = s {
                        lost.remove(v);
                    }
                }
            }
        }
    }
    let mut segments = vec![];
    let mut first = true;
    let mut pending: Option<Vec<Stmt>> = None;
    for (idx, p) in parts.into_iter().enumerate() {
        match p {
            Ok(run) => pending = Some(run),
            Err(c) => {
                let mut body = if first { vec![] } else { load_all() };
                body.extend(pending.take().unwrap_or_default());
                body.push(b::assign(c.lo, c.start.clone()));
                body.push(b::assign(c.hi, c.stop.clone()));
                body.extend(store_all());
                segments.push(Segment::Serial(with_body(body)));
                first = false;
                // A variable the chunk assigns before any read of it is not loaded: its
                // value on entry is never seen, and a load from the environment would hide
                // where its values come from (a gathered coordinate, `versioning`).
                let mut unseen = HashSet::new();
                super::walk::assigned(&c.body, &mut unseen);
                let exposed = exposed_reads(&c.body);
                unseen.retain(|v| {
                    !exposed.contains(v)
                        && !c.rows.iter().any(|r| r.cursor == *v || r.last == Some(*v))
                        && !c.scratch_state.contains(v)
                });
                let mut body = load_all();
                body.retain(|s| !matches!(s, Stmt::Assign(v, _) if unseen.contains(v)));
                body.push(b::assign(c.lo, b::load(chunk_buf, b::int(0))));
                body.push(b::assign(c.hi, b::load(chunk_buf, b::int(1))));
                body.extend(c.body.iter().cloned());
                // Into the chunk's own copies of the environment (the runner's one chunk: the
                // real ones): where its appends ended and what its workspaces' state is.
                body.extend(store_all());
                let _ = idx;
                let scratch_state = c
                    .scratch_state
                    .iter()
                    .map(|v| slots[v.0 as usize])
                    .collect();
                let rows = c
                    .rows
                    .iter()
                    .map(|r| {
                        (
                            slots[r.cursor.0 as usize].1,
                            r.last.map(|v| slots[v.0 as usize].1),
                        )
                    })
                    .collect();
                segments.push(Segment::Chunks {
                    kernel: with_body(body),
                    lo_slot: slots[c.lo.0 as usize].1,
                    hi_slot: slots[c.hi.0 as usize].1,
                    range: Box::new(c),
                    rows,
                    scratch_state,
                });
            }
        }
    }
    let mut body = load_all();
    body.extend(pending.take().unwrap_or_default());
    segments.push(Segment::Serial(with_body(body)));
    Some(Split {
        segments,
        extra,
        chunk_buf,
    })
}

/// Whether a chunk body only moves memory of its own: no growth, fill or sort of a shared
/// buffer, and no nested range with workspaces or appended rows that are not the chunk's own.
///
/// A nested range runs inside the chunk as its serial loop (one chunk, no private copies):
/// its privatised outputs are written directly, which is safe because the race check tested
/// every write under the nested loop against the enclosing parallel loop too, so the chunk
/// writes only elements its outer indices own, or its own private copy. Its workspaces and
/// rows cannot pass that check (a declaration inside the nested loop is not a statement of the
/// outer loop's body; rows under two parallel loops are refused), and are refused here again.
fn chunk_body_ok(body: &[Stmt], own: &HashSet<BufId>) -> bool {
    body.iter().all(|s| {
        let ok = match s {
            Stmt::Grow { buf, .. } | Stmt::Fill { buf, .. } | Stmt::Sort { buf, .. } => {
                own.contains(buf)
            }
            Stmt::SortPerm { perm, .. } => own.contains(perm),
            Stmt::Chunked(c) => {
                c.scratch.iter().all(|b| own.contains(b))
                    && c.rows
                        .iter()
                        .flat_map(|r| &r.arrays)
                        .all(|b| own.contains(b))
            }
            _ => true,
        };
        ok && s.bodies().iter().all(|b| chunk_body_ok(b, own))
    })
}

/// Variables `run` may read before assigning them, on some path through it. An assignment
/// counts for what follows it in its own statement list and in the lists nested there; what
/// a nested list assigns (a branch, a loop body that may not run) counts only inside it. A
/// loop's counter, and a nested range's bounds, are assigned for its body.
fn exposed_reads(run: &[Stmt]) -> HashSet<VarId> {
    fn walk(run: &[Stmt], defined: &mut HashSet<VarId>, out: &mut HashSet<VarId>) {
        for s in run {
            for e in s.own_exprs() {
                e.visit(&mut |x| {
                    if let Expr::Var(v) = x
                        && !defined.contains(v)
                    {
                        out.insert(*v);
                    }
                });
            }
            let inner: Vec<VarId> = match s {
                Stmt::For { var, .. } => vec![*var],
                Stmt::Chunked(c) => vec![c.lo, c.hi],
                _ => vec![],
            };
            for body in s.bodies() {
                let mut d = defined.clone();
                d.extend(inner.iter().copied());
                walk(body, &mut d, out);
            }
            if let Stmt::Assign(v, _) = s {
                defined.insert(*v);
            }
        }
    }
    let mut out = HashSet::new();
    walk(run, &mut HashSet::new(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ElemType;

    /// `a`, `b`, `c`, `k`: variables 0-3.
    fn vars() -> [VarId; 4] {
        [VarId(0), VarId(1), VarId(2), VarId(3)]
    }

    #[test]
    fn reads_after_an_assignment_on_every_path_are_not_exposed() {
        let [a, bv, c, k] = vars();
        let buf = BufId(0);
        // a = 1; for k = a..4 { b = buf[k]; buf[b] = c }  -- c is read before any
        // assignment, a and b only after theirs, k is the loop's own counter.
        let run = vec![
            b::assign(a, b::int(1)),
            Stmt::For {
                var: k,
                start: b::var(a),
                stop: b::int(4),
                body: vec![
                    b::assign(bv, b::load(buf, b::var(k))),
                    b::store(buf, b::var(bv), b::var(c)),
                ],
            },
        ];
        assert_eq!(exposed_reads(&run), HashSet::from([c]));
        // What a branch or a loop body assigns is not assigned after it: `b` read after the
        // loop is exposed (the loop may not run), and so is `c` after a one-armed `if`.
        let mut after = run.clone();
        after.push(b::store(buf, b::int(0), b::var(bv)));
        after.extend(b::if_(
            b::lt(b::var(a), b::int(2)),
            vec![b::assign(c, b::int(0))],
        ));
        after.push(b::store(buf, b::int(1), b::var(c)));
        assert_eq!(exposed_reads(&after), HashSet::from([bv, c]));
        // A read in the loop's bounds is before the loop's assignments.
        let bounds = vec![Stmt::For {
            var: k,
            start: b::int(0),
            stop: b::var(bv),
            body: vec![b::assign(bv, b::int(3))],
        }];
        assert_eq!(exposed_reads(&bounds), HashSet::from([bv]));
    }

    #[test]
    fn chunks_do_not_load_what_they_assign_before_reading() {
        let [a, bv, c, k] = vars();
        let (lo, hi) = (VarId(4), VarId(5));
        let (out, coords) = (BufId(0), BufId(1));
        // for k = lo..hi (parallel) { b = coords[k]; out[b] = a }; then `c` after it.
        let range = Chunked::plain(
            lo,
            hi,
            b::int(0),
            b::int(8),
            vec![Stmt::For {
                var: k,
                start: b::var(lo),
                stop: b::var(hi),
                body: vec![
                    b::assign(bv, b::load(coords, b::var(k))),
                    b::store(out, b::var(bv), b::var(a)),
                ],
            }],
        );
        let i64s: Vec<(&str, ElemType)> = ["a", "b", "c", "k", "lo", "hi"]
            .iter()
            .map(|n| (*n, ElemType::I64))
            .collect();
        let k = b::test_kernel(
            &[("out", ElemType::I64), ("coords", ElemType::I64)],
            false,
            &i64s,
            vec![
                b::assign(a, b::int(7)),
                Stmt::Chunked(Box::new(range)),
                b::assign(c, b::var(a)),
            ],
        );
        let split = split(&k).expect("splits");
        let Segment::Chunks { kernel, .. } = &split.segments[1] else {
            panic!("the range's segment: {:?}", split.segments[1]);
        };
        let loaded: HashSet<VarId> = kernel
            .body
            .iter()
            .filter_map(|s| match s {
                Stmt::Assign(v, Expr::Load { buf, .. }) if buf.0 >= 2 => Some(*v),
                _ => None,
            })
            .collect();
        // `b` is assigned (from the coordinates) before it is read: not loaded, so it holds
        // only coordinates; `a`, read, and `c`, untouched (carried through), are loaded.
        assert!(!loaded.contains(&bv), "{loaded:?}");
        assert!(loaded.contains(&a) && loaded.contains(&c), "{loaded:?}");
    }
}
