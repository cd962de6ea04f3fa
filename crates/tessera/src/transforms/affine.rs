//! Recognising the index expressions that wrapperization turns into structure instead of
//! random access: an offset index `i + c` (Finch's offset and toeplitz wrappers, `A[i + c]`,
//! `A[i + j]`) and a comparison of a loop index with a bound (mask tensors, `i <= j`).
//!
//! Both take the *deepest* loop index of the expression as the iterated index; everything else
//! must be fixed while that loop runs (outer loop indices, `let` names bound outside it, integer
//! literals, `size(...)`), so the lowering can compute it once per entry into the loop.

use crate::notation::ast::{BinaryOp, Expr, ExprKind, Span, UnaryOp};
use crate::semantics::Builtin;
use crate::types::Scalar;

/// The names in scope, outermost first, and whether each is a loop index.
pub struct Scope<'a> {
    pub names: &'a [(String, bool)],
}

impl Scope<'_> {
    /// Binding depth of a loop index.
    fn loop_depth(&self, n: &str) -> Option<usize> {
        let d = self.names.iter().rposition(|(m, _)| m == n)?;
        self.names[d].1.then_some(d)
    }
    fn depth(&self, n: &str) -> Option<usize> {
        self.names.iter().rposition(|(m, _)| m == n)
    }

    /// The deepest loop index the expression mentions.
    fn deepest(&self, e: &Expr) -> Option<(String, usize)> {
        let mut best: Option<(String, usize)> = None;
        names(e, &mut |n| {
            if let Some(d) = self.loop_depth(n)
                && best.as_ref().is_none_or(|(_, b)| d > *b)
            {
                best = Some((n.to_string(), d));
            }
        });
        best
    }

    /// Whether `e` is integer arithmetic on names bound above `depth`, integer literals and
    /// `size(...)`: a value fixed while the loop at `depth` runs.
    fn invariant(&self, e: &Expr, depth: usize) -> bool {
        match &e.kind {
            // A float literal is a real offset (`x[i + 2.5]` on a real dimension); on an
            // integer dimension the lowering refuses it as a float index, as before.
            ExprKind::Literal(Scalar::I64(_) | Scalar::F64(_)) => true,
            ExprKind::Name(n) => self.depth(n).is_some_and(|d| d < depth),
            ExprKind::Unary(UnaryOp::Neg, x) => self.invariant(x, depth),
            ExprKind::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul, x, y) => {
                self.invariant(x, depth) && self.invariant(y, depth)
            }
            ExprKind::Call(f, args) => f == Builtin::Size.name() && args.len() == 2,
            _ => false,
        }
    }

    /// `e` as `index + offset`: a sum and difference of terms (`i`, `i + c`, `c + i`,
    /// `i - c`, `(i + a) - b`, `a + (i + b)`...) in which `i`, the deepest loop index, appears
    /// once, added, and every other term is invariant in its loop. `None` when `e` has another
    /// shape (`c - i` runs backwards; `2 * i` is scaled).
    pub fn affine(&self, e: &Expr) -> Option<(String, Option<Expr>)> {
        let (i, depth) = self.deepest(e)?;
        let mut terms = vec![];
        flatten(e, true, &mut terms);
        let mut found = false;
        let mut offset: Option<Expr> = None;
        for (added, t) in terms {
            if matches!(&t.kind, ExprKind::Name(n) if *n == i) {
                if !added || found {
                    return None;
                }
                found = true;
            } else if self.invariant(t, depth) {
                offset = Some(match offset {
                    None if added => t.clone(),
                    None => neg(t),
                    Some(o) => bin(
                        if added { BinaryOp::Add } else { BinaryOp::Sub },
                        o,
                        t.clone(),
                    ),
                });
            } else {
                return None;
            }
        }
        found.then_some((i, offset))
    }

    /// A comparison of the deepest loop index with a bound fixed in its loop, as the range
    /// where it holds: `(index, lo, hi, inside)` meaning `lo <= index <= hi` gives `inside`.
    pub fn mask(&self, op: BinaryOp, x: &Expr, y: &Expr) -> Option<MaskRange> {
        use BinaryOp::*;
        if !matches!(op, Lt | Le | Gt | Ge | Eq | Ne) {
            return None;
        }
        let whole = Expr::new(
            ExprKind::Binary(op, Box::new(x.clone()), Box::new(y.clone())),
            x.span,
        );
        let (i, depth) = self.deepest(&whole)?;
        // `index + c OP bound` with the index on the left.
        let (op, side, bound) = match (self.affine(x), self.affine(y)) {
            (Some((a, c)), _) if a == i && self.invariant(y, depth) => (op, c, y),
            (_, Some((b, c))) if b == i && self.invariant(x, depth) => (flip(op), c, x),
            _ => return None,
        };
        // index OP bound - c
        let bound = match side {
            None => bound.clone(),
            Some(c) => bin(BinaryOp::Sub, bound.clone(), c),
        };
        let span = bound.span;
        let one = || Expr::new(ExprKind::Literal(Scalar::I64(1)), span);
        let (lo, hi, inside) = match op {
            Lt => (None, Some(bin(Sub, bound, one())), true),
            Le => (None, Some(bound), true),
            Gt => (Some(bin(Add, bound, one())), None, true),
            Ge => (Some(bound), None, true),
            Eq => (Some(bound.clone()), Some(bound), true),
            Ne => (Some(bound.clone()), Some(bound), false),
            _ => unreachable!("filtered above"),
        };
        Some(MaskRange {
            index: i,
            lo,
            hi,
            inside,
        })
    }
}

