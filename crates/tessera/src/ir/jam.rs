//! Row jamming: unroll-and-jam of a loop whose rows each run one fixed-range inner chain,
//! such as attention's scores `for j { acc = S[i, j]; for f = 0..64 { acc += Q[i, f] * K[j, f] };
//! S[i, j] = acc }` or a dot product per edge in a gradient.
//!
//! One row's inner loop is a chain of dependent adds (an add's latency per step, whatever
//! else the core could do), and GCC and Cranelift keep it one chain: a float sum may not be
//! reassociated. Rows are independent, so [`ROWS`] of them run together: their inner loops
//! become one loop whose every step does one step of each row, into that row's own
//! variables, so the core overlaps the chains. Every row runs its own steps in their
//! original order, so results are bit-identical. Where [`super::interleave`] jams ragged
//! rows of a sparse matrix (their lengths from a position array), this pass jams rows whose
//! inner loops have the same range, computed without loads (dense levels).
//!
//! The pass applies only to the shape it can prove safe (anything else stays as it is):
//! - the outer `for j` body is a path of `If`s (assignments before each, anything after it)
//!   down to ONE inner `for f` of assignments only, at least one of which carries a value from
//!   step to step (`acc = acc + ...`: the chain that pays), with a range the same in every row
//!   of a group and at least [`MIN_STEPS`] long (both tested at run time);
//! - every variable the body assigns is assigned before the body reads it (no state crosses
//!   rows), is used nowhere else in the kernel, and the statements after the inner loop do not
//!   read its counter;
//! - every buffer the body writes and its statements up to the inner loop (or the loop) read
//!   is accessed at one index `base + j + c` (`base` not assigned in the body) throughout the
//!   body, so no row reads what another writes (what only the statements after the inner loop
//!   touch runs in its original order), and the body grows, fills or sorts nothing;
//! - every load that moves earlier than it ran (the assignments and conditions before the
//!   inner loop, and the inner loop's, of rows 1.. of a group, which now run before row 0's
//!   statements after its inner loop) has an index computed without loads, and the inner
//!   loop's loads are at `base + f * s + c` (`s` >= 0, tested) or at an index the loop does
//!   not change.
//!
//! Before a group runs jammed, one test checks that every moved load of every row is in
//! bounds and that the rows' inner ranges agree; otherwise, or when a row's condition on the
//! path fails, the group's rows run one after another with their original bodies, and so do
//! the rows left over after the last whole group. So no load faults where the original loop
//! would not have, and the original's faults and writes happen in its order.

use super::effects::new_var;
use super::interleave::{
    assigned_first, reads, row_copies, row_private, straight, subst, subst_stmts,
};
use super::walk::{walk_accesses, walk_stmts};
use super::{BinOp, BufId, Expr, Kernel, Stmt, VarId};
use crate::ir::build as b;
use crate::types::{ElemType, Scalar};
use std::collections::{HashMap, HashSet};

/// Rows run together by default (measured: 2, 4 and 8 rows on dense products, BENCHMARKS.md
/// "Dense products: rows jammed", session 45).
pub const ROWS: usize = 8;

/// Inner loops shorter than this run row by row: the group's test and the copies of the
/// statements around the loop cost more than the overlapped chains save.
pub const MIN_STEPS: i64 = 8;

/// Row bodies of more statements than this are left alone: a group holds [`ROWS`] copies of
/// the body and the original twice, and a kernel's compile time grows with its size.
const MAX_BODY: usize = 200;

/// The most statements a kernel may hold after the pass: past it, loops stay as they are.
/// The C backend's versions of each loop make ~20 lines of C of an IR statement (GAT's
/// gradient: 246 statements, 4,900 lines). Jammed as one function, that gradient crossed the
/// backend's 6,000-line `-O1` threshold (30 -> 78 ms); compiled as parts
/// (`backend::c::parts`) at `-O3` with a cap per loop nest instead, it ran 5% slower than
/// unjammed and took twice as long to compile (session 46), so the cap stays per kernel.
const MAX_KERNEL: usize = 250;

/// Jam `rows` rows in every loop of `k` of the shape above (`rows` < 2: nothing).
pub fn jam_rows(k: &mut Kernel, rows: usize) {
    if rows < 2 {
        return;
    }
    let mut body = std::mem::take(&mut k.body);
    let whole = body.clone();
    let mut budget = MAX_KERNEL.saturating_sub(count(&body));
    walk(k, &mut body, &whole, rows, &mut budget);
    k.body = body;
}

