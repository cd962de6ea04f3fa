//! Slice lanes: the rows of a sliced level (`SparseSliceList`) run eight at a time, as the
//! lanes of one SIMD loop.
//!
//! A sliced level stores the `k`-th entries of rows `8s..8s+7` in 8 adjacent slots, so a row
//! loop walks its entries with a stride of 8: `for n { j = idx[q]; acc = acc + val[q] * x[j];
//! q = q + 8 }`. One row at a time, each entry is a dependent add, and the row's loads are
//! 8 slots apart. The 8 rows of a slice together read their entries' slots contiguously:
//! step `k` of the group is the slots `o + 8k .. o + 8k + 7`, lane `l` being row `8s + l`.
//! This pass runs an aligned group of 8 rows as one loop over the longest row's steps whose
//! body is a loop over the 8 lanes (marked vectorised, which the C backend hands to the
//! compiler as a SIMD loop), each lane's state in a small array of 8 (`lanes_*`, the kernel's
//! own buffers), each update taken only while `k` is below the lane's entry count. Every row
//! sums its entries in exactly its original order with its original operations, so results
//! are bit-identical; the slots past a row's end (the slice's padding) are read and ignored.
//!
//! The shape (anything else stays as it is):
//! - the row loop `for i` (outside any parallel range, whose chunks would share the lane
//!   arrays) has a body cut at its chain as `ir::interleave` cuts it: `If` levels, the head,
//!   one innermost loop, a tail; its variables are row-private and the buffers it writes are
//!   accessed at one index `i + c` only (rows may run in another order);
//! - the innermost loop's body is assignments: one variable `q` stepping by 8 (`q = q + 8`)
//!   read only as load indices `q + c`, temporaries (assigned before read, dead after the
//!   loop) and carried variables (each lane's array); it does not read its counter;
//! - its loads are `buf[q + c]` or gathers `buf[j]` with `j` loaded from a coordinate array
//!   the caller vouches for (`Kernel::bounded`); the chain's loads are `buf[i + c]` or
//!   `buf[i / 8 + c]`.
//!
//! Bounds checks keep their meaning: the chain's loads of every row move earlier than they
//! ran (the group's rows evaluate their chains first), so the groups run only behind one
//! test, before the row loop, that all of them are in bounds over its whole range, and that
//! every gathered buffer is as long as its coordinates' vouched bound; a group runs its
//! lanes only when its rows' entries start in adjacent slots and every slot its steps read
//! lies inside the arrays, and otherwise runs its rows one after another with their original
//! bodies, as it does when a row's chain condition fails (an empty row). After the lanes,
//! each row re-runs its chain's assignments (the same values: no other row writes what they
//! read), takes its carried variables from the lanes, and runs its tail: the IEEE-product
//! rule's re-run of a row whose sum is zero or NaN, and its stores, in row order.

use super::effects::new_var;
use super::interleave::{
    Chain, assigned_first, chain, plain_row_body, reads, row_private, rows_own_elements, subst,
};
use super::walk::{MAX_OFFSET, loop_offset};
use super::{BinOp, BufDecl, BufId, Expr, Kernel, Stmt, VarId, Vouched};
use crate::ir::build as b;
use crate::types::{ElemType, Scalar};
use std::collections::{HashMap, HashSet};

/// Rows a group runs as lanes: the sliced level's slice height.
pub const LANES: i64 = 8;

/// Run the rows of every sliced row loop of `k` in lanes (see the module documentation).
pub fn slice_lanes(k: &mut Kernel) {
    let mut body = std::mem::take(&mut k.body);
    let whole = body.clone();
    let mut grown = vec![];
    walk(k, &mut body, &whole, &mut grown);
    if !grown.is_empty() {
        // The lane arrays start empty (the kernel's own buffers): 8 elements each, once.
        let mut entry: Vec<Stmt> = grown
            .into_iter()
            .map(|buf| Stmt::Grow {
                buf,
                len: b::int(LANES),
            })
            .collect();
        entry.append(&mut body);
        body = entry;
    }
    k.body = body;
}

