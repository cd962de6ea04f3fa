//! Row interleaving: unroll-and-jam of a ragged loop nest such as SpMV's
//! `for i { acc = y[i]; for q = ptr[i]..ptr[i + 1] { acc += A[q] * x[idx[q]] }; y[i] = acc }`.
//!
//! One row's entry loop is a chain of dependent adds: each update waits for the previous one
//! (about 4 cycles an entry), whatever the memory system could deliver. Rows are independent,
//! so `ROWS` of them are walked together: one loop runs `min` of their entry counts, each
//! iteration doing one entry of every row into that row's own accumulator (`ROWS` independent
//! chains the core overlaps), then each row's remaining entries run alone, in order. Every
//! row sums its entries in exactly the order it did, so results are bit-identical.
//!
//! The pass applies only to the shape it can prove safe (anything else stays as it is):
//! - the outer `for i = S..E` body `B` is a chain of `Assign`s and `If`s (each `If` last in
//!   its list, its `then` continuing the chain) ending in assignments, ONE innermost `for q`
//!   (the hot loop, only `Assign`s inside, not assigning its bounds) and any statements after;
//! - every variable `B` assigns is assigned before `B` reads it (no state crosses rows), is
//!   read nowhere else in the kernel, and the assignments before the hot loop at the chain's
//!   `If` levels can be repeated (they read only `i`, invariants and earlier ones);
//! - every buffer `B` writes is only ever accessed at one index `i + c` (rows touch
//!   different elements), and `B` grows, fills or sorts nothing;
//! - the hot loop's loads are the entries of a fiber, `buf[q + c]` with `q` running between
//!   two elements of a position array the caller vouches for ([`super::Bounded`]), or gathers
//!   `buf[j]`, `j` loaded from a coordinate array vouched for; the chain's loads are
//!   `buf[i + c]`.
//!
//! Bounds checks keep their meaning: the interleaved loop runs only behind one test that every
//! load moved earlier than it used to run (the chain's and the hot loops') is in bounds (the
//! vouched bounds positive and at most the arrays' lengths, `S..E` inside the row arrays),
//! so no fault can happen in a different order; when the test fails, the original loop runs
//! (and the backends version it as before). A group of rows where a chain condition fails for
//! one row (an empty row) runs its rows one after another with their original bodies.
//!
//! Groups are adjacent rows `p, p + 1, ...`. When the gathers' coordinates are not vouched
//! for (no fact, or a bound that fails at run time: SciPy's arrays shared zero-copy, which
//! their owner may rewrite at any time), the groups still run, with every gather of the
//! jammed loop tested first (`0 <= j < len`, on the value the gather then uses, and the
//! gather keeps its own check): a bad one sets a flag and leaves the loop before anything is
//! written, and the group's rows then run one after another with their original, checked
//! bodies, so the fault and the writes before it are the original loop's. Each row's rest
//! then runs followed by its tail (its stores), so a bad gather in row `r`'s rest finds rows
//! `< r` written, as the original loop would have.

use super::effects::new_var;
use super::walk::{MAX_OFFSET, loop_offset, walk_accesses, walk_stmts};
use super::{BinOp, BufId, Expr, Kernel, Stmt, VarId, Vouched};
use crate::ir::build as b;
use std::collections::{HashMap, HashSet};

/// Rows walked together by default (measured, BENCHMARKS.md "## SpMV: y = A x").
pub const ROWS: usize = 2;

/// Rows with fewer entries than this run alone (measured, as [`ROWS`]).
pub const MIN_STEPS: i64 = 8;

/// Row loops whose rows average fewer entries than this are not interleaved at all
/// (measured, as [`ROWS`]).
pub const MIN_AVERAGE: i64 = 32;

/// Row loops whose entries span more bytes than this are not interleaved: streamed from
/// memory rather than the cache, two rows' four streams ran slower than one row's two
/// (measured on the C backend, BENCHMARKS.md "### Row sums in lanes; long rows past the
/// cache run alone").
pub const MAX_BYTES: i64 = 14 << 20;

/// The entries per row (on average) and the bytes of all rows' entries between which row
/// loops are interleaved.
#[derive(Clone, Copy, Debug)]
pub struct Range {
    pub min_average: i64,
    pub max_bytes: i64,
}

/// Interleave `rows` rows in every loop nest of `k` of the shape above (`rows` < 2: nothing).
pub fn interleave_rows(k: &mut Kernel, rows: usize, min_steps: i64, range: Range) {
    if rows < 2 {
        return;
    }
    let mut body = std::mem::take(&mut k.body);
    let whole = body.clone();
    walk(k, &mut body, &whole, rows, min_steps, range);
    k.body = body;
}