fn count(stmts: &[Stmt]) -> usize {
    let mut n = 0;
    walk_stmts(stmts, &mut |_| n += 1);
    n
}

fn walk(k: &mut Kernel, stmts: &mut Vec<Stmt>, whole: &[Stmt], rows: usize, budget: &mut usize) {
    let mut out = Vec::with_capacity(stmts.len());
    for mut s in stmts.drain(..) {
        if matches!(s, Stmt::For { .. }) {
            let vars = k.vars.len();
            if let Some(new) = jam(k, &s, whole, rows) {
                let added = count(&new).saturating_sub(count(std::slice::from_ref(&s)));
                if added <= *budget {
                    *budget -= added;
                    out.extend(new);
                    continue;
                }
            }
            k.vars.truncate(vars);
        }
        for b in s.bodies_mut() {
            walk(k, b, whole, rows, budget);
        }
        out.push(s);
    }
    *stmts = out;
}

/// One `If` on the path: the assignments before it, its condition, what follows it.
pub(super) struct Level {
    pub(super) pre: Vec<Stmt>,
    pub(super) cond: Expr,
    pub(super) post: Vec<Stmt>,
}

/// A row body cut along its path: the levels, the assignments before the inner loop, the
/// loop, and what follows it.
pub(super) struct Path {
    pub(super) levels: Vec<Level>,
    pub(super) head: Vec<Stmt>,
    pub(super) var: VarId,
    pub(super) start: Expr,
    pub(super) stop: Expr,
    pub(super) hot: Vec<Stmt>,
    pub(super) post: Vec<Stmt>,
}

pub(super) fn path(body: &[Stmt]) -> Option<Path> {
    let mut levels = vec![];
    let mut cur = body;
    loop {
        let p = cur.iter().position(|s| !straight(s))?;
        match &cur[p] {
            Stmt::If { cond, then, .. } => {
                levels.push(Level {
                    pre: cur[..p].to_vec(),
                    cond: cond.clone(),
                    post: cur[p + 1..].to_vec(),
                });
                cur = then;
            }
            Stmt::For {
                var,
                start,
                stop,
                body,
            } if body.iter().all(straight) => {
                return Some(Path {
                    levels,
                    head: cur[..p].to_vec(),
                    var: *var,
                    start: start.clone(),
                    stop: stop.clone(),
                    hot: body.clone(),
                    post: cur[p + 1..].to_vec(),
                });
            }
            _ => return None,
        }
    }
}

/// The terms of an index `t1 + t2 - c ...` (sums, and differences of constants).
fn terms(e: &Expr, out: &mut Vec<Expr>, c: &mut i64) -> bool {
    match e {
        Expr::Const(Scalar::I64(k)) => {
            *c = c.saturating_add(*k);
            true
        }
        Expr::Binary(BinOp::Add, a, x) => terms(a, out, c) && terms(x, out, c),
        Expr::Binary(BinOp::Sub, a, x) => match &**x {
            Expr::Const(Scalar::I64(k)) => {
                *c = c.saturating_sub(*k);
                terms(a, out, c)
            }
            _ => {
                out.push(e.clone());
                true
            }
        },
        _ => {
            out.push(e.clone());
            true
        }
    }
}

/// Whether `index` is `v + rest` with `rest` not reading `v` nor anything in `not`: one
/// step of `v` moves it by one element.
fn unit_stride(index: &Expr, v: VarId, not: &HashSet<VarId>) -> bool {
    matches!(stride(index, v, not), Some(None))
}

/// `Some(None)` when `index` is `v + rest`, `Some(Some(s))` when it is `v * s + rest` or
/// `s * v + rest`, with `s` and `rest` reading neither `v` nor anything in `not`.
fn stride(index: &Expr, v: VarId, not: &HashSet<VarId>) -> Option<Option<Expr>> {
    let (mut ts, mut c) = (vec![], 0i64);
    if !terms(index, &mut ts, &mut c) {
        return None;
    }
    let free = |e: &Expr| {
        let mut r = HashSet::new();
        reads(e, &mut r);
        !r.contains(&v) && !r.iter().any(|w| not.contains(w))
    };
    let mut found = None;
    for t in &ts {
        let here = match t {
            Expr::Var(w) if *w == v => Some(None),
            Expr::Binary(BinOp::Mul, a, x) => match (&**a, &**x) {
                (Expr::Var(w), s) | (s, Expr::Var(w)) if *w == v && free(s) => {
                    Some(Some(s.clone()))
                }
                _ => None,
            },
            _ => None,
        };
        match here {
            Some(h) if found.is_none() => found = Some(h),
            Some(_) => return None,
            None if free(t) => {}
            None => return None,
        }
    }
    found
}