pub struct MaskRange {
    pub index: String,
    pub lo: Option<Expr>,
    pub hi: Option<Expr>,
    pub inside: bool,
}

fn flip(op: BinaryOp) -> BinaryOp {
    match op {
        BinaryOp::Lt => BinaryOp::Gt,
        BinaryOp::Le => BinaryOp::Ge,
        BinaryOp::Gt => BinaryOp::Lt,
        BinaryOp::Ge => BinaryOp::Le,
        other => other,
    }
}

fn bin(op: BinaryOp, x: Expr, y: Expr) -> Expr {
    let span = x.span;
    Expr::new(ExprKind::Binary(op, Box::new(x), Box::new(y)), span)
}

/// The terms of a sum and difference, each with whether it is added (`a - (b - c)` is `+a`,
/// `-b`, `+c`).
fn flatten<'a>(e: &'a Expr, added: bool, out: &mut Vec<(bool, &'a Expr)>) {
    match &e.kind {
        ExprKind::Binary(BinaryOp::Add, x, y) => {
            flatten(x, added, out);
            flatten(y, added, out);
        }
        ExprKind::Binary(BinaryOp::Sub, x, y) => {
            flatten(x, added, out);
            flatten(y, !added, out);
        }
        _ => out.push((added, e)),
    }
}

fn neg(e: &Expr) -> Expr {
    match &e.kind {
        ExprKind::Literal(Scalar::I64(v)) => {
            Expr::new(ExprKind::Literal(Scalar::I64(v.wrapping_neg())), e.span)
        }
        ExprKind::Literal(Scalar::F64(v)) => Expr::new(ExprKind::Literal(Scalar::F64(-v)), e.span),
        _ => Expr::new(ExprKind::Unary(UnaryOp::Neg, Box::new(e.clone())), e.span),
    }
}

/// Every name an expression mentions (not inside accesses: their indices are other
/// expressions, and an access makes the expression non-affine anyway).
fn names(e: &Expr, f: &mut dyn FnMut(&str)) {
    match &e.kind {
        ExprKind::Name(n) => f(n),
        ExprKind::Unary(_, x) => names(x, f),
        ExprKind::Binary(_, x, y) => {
            names(x, f);
            names(y, f);
        }
        ExprKind::Call(_, args) => args.iter().for_each(|a| names(a, f)),
        ExprKind::Access(a) => a.indices.iter().for_each(|ix| names(&ix.expr, f)),
        ExprKind::Literal(_) | ExprKind::Missing => {}
    }
}