fn walk(k: &mut Kernel, stmts: &mut Vec<Stmt>, whole: &[Stmt], grown: &mut Vec<BufId>) {
    let mut out = Vec::with_capacity(stmts.len());
    for mut s in stmts.drain(..) {
        if matches!(s, Stmt::For { .. }) {
            let (vars, bufs) = (k.vars.len(), k.bufs.len());
            if let Some(new) = lanes(k, &s, whole, grown) {
                out.extend(new);
                continue;
            }
            k.vars.truncate(vars);
            k.bufs.truncate(bufs);
            grown.retain(|g| (g.0 as usize) < bufs);
        }
        // A parallel range's chunks would share the lane arrays.
        if !matches!(s, Stmt::Chunked(_)) {
            for body in s.bodies_mut() {
                walk(k, body, whole, grown);
            }
        }
        out.push(s);
    }
    *stmts = out;
}

/// What one statement of the innermost loop is.
enum Role {
    /// `q = q + 8`.
    Step,
    /// Assigned before any read in the iteration, dead after the loop: each lane's own.
    Temp,
    /// Carried from one entry to the next: a lane array.
    Carried(BufId),
}

/// A kernel buffer of 8 lanes for variable `v`.
fn lane_buffer(k: &mut Kernel, v: VarId, grown: &mut Vec<BufId>) -> BufId {
    let decl = &k.vars[v.0 as usize];
    let (name, ty) = (format!("lanes_{}", decl.name), decl.ty);
    lane_array(k, &name, ty, grown)
}

/// A kernel buffer of 8 lanes named `name`, of `elem`s, grown at the kernel's entry.
fn lane_array(k: &mut Kernel, name: &str, elem: ElemType, grown: &mut Vec<BufId>) -> BufId {
    k.bufs.push(BufDecl {
        name: name.into(),
        elem,
        growable: true,
        tensor: None,
        scratch: true,
    });
    let buf = BufId(k.bufs.len() as u32 - 1);
    grown.push(buf);
    buf
}

/// Whether `index` is `i / 8 + c` (or `i / 8`), `c >= 0`: every row of an aligned group
/// loads the same element.
fn slice_index(index: &Expr, i: VarId) -> Option<i64> {
    let is_slice = |e: &Expr| {
        matches!(e, Expr::Binary(BinOp::Div, a, d)
            if **a == Expr::Var(i) && **d == Expr::Const(Scalar::I64(LANES)))
    };
    if is_slice(index) {
        return Some(0);
    }
    match index {
        Expr::Binary(BinOp::Add, a, c) if is_slice(a) => match **c {
            Expr::Const(Scalar::I64(c)) if (0..=MAX_OFFSET).contains(&c) => Some(c),
            _ => None,
        },
        _ => None,
    }
}

