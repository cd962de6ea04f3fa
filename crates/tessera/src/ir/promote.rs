//! Scalar promotion: an innermost loop that reads and writes one element `buf[e]` whose index
//! does not change in the loop (the `y[i] += A[i, j] * x[j]` of a sparse row) keeps it in a
//! variable, loaded before the loop and stored after it. Backends cannot do this themselves:
//! every buffer may alias every other as far as they know, so each iteration would store and
//! reload the element, a chain through memory that costs more than the arithmetic.
//!
//! The promoted loop runs only when `e` is inside the buffer; otherwise the original loop
//! runs and reports the out-of-bounds access exactly where it happens. The copy costs code
//! size, so only innermost loops are promoted, and the pass runs just before a backend
//! compiles the kernel (`Runner::lower` keeps the structural code the tests read). Only elements whose
//! stored type is their compute type (`f64`, `i64`, `bool`) are promoted, since a narrowing
//! store followed by a reload is not the identity.

use super::effects::{Effects, effects_expr, effects_stmts, invariant, new_var};
use super::{BinOp, BufId, Expr, Kernel, Stmt, VarId};
use crate::types::{ElemType, Scalar};

/// At most this many elements of one buffer are kept in variables in one loop (each pair is
/// compared before it, to be sure they are distinct).
const MAX_ELEMENTS: usize = 16;

pub fn promote_scalars(k: &mut Kernel) {
    super::innermost::rewrite_innermost_loops(k, &mut promote_loop);
}

/// The loop with its promotable elements in variables, or `None` when nothing can be
/// promoted: `if inside { t = buf[e]; loop with t; buf[e] = t } else { loop }`. The original
/// loop in the `else` runs only when `e` is outside the buffer, so the out-of-bounds fault is
/// reported where it always was (or not at all, when the loop never reaches the element).
fn promote_loop(k: &mut Kernel, l: &Stmt) -> Option<Vec<Stmt>> {
    let (forwarded, after) = forward_copies(l);
    let l = &forwarded;
    let mut fx = Effects::default();
    effects_stmts(std::slice::from_ref(l), &mut fx);
    let mut chosen: Vec<Promoted> = vec![];
    let mut candidates: Vec<BufId> = fx.changed.iter().copied().collect();
    candidates.sort();
    for buf in candidates {
        let elem = k.buf_elem(buf);
        if !matches!(elem, ElemType::F64 | ElemType::I64 | ElemType::Bool)
            || fx.other_use.contains(&buf)
            || exit_only(std::slice::from_ref(l), buf)
        {
            continue;
        }
        // The distinct elements the loop accesses: each must stay put, and several (the
        // copies of a jammed statement, `dx[i.0 * 4 + t, f]` for each `t`) are kept apart
        // only while they are distinct elements, which the guard below tests.
        let mut distinct: Vec<&Expr> = vec![];
        for (_, e) in fx.accesses.iter().filter(|(b, _)| *b == buf) {
            if !distinct.contains(&e) {
                distinct.push(e);
            }
        }
        if distinct.is_empty()
            || distinct.len() > MAX_ELEMENTS
            || !distinct.iter().all(|e| invariant(e, &fx) && !reads(e, buf))
        {
            continue;
        }
        // No index may read a promoted element.
        if distinct
            .iter()
            .any(|e| chosen.iter().any(|p| reads(e, p.buf)))
        {
            continue;
        }
        let name = k.bufs[buf.0 as usize].name.clone();
        for e in distinct {
            let var = new_var(k, &format!("{name}_elem"), elem);
            chosen.push(Promoted {
                buf,
                index: e.clone(),
                var,
            });
        }
    }
    if chosen.is_empty() {
        // Nothing to keep in a variable, but the copies left the loop (what lets C's `omp
        // simd` and the JIT's lanes take it, a copy being no reduction).
        return (!after.is_empty()).then(|| [vec![forwarded.clone()], after].concat());
    }
    let mut inside: Option<Expr> = None;
    let mut then = vec![];
    for p in &chosen {
        let ok = Expr::Binary(
            BinOp::And,
            Box::new(Expr::Binary(
                BinOp::Le,
                Box::new(Expr::Const(Scalar::I64(0))),
                Box::new(p.index.clone()),
            )),
            Box::new(Expr::Binary(
                BinOp::Lt,
                Box::new(p.index.clone()),
                Box::new(Expr::Len(p.buf)),
            )),
        );
        // Two elements of one buffer in two variables must be two elements.
        let apart = chosen
            .iter()
            .take_while(|q| !std::ptr::eq(*q, p))
            .filter(|q| q.buf == p.buf)
            .map(|q| {
                Expr::Binary(
                    BinOp::Ne,
                    Box::new(q.index.clone()),
                    Box::new(p.index.clone()),
                )
            });
        for ok in std::iter::once(ok).chain(apart) {
            inside = Some(match inside {
                None => ok,
                Some(c) => Expr::Binary(BinOp::And, Box::new(c), Box::new(ok)),
            });
        }
        then.push(Stmt::Assign(p.var, p.load()));
    }
    let mut promoted = l.clone();
    substitute_stmt(&mut promoted, &chosen);
    then.push(promoted);
    then.extend(chosen.iter().map(Promoted::write_back));
    let mut out = vec![Stmt::If {
        cond: inside?,
        then,
        otherwise: vec![
            Stmt::Comment(
                "the same loop, reached only when an element above is out of bounds".into(),
            ),
            l.clone(),
        ],
    }];
    out.extend(after);
    Some(out)
}

