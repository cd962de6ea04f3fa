//! IEEE products with an exact re-run. The strong zero of `BinOp::Mul` (a zero factor gives
//! zero even against NaN or an infinity) costs a NaN test on every float product, which is a
//! fifth of an SpMV's time. In an innermost loop that only adds (subtracts, multiplies, takes
//! the min or max of) products into accumulators, the test can move out of the loop:
//!
//! ```text
//! saved = the accumulators, and the variables the loop reads before assigning them
//! the loop with its accumulator products as IEEE multiplies (`BinOp::IeeeMul`)
//! if (an accumulator is NaN or zero) { restore the variables; the original loop }
//! ```
//!
//! Why this gives the strong zero's results bit for bit: an IEEE product differs from the
//! strong-zero one only when it is NaN, or `-0.0` where the strong zero gives `+0.0`. If no
//! converted product differed, both loops computed the same values. A NaN product made its
//! accumulator NaN (each product sits on a NaN-propagating path into the accumulator's
//! update), and every later update keeps it NaN (the accumulator appears in its own update
//! only on such a path, and nowhere else). A zero of the other sign changes, through `+ - *
//! min max neg abs sqrt exp log floor`, at most the sign of a zero or a NaN (`-0.0 * Inf`),
//! never a nonzero value, so it either leaves the accumulator equal or makes it zero or NaN;
//! divisors, whose sign of zero shows (`1 / -0.0 = -Inf`), are off such paths. Either way the
//! test after the loop sees it and the original loop runs again from the saved state. The
//! loop must not write memory (only variables are restored), and no condition, index or
//! other value may read an accumulator, so both runs take the same path, fault at the same
//! place, and leave every other variable equal (which is also why a variable the loop
//! always assigns before reading needs no saved copy). An accumulator that is NaN for another
//! reason (`Inf - Inf`, a NaN input) only costs the re-run.
//!
//! Only a loop whose converted products are at least half of its strong-zero ones is
//! rewritten: the copy and the re-run are paid for the whole loop.
//!
//! The pass runs after scalar promotion (`promote.rs`), which turns `y[i] += A[i, j] * x[j]`
//! into such a loop over a variable; a loop that still stores to memory is left alone.

use super::{BinOp, Expr, Kernel, Stmt, UnOp, VarDecl, VarId};
use crate::types::{ElemType, Scalar};
use std::collections::{BTreeSet, HashMap};

pub fn ieee_products(k: &mut Kernel) {
    super::innermost::rewrite_innermost_loops(k, &mut retry_loop);
}

/// Whether a NaN in this operand of `e` always makes `e` NaN (with `Mul` read as the IEEE
/// multiply it becomes on such a path).
fn propagates(k: &Kernel, e: &Expr) -> bool {
    match e {
        Expr::Binary(op, a, _) => {
            k.type_of(a) == ElemType::F64
                && matches!(
                    op,
                    BinOp::Add
                        | BinOp::Sub
                        | BinOp::Mul
                        | BinOp::IeeeMul
                        | BinOp::Div
                        | BinOp::Min
                        | BinOp::Max
                )
        }
        Expr::Unary(op, a) => {
            k.type_of(a) == ElemType::F64
                && matches!(
                    op,
                    UnOp::Neg | UnOp::Abs | UnOp::Sqrt | UnOp::Exp | UnOp::Log | UnOp::Floor
                )
        }
        _ => false,
    }
}

/// Reads of each variable: `(all, on a NaN-propagating path from the root)`.
fn count_reads(k: &Kernel, e: &Expr, sticky: bool, reads: &mut HashMap<VarId, (usize, usize)>) {
    if let Expr::Var(v) = e {
        let r = reads.entry(*v).or_default();
        r.0 += 1;
        r.1 += usize::from(sticky);
    }
    let down = sticky && propagates(k, e);
    for (n, c) in e.children().into_iter().enumerate() {
        count_reads(k, c, down && !is_divisor(e, n), reads);
    }
}

/// What the loop does with its variables.
#[derive(Default)]
struct Uses {
    /// Every variable assigned (loop counters included), in order.
    assigned: BTreeSet<VarId>,
    /// Per variable, reads outside the right-hand sides of its own assignments.
    elsewhere: HashMap<VarId, usize>,
    /// Variables with an assignment whose reads of the variable itself are not all on a
    /// NaN-propagating path, or that does not read it at all.
    not_sticky: BTreeSet<VarId>,
    /// Whether the loop writes memory (stores, growth, fills, sorts).
    writes: bool,
}