/// Whether an expression holds a load or a lookup.
fn loads(e: &Expr) -> bool {
    let mut any = false;
    e.visit(&mut |x| {
        any |= matches!(
            x,
            Expr::Load { .. } | Expr::SearchGe { .. } | Expr::HashFind { .. }
        )
    });
    any
}

/// `e` with the body's variables replaced by their definitions before the inner loop
/// (`defs`), when it then reads no other variable the body assigns and loads nothing.
fn closed(
    e: &Expr,
    defs: &HashMap<VarId, Expr>,
    assigned: &HashSet<VarId>,
    depth: usize,
) -> Option<Expr> {
    if depth > 16 || loads(e) {
        return None;
    }
    let mut r = HashSet::new();
    reads(e, &mut r);
    let mut map = HashMap::new();
    for v in r {
        if let Some(d) = defs.get(&v) {
            map.insert(v, closed(d, defs, assigned, depth + 1)?);
        } else if assigned.contains(&v) {
            return None;
        }
    }
    Some(subst(e, &|v| map.get(&v).cloned()))
}

fn jam(k: &mut Kernel, l: &Stmt, whole: &[Stmt], rows: usize) -> Option<Vec<Stmt>> {
    let Stmt::For {
        var: j,
        start: s_expr,
        stop: e_expr,
        body,
    } = l
    else {
        return None;
    };
    let j = *j;
    let p = path(body)?;
    if k.vectorized.contains(&p.var) {
        return None;
    }
    // Only the statements a row body may hold (no growth, fills, sorts, ranges, breaks).
    let (mut bad, mut size) = (false, 0);
    walk_stmts(body, &mut |s| {
        size += 1;
        match s {
            Stmt::Assign(..)
            | Stmt::If { .. }
            | Stmt::Store { .. }
            | Stmt::Comment(_)
            | Stmt::For { .. } => {}
            // Only after the inner loop (what runs before it is assignments): it ends the
            // kernel where the original would, the rows before it written in their order.
            Stmt::Fail(_) => {}
            _ => bad = true,
        }
    });
    if bad || size > MAX_BODY {
        return None;
    }
    // Variables: assigned in the body, never read before assigned, used nowhere else.
    let assigned = row_private(l, whole)?;
    // The jammed loop has its own counter: nothing after it may read the inner counter.
    let counter = HashSet::from([p.var]);
    let posts = std::iter::once(&p.post).chain(p.levels.iter().rev().map(|lv| &lv.post));
    for post in posts.clone() {
        if !assigned_first(post, &counter, &mut HashSet::new()) {
            return None;
        }
    }
    // The inner loop: a carried value (the chain), its range not assigned in it.
    let hot_assigned: HashSet<VarId> = p
        .hot
        .iter()
        .filter_map(|s| match s {
            Stmt::Assign(v, _) => Some(*v),
            _ => None,
        })
        .collect();
    let mut range_reads = HashSet::new();
    reads(&p.start, &mut range_reads);
    reads(&p.stop, &mut range_reads);
    if hot_assigned.contains(&p.var) || range_reads.iter().any(|v| hot_assigned.contains(v)) {
        return None;
    }
    let carried = p.hot.iter().any(|s| match s {
        Stmt::Assign(v, e) => {
            let mut r = HashSet::new();
            reads(e, &mut r);
            r.contains(v)
        }
        _ => false,
    });
    if !carried {
        return None;
    }
    // Definitions before the inner loop, each variable assigned once among them.
    let mut defs: HashMap<VarId, Expr> = HashMap::new();
    let mut moved: Vec<Expr> = vec![];
    for lv in &p.levels {
        for s in &lv.pre {
            if let Stmt::Assign(v, e) = s {
                if defs.insert(*v, e.clone()).is_some() {
                    return None;
                }
                moved.push(e.clone());
            }
        }
        moved.push(lv.cond.clone());
    }
    for s in &p.head {
        if let Stmt::Assign(v, e) = s {
            if defs.insert(*v, e.clone()).is_some() {
                return None;
            }
            moved.push(e.clone());
        }
    }
    // Buffers the body writes and the moved statements read: one row-distinct index for
    // every access, anywhere in the body, so that no row's moved reads see another row's
    // writes (a buffer only the statements after the inner loop read keeps their order).
    let mut written = HashSet::new();
    walk_stmts(body, &mut |s| {
        if let Stmt::Store { buf, .. } = s {
            written.insert(*buf);
        }
    });
    let mut read_early = HashSet::new();
    let hot_exprs = p.hot.iter().filter_map(|s| match s {
        Stmt::Assign(_, e) => Some(e),
        _ => None,
    });
    for e in moved.iter().chain(hot_exprs) {
        e.visit(&mut |x| {
            if let Expr::Load { buf, .. } = x {
                read_early.insert(*buf);
            }
        });
    }
    let mut index_of: HashMap<BufId, Expr> = HashMap::new();
    let mut ok = true;
    walk_accesses(body, &mut |buf, index| {
        if !written.contains(&buf) || !read_early.contains(&buf) {
            return;
        }
        match index_of.get(&buf) {
            Some(e) => ok &= e == index,
            None => {
                ok &= unit_stride(index, j, &assigned);
                index_of.insert(buf, index.clone());
            }
        }
    });
    if !ok {
        return None;
    }
    // The group's test, for a row whose `j` is `at`: moved loads in bounds, the inner range
    // the same as row 0's.
    let start0 = closed(&p.start, &defs, &assigned, 0)?;
    let stop0 = closed(&p.stop, &defs, &assigned, 0)?;
    let mut checks: Vec<Expr> = vec![];
    let in_bounds =
        |buf: BufId, i: Expr| b::and(b::le(b::int(0), i.clone()), b::lt(i, Expr::Len(buf)));
    let mut fine = true;
    for e in &moved {
        e.visit(&mut |x| match x {
            Expr::Load { buf, index } => match closed(index, &defs, &assigned, 0) {
                Some(i) => checks.push(in_bounds(*buf, i)),
                None => fine = false,
            },
            Expr::SearchGe { .. } | Expr::HashFind { .. } => fine = false,
            _ => {}
        });
    }
    for s in &p.hot {
        let Stmt::Assign(_, e) = s else { continue };
        e.visit(&mut |x| match x {
            Expr::Load { buf, index } => {
                let mut r = HashSet::new();
                reads(index, &mut r);
                if r.iter().any(|v| hot_assigned.contains(v)) || loads(index) {
                    fine = false;
                } else if r.contains(&p.var) {
                    let not: HashSet<VarId> = assigned
                        .iter()
                        .copied()
                        .filter(|v| !defs.contains_key(v))
                        .collect();
                    // Monotone in the counter (a step of zero or more elements): its
                    // first and last steps bound every access.
                    match stride(index, p.var, &not) {
                        Some(None) => {}
                        Some(Some(step)) => match closed(&step, &defs, &assigned, 0) {
                            Some(step) => checks.push(b::le(b::int(0), step)),
                            None => {
                                fine = false;
                                return;
                            }
                        },
                        None => {
                            fine = false;
                            return;
                        }
                    }
                    let at = |f: Expr| {
                        let e = subst(index, &|v| (v == p.var).then(|| f.clone()));
                        closed(&e, &defs, &assigned, 0)
                    };
                    match (at(start0.clone()), at(b::sub(stop0.clone(), b::int(1)))) {
                        (Some(first), Some(last)) => {
                            checks.push(b::le(b::int(0), first));
                            checks.push(b::lt(last, Expr::Len(*buf)));
                        }
                        _ => fine = false,
                    }
                } else {
                    match closed(index, &defs, &assigned, 0) {
                        Some(i) => checks.push(in_bounds(*buf, i)),
                        None => fine = false,
                    }
                }
            }
            Expr::SearchGe { .. } | Expr::HashFind { .. } => fine = false,
            _ => {}
        });
    }
    if !fine {
        return None;
    }

    // Rows of a group: row 0 keeps the variables, row r > 0 gets copies; `j` is `first + r`.
    let first = new_var(k, "jam_first", ElemType::I64);
    let maps = row_copies(k, &assigned, rows);
    let row_of = |r: usize| {
        let m = maps[r].clone();
        move |v: VarId| -> Option<Expr> {
            if v == j {
                return Some(b::add(b::var(first), b::int(r as i64)));
            }
            m.get(&v).map(|w| b::var(*w))
        }
    };
    let of_row = |r: usize, stmts: &[Stmt]| subst_stmts(stmts, &row_of(r));
    let expr_of_row = |r: usize, e: &Expr| subst(e, &row_of(r));
    // Closed expressions read `j` and invariants only.
    let at_row = |r: usize, e: &Expr| {
        subst(e, &|v| {
            (v == j).then(|| b::add(b::var(first), b::int(r as i64)))
        })
    };
    let mut test = b::le(
        b::int(MIN_STEPS),
        b::sub(at_row(0, &stop0), at_row(0, &start0)),
    );
    for r in 0..rows {
        for c in &checks {
            test = b::and(test, at_row(r, c));
        }
        if r > 0 {
            test = b::and(test, b::eq(at_row(r, &start0), at_row(0, &start0)));
            test = b::and(test, b::eq(at_row(r, &stop0), at_row(0, &stop0)));
        }
    }

    let done = new_var(k, "jam_done", ElemType::Bool);
    let c = new_var(k, "jam_step", ElemType::I64);
    let mut jammed = vec![];
    for s in &p.hot {
        for (r, m) in maps.iter().enumerate() {
            let f = |v: VarId| -> Option<Expr> {
                if v == p.var {
                    return Some(b::var(c));
                }
                if v == j {
                    return Some(b::add(b::var(first), b::int(r as i64)));
                }
                m.get(&v).map(|w| b::var(*w))
            };
            jammed.extend(subst_stmts(std::slice::from_ref(s), &f));
        }
    }
    let mut inner = vec![];
    for r in 0..rows {
        inner.extend(of_row(r, &p.head));
    }
    inner.push(Stmt::For {
        var: c,
        start: expr_of_row(0, &p.start),
        stop: expr_of_row(0, &p.stop),
        body: jammed,
    });
    for r in 0..rows {
        for post in posts.clone() {
            inner.extend(of_row(r, post));
        }
    }
    inner.push(Stmt::Assign(done, b::boolean(true)));
    // The levels, outermost last: each needs its condition in every row.
    for lv in p.levels.iter().rev() {
        let mut pre = vec![];
        for r in 0..rows {
            pre.extend(of_row(r, &lv.pre));
        }
        let cond = (0..rows).map(|r| expr_of_row(r, &lv.cond)).reduce(b::and)?;
        pre.push(Stmt::If {
            cond,
            then: inner,
            otherwise: vec![],
        });
        inner = pre;
    }
    let rows_i = rows as i64;
    let (sv, ev) = (
        new_var(k, "jam_start", ElemType::I64),
        new_var(k, "jam_stop", ElemType::I64),
    );
    let part = new_var(k, "jam_groups", ElemType::I64);
    let group = new_var(k, "jam_group", ElemType::I64);
    let one_by_one = |from: Expr, to: Expr| Stmt::For {
        var: j,
        start: from,
        stop: to,
        body: body.clone(),
    };
    let group_body = vec![
        Stmt::Assign(
            first,
            b::add(b::var(sv), b::mul(b::var(group), b::int(rows_i))),
        ),
        Stmt::Assign(done, b::boolean(false)),
        Stmt::If {
            cond: test,
            then: inner,
            otherwise: vec![],
        },
        Stmt::If {
            cond: b::not(b::var(done)),
            then: vec![one_by_one(
                b::var(first),
                b::add(b::var(first), b::int(rows_i)),
            )],
            otherwise: vec![],
        },
    ];
    Some(vec![
        Stmt::Comment(format!(
            "{rows} rows jammed: their inner loops over one range run as one, each row's steps in order"
        )),
        Stmt::Assign(sv, s_expr.clone()),
        Stmt::Assign(ev, e_expr.clone()),
        Stmt::Assign(
            part,
            b::select(
                b::lt(b::var(sv), b::var(ev)),
                b::bin(BinOp::Div, b::sub(b::var(ev), b::var(sv)), b::int(rows_i)),
                b::int(0),
            ),
        ),
        Stmt::For {
            var: group,
            start: b::int(0),
            stop: b::var(part),
            body: group_body,
        },
        one_by_one(
            b::add(b::var(sv), b::mul(b::var(part), b::int(rows_i))),
            b::var(ev),
        ),
    ])
}

/// [`ROWS`], or `TESSERA_JAM_ROWS` (1 turns the pass off): for measuring.
pub fn rows() -> usize {
    std::env::var("TESSERA_JAM_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROWS)
}