fn lanes(k: &mut Kernel, l: &Stmt, whole: &[Stmt], grown: &mut Vec<BufId>) -> Option<Vec<Stmt>> {
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
    let ch: Chain = chain(body)?;
    if k.vectorized.contains(&ch.var) || !plain_row_body(body) || !rows_own_elements(body, i) {
        return None;
    }
    let private = row_private(l, whole)?;
    let modified = k.modified_bufs();

    // The innermost loop's statements: the step, temporaries and carried variables.
    let mut assigned_at: HashMap<VarId, Vec<usize>> = HashMap::new();
    for (n, s) in ch.hot.iter().enumerate() {
        if let Stmt::Assign(v, _) = s {
            assigned_at.entry(*v).or_default().push(n);
        }
    }
    if assigned_at.values().any(|at| at.len() > 1) || assigned_at.contains_key(&ch.var) {
        return None;
    }
    let mut step = None;
    let mut temps: HashSet<VarId> = HashSet::new();
    let mut carried: Vec<VarId> = vec![];
    for (n, s) in ch.hot.iter().enumerate() {
        let Stmt::Assign(v, e) = s else { continue };
        let read_before = ch.hot[..=n].iter().any(|t| {
            let mut r = HashSet::new();
            for x in t.own_exprs() {
                reads(x, &mut r);
            }
            r.contains(v)
        });
        let is_step = matches!(e, Expr::Binary(BinOp::Add, a, c)
            if **a == Expr::Var(*v) && **c == Expr::Const(Scalar::I64(LANES)));
        if is_step {
            if step.replace(*v).is_some() {
                return None;
            }
        } else if read_before {
            if !matches!(k.var_ty(*v), ElemType::F64 | ElemType::I64 | ElemType::Bool) {
                return None;
            }
            carried.push(*v);
        } else {
            temps.insert(*v);
        }
    }
    let q = step?;
    // The counter, `q` and the temporaries leave values the tail must not read (the lanes
    // set the counter and `q`, but not the temporaries' last values).
    let dead: HashSet<VarId> = temps.iter().copied().collect();
    if !assigned_first(&ch.post, &dead, &mut HashSet::new()) {
        return None;
    }
    // Reads in the innermost loop: its counter never; `q` only as a load index `q + c`.
    let mut contiguous: Vec<(BufId, i64)> = vec![];
    let mut gathered: Vec<(BufId, BufId)> = vec![];
    // Coordinate arrays the temporaries hold elements of.
    let mut coord_of: HashMap<VarId, BufId> = HashMap::new();
    let mut fine = true;
    for s in &ch.hot {
        let Stmt::Assign(v, e) = s else { continue };
        if Some(*v) == Some(q) {
            continue;
        }
        check_hot_expr(
            e,
            (q, ch.var),
            &modified,
            &coord_of,
            &mut contiguous,
            &mut gathered,
            &mut fine,
        );
        if let Expr::Load { buf, index } = e
            && temps.contains(v)
            && matches!(loop_offset(index, q), Some((None, 0..=MAX_OFFSET)))
        {
            coord_of.insert(*v, *buf);
        }
    }
    if !fine || contiguous.is_empty() {
        return None;
    }
    // Every gather's coordinates vouched for, and the gathered buffer as long as their bound.
    let bounded = k.bounded.clone();
    let mut guard: Vec<Expr> = vec![];
    for (crd, buf) in &gathered {
        let mut facts = bounded.iter().filter(|f| f.buf == *crd);
        let f = facts.next()?;
        if facts.next().is_some() || f.what != Vouched::Coordinates || modified[crd.0 as usize] {
            return None;
        }
        guard.push(b::lt(b::int(0), f.below.clone()));
        guard.push(b::le(f.below.clone(), Expr::Len(*buf)));
    }
    // The chain's loads, in bounds over the whole range `S..E`.
    let (sv, ev) = (
        new_var(k, "lanes_start", ElemType::I64),
        new_var(k, "lanes_stop", ElemType::I64),
    );
    guard.push(b::le(b::int(0), b::var(sv)));
    let mut chain_exprs: Vec<&Expr> = vec![];
    for lv in &ch.levels {
        chain_exprs.push(&lv.cond);
        for s in &lv.pre {
            chain_exprs.extend(s.own_exprs());
        }
    }
    for s in &ch.head {
        chain_exprs.extend(s.own_exprs());
    }
    chain_exprs.push(&ch.start);
    chain_exprs.push(&ch.stop);
    let mut fine = true;
    for e in chain_exprs {
        e.visit(&mut |x| match x {
            Expr::Load { buf, index } => {
                if let Some((None, c)) = loop_offset(index, i) {
                    guard.push(b::le(b::int(-c), b::var(sv)));
                    guard.push(b::le(b::var(ev), b::sub(Expr::Len(*buf), b::int(c))));
                } else if let Some(c) = slice_index(index, i) {
                    // `(E - 1) / 8 + c < len`, `S >= 0` tested above.
                    guard.push(b::lt(
                        b::add(
                            b::bin(BinOp::Div, b::sub(b::var(ev), b::int(1)), b::int(LANES)),
                            b::int(c),
                        ),
                        Expr::Len(*buf),
                    ));
                } else {
                    fine = false;
                }
            }
            Expr::SearchGe { .. } | Expr::HashFind { .. } => fine = false,
            _ => {}
        });
    }
    if !fine {
        return None;
    }
    // Variables the loop reads that the chain sets per row: lane arrays too.
    let mut hot_reads = HashSet::new();
    for s in &ch.hot {
        for e in s.own_exprs() {
            reads(e, &mut hot_reads);
        }
    }
    let mut inputs: Vec<VarId> = hot_reads
        .iter()
        .copied()
        .filter(|v| private.contains(v) && !assigned_at.contains_key(v))
        .collect();
    inputs.sort();
    if inputs
        .iter()
        .any(|v| !matches!(k.var_ty(*v), ElemType::F64 | ElemType::I64 | ElemType::Bool))
    {
        return None;
    }

    // Lane arrays: counts, carried variables, inputs.
    let counts = lane_array(k, "lanes_count", ElemType::I64, grown);
    let mut role: HashMap<VarId, Role> = HashMap::new();
    role.insert(q, Role::Step);
    for t in &temps {
        role.insert(*t, Role::Temp);
    }
    let mut lane_of: HashMap<VarId, BufId> = HashMap::new();
    for v in carried.iter().chain(&inputs) {
        let buf = lane_buffer(k, *v, grown);
        lane_of.insert(*v, buf);
        if carried.contains(v) {
            role.insert(*v, Role::Carried(buf));
        }
    }
    // The scalar loops over a group's rows, and the vectorised one over its lanes (the mark
    // is per variable).
    let lane = new_var(k, "lanes_row", ElemType::I64);
    let vlane = new_var(k, "lanes_lane", ElemType::I64);
    let base = new_var(k, "lanes_base", ElemType::I64);
    let slice = new_var(k, "lanes_slice", ElemType::I64);
    let all = new_var(k, "lanes_all", ElemType::Bool);
    let most = new_var(k, "lanes_steps", ElemType::I64);
    let first = new_var(k, "lanes_first", ElemType::I64);
    let kv = new_var(k, "lanes_k", ElemType::I64);
    let at = new_var(k, "lanes_at", ElemType::I64);
    let go = new_var(k, "lanes_go", ElemType::Bool);
    let count = new_var(k, "lanes_n", ElemType::I64);
    let lane_load = |buf: BufId| b::load(buf, b::var(lane));
    let vlane_load = |buf: BufId| b::load(buf, b::var(vlane));
    let set_row = Stmt::Assign(i, b::add(b::var(base), b::var(lane)));

    // 1. Each row's chain, its count and start, and its carried and input values, without
    //    branches: every chain load is in bounds for every row of the range (the guard), and
    //    the chain only assigns, so a row whose condition fails computes values nobody uses
    //    and clears `all` (the group then runs row by row). The rows' entries start in
    //    adjacent slots when `q - row` is the same for all: its least and greatest agree.
    let (low, high, worst) = (
        new_var(k, "lanes_low", ElemType::I64),
        new_var(k, "lanes_high", ElemType::I64),
        new_var(k, "lanes_worst", ElemType::I64),
    );
    let record_lane = new_var(k, "lanes_record", ElemType::I64);
    // Each level's condition in a variable of its own (assigned once, as a vectorised
    // loop's temporaries are), the rows' verdict folded as the least of 0 or 1.
    let mut record = vec![];
    let mut ok = b::boolean(true);
    for lv in &ch.levels {
        record.extend(lv.pre.iter().cloned());
        let v = new_var(k, "lanes_ok", ElemType::Bool);
        record.push(Stmt::Assign(v, b::and(ok, lv.cond.clone())));
        ok = b::var(v);
    }
    record.extend(ch.head.iter().cloned());
    record.push(Stmt::Assign(
        count,
        b::max(b::sub(ch.stop.clone(), ch.start.clone()), b::int(0)),
    ));
    record.push(b::store(counts, b::var(lane), b::var(count)));
    record.push(Stmt::Assign(most, b::max(b::var(most), b::var(count))));
    let offset = b::sub(b::var(q), b::var(lane));
    record.push(Stmt::Assign(low, b::min(b::var(low), offset.clone())));
    record.push(Stmt::Assign(high, b::max(b::var(high), offset)));
    for v in carried.iter().chain(&inputs) {
        record.push(b::store(lane_of[v], b::var(lane), b::var(*v)));
    }
    record.push(Stmt::Assign(
        worst,
        b::min(b::var(worst), b::cast(ElemType::I64, ok)),
    ));
    let record = in_group(
        drop_dead(record, &private, &mut HashSet::new()),
        (i, base, lane, slice),
    );
    // Its own variable, vectorised: rows are independent but for the folds.
    let record =
        super::interleave::subst_stmts(&record, &|w| (w == lane).then(|| b::var(record_lane)));
    k.vectorized.push(record_lane);

    // 2. The lanes: step `k` of every row at once, lane `l` at slot `first + 8k + l`.
    let slot = b::add(b::var(at), b::var(vlane));
    // Temporaries stay assignments of their variables, each lane's own in the vectorised
    // loop (a gather's coordinate in a variable is what the backends' bounds versioning
    // recognises as vouched for).
    let mut lane_body = vec![];
    for s in &ch.hot {
        let Stmt::Assign(v, e) = s else { continue };
        let value = subst(e, &|w| {
            if w == q {
                Some(slot.clone())
            } else {
                lane_of.get(&w).map(|buf| vlane_load(*buf))
            }
        });
        match role.get(v) {
            Some(Role::Step) => {}
            Some(Role::Temp) => lane_body.push(Stmt::Assign(*v, value)),
            Some(Role::Carried(buf)) => lane_body.push(b::store(
                *buf,
                b::var(vlane),
                b::select(
                    b::lt(b::var(kv), vlane_load(counts)),
                    value,
                    vlane_load(*buf),
                ),
            )),
            None => return None,
        }
    }
    k.vectorized.push(vlane);
    let steps = Stmt::For {
        var: kv,
        start: b::int(0),
        stop: b::var(most),
        body: vec![
            Stmt::Assign(at, b::add(b::var(first), b::mul(b::int(LANES), b::var(kv)))),
            Stmt::For {
                var: vlane,
                start: b::int(0),
                stop: b::int(LANES),
                body: lane_body,
            },
        ],
    };

    // 3. Each row in order: its chain's assignments again, its carried values and `q` from
    //    the lanes, the counter as the loop leaves it, its tail.
    let mut finish = vec![set_row.clone()];
    for lv in &ch.levels {
        finish.extend(lv.pre.iter().cloned());
    }
    finish.extend(ch.head.iter().cloned());
    finish.push(Stmt::Assign(
        ch.var,
        b::select(
            b::lt(ch.start.clone(), ch.stop.clone()),
            ch.stop.clone(),
            ch.start.clone(),
        ),
    ));
    for v in &carried {
        finish.push(Stmt::Assign(*v, lane_load(lane_of[v])));
    }
    finish.push(Stmt::Assign(
        q,
        b::add(b::var(q), b::mul(b::int(LANES), lane_load(counts))),
    ));
    finish.extend(ch.post.iter().cloned());
    // Most of that serves only the tail's re-run (a row whose sum is zero or NaN): what
    // nothing reads goes, and what only the re-run reads moves into it.
    let finish = in_group(
        sink(drop_dead(finish, &private, &mut HashSet::new()), &private),
        (i, base, lane, slice),
    );

    // The slots the steps read, inside every array read at `q + c`.
    // `first + c + 8 * most <= len`, written without overflow: `first + c <= len` and `most
    // <= (len - c - first) / 8`.
    let mut in_slots = b::and(b::var(all), b::le(b::int(0), b::var(first)));
    let mut seen = HashSet::new();
    for (buf, c) in &contiguous {
        if seen.insert((*buf, *c)) {
            let room = b::sub(b::sub(Expr::Len(*buf), b::int(*c)), b::var(first));
            in_slots = b::and(
                in_slots,
                b::and(
                    b::le(b::int(0), room.clone()),
                    b::le(b::var(most), b::bin(BinOp::Div, room, b::int(LANES))),
                ),
            );
        }
    }
    let one_by_one = {
        let mut rows = vec![set_row];
        rows.extend(body.iter().cloned());
        Stmt::For {
            var: lane,
            start: b::int(0),
            stop: b::int(LANES),
            body: rows,
        }
    };
    let group = vec![
        Stmt::Comment(format!(
            "{LANES} rows of a slice as lanes: each row's chain, then one loop over the longest row's steps, then each row's tail"
        )),
        Stmt::Assign(base, b::var(i)),
        Stmt::Assign(slice, b::bin(BinOp::Div, b::var(i), b::int(LANES))),
        Stmt::Assign(worst, b::int(1)),
        Stmt::Assign(most, b::int(0)),
        Stmt::Assign(low, b::int(i64::MAX)),
        Stmt::Assign(high, b::int(i64::MIN)),
        Stmt::For {
            var: record_lane,
            start: b::int(0),
            stop: b::int(LANES),
            body: record,
        },
        Stmt::Assign(
            all,
            b::and(
                b::eq(b::var(worst), b::int(1)),
                b::eq(b::var(low), b::var(high)),
            ),
        ),
        Stmt::Assign(first, b::var(low)),
        Stmt::If {
            cond: in_slots,
            then: std::iter::once(steps)
                .chain(tails(k, finish, lane))
                .collect(),
            otherwise: vec![one_by_one],
        },
        Stmt::Assign(i, b::add(b::var(base), b::int(LANES))),
    ];
    let mut single = body.clone();
    single.push(Stmt::Assign(i, b::add(b::var(i), b::int(1))));
    let aligned = b::and(
        b::and(
            b::var(go),
            b::eq(b::bin(BinOp::Rem, b::var(i), b::int(LANES)), b::int(0)),
        ),
        b::le(b::var(i), b::sub(b::var(ev), b::int(LANES))),
    );
    let mut distinct: Vec<Expr> = vec![];
    for t in guard {
        if !distinct.contains(&t) {
            distinct.push(t);
        }
    }
    let guard = distinct.into_iter().reduce(b::and)?;
    Some(vec![
        Stmt::Assign(sv, s_expr.clone()),
        Stmt::Assign(ev, e_expr.clone()),
        Stmt::Assign(go, guard),
        Stmt::Assign(i, b::var(sv)),
        Stmt::While {
            cond: b::lt(b::var(i), b::var(ev)),
            body: vec![Stmt::If {
                cond: aligned,
                then: group,
                otherwise: single,
            }],
        },
    ])
}