fn uses_stmts(k: &Kernel, stmts: &[Stmt], u: &mut Uses) {
    for s in stmts {
        match s {
            Stmt::Assign(v, e) => {
                u.assigned.insert(*v);
                let mut reads = HashMap::new();
                count_reads(k, e, true, &mut reads);
                // An overwrite (no read of `v`) forgets a NaN, so `v` must be read, and only
                // on NaN-propagating paths.
                match reads.remove(v) {
                    Some((all, sticky)) if all == sticky => {}
                    _ => {
                        u.not_sticky.insert(*v);
                    }
                }
                for (r, (all, _)) in reads {
                    *u.elsewhere.entry(r).or_default() += all;
                }
                continue;
            }
            Stmt::For { var, .. } => {
                u.assigned.insert(*var);
            }
            Stmt::Chunked(c) => {
                u.assigned.insert(c.lo);
                u.assigned.insert(c.hi);
                // The runner sets the appended outputs' cursors after the chunks.
                u.assigned.extend(
                    c.rows
                        .iter()
                        .flat_map(|r| [Some(r.cursor), r.last])
                        .flatten(),
                );
                u.assigned.extend(c.scratch_state.iter().copied());
            }
            Stmt::Store { .. }
            | Stmt::Atomic { .. }
            | Stmt::Grow { .. }
            | Stmt::Fill { .. }
            | Stmt::Sort { .. }
            | Stmt::SortPerm { .. } => u.writes = true,
            Stmt::If { .. }
            | Stmt::While { .. }
            | Stmt::Break
            | Stmt::Fail(_)
            | Stmt::Comment(_) => {}
        }
        for e in s.own_exprs() {
            let mut reads = HashMap::new();
            count_reads(k, e, false, &mut reads);
            for (r, (all, _)) in reads {
                *u.elsewhere.entry(r).or_default() += all;
            }
        }
        for body in s.bodies() {
            uses_stmts(k, body, u);
        }
    }
}

/// The F64 products on a NaN-propagating path of `e`, made IEEE; how many there were.
fn convert(k: &Kernel, e: &mut Expr) -> usize {
    if !propagates(k, e) {
        return 0;
    }
    let mut n = 0;
    if let Expr::Binary(op @ BinOp::Mul, ..) = e {
        *op = BinOp::IeeeMul;
        n += 1;
    }
    let div = matches!(e, Expr::Binary(BinOp::Div, ..));
    for (m, c) in e.children_mut().into_iter().enumerate() {
        // A divisor's products stay strong: see `is_divisor`.
        if !(div && m == 1) {
            n += convert(k, c);
        }
    }
    n
}

/// Whether child `n` of `e` is a divisor, whose sign of zero the quotient shows (`x / -0.0`
/// is `-Inf`), so a difference there would not stay a difference of zeros.
fn is_divisor(e: &Expr, n: usize) -> bool {
    matches!(e, Expr::Binary(BinOp::Div, ..)) && n == 1
}

/// Make the products of the accumulators' updates IEEE; the number converted.
fn convert_stmts(k: &Kernel, stmts: &mut [Stmt], acc: &BTreeSet<VarId>) -> usize {
    let mut n = 0;
    for s in stmts {
        if let Stmt::Assign(v, e) = s
            && acc.contains(v)
        {
            n += convert(k, e);
        }
        for body in s.bodies_mut() {
            n += convert_stmts(k, body, acc);
        }
    }
    n
}

/// The variables the loop may read before it assigns them in the same iteration (or in its
/// bounds): the only ones besides the accumulators that the re-run needs back. Any other
/// variable the loop assigns is recomputed by the re-run along the same path, to the same
/// value, since only the accumulators depend on the products; so it needs no saved copy,
/// and no register to hold one while the fast loop runs (a per-row temporary such as a
/// gathered column index).
fn read_before_assigned(l: &Stmt) -> BTreeSet<VarId> {
    let mut out = BTreeSet::new();
    let reads = |s: &Stmt, out: &mut BTreeSet<VarId>, skip: &BTreeSet<VarId>| {
        let mut all = BTreeSet::new();
        collect_reads(std::slice::from_ref(s), &mut all);
        out.extend(all.difference(skip).copied());
    };
    let mut assigned = BTreeSet::new();
    if let Stmt::For { var, .. } = l {
        assigned.insert(*var);
    }
    for e in l.own_exprs() {
        e.visit(&mut |x| {
            if let Expr::Var(v) = x {
                out.insert(*v);
            }
        });
    }
    for s in l.bodies().into_iter().flatten() {
        reads(s, &mut out, &assigned);
        if let Stmt::Assign(v, _) = s {
            assigned.insert(*v);
        }
    }
    out
}