fn walk(
    k: &mut Kernel,
    stmts: &mut Vec<Stmt>,
    whole: &[Stmt],
    rows: usize,
    min_steps: i64,
    range: Range,
) {
    let mut out = Vec::with_capacity(stmts.len());
    for mut s in stmts.drain(..) {
        if matches!(s, Stmt::For { .. })
            && let Some(new) = interleave(k, &s, whole, rows, min_steps, range)
        {
            out.extend(new);
            continue;
        }
        for b in s.bodies_mut() {
            walk(k, b, whole, rows, min_steps, range);
        }
        out.push(s);
    }
    *stmts = out;
}

/// A row body cut at its chain: `jam::Path` whose `If` levels have nothing after them
/// (`post` of each level empty): the levels' assignments and conditions, `head` before the
/// hot loop, and the path's `post` after it.
pub(super) type Chain = super::jam::Path;

pub(super) fn straight(s: &Stmt) -> bool {
    matches!(s, Stmt::Assign(..) | Stmt::Comment(_))
}

/// The row body's path (`jam::path`) with nothing after any `If` on it.
pub(super) fn chain(body: &[Stmt]) -> Option<Chain> {
    let p = super::jam::path(body)?;
    p.levels.iter().all(|lv| lv.post.is_empty()).then_some(p)
}

/// Whether a row body holds only the statements a row may (assignments, branches, stores,
/// at most 8 loops; no growth, fills, sorts, ranges or breaks).
pub(super) fn plain_row_body(body: &[Stmt]) -> bool {
    let mut bad = false;
    let mut nested_loops = 0;
    walk_stmts(body, &mut |s| match s {
        Stmt::Assign(..) | Stmt::If { .. } | Stmt::Store { .. } | Stmt::Comment(_) => {}
        Stmt::For { .. } => nested_loops += 1,
        _ => bad = true,
    });
    !bad && nested_loops <= 8
}

/// Whether every buffer a row body (of the loop over `i`) writes is accessed, anywhere in
/// the body, at one index `i + c` only: rows touch different elements, so they may run in
/// another order or at once.
pub(super) fn rows_own_elements(body: &[Stmt], i: VarId) -> bool {
    let mut written = HashSet::new();
    walk_stmts(body, &mut |s| {
        if let Stmt::Store { buf, .. } = s {
            written.insert(*buf);
        }
    });
    let mut index_of: HashMap<BufId, Expr> = HashMap::new();
    let mut ok = true;
    let mut note = |buf: BufId, index: &Expr| {
        if written.contains(&buf) {
            match index_of.get(&buf) {
                Some(e) if e != index => ok = false,
                Some(_) => {}
                None => {
                    ok &= matches!(loop_offset(index, i), Some((None, c)) if c.abs() <= MAX_OFFSET);
                    index_of.insert(buf, index.clone());
                }
            }
        }
    };
    walk_accesses(body, &mut note);
    ok
}

/// Variables an expression reads.
pub(super) fn reads(e: &Expr, out: &mut HashSet<VarId>) {
    e.visit(&mut |x| {
        if let Expr::Var(v) = x {
            out.insert(*v);
        }
    });
}

/// Whether every read of a variable in `tracked` happens where it is definitely assigned
/// (`done` holds those assigned so far on every path).
pub(super) fn assigned_first(
    stmts: &[Stmt],
    tracked: &HashSet<VarId>,
    done: &mut HashSet<VarId>,
) -> bool {
    let ok_expr = |e: &Expr, done: &HashSet<VarId>| {
        let mut r = HashSet::new();
        reads(e, &mut r);
        r.iter().all(|v| !tracked.contains(v) || done.contains(v))
    };
    for s in stmts {
        match s {
            Stmt::Assign(v, e) => {
                if !ok_expr(e, done) {
                    return false;
                }
                done.insert(*v);
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                if !ok_expr(cond, done) {
                    return false;
                }
                let mut a = done.clone();
                let mut c = done.clone();
                if !assigned_first(then, tracked, &mut a)
                    || !assigned_first(otherwise, tracked, &mut c)
                {
                    return false;
                }
                *done = a.intersection(&c).copied().collect();
            }
            Stmt::For {
                var,
                start,
                stop,
                body,
            } => {
                if !ok_expr(start, done) || !ok_expr(stop, done) {
                    return false;
                }
                // The body may not run: what it assigns is not definitely assigned after it,
                // except the counter.
                let mut inner = done.clone();
                inner.insert(*var);
                if !assigned_first(body, tracked, &mut inner) {
                    return false;
                }
                done.insert(*var);
            }
            Stmt::Store { index, value, .. } => {
                if !ok_expr(index, done) || !ok_expr(value, done) {
                    return false;
                }
            }
            // Ends the kernel: reads nothing.
            Stmt::Comment(_) | Stmt::Fail(_) => {}
            _ => return false,
        }
    }
    true
}