/// The loop `for lane in 0..8 { finish }` over a group's rows' tails, and when the tail is
/// `[assignments; if c { rare }; stores and assignments]` (the IEEE-product rule's re-run of
/// a row whose sum is zero or NaN), before it a vectorised loop that evaluates `c` for all 8
/// rows: when no row takes its branch, the tails without it run as one vectorised loop (8
/// sums stored at once). The assignments before the `If` write only row-private variables,
/// and a row reads only its own elements of the buffers the tails write (`lanes` runs only
/// on bodies where `rows_own_elements` holds), so evaluating them for all 8 rows first, and
/// again in the loop that follows, changes nothing.
fn tails(k: &mut Kernel, finish: Vec<Stmt>, lane: VarId) -> Vec<Stmt> {
    let each = |var, body| Stmt::For {
        var,
        start: b::int(0),
        stop: b::int(LANES),
        body,
    };
    let real: Vec<usize> = (0..finish.len())
        .filter(|&n| !matches!(finish[n], Stmt::Comment(_)))
        .collect();
    let ifs: Vec<usize> = real
        .iter()
        .copied()
        .filter(|&n| matches!(finish[n], Stmt::If { .. }))
        .collect();
    let [at] = ifs[..] else {
        return vec![each(lane, finish)];
    };
    let Stmt::If {
        cond, otherwise, ..
    } = &finish[at]
    else {
        return vec![each(lane, finish)];
    };
    let before_plain = real
        .iter()
        .all(|&n| n >= at || matches!(finish[n], Stmt::Assign(..)));
    let after_plain = real
        .iter()
        .all(|&n| n <= at || matches!(finish[n], Stmt::Assign(..) | Stmt::Store { .. }));
    if !otherwise.is_empty() || !before_plain || !after_plain {
        return vec![each(lane, finish)];
    }
    let cond = cond.clone();
    let (check, quick, rare) = (
        new_var(k, "lanes_check", ElemType::I64),
        new_var(k, "lanes_quick", ElemType::I64),
        new_var(k, "lanes_rare", ElemType::Bool),
    );
    let as_var = |stmts: &[Stmt], v: VarId| {
        super::interleave::subst_stmts(stmts, &|w| (w == lane).then(|| b::var(v)))
    };
    let mut test = as_var(&finish[..at], check);
    test.push(Stmt::Assign(
        rare,
        b::or(
            b::var(rare),
            super::interleave::subst(&cond, &|w| (w == lane).then(|| b::var(check))),
        ),
    ));
    let mut plain: Vec<Stmt> = finish[..at].to_vec();
    plain.extend(finish[at + 1..].iter().cloned());
    let plain = as_var(&plain, quick);
    k.vectorized.push(check);
    k.vectorized.push(quick);
    vec![
        Stmt::Assign(rare, b::boolean(false)),
        each(check, test),
        Stmt::If {
            cond: b::var(rare),
            then: vec![each(lane, finish)],
            otherwise: vec![each(quick, plain)],
        },
    ]
}