/// The loop with each copy of a loop-invariant variable read through that variable: after
/// `v = u` at the top of the body (`u` not assigned in the loop, `v` assigned nowhere else in
/// it), the rest of the body reads `u` for `v`, the same value. A concordized index is such a
/// copy (`x[i.0 * 4 + i.1, f]` reads `x` at `k` after `k = f`), and an element indexed by it
/// is then seen to stay put (`dx[i.0 * 4 + i.1, f] +=` in the loop over `o`).
///
/// When the loop's range is invariant too, the copy itself leaves the loop: it runs once
/// after it, when the loop ran (returned second), so `v` ends with the value it always had.
fn forward_copies(l: &Stmt) -> (Stmt, Vec<Stmt>) {
    let Stmt::For {
        var,
        start,
        stop,
        body,
    } = l
    else {
        return (l.clone(), vec![]);
    };
    let mut fx = Effects::default();
    effects_stmts(std::slice::from_ref(l), &mut fx);
    let range_fixed = invariant(start, &fx) && invariant(stop, &fx);
    let mut body = body.clone();
    let mut moved = vec![];
    for at in 0..body.len() {
        let Stmt::Assign(v, value) = &body[at] else {
            continue;
        };
        let (v, value) = (*v, value.clone());
        // A copy of the loop's own variable (`k = o`, what concordization makes of `o` in
        // `seed[i.0 * 4 + t, o]`) when nothing else in the body assigns it: each iteration
        // reads that iteration's value, and the last one leaves `stop - 1` in it.
        let own = value == Expr::Var(*var)
            && v != *var
            && assignments(&body, *var) == 0
            && !breaks(&body);
        if !(own || forwardable(&value, v, *var, &fx)) || assignments(&body, v) != 1 {
            continue;
        }
        for s in &mut body[at + 1..] {
            substitute_var_stmt(s, v, &value);
        }
        // Earlier statements of the body read `v` as the previous iteration left it.
        if range_fixed && !body[..at].iter().any(|s| mentions(s, v)) {
            moved.push(at);
        }
    }
    let last = Expr::Binary(
        BinOp::Sub,
        Box::new(stop.clone()),
        Box::new(Expr::Const(Scalar::I64(1))),
    );
    let after: Vec<Stmt> = moved
        .iter()
        .map(|&at| match &body[at] {
            Stmt::Assign(v, Expr::Var(u)) if u == var => Stmt::Assign(*v, last.clone()),
            s => s.clone(),
        })
        .collect();
    for at in moved.into_iter().rev() {
        body.remove(at);
    }
    let ran = Expr::Binary(BinOp::Lt, Box::new(start.clone()), Box::new(stop.clone()));
    let after = if after.is_empty() {
        vec![]
    } else {
        vec![Stmt::If {
            cond: ran,
            then: after,
            otherwise: vec![],
        }]
    };
    let lp = Stmt::For {
        var: *var,
        start: start.clone(),
        stop: stop.clone(),
        body,
    };
    (lp, after)
}