/// `index + offset` as an expression (for passes that need the coordinate itself).
pub fn offset_expr(index: &str, offset: &Option<Expr>, span: Span) -> Expr {
    let i = Expr::new(ExprKind::Name(index.to_string()), span);
    match offset {
        None => i,
        Some(o) => bin(BinaryOp::Add, i, o.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_expr;

    fn scope(names: &[(&str, bool)]) -> Vec<(String, bool)> {
        names.iter().map(|(n, l)| (n.to_string(), *l)).collect()
    }

    fn show(e: &Option<Expr>) -> String {
        e.as_ref().map_or("-".into(), |e| e.to_string())
    }

    #[test]
    fn affine_picks_the_deepest_index() {
        let names = scope(&[("i", true), ("t", false), ("j", true)]);
        let s = Scope { names: &names };
        let e = |t: &str| parse_expr(t).unwrap();
        let (i, o) = s.affine(&e("i + j")).unwrap();
        assert_eq!((i.as_str(), show(&o).as_str()), ("j", "i"));
        let (i, o) = s.affine(&e("j - (i + 1)")).unwrap();
        assert_eq!((i.as_str(), show(&o).as_str()), ("j", "-i - 1"));
        // Sums nest either way; the offset keeps the other terms in order.
        let (i, o) = s.affine(&e("(j + 0.1 * t) + 0.1")).unwrap();
        assert_eq!((i.as_str(), show(&o).as_str()), ("j", "0.1 * t + 0.1"));
        let (i, o) = s.affine(&e("t - (1 - j)")).unwrap();
        assert_eq!((i.as_str(), show(&o).as_str()), ("j", "t - 1"));
        let (i, o) = s.affine(&e("t + j")).unwrap();
        assert_eq!((i.as_str(), show(&o).as_str()), ("j", "t"));
        assert!(s.affine(&e("j - i")).is_some());
        // Not affine with coefficient 1 in the deepest index, or not fixed in its loop.
        assert!(s.affine(&e("i - j")).is_none());
        assert!(s.affine(&e("2 * j")).is_none());
        assert!(s.affine(&e("j + j")).is_none());
        assert!(s.affine(&e("t - (j + 1)")).is_none());
        assert!(s.affine(&e("j + x[i]")).is_none());
        // A float offset is affine (a real offset on a real dimension).
        assert!(s.affine(&e("j + 0.5")).is_some());
    }

    #[test]
    fn comparisons_become_ranges_of_the_deepest_index() {
        let names = scope(&[("i", true), ("j", true)]);
        let s = Scope { names: &names };
        let m = |t: &str| {
            let e = parse_expr(t).unwrap();
            let ExprKind::Binary(op, x, y) = &e.kind else {
                panic!()
            };
            s.mask(*op, x, y)
                .map(|r| format!("{} {} {} {}", r.index, show(&r.lo), show(&r.hi), r.inside))
        };
        assert_eq!(m("i <= j").unwrap(), "j i - true");
        assert_eq!(m("j <= i").unwrap(), "j - i true");
        assert_eq!(m("i < j").unwrap(), "j i + 1 - true");
        assert_eq!(m("i == j").unwrap(), "j i i true");
        assert_eq!(m("i != j").unwrap(), "j i i false");
        assert_eq!(m("j - 1 >= 0").unwrap(), "j 0 - -1 - true");
        assert_eq!(m("j + 2 < i").unwrap(), "j - i - 2 - 1 true");
        assert!(m("j * 2 < i").is_none());
        assert!(m("i + j").is_none());
    }
}