/// Check an expression of the innermost loop: it never reads the counter, reads `q` only as
/// a load index `q + c` (noted in `contiguous`), and gathers only through temporaries
/// holding coordinates (noted in `gathered` as `(coordinates, gathered buffer)`).
fn check_hot_expr(
    e: &Expr,
    (q, counter): (VarId, VarId),
    modified: &[bool],
    coord_of: &HashMap<VarId, BufId>,
    contiguous: &mut Vec<(BufId, i64)>,
    gathered: &mut Vec<(BufId, BufId)>,
    fine: &mut bool,
) {
    match e {
        Expr::Var(v) if *v == q || *v == counter => *fine = false,
        Expr::Load { buf, index } => {
            if let Some((None, c)) = loop_offset(index, q)
                && (0..=MAX_OFFSET).contains(&c)
            {
                contiguous.push((*buf, c));
                return;
            }
            match &**index {
                Expr::Var(j) => match coord_of.get(j) {
                    Some(crd) if !modified[crd.0 as usize] => gathered.push((*crd, *buf)),
                    _ => *fine = false,
                },
                _ => *fine = false,
            }
        }
        Expr::SearchGe { .. } | Expr::HashFind { .. } | Expr::Len(_) => *fine = false,
        _ => {
            for c in e.children() {
                check_hot_expr(
                    c,
                    (q, counter),
                    modified,
                    coord_of,
                    contiguous,
                    gathered,
                    fine,
                );
            }
        }
    }
}