/// Whether the statements can leave their loop early (a `break` outside nested loops): the
/// loop variable's last value is then not `stop - 1`.
fn breaks(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match s {
        Stmt::Break => true,
        Stmt::If {
            then, otherwise, ..
        } => breaks(then) || breaks(otherwise),
        _ => false,
    })
}

/// Whether `v = value` in a loop over `var` with effects `fx` copies a value that stays the
/// same while the loop runs: a variable the loop does not assign, or arithmetic on such
/// variables and constants that cannot fault (an index expression a jam or split leaves,
/// `i.0 * 4 + 1`, copied per statement by concordization). Reading it where `v` was read
/// gives the same value, and the arithmetic is left for `hoist` to compute once.
fn forwardable(value: &Expr, v: VarId, var: VarId, fx: &Effects) -> bool {
    let (mut pure, mut size) = (true, 0);
    value.visit(&mut |x| {
        size += 1;
        pure &= !matches!(
            x,
            Expr::Load { .. } | Expr::SearchGe { .. } | Expr::HashFind { .. }
        ) && !matches!(x, Expr::Var(u) if *u == v || *u == var);
    });
    pure && size <= 16 && invariant(value, fx)
}

/// Replace the variable `v` by `with` in `s` and the statements nested in it.
fn substitute_var_stmt(s: &mut Stmt, v: VarId, with: &Expr) {
    for e in s.own_exprs_mut() {
        substitute_var_expr(e, v, with);
    }
    for b in s.bodies_mut() {
        for inner in b.iter_mut() {
            substitute_var_stmt(inner, v, with);
        }
    }
}

fn substitute_var_expr(e: &mut Expr, v: VarId, with: &Expr) {
    if matches!(e, Expr::Var(u) if *u == v) {
        *e = with.clone();
        return;
    }
    for c in e.children_mut() {
        substitute_var_expr(c, v, with);
    }
}

/// Whether `s` (or a statement nested in it) reads or assigns the variable `v`.
fn mentions(s: &Stmt, v: VarId) -> bool {
    let own = match s {
        Stmt::For { var: w, .. } => *w == v,
        Stmt::Chunked(_) => true,
        _ => super::vector::stmt_mentions(s, v),
    };
    own || s
        .own_exprs()
        .iter()
        .any(|e| super::vector::expr_mentions(e, v))
        || s.bodies().into_iter().flatten().any(|t| mentions(t, v))
}

/// How many statements in `stmts` (nested ones too) assign `v`.
fn assignments(stmts: &[Stmt], v: VarId) -> usize {
    stmts
        .iter()
        .map(|s| {
            let own = match s {
                Stmt::Assign(w, _) | Stmt::For { var: w, .. } => usize::from(*w == v),
                // Anything else that assigns variables (a chunked range) counts as many.
                Stmt::Chunked(_) => 2,
                _ => 0,
            };
            own + s
                .bodies()
                .into_iter()
                .map(|b| assignments(b, v))
                .sum::<usize>()
        })
        .sum()
}

/// An element kept in `var` while a loop runs.
struct Promoted {
    buf: BufId,
    index: Expr,
    var: VarId,
}

impl Promoted {
    fn load(&self) -> Expr {
        Expr::Load {
            buf: self.buf,
            index: Box::new(self.index.clone()),
        }
    }

    fn write_back(&self) -> Stmt {
        Stmt::Store {
            buf: self.buf,
            index: self.index.clone(),
            value: Expr::Var(self.var),
        }
    }
}

