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

/// Interleave `rows` rows in every loop nest of `k` of the shape above (`rows` < 2: nothing).
pub fn interleave_rows(k: &mut Kernel, rows: usize, min_steps: i64, min_average: i64) {
    if rows < 2 {
        return;
    }
    let mut body = std::mem::take(&mut k.body);
    let whole = body.clone();
    walk(k, &mut body, &whole, rows, min_steps, min_average);
    k.body = body;
}

fn walk(
    k: &mut Kernel,
    stmts: &mut Vec<Stmt>,
    whole: &[Stmt],
    rows: usize,
    min_steps: i64,
    min_average: i64,
) {
    let mut out = Vec::with_capacity(stmts.len());
    for mut s in stmts.drain(..) {
        if matches!(s, Stmt::For { .. })
            && let Some(new) = interleave(k, &s, whole, rows, min_steps, min_average)
        {
            out.extend(new);
            continue;
        }
        for b in s.bodies_mut() {
            walk(k, b, whole, rows, min_steps, min_average);
        }
        out.push(s);
    }
    *stmts = out;
}

/// One `If` level of a row body's chain: assignments, then the condition the rest needs.
struct Level {
    pre: Vec<Stmt>,
    cond: Expr,
}

/// A row body cut at its chain: `levels`, then `head` (assignments) before the hot loop,
/// and `tail` after it.
struct Chain {
    levels: Vec<Level>,
    head: Vec<Stmt>,
    var: VarId,
    start: Expr,
    stop: Expr,
    hot: Vec<Stmt>,
    tail: Vec<Stmt>,
}

fn straight(s: &Stmt) -> bool {
    matches!(s, Stmt::Assign(..) | Stmt::Comment(_))
}

fn chain(body: &[Stmt]) -> Option<Chain> {
    let mut levels = vec![];
    let mut cur = body;
    loop {
        let p = cur.iter().position(|s| !straight(s))?;
        match &cur[p] {
            Stmt::If { cond, then, .. } if p + 1 == cur.len() => {
                levels.push(Level {
                    pre: cur[..p].to_vec(),
                    cond: cond.clone(),
                });
                cur = then;
            }
            Stmt::For {
                var,
                start,
                stop,
                body,
            } if body.iter().all(straight) => {
                return Some(Chain {
                    levels,
                    head: cur[..p].to_vec(),
                    var: *var,
                    start: start.clone(),
                    stop: stop.clone(),
                    hot: body.clone(),
                    tail: cur[p + 1..].to_vec(),
                });
            }
            _ => return None,
        }
    }
}

/// Variables an expression reads.
fn reads(e: &Expr, out: &mut HashSet<VarId>) {
    e.visit(&mut |x| {
        if let Expr::Var(v) = x {
            out.insert(*v);
        }
    });
}

/// Whether every read of a variable in `tracked` happens where it is definitely assigned
/// (`done` holds those assigned so far on every path).
fn assigned_first(stmts: &[Stmt], tracked: &HashSet<VarId>, done: &mut HashSet<VarId>) -> bool {
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
            Stmt::Comment(_) => {}
            _ => return false,
        }
    }
    true
}

