//! Shared cotangents: the contributions of one forward statement bind the subexpressions they
//! repeat to `let` variables, evaluated once.
//!
//! The derivative table copies a cotangent into every operand it reaches (`a + b`, `a * b`,
//! `min(a, b)` with both operands active), and each level of a nested expression wraps the
//! copies again, so the contributions of one statement repeat whole masks and chains:
//! SoftRas's clamped projection `t = min(max(q * r, 0), 1)` gives five contributions that each
//! recompute `ifelse(q * r >= 0, ifelse(max(q * r, 0) <= 1, dt, 0), 0)`, and `d = min(u0, ...)`
//! with `u0 = ux * ux + uy * uy` four that each recompute the selection. Neither backend
//! eliminates the copies (every buffer may alias every other), so the backward loop did
//! several times the forward loop's arithmetic.
//!
//! Bound, smallest first, are the subexpressions of at least [`MIN_NODES`] nodes that occur at
//! least twice among the contributions and read only `let` variables, loop indices, 0-d
//! tensors and literals, through the table's pure operators and functions: never an indexed
//! tensor, so a sparse operand stays a factor of the statement it annihilates (the backward
//! loop still walks only its pattern), and never a gradient one of the contributions updates
//! (its value would be read before the update). A `let` evaluates its value once where the
//! copies evaluated it each time, with the same operations on the same values: the results
//! are the same, bit for bit; a value an `ifelse` did not select is now computed, which costs
//! time but changes no result (nothing bound can fault: no `%`, `div` or index).

use crate::notation::ast::{BinaryOp, Expr, ExprKind};
use std::collections::{HashMap, HashSet};

/// The smallest expression worth a variable: `a * b` (three nodes) is recomputed.
pub const MIN_NODES: usize = 4;

/// Rewrite `exprs` to read `let` variables for their repeated subexpressions; returns the
/// bindings in order (each value may read the variables bound before it). `fresh` names a
/// variable; `updated` are the tensors the contributions write.
pub fn share(
    exprs: &mut [Expr],
    updated: &HashSet<String>,
    fresh: &mut dyn FnMut() -> String,
) -> Vec<(String, Expr)> {
    let mut lets = vec![];
    loop {
        let mut counts: HashMap<String, (usize, usize, Expr)> = HashMap::new();
        for e in exprs.iter() {
            count(e, updated, &mut counts);
        }
        let best = counts
            .into_iter()
            .filter(|(_, (n, size, _))| *n >= 2 && *size >= MIN_NODES)
            .min_by(|a, b| a.1.1.cmp(&b.1.1).then_with(|| a.0.cmp(&b.0)));
        let Some((key, (_, _, value))) = best else {
            return lets;
        };
        let name = fresh();
        for e in exprs.iter_mut() {
            replace(e, &key, &name);
        }
        lets.push((name, value));
    }
}

/// Count every bindable subexpression of `e` by its printed form; returns whether `e` itself
/// is bindable and its node count.
fn count(
    e: &Expr,
    updated: &HashSet<String>,
    out: &mut HashMap<String, (usize, usize, Expr)>,
) -> (bool, usize) {
    let children: Vec<&Expr> = match &e.kind {
        ExprKind::Literal(_) | ExprKind::Name(_) => vec![],
        ExprKind::Missing => return (false, 1),
        ExprKind::Access(a) => {
            let ok = a.indices.is_empty() && !updated.contains(&a.tensor);
            return (ok, 1);
        }
        ExprKind::Unary(_, x) => vec![x],
        ExprKind::Binary(op, x, y) => {
            if matches!(op, BinaryOp::Rem) {
                count(x, updated, out);
                count(y, updated, out);
                return (false, 1);
            }
            vec![x, y]
        }
        ExprKind::Call(name, args) => {
            let pure = matches!(
                name.as_str(),
                "min" | "max" | "abs" | "sqrt" | "exp" | "log" | "ifelse"
            ) || crate::ir::math::Math1::ALL.iter().any(|f| f.name() == name)
                || crate::ir::math::Math2::ALL.iter().any(|f| f.name() == name);
            let mut size = 1;
            for a in args {
                size += count(a, updated, out).1;
            }
            if !pure {
                return (false, size);
            }
            args.iter().collect()
        }
    };
    let mut ok = true;
    let mut size = 1;
    for c in children {
        let (b, s) = count(c, updated, out);
        ok &= b;
        size += s;
    }
    if ok && size >= MIN_NODES {
        let entry = out
            .entry(e.to_string())
            .or_insert_with(|| (0, size, e.clone()));
        entry.0 += 1;
    }
    (ok, size)
}

/// Replace every subexpression of `e` printed as `key` by the variable `name`.
fn replace(e: &mut Expr, key: &str, name: &str) {
    if e.to_string() == key {
        *e = Expr::new(ExprKind::Name(name.to_string()), e.span);
        return;
    }
    match &mut e.kind {
        ExprKind::Unary(_, x) => replace(x, key, name),
        ExprKind::Binary(_, x, y) => {
            replace(x, key, name);
            replace(y, key, name);
        }
        ExprKind::Call(_, args) => {
            for a in args {
                replace(a, key, name);
            }
        }
        ExprKind::Access(a) => {
            for ix in &mut a.indices {
                replace(&mut ix.expr, key, name);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_expr;

    fn shared(exprs: &[&str], updated: &[&str]) -> (Vec<String>, Vec<String>) {
        let mut es: Vec<Expr> = exprs.iter().map(|e| parse_expr(e).unwrap()).collect();
        let updated = updated.iter().map(|s| s.to_string()).collect();
        let mut k = 0;
        let lets = share(&mut es, &updated, &mut || {
            k += 1;
            format!("g{k}")
        });
        (
            lets.iter().map(|(n, v)| format!("{n} = {v}")).collect(),
            es.iter().map(|e| e.to_string()).collect(),
        )
    }

    /// The clamp's mask, repeated in every contribution, is computed once; the smaller
    /// repeated product inside it first.
    #[test]
    fn repeated_masks_are_bound_smallest_first() {
        let m = "ifelse((q * e + p) * r >= 0.0, dt[], 0.0)";
        let (lets, es) = shared(&[&format!("{m} * r * e"), &format!("{m} * q")], &["de"]);
        assert_eq!(
            lets,
            [
                "g1 = q * e + p",
                "g2 = g1 * r >= 0.0",
                "g3 = ifelse(g2, dt[], 0.0)"
            ]
        );
        assert_eq!(es, ["g3 * r * e", "g3 * q"]);
    }

    /// Indexed reads stay in their statements (a sparse factor must keep annihilating it),
    /// as do the gradients the contributions update, `%`, and small expressions.
    #[test]
    fn indexed_reads_updated_gradients_and_small_expressions_stay() {
        let (lets, _) = shared(&["A[i, j] * (x + y) * 2.0", "A[i, j] * (x + y) * 2.0"], &[]);
        assert!(lets.is_empty(), "{lets:?}");
        let (lets, _) = shared(&["exp(dy[] * 2.0)", "exp(dy[] * 2.0)"], &["dy"]);
        assert!(lets.is_empty(), "{lets:?}");
        let (lets, _) = shared(&["(a % b) + c * d", "(a % b) + c * d"], &[]);
        assert!(lets.is_empty(), "{lets:?}");
        let (lets, _) = shared(&["dy[] * x3[]", "dy[] * x3[]"], &[]);
        assert!(lets.is_empty(), "{lets:?}");
    }
}