/// Whether the loop only stores to `buf` right before a `Fail` and never reads it (a
/// check's report of the offending index, `dims[5] = v; fail(..)`): such a store runs at
/// most once per call, so keeping the element in a variable saves nothing and costs a load,
/// a store and a length test each time the loop starts (the run loop of a run-length mask
/// starts once per run).
fn exit_only(stmts: &[Stmt], buf: BufId) -> bool {
    stmts.iter().enumerate().all(|(at, s)| {
        let before_fail = matches!(stmts.get(at + 1), Some(Stmt::Fail(_)));
        let own_ok = match s {
            Stmt::Store {
                buf: b,
                index,
                value,
            } if *b == buf => before_fail && !reads(index, buf) && !reads(value, buf),
            // Updates other than plain stores: not looked into.
            Stmt::Atomic { .. }
            | Stmt::Grow { .. }
            | Stmt::Fill { .. }
            | Stmt::Sort { .. }
            | Stmt::SortPerm { .. }
            | Stmt::Chunked(_) => false,
            _ => s.own_exprs().into_iter().all(|e| !reads(e, buf)),
        };
        own_ok && s.bodies().into_iter().all(|b| exit_only(b, buf))
    })
}

fn reads(e: &Expr, buf: BufId) -> bool {
    let mut fx = Effects::default();
    effects_expr(e, &mut fx);
    fx.accesses.iter().any(|(b, _)| *b == buf)
}

/// Substitute in a statement list; before a `Fail` the elements go back to memory, so a
/// failing kernel leaves them (and the value a check reports) as the original loop would.
fn substitute_list(stmts: &mut Vec<Stmt>, chosen: &[Promoted]) {
    let mut out = Vec::with_capacity(stmts.len());
    for mut s in stmts.drain(..) {
        if matches!(s, Stmt::Fail(_)) {
            out.extend(chosen.iter().map(Promoted::write_back));
        }
        substitute_stmt(&mut s, chosen);
        out.push(s);
    }
    *stmts = out;
}

fn substitute_stmt(s: &mut Stmt, chosen: &[Promoted]) {
    if let Stmt::Store { buf, index, value } = s
        && let Some(p) = chosen.iter().find(|p| p.buf == *buf && p.index == *index)
    {
        let mut value = std::mem::replace(value, Expr::Var(p.var));
        substitute_expr(&mut value, chosen);
        *s = Stmt::Assign(p.var, value);
        return;
    }
    for e in s.own_exprs_mut() {
        substitute_expr(e, chosen);
    }
    for body in s.bodies_mut() {
        substitute_list(body, chosen);
    }
}