/// Reads and assignments of variables in statements.
pub(super) fn var_uses(stmts: &[Stmt], out: &mut HashMap<VarId, usize>) {
    walk_stmts(stmts, &mut |s| {
        if let Stmt::Assign(v, _) | Stmt::For { var: v, .. } = s {
            *out.entry(*v).or_default() += 1;
        }
        if let Stmt::Chunked(c) = s {
            for v in [c.lo, c.hi] {
                *out.entry(v).or_default() += 1;
            }
        }
        for e in s.own_exprs() {
            e.visit(&mut |x| {
                if let Expr::Var(v) = x {
                    *out.entry(*v).or_default() += 1;
                }
            });
        }
    });
}

/// The variables a row loop `l` (in the kernel body `whole`) assigns in its body, when each is
/// assigned before the body reads it (no state crosses rows), none is the loop's counter, and
/// none is used anywhere else in the kernel: each row may then have its own copies.
pub(super) fn row_private(l: &Stmt, whole: &[Stmt]) -> Option<HashSet<VarId>> {
    let Stmt::For { var: i, body, .. } = l else {
        return None;
    };
    let mut assigned = HashSet::new();
    walk_stmts(body, &mut |s| {
        if let Stmt::Assign(v, _) | Stmt::For { var: v, .. } = s {
            assigned.insert(*v);
        }
    });
    if assigned.contains(i) || !assigned_first(body, &assigned, &mut HashSet::new()) {
        return None;
    }
    let mut all = HashMap::new();
    var_uses(whole, &mut all);
    let mut here = HashMap::new();
    var_uses(std::slice::from_ref(l), &mut here);
    if assigned.iter().any(|v| all.get(v) != here.get(v)) {
        return None;
    }
    Some(assigned)
}

/// Per row of a group, the copies of the row-private variables `assigned`: row 0 keeps
/// them (an empty map), row `r > 0` gets new variables named `NAME_r`.
pub(super) fn row_copies(
    k: &mut Kernel,
    assigned: &HashSet<VarId>,
    rows: usize,
) -> Vec<HashMap<VarId, VarId>> {
    let mut order: Vec<VarId> = assigned.iter().copied().collect();
    order.sort();
    let mut maps: Vec<HashMap<VarId, VarId>> = vec![HashMap::new()];
    for r in 1..rows {
        let mut m = HashMap::new();
        for &v in &order {
            let decl = k.vars[v.0 as usize].clone();
            k.vars.push(super::VarDecl {
                name: format!("{}_{r}", decl.name),
                ..decl
            });
            m.insert(v, VarId(k.vars.len() as u32 - 1));
        }
        maps.push(m);
    }
    maps
}

/// `e` with each variable replaced as `f` says.
pub(super) fn subst(e: &Expr, f: &dyn Fn(VarId) -> Option<Expr>) -> Expr {
    if let Expr::Var(v) = e
        && let Some(r) = f(*v)
    {
        return r;
    }
    let mut e = e.clone();
    for c in e.children_mut() {
        *c = subst(c, f);
    }
    e
}

/// Statements with their variables replaced as `f` says, and assigned variables renamed by
/// `to` (the targets of `f`'s replacements must be variables where they are assigned).
pub(super) fn subst_stmts(stmts: &[Stmt], f: &dyn Fn(VarId) -> Option<Expr>) -> Vec<Stmt> {
    let target = |v: VarId| match f(v) {
        Some(Expr::Var(w)) => w,
        _ => v,
    };
    stmts
        .iter()
        .map(|s| {
            let mut s = s.clone();
            match &mut s {
                Stmt::Assign(v, _) | Stmt::For { var: v, .. } => *v = target(*v),
                _ => {}
            }
            for e in s.own_exprs_mut() {
                *e = subst(e, f);
            }
            for b in s.bodies_mut() {
                *b = subst_stmts(b, f);
            }
            s
        })
        .collect()
}

/// The buffer a variable holds an element of at the hot loop: followed through copies back
/// to its load, among `assigns` (the chain's assignments before the loop, in order).
fn loaded_from(v: VarId, assigns: &[(VarId, Expr)], depth: usize) -> Option<BufId> {
    let (_, e) = assigns.iter().rev().find(|(w, _)| *w == v)?;
    match e {
        Expr::Load { buf, .. } => Some(*buf),
        Expr::Var(u) if depth < 8 => {
            let at = assigns.iter().rposition(|(w, _)| *w == v)?;
            loaded_from(*u, &assigns[..at], depth + 1)
        }
        _ => None,
    }
}

fn and(a: Expr, c: Expr) -> Expr {
    b::and(a, c)
}

/// [`jam`], leaving `k` as it was when the loop is not of the shape.
fn interleave(
    k: &mut Kernel,
    l: &Stmt,
    whole: &[Stmt],
    rows: usize,
    min_steps: i64,
    range: Range,
) -> Option<Vec<Stmt>> {
    let vars = k.vars.len();
    let out = jam(k, l, whole, rows, min_steps, range);
    if out.is_none() {
        k.vars.truncate(vars);
    }
    out
}

