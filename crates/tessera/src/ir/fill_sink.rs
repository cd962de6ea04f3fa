//! Fill sinking: an output's fill moved into the row loop that then writes each element, as in
//! SpMV's `grow(y, n); fill(y, 0, n, 0.0); for i = 0..n { acc = y[i]; ...; y[i] = acc }`.
//!
//! The fill writes every element and each row reads its element back before summing into
//! it: on short rows that is most of the memory traffic besides the matrix (reverse_perm_1e6,
//! one entry a row: 16 of 52 MB, BENCHMARKS.md "## SpMV: y = A x", short rows). Here each row
//! starts from the fill value instead: the first load of `y[i]` on each path through the row
//! body becomes the value, and a path that would leave `y[i]` as the fill left it (an empty
//! row) stores the value. Every element ends as before.
//!
//! The pass applies only where that is provably so (anything else stays as it is):
//! - `Grow { y, n }`, then `Fill { y, 0, n, constant }`, then, in the same statement list,
//!   statements that do not mention `y`, then `for i = s..e` with `s` and `e` the fill's
//!   bounds (equal linear forms once the variables assigned once in between are replaced by
//!   their values): the loop visits exactly the filled elements, and the growth before the
//!   fill means the fill could not fail, so no error moves;
//! - the loop body accesses `y` only by loads and stores at index `i` (each iteration its own
//!   element), does not grow, fill, sort or search it, does not assign `i`, and has no
//!   `break` of its own (every iteration runs to its end or the kernel stops with an error,
//!   after which no output is read).
//!
//! `TESSERA_NO_FILL_SINK` (any value) turns the pass off, for measuring (`run::late_passes`).

use super::effects::{Effects, effects_stmts};
use super::{BinOp, BufId, Expr, Kernel, Stmt, VarId};
use crate::types::Scalar;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Sink every fill of the shape above into its row loop.
pub fn sink_fills(k: &mut Kernel) {
    sink_list(&mut k.body);
}

fn sink_list(stmts: &mut Vec<Stmt>) {
    for s in stmts.iter_mut() {
        for b in s.bodies_mut() {
            sink_list(b);
        }
    }
    let mut f = 1;
    while f < stmts.len() {
        if let Some(l) = candidate(stmts, f) {
            let Stmt::Fill { buf, value, .. } = stmts[f].clone() else {
                unreachable!("candidate() checked stmts[f] is a fill")
            };
            if let Stmt::For { var, body, .. } = &mut stmts[l] {
                let (mut new, touched) = sink(std::mem::take(body), buf, *var, &value);
                if !touched {
                    new.push(store(buf, *var, &value));
                }
                *body = new;
            }
            stmts.remove(f);
            continue;
        }
        f += 1;
    }
}

/// The position of the row loop the fill at `f` can sink into.
fn candidate(stmts: &[Stmt], f: usize) -> Option<usize> {
    let Stmt::Fill {
        buf: y,
        start,
        stop,
        value: Expr::Const(_),
    } = &stmts[f]
    else {
        return None;
    };
    let y = *y;
    if !matches!(start, Expr::Const(Scalar::I64(0))) {
        return None;
    }
    // The growth right before makes the fill infallible.
    if !matches!(&stmts[f - 1], Stmt::Grow { buf, len } if *buf == y && len == stop) {
        return None;
    }
    // Statements in between: no mention of `y`; what they assign, once each, may stand for
    // its value in the loop's bounds, if the value reads nothing they assign.
    let mut between_assigned: HashMap<VarId, usize> = HashMap::new();
    let mut l = f + 1;
    loop {
        let s = stmts.get(l)?;
        if matches!(s, Stmt::For { .. }) {
            break;
        }
        if mentions(std::slice::from_ref(s), y) {
            return None;
        }
        let mut fx = Effects::default();
        effects_stmts(std::slice::from_ref(s), &mut fx);
        for v in fx.assigned {
            *between_assigned.entry(v).or_default() += 1;
        }
        l += 1;
    }
    let mut defs: HashMap<VarId, Expr> = HashMap::new();
    for s in &stmts[f + 1..l] {
        if let Stmt::Assign(v, e) = s
            && between_assigned.get(v) == Some(&1)
        {
            let mut r = HashSet::new();
            reads(e, &mut r);
            if r.iter().all(|u| !between_assigned.contains_key(u)) {
                defs.insert(*v, e.clone());
            }
        }
    }
    // The fill's bounds were evaluated before the statements in between.
    let mut r = HashSet::new();
    reads(stop, &mut r);
    if r.iter().any(|u| between_assigned.contains_key(u)) {
        return None;
    }
    let Stmt::For {
        var: i,
        start: s,
        stop: e,
        body,
    } = &stmts[l]
    else {
        return None;
    };
    if linear(s, &defs, 0)? != linear(start, &HashMap::new(), 0)?
        || linear(e, &defs, 0)? != linear(stop, &HashMap::new(), 0)?
    {
        return None;
    }
    body_fits(body, y, *i).then_some(l)
}