/// `stmts` without the assignments of row-private variables (`private`, dead at the end of
/// `stmts`: each row assigns them before reading them) whose values nothing reads; `live`
/// holds the variables live after `stmts` on entry, before them on return. Loops are kept
/// whole (what they read is live before them).
fn drop_dead(stmts: Vec<Stmt>, private: &HashSet<VarId>, live: &mut HashSet<VarId>) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(stmts.len());
    for s in stmts.into_iter().rev() {
        match s {
            Stmt::Assign(v, e) => {
                if private.contains(&v) && !live.contains(&v) {
                    continue;
                }
                live.remove(&v);
                reads(&e, live);
                out.push(Stmt::Assign(v, e));
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let mut a = live.clone();
                let then = drop_dead(then, private, &mut a);
                let otherwise = drop_dead(otherwise, private, live);
                live.extend(a);
                reads(&cond, live);
                out.push(Stmt::If {
                    cond,
                    then,
                    otherwise,
                });
            }
            s => {
                for b in s.bodies() {
                    for t in b {
                        super::walk::walk_stmts(std::slice::from_ref(t), &mut |u| {
                            for e in u.own_exprs() {
                                reads(e, live);
                            }
                        });
                    }
                }
                for e in s.own_exprs() {
                    reads(e, live);
                }
                out.push(s);
            }
        }
    }
    out.reverse();
    out
}