fn jam(
    k: &mut Kernel,
    l: &Stmt,
    whole: &[Stmt],
    rows: usize,
    min_steps: i64,
    range: Range,
) -> Option<Vec<Stmt>> {
    let Stmt::For {
        var: i,
        start: s_expr,
        stop: e_expr,
        body,
    } = l
    else {
        return None;
    };
    let i = *i;
    let ch = chain(body)?;
    // A vectorised entry loop already runs independent chains (its lanes), and a jammed
    // loop would be a new variable the backends do not know to vectorise.
    if k.vectorized.contains(&ch.var) {
        return None;
    }
    if !plain_row_body(body) {
        return None;
    }
    let assigned = row_private(l, whole)?;
    // The hot loop's counter is the only variable whose value after the jammed loops differs
    // from the original's: what follows must assign it before reading it.
    let counter = HashSet::from([ch.var]);
    if !assigned_first(&ch.post, &counter, &mut HashSet::new()) {
        return None;
    }
    let mut hot_assigned = HashSet::new();
    for s in &ch.hot {
        if let Stmt::Assign(v, _) = s {
            hot_assigned.insert(*v);
        }
    }
    let (Expr::Var(start_var), Expr::Var(stop_var)) = (&ch.start, &ch.stop) else {
        return None;
    };
    if hot_assigned.contains(&ch.var)
        || hot_assigned.contains(start_var)
        || hot_assigned.contains(stop_var)
    {
        return None;
    }
    // The chain's assignments before the hot loop can run twice (a group falling back to its
    // original bodies): each assigned once, reading only `i`, invariants and earlier ones.
    let mut before: Vec<(VarId, Expr)> = vec![];
    let mut seen = HashSet::new();
    for lv in &ch.levels {
        for s in &lv.pre {
            if let Stmt::Assign(v, e) = s {
                let mut r = HashSet::new();
                reads(e, &mut r);
                if !seen.insert(*v)
                    || r.iter().any(|u| assigned.contains(u) && !seen.contains(u))
                    || r.contains(v)
                {
                    return None;
                }
                before.push((*v, e.clone()));
            }
        }
    }
    for s in &ch.head {
        if let Stmt::Assign(v, e) = s {
            before.push((*v, e.clone()));
        }
    }
    if !rows_own_elements(body, i) {
        return None;
    }
    let modified = k.modified_bufs();
    let bounded = k.bounded.clone();
    let vouched = |buf: BufId, what: Vouched| {
        if modified[buf.0 as usize] {
            return None;
        }
        let mut facts = bounded.iter().filter(|f| f.buf == buf);
        let f = facts.next()?;
        (facts.next().is_none() && f.what == what).then(|| f.below.clone())
    };
    // The range test: every load that moves is in bounds. Row accesses `buf[i + c]` over
    // `i` in `S..E`, written `E <= len - c` and `S >= -c` (no overflow: `c` is small).
    let (sv, ev) = (
        new_var(k, "interleave_start", crate::types::ElemType::I64),
        new_var(k, "interleave_stop", crate::types::ElemType::I64),
    );
    let mut tests = vec![b::le(b::int(0), b::var(sv))];
    let row_access = |buf: BufId, index: &Expr, tests: &mut Vec<Expr>| -> bool {
        let Some((None, c)) = loop_offset(index, i) else {
            return false;
        };
        if c.abs() > MAX_OFFSET {
            return false;
        }
        tests.push(b::le(b::int(-c), b::var(sv)));
        tests.push(b::le(b::var(ev), b::sub(Expr::Len(buf), b::int(c))));
        true
    };
    let mut moved_exprs: Vec<&Expr> = vec![];
    for lv in &ch.levels {
        moved_exprs.push(&lv.cond);
        for s in &lv.pre {
            moved_exprs.extend(s.own_exprs());
        }
    }
    for s in &ch.head {
        moved_exprs.extend(s.own_exprs());
    }
    let mut fine = true;
    for e in &moved_exprs {
        e.visit(&mut |x| match x {
            Expr::Load { buf, index } => fine &= row_access(*buf, index, &mut tests),
            Expr::SearchGe { .. } | Expr::HashFind { .. } => fine = false,
            _ => {}
        });
    }
    if !fine {
        return None;
    }
    // The hot loop's range: two elements of one vouched position array.
    let positions = loaded_from(*start_var, &before, 0)?;
    if loaded_from(*stop_var, &before, 0)? != positions {
        return None;
    }
    let pos_below = vouched(positions, Vouched::Positions)?;
    tests.push(b::lt(b::int(0), pos_below.clone()));
    // Coordinates loaded in the hot loop (vouched for or not), the vouched gathers' tests
    // (`None` once one gather's coordinates have no fact), and each hot statement's gathers
    // (for the checked groups, which test them instead).
    let mut coords: HashMap<VarId, BufId> = HashMap::new();
    let mut coord_tests: Option<Vec<Expr>> = Some(vec![]);
    let mut gathers: Vec<Vec<(BufId, Expr)>> = vec![];
    // The arrays read at the entries' positions (coordinates, values): what a row streams.
    let mut streamed: HashSet<BufId> = HashSet::new();
    for s in &ch.hot {
        let mut here: Vec<(BufId, Expr)> = vec![];
        let Stmt::Assign(v, e) = s else {
            gathers.push(here);
            continue;
        };
        let mut fine = true;
        e.visit(&mut |x| {
            let Expr::Load { buf, index } = x else {
                if matches!(
                    x,
                    Expr::SearchGe { .. } | Expr::HashFind { .. } | Expr::Len(_)
                ) {
                    fine = false;
                }
                return;
            };
            if let Some((None, c)) = loop_offset(index, ch.var) {
                // An entry: `q + c` is at most `below - 2 + c`.
                if !(0..=MAX_OFFSET).contains(&c) {
                    fine = false;
                    return;
                }
                tests.push(b::le(
                    pos_below.clone(),
                    b::sub(b::add(Expr::Len(*buf), b::int(1)), b::int(c)),
                ));
                streamed.insert(*buf);
                return;
            }
            let from = match &**index {
                Expr::Var(j) => coords.get(j).copied(),
                Expr::Load { buf: c, index: at } => (!modified[c.0 as usize]
                    && matches!(loop_offset(at, ch.var), Some((None, 0..=MAX_OFFSET))))
                .then_some(*c),
                _ => None,
            };
            let Some(from) = from else {
                fine = false;
                return;
            };
            here.push((*buf, (**index).clone()));
            match vouched(from, Vouched::Coordinates) {
                Some(below) => {
                    if let Some(t) = &mut coord_tests {
                        t.push(b::lt(b::int(0), below.clone()));
                        t.push(b::le(below, Expr::Len(*buf)));
                    }
                }
                None => coord_tests = None,
            }
        });
        if !fine {
            return None;
        }
        gathers.push(here);
        coords.remove(v);
        if let Expr::Load { buf, index } = e
            && matches!(loop_offset(index, ch.var), Some((None, 0..=MAX_OFFSET)))
            && !modified[buf.0 as usize]
        {
            coords.insert(*v, *buf);
        }
    }
    let all_of = |ts: Vec<Expr>| -> Option<Expr> {
        let mut distinct: Vec<Expr> = vec![];
        for t in ts {
            if !distinct.contains(&t) {
                distinct.push(t);
            }
        }
        distinct.into_iter().reduce(and)
    };
    let guard = all_of(tests)?;
    // `Some` when every gather's coordinates have a fact: true at run time when they are
    // vouched for, and the groups then run without testing the gathers.
    let coords_ok = coord_tests.map(|t| all_of(t).unwrap_or(b::boolean(true)));

    // Rows of a group: row 0 keeps the variables, row r > 0 gets copies.
    let maps = row_copies(k, &assigned, rows);
    // Groups are adjacent rows `p, p + 1, ...`: measured faster than rows `i, i + h, ...`
    // (`h` the rows per part), whose row accesses `buf[i + w + c]` the backends version
    // once for the whole group loop, on the long-row matrices of BENCHMARKS.md ("Python
    // package", helper sh19; `spaced` keeps those for measuring), and the only order in
    // which a group with tested gathers can re-run its rows as the original loop would.
    let spaced = spaced();
    let part = new_var(k, "interleave_part", crate::types::ElemType::I64);
    let offsets: Vec<Option<VarId>> = (0..rows)
        .map(|r| (r > 0).then(|| new_var(k, "interleave_row", crate::types::ElemType::I64)))
        .collect();
    // Checked groups: adjacent rows `p, p + 1, ...` (`p` a variable the group loop sets), so
    // a group re-run row by row keeps the original order of rows.
    let pair = new_var(k, "interleave_first", crate::types::ElemType::I64);
    let group = new_var(k, "interleave_group", crate::types::ElemType::I64);
    let adjacent_rows: Vec<Option<Expr>> = (0..rows)
        .map(|r| Some(b::add(b::var(pair), b::int(r as i64))))
        .collect();
    let vouched_rows: Vec<Option<Expr>> = if spaced {
        offsets
            .iter()
            .map(|w| w.map(|w| b::add(b::var(i), b::var(w))))
            .collect()
    } else {
        adjacent_rows.clone()
    };
    let alloc = |k: &mut Kernel, checked: bool| GroupVars {
        n: new_var(k, "interleave_steps", crate::types::ElemType::I64),
        c: new_var(k, "interleave_q", crate::types::ElemType::I64),
        deltas: (0..rows)
            .map(|r| (r > 0).then(|| new_var(k, "interleave_delta", crate::types::ElemType::I64)))
            .collect(),
        rests: (0..rows)
            .map(|_| new_var(k, "interleave_rest", crate::types::ElemType::I64))
            .collect(),
        bad: checked.then(|| new_var(k, "interleave_bad", crate::types::ElemType::Bool)),
    };
    let vouched_vars = alloc(k, false);
    let checked_vars = alloc(k, true);
    let ends_known = seen.contains(start_var)
        && seen.contains(stop_var)
        && ch
            .head
            .iter()
            .all(|s| !matches!(s, Stmt::Assign(v, _) if v == start_var || v == stop_var));
    let shape = Group {
        i,
        rows,
        body,
        ch: &ch,
        maps: &maps,
        gathers: &gathers,
        min_steps: if ends_known { min_steps } else { 1 },
    };
    let vouched_group = shape.build(&vouched_rows, &vouched_vars)?;
    let checked_group = shape.build(&adjacent_rows, &checked_vars)?;

    // The groups, the rows left over, and the original loop when the range test fails.
    let rows_i = rows as i64;
    let groups_of = b::select(
        b::lt(b::var(sv), b::var(ev)),
        b::bin(BinOp::Div, b::sub(b::var(ev), b::var(sv)), b::int(rows_i)),
        b::int(0),
    );
    // A loop over groups of adjacent rows `p, p + 1, ...`, then the rows left over.
    let adjacent = |comment: String, group_body: Vec<Stmt>| {
        let mut in_group = vec![Stmt::Assign(
            pair,
            b::add(b::var(sv), b::mul(b::var(group), b::int(rows_i))),
        )];
        in_group.extend(group_body);
        vec![
            Stmt::Comment(comment),
            Stmt::Assign(part, groups_of.clone()),
            Stmt::For {
                var: group,
                start: b::int(0),
                stop: b::var(part),
                body: in_group,
            },
            Stmt::For {
                var: i,
                start: b::add(b::var(sv), b::mul(b::var(part), b::int(rows_i))),
                stop: b::var(ev),
                body: body.to_vec(),
            },
        ]
    };
    let then = if spaced {
        let mut then = vec![
            Stmt::Comment(format!(
                "{rows} rows at a time (i, i + h, ...): one loop over their common entries, then each row's rest"
            )),
            Stmt::Assign(part, groups_of.clone()),
        ];
        for (r, w) in offsets.iter().enumerate() {
            if let Some(w) = w {
                then.push(Stmt::Assign(*w, b::mul(b::var(part), b::int(r as i64))));
            }
        }
        then.push(Stmt::For {
            var: i,
            start: b::var(sv),
            stop: b::add(b::var(sv), b::var(part)),
            body: vouched_group,
        });
        then.push(Stmt::For {
            var: i,
            start: b::add(b::var(sv), b::mul(b::var(part), b::int(rows_i))),
            stop: b::var(ev),
            body: body.clone(),
        });
        then
    } else {
        adjacent(
            format!(
                "{rows} rows at a time (i, i + 1, ...): one loop over their common entries, then each row's rest"
            ),
            vouched_group,
        )
    };
    let checked = adjacent(
        format!(
            "{rows} adjacent rows at a time, gathers tested: a group meeting a bad one re-runs its rows one by one"
        ),
        checked_group,
    );
    let original = Stmt::For {
        var: i,
        start: b::var(sv),
        stop: b::var(ev),
        body: body.clone(),
    };
    // Matrices whose rows average fewer than `min_average` entries keep the original loop:
    // the groups' tests and tails cost more there than the overlapped chains save (measured
    // on the C backend); so do those whose entries span more than `max_bytes` (see
    // [`MAX_BYTES`]; the bytes of an entry are those of the arrays the hot loop reads at its
    // position). The total is the last row's end minus the first row's start, both loads the
    // range test covers (the loop runs at least one row here).
    let Range {
        min_average,
        max_bytes,
    } = range;
    let per_entry: i64 = streamed.iter().map(|b| k.buf_elem(*b).size() as i64).sum();
    let max_entries = max_bytes / per_entry.max(1);
    let load_of = |v: VarId| -> Option<Expr> {
        let mut v = v;
        for _ in 0..8 {
            match &before.iter().rev().find(|(w, _)| *w == v)?.1 {
                e @ Expr::Load { index, .. } => {
                    let mut r = HashSet::new();
                    reads(index, &mut r);
                    return r.iter().all(|u| *u == i).then(|| e.clone());
                }
                Expr::Var(u) => v = *u,
                _ => return None,
            }
        }
        None
    };
    let average = match (
        min_average > 1 || max_entries < i64::MAX,
        load_of(*start_var),
        load_of(*stop_var),
    ) {
        (true, Some(first), Some(last)) => {
            let first = subst(&first, &|v| (v == i).then(|| b::var(sv)));
            let last = subst(&last, &|v| (v == i).then(|| b::sub(b::var(ev), b::int(1))));
            let total = b::sub(last, first);
            and(
                b::le(
                    b::mul(b::int(min_average), b::sub(b::var(ev), b::var(sv))),
                    total.clone(),
                ),
                b::le(total, b::int(max_entries)),
            )
        }
        _ => b::boolean(true),
    };
    // The decisions in variables, so the original loop is emitted once, where it was (a
    // second copy of it in another branch made GCC compile it 7% slower on delaunay_n17).
    let go = new_var(k, "interleave_go", crate::types::ElemType::Bool);
    let go_checked = new_var(k, "interleave_checked", crate::types::ElemType::Bool);
    let long = new_var(k, "interleave_long", crate::types::ElemType::Bool);
    let mut decide = vec![Stmt::Assign(long, average)];
    match &coords_ok {
        Some(ok) => {
            decide.push(Stmt::Assign(go, and(b::var(long), ok.clone())));
            decide.push(Stmt::Assign(
                go_checked,
                and(b::var(long), b::not(b::var(go))),
            ));
        }
        None => decide.push(Stmt::Assign(go_checked, b::var(long))),
    }
    let fallback_loops = Stmt::If {
        cond: b::var(go_checked),
        then: checked,
        otherwise: vec![original],
    };
    let run = match coords_ok {
        Some(_) => Stmt::If {
            cond: b::var(go),
            then,
            otherwise: vec![fallback_loops],
        },
        None => fallback_loops,
    };
    Some(vec![
        Stmt::Assign(sv, s_expr.clone()),
        Stmt::Assign(ev, e_expr.clone()),
        Stmt::Assign(go, b::boolean(false)),
        Stmt::Assign(go_checked, b::boolean(false)),
        Stmt::If {
            cond: guard,
            then: vec![Stmt::If {
                cond: b::lt(b::var(sv), b::var(ev)),
                then: decide,
                otherwise: vec![],
            }],
            otherwise: vec![],
        },
        run,
    ])
}