/// Reads and assignments of variables in statements.
fn var_uses(stmts: &[Stmt], out: &mut HashMap<VarId, usize>) {
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

/// `e` with each variable replaced as `f` says.
fn subst(e: &Expr, f: &dyn Fn(VarId) -> Option<Expr>) -> Expr {
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
fn subst_stmts(stmts: &[Stmt], f: &dyn Fn(VarId) -> Option<Expr>) -> Vec<Stmt> {
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
    min_average: i64,
) -> Option<Vec<Stmt>> {
    let vars = k.vars.len();
    let out = jam(k, l, whole, rows, min_steps, min_average);
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
    min_average: i64,
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
    // Only the statements a row body may hold (no growth, fills, sorts, ranges, breaks).
    let mut bad = false;
    let mut nested_loops = 0;
    walk_stmts(body, &mut |s| match s {
        Stmt::Assign(..) | Stmt::If { .. } | Stmt::Store { .. } | Stmt::Comment(_) => {}
        Stmt::For { .. } => nested_loops += 1,
        _ => bad = true,
    });
    if bad || nested_loops > 8 {
        return None;
    }
    // Variables: assigned in the body, never read before assigned, used nowhere else.
    let mut assigned = HashSet::new();
    walk_stmts(body, &mut |s| {
        if let Stmt::Assign(v, _) | Stmt::For { var: v, .. } = s {
            assigned.insert(*v);
        }
    });
    if assigned.contains(&i) || !assigned_first(body, &assigned, &mut HashSet::new()) {
        return None;
    }
    let mut all = HashMap::new();
    var_uses(whole, &mut all);
    let mut here = HashMap::new();
    var_uses(std::slice::from_ref(l), &mut here);
    if assigned.iter().any(|v| all.get(v) != here.get(v)) {
        return None;
    }
    // The hot loop's counter is the only variable whose value after the jammed loops differs
    // from the original's: what follows must assign it before reading it.
    let counter = HashSet::from([ch.var]);
    if !assigned_first(&ch.tail, &counter, &mut HashSet::new()) {
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
    // Buffers the body writes: one index `i + c` for every access, anywhere in the body.
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
    if !ok {
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
    let mut coords: HashMap<VarId, BufId> = HashMap::new();
    for s in &ch.hot {
        let Stmt::Assign(v, e) = s else { continue };
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
                return;
            }
            let from = match &**index {
                Expr::Var(j) => coords.get(j).copied(),
                Expr::Load { buf: c, index: at } => {
                    matches!(loop_offset(at, ch.var), Some((None, 0..=MAX_OFFSET))).then_some(*c)
                }
                _ => None,
            };
            match from.and_then(|c| vouched(c, Vouched::Coordinates)) {
                Some(below) => {
                    tests.push(b::lt(b::int(0), below.clone()));
                    tests.push(b::le(below, Expr::Len(*buf)));
                }
                None => fine = false,
            }
        });
        if !fine {
            return None;
        }
        coords.remove(v);
        if let Expr::Load { buf, index } = e
            && matches!(loop_offset(index, ch.var), Some((None, 0..=MAX_OFFSET)))
            && vouched(*buf, Vouched::Coordinates).is_some()
        {
            coords.insert(*v, *buf);
        }
    }
    let mut distinct: Vec<Expr> = vec![];
    for t in tests {
        if !distinct.contains(&t) {
            distinct.push(t);
        }
    }
    let guard = distinct.into_iter().reduce(and)?;

    // Rows of a group: row 0 keeps the variables, row r > 0 gets copies and `i + r`.
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
    // Row r of a group is `i + r * h` (`h` the rows per part, a variable the group loop
    // keeps): every row access stays `buf[i + w + c]`, which the backends version once for
    // the whole group loop, as they do the original row loop.
    let part = new_var(k, "interleave_part", crate::types::ElemType::I64);
    let offsets: Vec<Option<VarId>> = (0..rows)
        .map(|r| (r > 0).then(|| new_var(k, "interleave_row", crate::types::ElemType::I64)))
        .collect();
    let row = |r: usize, extra: &HashMap<VarId, Expr>| {
        let m = maps[r].clone();
        let extra = extra.clone();
        let offset = offsets[r];
        move |v: VarId| -> Option<Expr> {
            if let Some(e) = extra.get(&v) {
                return Some(e.clone());
            }
            if v == i {
                return offset.map(|w| b::add(b::var(i), b::var(w)));
            }
            m.get(&v).map(|w| b::var(*w))
        }
    };
    let none = HashMap::new();
    let of_row = |r: usize, stmts: &[Stmt]| subst_stmts(stmts, &row(r, &none));
    let expr_of_row = |r: usize, e: &Expr| subst(e, &row(r, &none));

    let fallback: Vec<Stmt> = (0..rows).flat_map(|r| of_row(r, body)).collect();
    // The jammed loop and each row's remaining entries.
    let n = new_var(k, "interleave_steps", crate::types::ElemType::I64);
    let c = new_var(k, "interleave_q", crate::types::ElemType::I64);
    let mut inner = vec![];
    for r in 0..rows {
        inner.extend(of_row(r, &ch.head));
    }
    let len = |r: usize| b::sub(expr_of_row(r, &ch.stop), expr_of_row(r, &ch.start));
    let steps = (1..rows).fold(len(0), |acc, r| b::min(acc, len(r)));
    inner.push(Stmt::Assign(n, steps));
    let mut deltas = vec![None];
    for r in 1..rows {
        let d = new_var(k, "interleave_delta", crate::types::ElemType::I64);
        inner.push(Stmt::Assign(
            d,
            b::sub(expr_of_row(r, &ch.start), expr_of_row(0, &ch.start)),
        ));
        deltas.push(Some(d));
    }
    let at = |r: usize| match deltas[r] {
        None => b::var(c),
        Some(d) => b::add(b::var(c), b::var(d)),
    };
    let jammed_rows: Vec<Vec<Stmt>> = (0..rows)
        .map(|r| subst_stmts(&ch.hot, &row(r, &HashMap::from([(ch.var, at(r))]))))
        .collect();
    let mut jammed = vec![];
    for s in 0..ch.hot.len() {
        for rows_body in &jammed_rows {
            jammed.push(rows_body[s].clone());
        }
    }
    inner.push(Stmt::For {
        var: c,
        start: expr_of_row(0, &ch.start),
        stop: b::add(expr_of_row(0, &ch.start), b::var(n)),
        body: jammed,
    });
    for r in 0..rows {
        let t = new_var(k, "interleave_rest", crate::types::ElemType::I64);
        inner.push(Stmt::For {
            var: t,
            start: at(r),
            stop: expr_of_row(r, &ch.stop),
            body: subst_stmts(&ch.hot, &row(r, &HashMap::from([(ch.var, b::var(t))]))),
        });
    }
    for r in 0..rows {
        inner.extend(of_row(r, &ch.tail));
    }
    // Rows shorter than `min_steps` run one after another (their original bodies): on
    // short rows the end of each row's loop, mispredicted, costs more than the chain.
    let mut levels: Vec<Level> = ch
        .levels
        .iter()
        .map(|lv| Level {
            pre: lv.pre.clone(),
            cond: lv.cond.clone(),
        })
        .collect();
    let ends_known = seen.contains(start_var)
        && seen.contains(stop_var)
        && ch
            .head
            .iter()
            .all(|s| !matches!(s, Stmt::Assign(v, _) if v == start_var || v == stop_var));
    if min_steps > 1
        && ends_known
        && let Some(lv) = levels.last_mut()
    {
        let long = b::le(b::int(min_steps), b::sub(ch.stop.clone(), ch.start.clone()));
        lv.cond = and(lv.cond.clone(), long);
    }
    // The chain's levels, outermost last: each needs its condition for every row.
    for lv in levels.iter().rev() {
        let mut pre = vec![];
        for r in 0..rows {
            pre.extend(of_row(r, &lv.pre));
        }
        let cond = (0..rows).map(|r| expr_of_row(r, &lv.cond)).reduce(and)?;
        pre.push(Stmt::If {
            cond,
            then: inner,
            otherwise: fallback.clone(),
        });
        inner = pre;
    }
    // The groups, the rows left over, and the original loop when the range test fails.
    let rows_i = rows as i64;
    let mut setup = vec![Stmt::Assign(
        part,
        b::select(
            b::lt(b::var(sv), b::var(ev)),
            b::bin(BinOp::Div, b::sub(b::var(ev), b::var(sv)), b::int(rows_i)),
            b::int(0),
        ),
    )];
    for (r, w) in offsets.iter().enumerate() {
        if let Some(w) = w {
            setup.push(Stmt::Assign(*w, b::mul(b::var(part), b::int(r as i64))));
        }
    }
    let groups = Stmt::For {
        var: i,
        start: b::var(sv),
        stop: b::add(b::var(sv), b::var(part)),
        body: inner,
    };
    let remaining = Stmt::For {
        var: i,
        start: b::add(b::var(sv), b::mul(b::var(part), b::int(rows_i))),
        stop: b::var(ev),
        body: body.clone(),
    };
    let original = Stmt::For {
        var: i,
        start: b::var(sv),
        stop: b::var(ev),
        body: body.clone(),
    };
    // Matrices whose rows average fewer than `min_average` entries keep the original loop:
    // the groups' tests and tails cost more there than the overlapped chains save (measured
    // on the C backend). The total is the last row's end minus the first row's start, both
    // loads the range test covers (the loop runs at least one row here).
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
    let average = match (min_average > 1, load_of(*start_var), load_of(*stop_var)) {
        (true, Some(first), Some(last)) => {
            let first = subst(&first, &|v| (v == i).then(|| b::var(sv)));
            let last = subst(&last, &|v| (v == i).then(|| b::sub(b::var(ev), b::int(1))));
            Some(b::le(
                b::mul(b::int(min_average), b::sub(b::var(ev), b::var(sv))),
                b::sub(last, first),
            ))
        }
        _ => None,
    };
    let mut then = vec![Stmt::Comment(format!(
        "{rows} rows at a time (i, i + h, ...): one loop over their common entries, then each row's rest"
    ))];
    then.extend(setup);
    then.push(groups);
    then.push(remaining);
    // The decision in a variable, so the original loop is emitted once, where it was (a
    // second copy of it in another branch made GCC compile it 7% slower on delaunay_n17).
    let go = new_var(k, "interleave_go", crate::types::ElemType::Bool);
    let decide = match average {
        Some(long) => vec![Stmt::If {
            cond: b::lt(b::var(sv), b::var(ev)),
            then: vec![Stmt::Assign(go, long)],
            otherwise: vec![],
        }],
        None => vec![Stmt::Assign(go, b::boolean(true))],
    };
    Some(vec![
        Stmt::Assign(sv, s_expr.clone()),
        Stmt::Assign(ev, e_expr.clone()),
        Stmt::Assign(go, b::boolean(false)),
        Stmt::If {
            cond: guard,
            then: decide,
            otherwise: vec![],
        },
        Stmt::If {
            cond: b::var(go),
            then,
            otherwise: vec![original],
        },
    ])
}

/// [`ROWS`], or `TESSERA_INTERLEAVE_ROWS` (1 turns the pass off): for measuring.
pub fn rows() -> usize {
    std::env::var("TESSERA_INTERLEAVE_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROWS)
}

/// [`MIN_STEPS`], or `TESSERA_INTERLEAVE_MIN`: for measuring.
pub fn min_steps() -> i64 {
    std::env::var("TESSERA_INTERLEAVE_MIN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MIN_STEPS)
}

/// [`MIN_AVERAGE`], or `TESSERA_INTERLEAVE_AVERAGE`: for measuring.
pub fn min_average() -> i64 {
    std::env::var("TESSERA_INTERLEAVE_AVERAGE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MIN_AVERAGE)
}