/// Whether the row body touches `y` only at `[i]` by loads and stores, keeps `i`, and has no
/// `break` of its own.
fn body_fits(body: &[Stmt], y: BufId, i: VarId) -> bool {
    let mut fx = Effects::default();
    effects_stmts(body, &mut fx);
    if fx.assigned.contains(&i) || own_break(body) {
        return false;
    }
    if fx
        .accesses
        .iter()
        .any(|(b, at)| *b == y && !matches!(at, Expr::Var(v) if *v == i))
    {
        return false;
    }
    // Other uses of `y`: only its length (the bounds tests), which nothing here changes.
    let mut fine = true;
    super::walk::walk_stmts(body, &mut |s| match s {
        Stmt::Atomic { buf, .. }
        | Stmt::Grow { buf, .. }
        | Stmt::Fill { buf, .. }
        | Stmt::Sort { buf, .. }
            if *buf == y =>
        {
            fine = false
        }
        Stmt::Sort { flags: Some(b), .. } if *b == y => fine = false,
        Stmt::SortPerm { keys, perm, .. } if *keys == y || *perm == y => fine = false,
        Stmt::Chunked(_) => fine = false,
        _ => {}
    });
    super::walk::walk_exprs(body, &mut |e| {
        if matches!(e, Expr::SearchGe { buf, .. } | Expr::HashFind { table: buf, .. } if *buf == y)
        {
            fine = false;
        }
    });
    fine
}

/// Whether a `break` leaves this loop body (one inside a nested loop leaves that loop).
fn own_break(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match s {
        Stmt::Break => true,
        Stmt::If {
            then, otherwise, ..
        } => own_break(then) || own_break(otherwise),
        _ => false,
    })
}

/// Whether the statements use `y` at all.
fn mentions(stmts: &[Stmt], y: BufId) -> bool {
    let mut fx = Effects::default();
    effects_stmts(stmts, &mut fx);
    fx.changed.contains(&y) || fx.other_use.contains(&y) || fx.accesses.iter().any(|(b, _)| *b == y)
}

fn reads(e: &Expr, out: &mut HashSet<VarId>) {
    e.visit(&mut |x| {
        if let Expr::Var(v) = x {
            out.insert(*v);
        }
    });
}