/// The variables of one kind of group: its common steps, the jammed loop's counter, each
/// row's start after row 0's, each row's rest counter, and (checked groups) the flag of a
/// gather out of bounds.
struct GroupVars {
    n: VarId,
    c: VarId,
    deltas: Vec<Option<VarId>>,
    rests: Vec<VarId>,
    bad: Option<VarId>,
}

/// What a group of rows is built from: the row loop's counter and body cut at its chain,
/// the rows' variable copies, and each hot statement's gathers.
struct Group<'a> {
    i: VarId,
    rows: usize,
    body: &'a [Stmt],
    ch: &'a Chain,
    maps: &'a [HashMap<VarId, VarId>],
    gathers: &'a [Vec<(BufId, Expr)>],
    min_steps: i64,
}

impl Group<'_> {
    /// Row `r`'s renaming: its variable copies, `extra`, and `i` as `at[r]` (`None`: `i`).
    fn row<'b>(
        &'b self,
        r: usize,
        at: &'b [Option<Expr>],
        extra: &'b HashMap<VarId, Expr>,
    ) -> impl Fn(VarId) -> Option<Expr> + 'b {
        move |v: VarId| -> Option<Expr> {
            if let Some(e) = extra.get(&v) {
                return Some(e.clone());
            }
            if v == self.i {
                return at[r].clone();
            }
            self.maps[r].get(&v).map(|w| b::var(*w))
        }
    }

    /// The body of one group: the chain's levels for every row, the jammed loop over the
    /// rows' common entries, each row's rest and tail; rows falling out of the chain run
    /// one after another with their original bodies. With `vars.bad`, every gather of the
    /// jammed loop is tested first: a bad one leaves the loop before anything is written and
    /// the group's rows run one after another with their original (checked) bodies, so the
    /// fault and the writes before it are the original loop's; the rests then run row by row,
    /// each followed by its tail, so a fault in row `r`'s rest finds rows `< r` written.
    fn build(&self, at: &[Option<Expr>], vars: &GroupVars) -> Option<Vec<Stmt>> {
        let ch = self.ch;
        let rows = self.rows;
        let none = HashMap::new();
        let of_row = |r: usize, stmts: &[Stmt]| subst_stmts(stmts, &self.row(r, at, &none));
        let expr_of_row = |r: usize, e: &Expr| subst(e, &self.row(r, at, &none));
        let fallback: Vec<Stmt> = (0..rows).flat_map(|r| of_row(r, self.body)).collect();
        let (n, c) = (vars.n, vars.c);
        let mut inner = vec![];
        for r in 0..rows {
            inner.extend(of_row(r, &ch.head));
        }
        let len = |r: usize| b::sub(expr_of_row(r, &ch.stop), expr_of_row(r, &ch.start));
        let steps = (1..rows).fold(len(0), |acc, r| b::min(acc, len(r)));
        inner.push(Stmt::Assign(n, steps));
        for r in 1..rows {
            let d = vars.deltas[r]?;
            inner.push(Stmt::Assign(
                d,
                b::sub(expr_of_row(r, &ch.start), expr_of_row(0, &ch.start)),
            ));
        }
        let at_q = |r: usize| match vars.deltas[r] {
            None => b::var(c),
            Some(d) => b::add(b::var(c), b::var(d)),
        };
        let mut jammed = vec![];
        for (s, stmt) in ch.hot.iter().enumerate() {
            for r in 0..rows {
                let extra = HashMap::from([(ch.var, at_q(r))]);
                let f = self.row(r, at, &extra);
                if let Some(bad) = vars.bad {
                    for (buf, index) in &self.gathers[s] {
                        let j = subst(index, &f);
                        let inside = and(b::le(b::int(0), j.clone()), b::lt(j, Expr::Len(*buf)));
                        jammed.push(Stmt::If {
                            cond: b::not(inside),
                            then: vec![Stmt::Assign(bad, b::boolean(true)), Stmt::Break],
                            otherwise: vec![],
                        });
                    }
                }
                jammed.extend(subst_stmts(std::slice::from_ref(stmt), &f));
            }
        }
        if let Some(bad) = vars.bad {
            inner.push(Stmt::Assign(bad, b::boolean(false)));
        }
        inner.push(Stmt::For {
            var: c,
            start: expr_of_row(0, &ch.start),
            stop: b::add(expr_of_row(0, &ch.start), b::var(n)),
            body: jammed,
        });
        let rest = |r: usize| {
            let t = vars.rests[r];
            Stmt::For {
                var: t,
                start: at_q(r),
                stop: expr_of_row(r, &ch.stop),
                body: subst_stmts(
                    &ch.hot,
                    &self.row(r, at, &HashMap::from([(ch.var, b::var(t))])),
                ),
            }
        };
        match vars.bad {
            None => {
                for r in 0..rows {
                    inner.push(rest(r));
                }
                for r in 0..rows {
                    inner.extend(of_row(r, &ch.post));
                }
            }
            Some(bad) => {
                let mut after = vec![];
                for r in 0..rows {
                    after.push(rest(r));
                    after.extend(of_row(r, &ch.post));
                }
                inner.push(Stmt::If {
                    cond: b::var(bad),
                    then: fallback.clone(),
                    otherwise: after,
                });
            }
        }
        // Rows shorter than `min_steps` run one after another (their original bodies): on
        // short rows the end of each row's loop, mispredicted, costs more than the chain.
        let mut levels: Vec<(Vec<Stmt>, Expr)> = ch
            .levels
            .iter()
            .map(|lv| (lv.pre.clone(), lv.cond.clone()))
            .collect();
        if self.min_steps > 1
            && let Some((_, cond)) = levels.last_mut()
        {
            let long = b::le(
                b::int(self.min_steps),
                b::sub(ch.stop.clone(), ch.start.clone()),
            );
            *cond = and(cond.clone(), long);
        }
        // The chain's levels, outermost last: each needs its condition for every row.
        for (lv_pre, lv_cond) in levels.iter().rev() {
            let mut pre = vec![];
            for r in 0..rows {
                pre.extend(of_row(r, lv_pre));
            }
            let cond = (0..rows).map(|r| expr_of_row(r, lv_cond)).reduce(and)?;
            pre.push(Stmt::If {
                cond,
                then: inner,
                otherwise: fallback.clone(),
            });
            inner = pre;
        }
        Some(inner)
    }
}