fn substitute_expr(e: &mut Expr, chosen: &[Promoted]) {
    if let Expr::Load { buf, index } = e
        && let Some(p) = chosen.iter().find(|p| p.buf == *buf && p.index == **index)
    {
        *e = Expr::Var(p.var);
        return;
    }
    for c in e.children_mut() {
        substitute_expr(c, chosen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::BufDecl;
    use crate::ir::VarDecl;
    use crate::ir::build as b;

    fn kernel(body: Vec<Stmt>, bufs: &[(&str, ElemType)]) -> Kernel {
        Kernel {
            name: "k".into(),
            bufs: bufs
                .iter()
                .map(|(n, e)| BufDecl {
                    name: n.to_string(),
                    elem: *e,
                    growable: false,
                    tensor: None,
                    scratch: false,
                })
                .collect(),
            vars: vec![
                VarDecl {
                    name: "j".into(),
                    ty: ElemType::I64,
                    cold: false,
                },
                VarDecl {
                    name: "i".into(),
                    ty: ElemType::I64,
                    cold: false,
                },
            ],
            body,
            errors: vec![],
            bounded: vec![],
            not_nan: vec![],
            vectorized: vec![],
        }
    }

    fn sum_loop(index: Expr) -> Stmt {
        let y = BufId(0);
        let x = BufId(1);
        Stmt::For {
            var: VarId(0),
            start: b::int(0),
            stop: b::int(4),
            body: vec![b::store(
                y,
                index.clone(),
                b::add(
                    Expr::Load {
                        buf: y,
                        index: Box::new(index),
                    },
                    Expr::Load {
                        buf: x,
                        index: Box::new(b::var(VarId(0))),
                    },
                ),
            )],
        }
    }

    #[test]
    fn an_invariant_element_is_kept_in_a_variable_inside_its_bounds() {
        let bufs = [("y", ElemType::F64), ("x", ElemType::F64)];
        let mut k = kernel(vec![sum_loop(b::var(VarId(1)))], &bufs);
        promote_scalars(&mut k);
        assert!(k.check().is_ok());
        let shown = k.to_string();
        assert!(
            shown.contains("if ((0 <= i) & (i < len(y))) {\n    y_elem = y[i];"),
            "{shown}"
        );
        assert!(shown.contains("y_elem = y_elem + x[j];"), "{shown}");
        assert!(
            shown.contains("    y[i] = y_elem;\n  } else {\n    // the same loop"),
            "{shown}"
        );
        assert!(shown.contains("y[i] = y[i] + x[j];"), "{shown}");
    }

    #[test]
    fn elements_that_move_or_narrow_stay_in_memory() {
        // The index changes with the loop.
        let bufs = [("y", ElemType::F64), ("x", ElemType::F64)];
        let mut k = kernel(vec![sum_loop(b::var(VarId(0)))], &bufs);
        promote_scalars(&mut k);
        assert!(matches!(k.body[0], Stmt::For { .. }));
        // A u8 element wraps on every store.
        let bufs = [("y", ElemType::U8), ("x", ElemType::U8)];
        let mut k = kernel(vec![sum_loop(b::var(VarId(1)))], &bufs);
        promote_scalars(&mut k);
        assert!(matches!(k.body[0], Stmt::For { .. }));
    }

    /// `k = i` at the top of the body (a concordized copy of an index): the element
    /// `y[k]` is read through the copy of an invariant variable, so it stays put and is kept
    /// in a variable, and the copy itself runs once after the loop.
    #[test]
    fn an_element_indexed_by_a_copy_of_an_invariant_is_promoted() {
        let bufs = [("y", ElemType::F64), ("x", ElemType::F64)];
        let mut k = kernel(vec![], &bufs);
        k.vars.push(VarDecl {
            name: "k".into(),
            ty: ElemType::I64,
            cold: false,
        });
        let copy = Stmt::Assign(VarId(2), b::var(VarId(1)));
        let Stmt::For {
            var,
            start,
            stop,
            body,
        } = sum_loop(b::var(VarId(2)))
        else {
            unreachable!()
        };
        k.body = vec![Stmt::For {
            var,
            start,
            stop,
            body: [vec![copy], body].concat(),
        }];
        promote_scalars(&mut k);
        assert!(k.check().is_ok());
        let shown = k.to_string();
        assert!(shown.contains("y_elem"), "{shown}");
        let (_, after) = shown.rsplit_once("for (").expect("a loop");
        assert!(after.contains("k = i;"), "{shown}");
        let inner = after.split("}").next().unwrap_or("");
        assert!(!inner.contains("k = i"), "the copy left the loop:\n{shown}");
    }

    /// `k = i * 2 + 1` (a jammed copy's row index, concordized into a copy per statement) is
    /// forwarded like a copy of a variable, and `m = j` (a copy of the loop's own variable)
    /// is read as `j`, its last value `stop - 1` assigned after the loop: the element `y[k]`
    /// is promoted and the loop body assigns no variable but the element's.
    #[test]
    fn copies_of_invariant_arithmetic_and_of_the_loop_variable_are_forwarded() {
        let bufs = [("y", ElemType::F64), ("x", ElemType::F64)];
        let mut k = kernel(vec![], &bufs);
        for n in ["k", "m"] {
            k.vars.push(VarDecl {
                name: n.into(),
                ty: ElemType::I64,
                cold: false,
            });
        }
        let (y, x) = (BufId(0), BufId(1));
        let row = b::add(b::mul(b::var(VarId(1)), b::int(2)), b::int(1));
        let load = |buf, v| Expr::Load {
            buf,
            index: Box::new(b::var(v)),
        };
        k.body = vec![Stmt::For {
            var: VarId(0),
            start: b::int(0),
            stop: b::int(4),
            body: vec![
                Stmt::Assign(VarId(2), row),
                Stmt::Assign(VarId(3), b::var(VarId(0))),
                b::store(
                    y,
                    b::var(VarId(2)),
                    b::add(load(y, VarId(2)), load(x, VarId(3))),
                ),
            ],
        }];
        promote_scalars(&mut k);
        assert!(k.check().is_ok());
        let shown = k.to_string();
        assert!(shown.contains("y_elem = y[(i * 2) + 1];"), "{shown}");
        assert!(shown.contains("y_elem = y_elem + x[j];"), "{shown}");
        assert!(shown.contains("m = 4 - 1;"), "{shown}");
    }

    /// Two elements of one buffer (`y[i]`, `y[i + 1]`) are kept in two variables under a
    /// guard that they are two elements; otherwise the loop runs as it was.
    #[test]
    fn distinct_elements_of_one_buffer_are_promoted_apart() {
        let bufs = [("y", ElemType::F64), ("x", ElemType::F64)];
        let (y, x) = (BufId(0), BufId(1));
        let upd = |index: Expr| {
            b::store(
                y,
                index.clone(),
                b::add(
                    Expr::Load {
                        buf: y,
                        index: Box::new(index),
                    },
                    Expr::Load {
                        buf: x,
                        index: Box::new(b::var(VarId(0))),
                    },
                ),
            )
        };
        let mut k = kernel(
            vec![Stmt::For {
                var: VarId(0),
                start: b::int(0),
                stop: b::int(4),
                body: vec![
                    upd(b::var(VarId(1))),
                    upd(b::add(b::var(VarId(1)), b::int(1))),
                ],
            }],
            &bufs,
        );
        promote_scalars(&mut k);
        assert!(k.check().is_ok());
        let shown = k.to_string();
        assert!(shown.contains("(i != (i + 1))"), "{shown}");
        assert!(shown.contains("y_elem_3 = y_elem_3 + x[j];"), "{shown}");
        assert!(shown.contains("y[i + 1] = y_elem_3;"), "{shown}");
        assert!(
            shown.contains("y[i] = y[i] + x[j];"),
            "the original loop:\n{shown}"
        );
    }

    /// A check's report of the offending index (`y[i] = v; fail`) runs at most once per
    /// call: the element stays in memory, with no load, store and length test around the
    /// loop.
    #[test]
    fn a_store_only_before_a_failure_is_not_promoted() {
        let bufs = [("y", ElemType::I64), ("x", ElemType::I64)];
        let (y, x) = (BufId(0), BufId(1));
        let report = Stmt::If {
            cond: b::lt(
                Expr::Load {
                    buf: x,
                    index: Box::new(b::var(VarId(0))),
                },
                b::int(0),
            ),
            then: vec![
                b::store(y, b::var(VarId(1)), b::var(VarId(0))),
                Stmt::Fail(0),
            ],
            otherwise: vec![],
        };
        let lp = Stmt::For {
            var: VarId(0),
            start: b::int(0),
            stop: b::int(4),
            body: vec![report.clone()],
        };
        let mut k = kernel(vec![lp], &bufs);
        promote_scalars(&mut k);
        assert!(matches!(k.body[..], [Stmt::For { .. }]), "{k}");
        // A read of it in the loop, or a store not followed by a failure, is promoted.
        let mut read = report.clone();
        if let Stmt::If { then, .. } = &mut read {
            then.remove(1);
        }
        let lp = Stmt::For {
            var: VarId(0),
            start: b::int(0),
            stop: b::int(4),
            body: vec![read],
        };
        let mut k = kernel(vec![lp], &bufs);
        promote_scalars(&mut k);
        assert!(matches!(k.body[..], [Stmt::If { .. }]), "{k}");
    }
}