/// Assignments of row-private variables read only inside one later `If`'s branches moved
/// into the branches that read them (so that a rare branch's inputs are computed only when
/// it runs), when nothing in between assigns what they read or writes memory.
fn sink(mut stmts: Vec<Stmt>, private: &HashSet<VarId>) -> Vec<Stmt> {
    let mut p = stmts.len();
    while p > 0 {
        p -= 1;
        let Stmt::Assign(v, e) = &stmts[p] else {
            continue;
        };
        let (v, e) = (*v, e.clone());
        if !private.contains(&v) {
            continue;
        }
        let mut needs = HashSet::new();
        reads(&e, &mut needs);
        needs.insert(v);
        let mention = |t: &Stmt| {
            let mut r = HashSet::new();
            super::walk::walk_stmts(std::slice::from_ref(t), &mut |u| {
                for x in u.own_exprs() {
                    reads(x, &mut r);
                }
                if let Stmt::Assign(w, _) | Stmt::For { var: w, .. } = u {
                    r.insert(*w);
                }
            });
            r
        };
        // The first later statement that mentions `v`: it must be an `If` reading `v` only
        // in its branches, and nothing before it may change what `e` reads or memory.
        let Some(r) = (p + 1..stmts.len()).find(|&r| mention(&stmts[r]).contains(&v)) else {
            continue;
        };
        let blocked = stmts[p + 1..r].iter().any(|t| {
            let mut changed = false;
            super::walk::walk_stmts(std::slice::from_ref(t), &mut |u| match u {
                Stmt::Assign(w, _) | Stmt::For { var: w, .. } => changed |= needs.contains(w),
                Stmt::If { .. } | Stmt::Comment(_) => {}
                _ => changed = true,
            });
            changed
        });
        let later = stmts[r + 1..].iter().any(|t| mention(t).contains(&v));
        let Stmt::If {
            cond,
            then,
            otherwise,
        } = &stmts[r]
        else {
            continue;
        };
        let mut in_cond = HashSet::new();
        reads(cond, &mut in_cond);
        if blocked || later || in_cond.contains(&v) {
            continue;
        }
        let uses = |b: &[Stmt]| b.iter().any(|t| mention(t).contains(&v));
        let (in_then, in_else) = (uses(then), uses(otherwise));
        let moved = stmts.remove(p);
        if let Stmt::If {
            then, otherwise, ..
        } = &mut stmts[r - 1]
        {
            if in_then {
                then.insert(0, moved.clone());
            }
            if in_else {
                otherwise.insert(0, moved);
            }
        }
    }
    stmts
}