/// [`ROWS`], or `TESSERA_INTERLEAVE_ROWS` (1 turns the pass off): for measuring.
pub fn rows() -> usize {
    std::env::var("TESSERA_INTERLEAVE_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROWS)
}

/// `TESSERA_INTERLEAVE_SPACED=1`: groups of vouched rows as `i, i + h, ...` (the layout
/// before adjacent groups), for measuring.
pub fn spaced() -> bool {
    std::env::var("TESSERA_INTERLEAVE_SPACED").is_ok_and(|v| v == "1")
}

/// [`MIN_STEPS`], or `TESSERA_INTERLEAVE_MIN`: for measuring.
pub fn min_steps() -> i64 {
    std::env::var("TESSERA_INTERLEAVE_MIN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MIN_STEPS)
}

/// [`MIN_AVERAGE`] and [`MAX_BYTES`], or `TESSERA_INTERLEAVE_AVERAGE` and
/// `TESSERA_INTERLEAVE_MAX_BYTES`: for measuring.
pub fn range() -> Range {
    let env = |name: &str, default: i64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    Range {
        min_average: env("TESSERA_INTERLEAVE_AVERAGE", MIN_AVERAGE),
        max_bytes: env("TESSERA_INTERLEAVE_MAX_BYTES", MAX_BYTES),
    }
}