/// `e` as a sum of variables with integer factors plus a constant (wrapping I64 arithmetic,
/// so equal forms are equal values), variables in `defs` replaced by their values.
fn linear(
    e: &Expr,
    defs: &HashMap<VarId, Expr>,
    depth: usize,
) -> Option<(BTreeMap<VarId, i64>, i64)> {
    if depth > 16 {
        return None;
    }
    let scale = |(mut m, c): (BTreeMap<VarId, i64>, i64), k: i64| {
        for f in m.values_mut() {
            *f = f.wrapping_mul(k);
        }
        m.retain(|_, f| *f != 0);
        (m, c.wrapping_mul(k))
    };
    let sum = |(mut m, c): (BTreeMap<VarId, i64>, i64), (n, d): (BTreeMap<VarId, i64>, i64)| {
        for (v, f) in n {
            let t = m.entry(v).or_insert(0);
            *t = t.wrapping_add(f);
        }
        m.retain(|_, f| *f != 0);
        (m, c.wrapping_add(d))
    };
    match e {
        Expr::Const(Scalar::I64(c)) => Some((BTreeMap::new(), *c)),
        Expr::Var(v) => match defs.get(v) {
            Some(d) => linear(d, defs, depth + 1),
            None => Some((BTreeMap::from([(*v, 1)]), 0)),
        },
        Expr::Binary(BinOp::Add, a, b) => Some(sum(
            linear(a, defs, depth + 1)?,
            linear(b, defs, depth + 1)?,
        )),
        Expr::Binary(BinOp::Sub, a, b) => Some(sum(
            linear(a, defs, depth + 1)?,
            scale(linear(b, defs, depth + 1)?, -1),
        )),
        Expr::Binary(BinOp::Mul, a, b) => {
            let (x, y) = (linear(a, defs, depth + 1)?, linear(b, defs, depth + 1)?);
            match (x.0.is_empty(), y.0.is_empty()) {
                (_, true) => Some(scale(x, y.1)),
                (true, false) => Some(scale(y, x.1)),
                _ => None,
            }
        }
        _ => None,
    }
}

fn store(y: BufId, i: VarId, value: &Expr) -> Stmt {
    Stmt::Store {
        buf: y,
        index: Expr::Var(i),
        value: value.clone(),
    }
}

/// `e` with its loads of `y[i]` (the element still holding the fill value) replaced by it.
fn forward(e: &Expr, y: BufId, value: &Expr) -> Expr {
    if let Expr::Load { buf, .. } = e
        && *buf == y
    {
        return value.clone();
    }
    let mut e = e.clone();
    for c in e.children_mut() {
        *c = forward(c, y, value);
    }
    e
}

