//! Integer expressions as linear forms `c + Σ kᵢ·nameᵢ`, for facts that hold whatever the
//! names' values are: the size `hi - lo + 1` of a window `(j:j+2)` is 3 for every `j`.

use crate::notation::ast::{BinaryOp, Expr, ExprKind, UnaryOp};
use crate::semantics::Builtin;
use crate::types::Scalar;
use std::collections::BTreeMap;

/// `constant + Σ coefficient·name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Linear {
    pub constant: i64,
    pub terms: BTreeMap<String, i64>,
}

/// The extent of dimension `d` of a tensor, when known (for `size(A, d)`).
pub type Sizes<'a> = &'a dyn Fn(&str, usize) -> Option<usize>;

impl Linear {
    fn constant(c: i64) -> Linear {
        Linear {
            constant: c,
            terms: BTreeMap::new(),
        }
    }

    /// `self + k·other`, `None` on overflow.
    fn add_scaled(mut self, other: &Linear, k: i64) -> Option<Linear> {
        self.constant = self.constant.checked_add(other.constant.checked_mul(k)?)?;
        for (n, c) in &other.terms {
            let e = self.terms.entry(n.clone()).or_insert(0);
            *e = e.checked_add(c.checked_mul(k)?)?;
        }
        self.terms.retain(|_, c| *c != 0);
        Some(self)
    }

    fn scale(&self, k: i64) -> Option<Linear> {
        Linear::constant(0).add_scaled(self, k)
    }

    /// The value, if no name is left.
    pub fn as_constant(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.constant)
    }
}

/// `e` as a linear form over its names; `None` if it is not one (a product of names, a float,
/// a tensor read, an unknown size...).
pub fn linear(e: &Expr, sizes: Sizes) -> Option<Linear> {
    match &e.kind {
        ExprKind::Literal(Scalar::I64(v)) => Some(Linear::constant(*v)),
        ExprKind::Name(n) => Some(Linear {
            constant: 0,
            terms: BTreeMap::from([(n.clone(), 1)]),
        }),
        ExprKind::Unary(UnaryOp::Neg, x) => linear(x, sizes)?.scale(-1),
        ExprKind::Binary(op @ (BinaryOp::Add | BinaryOp::Sub), x, y) => {
            let k = if *op == BinaryOp::Add { 1 } else { -1 };
            linear(x, sizes)?.add_scaled(&linear(y, sizes)?, k)
        }
        ExprKind::Binary(BinaryOp::Mul, x, y) => {
            let (x, y) = (linear(x, sizes)?, linear(y, sizes)?);
            match (x.as_constant(), y.as_constant()) {
                (Some(c), _) => y.scale(c),
                (_, Some(c)) => x.scale(c),
                _ => None,
            }
        }
        // `div(a, b)` of two constants (the truncating quotient, as `div` computes it): the
        // outer extent `0:div(n - 1, F)` of `split(i, F)` is then a constant too, so the
        // tensors indexed by the derived loop `i.0` (a gradient's tapes) get their shape.
        ExprKind::Call(f, args) if f == Builtin::Div.name() => match args.as_slice() {
            [x, y] => {
                let (x, y) = (linear(x, sizes)?.as_constant()?, linear(y, sizes)?);
                Some(Linear::constant(x.checked_div(y.as_constant()?)?))
            }
            _ => None,
        },
        ExprKind::Call(f, args) if f == Builtin::Size.name() => match args.as_slice() {
            [t, d] => match (&t.kind, &d.kind) {
                (ExprKind::Name(t), ExprKind::Literal(Scalar::I64(d))) if *d >= 0 => {
                    let n = sizes(t, *d as usize)?;
                    Some(Linear::constant(i64::try_from(n).ok()?))
                }
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// `e`'s value, if it is the same whatever its names are.
pub fn constant(e: &Expr, sizes: Sizes) -> Option<i64> {
    linear(e, sizes)?.as_constant()
}

/// The number of coordinates of the window `lo:hi` (0 when `hi < lo`), if it is the same
/// whatever the names in `lo` and `hi` are.
pub fn window_size(lo: &Expr, hi: &Expr, sizes: Sizes) -> Option<i64> {
    let d = linear(hi, sizes)?.add_scaled(&linear(lo, sizes)?, -1)?;
    Some(d.as_constant()?.saturating_add(1).max(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_expr;

    fn sizes(t: &str, d: usize) -> Option<usize> {
        (t == "A").then_some(10 + d)
    }

    fn size_of(lo: &str, hi: &str) -> Option<i64> {
        window_size(&parse_expr(lo).unwrap(), &parse_expr(hi).unwrap(), &sizes)
    }

    #[test]
    fn window_sizes() {
        assert_eq!(size_of("2", "4"), Some(3));
        assert_eq!(size_of("j", "j + 2"), Some(3));
        assert_eq!(size_of("j - 1", "1 + j"), Some(3));
        assert_eq!(size_of("2 * j", "j + j + 4"), Some(5));
        assert_eq!(size_of("0", "size(A, 1) - 1"), Some(11));
        assert_eq!(size_of("3", "2"), Some(0));
        assert_eq!(size_of("5", "0"), Some(0));
        assert_eq!(size_of("j", "k"), None);
        assert_eq!(size_of("0", "size(B, 0) - 1"), None);
        assert_eq!(size_of("0", "j * k"), None);
        assert_eq!(size_of("0", "x[j]"), None);
        assert_eq!(size_of("0", "9223372036854775807 + 1"), None);
    }

    #[test]
    fn constants() {
        let c = |s: &str| constant(&parse_expr(s).unwrap(), &sizes);
        assert_eq!(c("-(3 - 5) * 2"), Some(4));
        assert_eq!(c("size(A, 0)"), Some(10));
        assert_eq!(c("j - j + 1"), Some(1));
        assert_eq!(c("j"), None);
        assert_eq!(c("1.5"), None);
        assert_eq!(c("div(size(A, 0) - 1, 4)"), Some(2));
        assert_eq!(c("div(-7, 2)"), Some(-3));
        assert_eq!(c("div(7, 0)"), None);
        assert_eq!(c("div(j, 2)"), None);
    }
}