/// Statements of a group's row `lane` (`i` is `base + lane`, `base` a multiple of 8 and at
/// least 0, `slice` = `base / 8`) with `i / 8` read as `slice`, `i % 8` as `lane` and `i` as
/// `base + lane`: the same values, in terms the backends can see are the same for a whole
/// group (`slice`) or affine in the row (`base + lane`, a range they test once).
fn in_group(stmts: Vec<Stmt>, (i, base, lane, slice): (VarId, VarId, VarId, VarId)) -> Vec<Stmt> {
    fn fold(e: &Expr, i: VarId, base: VarId, lane: VarId, slice: VarId) -> Expr {
        let of_i = |op: BinOp| {
            matches!(e, Expr::Binary(o, a, d)
                if *o == op && **a == Expr::Var(i) && **d == Expr::Const(Scalar::I64(LANES)))
        };
        if of_i(BinOp::Div) {
            return b::var(slice);
        }
        if of_i(BinOp::Rem) {
            return b::var(lane);
        }
        if *e == Expr::Var(i) {
            return b::add(b::var(base), b::var(lane));
        }
        let mut e = e.clone();
        for c in e.children_mut() {
            *c = fold(c, i, base, lane, slice);
        }
        e
    }
    stmts
        .into_iter()
        .map(|mut s| {
            // The row's own `i = base + lane` stays: later statements may not read it, but
            // the variable keeps its meaning.
            if !matches!(&s, Stmt::Assign(v, _) if *v == i) {
                for e in s.own_exprs_mut() {
                    *e = fold(e, i, base, lane, slice);
                }
            }
            for body in s.bodies_mut() {
                *body = in_group(std::mem::take(body), (i, base, lane, slice));
            }
            s
        })
        .collect()
}