fn collect_reads(stmts: &[Stmt], out: &mut BTreeSet<VarId>) {
    for s in stmts {
        for e in s.own_exprs() {
            e.visit(&mut |x| {
                if let Expr::Var(v) = x {
                    out.insert(*v);
                }
            });
        }
        for body in s.bodies() {
            collect_reads(body, out);
        }
    }
}

/// The number of strong-zero `f64` products (`BinOp::Mul`) in the statements.
fn strong_products(k: &Kernel, stmts: &[Stmt]) -> usize {
    let mut n = 0;
    for s in stmts {
        for e in s.own_exprs() {
            e.visit(&mut |x| {
                if let Expr::Binary(BinOp::Mul, a, _) = x
                    && k.type_of(a) == ElemType::F64
                {
                    n += 1;
                }
            });
        }
        for body in s.bodies() {
            n += strong_products(k, body);
        }
    }
    n
}

/// The loop as IEEE run + NaN test + exact re-run, or `None` when no product qualifies.
fn retry_loop(k: &mut Kernel, l: &Stmt) -> Option<Vec<Stmt>> {
    let mut u = Uses::default();
    uses_stmts(k, std::slice::from_ref(l), &mut u);
    if u.writes {
        return None;
    }
    let acc: BTreeSet<VarId> = u
        .assigned
        .iter()
        .copied()
        .filter(|v| {
            k.var_ty(*v) == ElemType::F64
                && !u.not_sticky.contains(v)
                && u.elsewhere.get(v).copied().unwrap_or(0) == 0
        })
        .collect();
    if acc.is_empty() {
        return None;
    }
    let mut fast = l.clone();
    let converted = convert_stmts(k, fast.bodies_mut().into_iter().next()?, &acc);
    // The loop's copy, the saved state and the test are paid for the whole loop, and a
    // re-run of all of it for any accumulator that ends at zero, which is common where many
    // accumulators sum masked terms (a gradient program's, once its 0-d locals are variables):
    // worth it only where the tests saved are most of the loop's products.
    if converted == 0 || 2 * converted < strong_products(k, std::slice::from_ref(l)) {
        return None;
    }
    let needed = read_before_assigned(l);
    let saved: Vec<(VarId, VarId)> = u
        .assigned
        .iter()
        .filter(|v| acc.contains(v) || needed.contains(v))
        .map(|&v| {
            let decl = &k.vars[v.0 as usize];
            let copy = VarDecl {
                name: format!("{}_saved", decl.name),
                ty: decl.ty,
                cold: true,
            };
            k.vars.push(copy);
            (v, VarId(k.vars.len() as u32 - 1))
        })
        .collect();
    // NaN or zero: `!(v < 0 || v > 0)`.
    let nan = acc
        .iter()
        .map(|&v| {
            let side = |op| {
                let zero = Expr::Const(Scalar::F64(0.0));
                Box::new(Expr::Binary(op, Box::new(Expr::Var(v)), Box::new(zero)))
            };
            let nonzero = Expr::Binary(BinOp::Or, side(BinOp::Lt), side(BinOp::Gt));
            Expr::Unary(UnOp::Not, Box::new(nonzero))
        })
        .reduce(|a, b| Expr::Binary(BinOp::Or, Box::new(a), Box::new(b)))?;
    let mut out = vec![Stmt::Comment(
        "IEEE products; a NaN or zero accumulator re-runs the loop with strong-zero products"
            .into(),
    )];
    out.extend(saved.iter().map(|&(v, s)| Stmt::Assign(s, Expr::Var(v))));
    out.push(fast);
    let mut again: Vec<Stmt> = saved
        .iter()
        .map(|&(v, s)| Stmt::Assign(v, Expr::Var(s)))
        .collect();
    again.push(l.clone());
    out.push(Stmt::If {
        cond: nan,
        then: again,
        otherwise: vec![],
    });
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::BufId;
    use crate::ir::build as b;
    use crate::types::Scalar;

    /// Variables: 0 `j` (i64), 1 `s` (f64), 2 `t` (f64); buffers `a`, `x` (f64), `out` (f64).
    fn kernel(body: Vec<Stmt>) -> Kernel {
        let f = ElemType::F64;
        b::test_kernel(
            &[("a", f), ("x", f), ("out", f)],
            false,
            &[("j", ElemType::I64), ("s", f), ("t", f)],
            body,
        )
    }

    const J: VarId = VarId(0);
    const S: VarId = VarId(1);
    const T: VarId = VarId(2);

    fn product() -> Expr {
        b::mul(b::load(BufId(0), b::var(J)), b::load(BufId(1), b::var(J)))
    }

    fn counted(body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var: J,
            start: b::var(J),
            stop: b::int(8),
            body,
        }
    }

    fn converted(body: Vec<Stmt>) -> String {
        let mut k = kernel(vec![counted(body)]);
        ieee_products(&mut k);
        assert!(k.check().is_ok(), "{k}");
        k.to_string()
    }

    #[test]
    fn a_sum_of_products_runs_ieee_and_re_runs_on_nan() {
        let shown = converted(vec![b::assign(S, b::add(b::var(S), product()))]);
        assert!(shown.contains("j_saved = j;\n  s_saved = s;"), "{shown}");
        assert!(shown.contains("s = s + ieee_mul(a[j], x[j]);"), "{shown}");
        assert!(
            shown.contains("if (!((s < 0.0) | (s > 0.0))) {\n    j = j_saved;\n    s = s_saved;"),
            "{shown}"
        );
        assert!(shown.contains("s = s + (a[j] * x[j]);"), "{shown}");
    }

    #[test]
    fn a_temporary_assigned_before_it_is_read_is_not_saved() {
        let shown = converted(vec![
            b::assign(T, b::load(BufId(0), b::var(J))),
            b::assign(
                S,
                b::add(b::var(S), b::mul(b::var(T), b::load(BufId(1), b::var(J)))),
            ),
        ]);
        assert!(shown.contains("s = s + ieee_mul(t, x[j]);"), "{shown}");
        assert!(
            shown.contains("j_saved = j;\n  s_saved = s;\n  for"),
            "{shown}"
        );
        assert!(!shown.contains("t_saved"), "{shown}");
    }

    #[test]
    fn a_loop_whose_accumulated_products_are_few_keeps_the_strong_zero() {
        // One product of three reaches the accumulator: the loop stays as it is.
        let body = vec![
            b::assign(T, b::mul(product(), b::load(BufId(0), b::var(J)))),
            b::assign(
                S,
                b::add(b::var(S), b::mul(b::var(T), b::load(BufId(1), b::var(J)))),
            ),
        ];
        let shown = converted(body.clone());
        assert!(!shown.contains("ieee_mul"), "{shown}");
        // Half of them (two of four) do.
        let mut more = body;
        more.push(b::assign(S, b::add(b::var(S), product())));
        let shown = converted(more);
        assert!(shown.contains("s = s + ieee_mul(a[j], x[j]);"), "{shown}");
    }

    #[test]
    fn min_max_and_product_reducers_are_nan_sticky() {
        for op in [BinOp::Min, BinOp::Max, BinOp::Mul] {
            let shown = converted(vec![b::assign(S, b::bin(op, b::var(S), product()))]);
            assert!(shown.contains("ieee_mul(a[j], x[j])"), "{op:?}: {shown}");
        }
    }

    #[test]
    fn products_that_flow_elsewhere_keep_the_strong_zero() {
        let sum = || b::assign(S, b::add(b::var(S), product()));
        let cases = vec![
            // An overwrite forgets an earlier NaN.
            vec![b::assign(S, product())],
            // The accumulator decides a branch.
            vec![
                sum(),
                Stmt::If {
                    cond: b::bin(BinOp::Lt, b::var(S), Expr::Const(Scalar::F64(1.0))),
                    then: vec![Stmt::Break],
                    otherwise: vec![],
                },
            ],
            // The accumulator flows into another variable.
            vec![sum(), b::assign(T, b::add(b::var(T), b::var(S)))],
            // The product is stored.
            vec![b::store(BufId(2), b::var(J), product())],
            // The product passes a select, which may drop it.
            vec![b::assign(
                S,
                b::add(
                    b::var(S),
                    Expr::Select(
                        Box::new(b::boolean(true)),
                        Box::new(product()),
                        Box::new(Expr::Const(Scalar::F64(0.0))),
                    ),
                ),
            )],
            // The product is an index.
            vec![b::assign(
                S,
                b::add(
                    b::var(S),
                    b::load(BufId(0), Expr::Cast(ElemType::I64, Box::new(product()))),
                ),
            )],
        ];
        for body in cases {
            let shown = converted(body);
            assert!(!shown.contains("ieee_mul"), "{shown}");
            assert!(!shown.contains("_saved"), "{shown}");
        }
    }
}