/// The row body with `y[i]` starting as `value`: loads before the first store on a path read
/// `value`; a loop touching `y` first gets the store before it. Returns the statements and
/// whether `y[i]` is stored on every path through them.
fn sink(stmts: Vec<Stmt>, y: BufId, i: VarId, value: &Expr) -> (Vec<Stmt>, bool) {
    let mut out = Vec::with_capacity(stmts.len() + 1);
    let mut touched = false;
    for mut s in stmts {
        if touched {
            out.push(s);
            continue;
        }
        match &mut s {
            Stmt::Assign(_, e) => *e = forward(e, y, value),
            Stmt::Store {
                buf, value: stored, ..
            } => {
                *stored = forward(stored, y, value);
                touched = *buf == y;
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                *cond = forward(cond, y, value);
                let (t, a) = sink(std::mem::take(then), y, i, value);
                let (o, b) = sink(std::mem::take(otherwise), y, i, value);
                *then = t;
                *otherwise = o;
                // Both or neither store: else the one that does not stores the value too.
                if a != b {
                    let side = if a { &mut *otherwise } else { &mut *then };
                    side.push(store(y, i, value));
                }
                touched = a || b;
            }
            other => {
                if mentions(std::slice::from_ref(other), y) {
                    out.push(store(y, i, value));
                    touched = true;
                } else {
                    for e in other.own_exprs_mut() {
                        *e = forward(e, y, value);
                    }
                }
            }
        }
        out.push(s);
    }
    (out, touched)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build as b;
    use crate::types::ElemType;

    /// Buffers y, x (f64); variables i (the row), n, m (its end), acc (f64).
    fn kernel(body: Vec<Stmt>) -> Kernel {
        let (f, i) = (ElemType::F64, ElemType::I64);
        b::test_kernel(
            &[("y", f), ("x", f)],
            true,
            &[("i", i), ("n", i), ("m", i), ("acc", f)],
            body,
        )
    }

    const Y: BufId = BufId(0);
    const X: BufId = BufId(1);
    const I: VarId = VarId(0);
    const N: VarId = VarId(1);
    const M: VarId = VarId(2);
    const ACC: VarId = VarId(3);

    fn zero() -> Expr {
        Expr::Const(Scalar::F64(0.0))
    }

    /// `grow(y, n); fill(y, 0, n, 0.0); m = n - 1; for i = start..stop { row }`, where a
    /// row with `x[i] > 0` sums `x[i]` into y[i] and the others leave it alone.
    fn shape(start: Expr, stop: Expr, extra: Vec<Stmt>) -> Vec<Stmt> {
        let mut row = vec![Stmt::If {
            cond: b::lt(zero(), b::load(X, b::var(I))),
            then: vec![
                Stmt::Assign(ACC, b::load(Y, b::var(I))),
                Stmt::Assign(ACC, b::add(b::var(ACC), b::load(X, b::var(I)))),
                Stmt::Store {
                    buf: Y,
                    index: b::var(I),
                    value: b::var(ACC),
                },
            ],
            otherwise: vec![],
        }];
        row.extend(extra);
        vec![
            Stmt::Grow {
                buf: Y,
                len: b::var(N),
            },
            Stmt::Fill {
                buf: Y,
                start: b::int(0),
                stop: b::var(N),
                value: zero(),
            },
            Stmt::Assign(M, b::sub(b::var(N), b::int(1))),
            Stmt::For {
                var: I,
                start,
                stop,
                body: row,
            },
        ]
    }

    fn has_fill(stmts: &[Stmt]) -> bool {
        let mut found = false;
        super::super::walk::walk_stmts(stmts, &mut |s| found |= matches!(s, Stmt::Fill { .. }));
        found
    }

    #[test]
    fn the_fill_moves_into_the_rows_and_empty_rows_store_it() {
        let mut k = kernel(shape(b::int(0), b::add(b::var(M), b::int(1)), vec![]));
        sink_fills(&mut k);
        assert!(!has_fill(&k.body), "{:?}", k.body);
        let Some(Stmt::For { body, .. }) = k.body.last() else {
            panic!("{:?}", k.body)
        };
        let Stmt::If {
            then, otherwise, ..
        } = &body[0]
        else {
            panic!("{body:?}")
        };
        // The row starts from the fill value, not from y[i].
        assert_eq!(then[0], Stmt::Assign(ACC, zero()));
        // The row that stores nothing stores the fill value.
        assert_eq!(otherwise, &vec![store(Y, I, &zero())]);
    }

    #[test]
    fn other_ranges_breaks_and_shifted_rows_keep_the_fill() {
        let shifted = Stmt::Store {
            buf: Y,
            index: b::add(b::var(I), b::int(1)),
            value: zero(),
        };
        let cases = [
            // Not every filled element is visited.
            shape(b::int(1), b::var(N), vec![]),
            shape(b::int(0), b::var(M), vec![]),
            // A row stops the loop: later rows would miss the fill.
            shape(b::int(0), b::var(N), vec![Stmt::Break]),
            // A row writes another row's element.
            shape(b::int(0), b::var(N), vec![shifted]),
        ];
        for body in cases {
            let mut k = kernel(body.clone());
            sink_fills(&mut k);
            assert_eq!(k.body, body);
        }
        // Without the growth the fill could fail; the loop must not fail elsewhere instead.
        let mut body = shape(b::int(0), b::var(N), vec![]);
        body.remove(0);
        let mut k = kernel(body.clone());
        sink_fills(&mut k);
        assert_eq!(k.body, body);
    }

    #[test]
    fn linear_forms_see_through_assignments() {
        let defs = HashMap::from([(M, b::sub(b::var(N), b::int(1)))]);
        let a = linear(&b::add(b::var(M), b::int(1)), &defs, 0).unwrap();
        assert_eq!(a, linear(&b::var(N), &HashMap::new(), 0).unwrap());
        let twice = b::mul(b::int(2), b::var(N));
        assert_eq!(
            linear(&twice, &defs, 0).unwrap(),
            (BTreeMap::from([(N, 2)]), 0)
        );
        assert!(linear(&b::mul(b::var(N), b::var(M)), &defs, 0).is_none());
    }
}
