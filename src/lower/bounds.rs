//! A small prover for extent facts: constant lower and upper bounds of index expressions, so
//! the lowering can drop phases that are provably empty (a mask phase `j < 0` of a loop that
//! starts at 0, the second of two masks cutting at the same place) without emitting them.

use crate::ir::{BinOp, Expr, VarId};
use crate::types::Scalar;
use std::collections::HashMap;

/// Bounds of variables assigned once from a known expression (phase starts and stops).
#[derive(Default)]
pub struct Facts {
    vars: HashMap<VarId, (Option<i64>, Option<i64>)>,
}

impl Facts {
    /// `v` always holds the value of `e`.
    pub fn record(&mut self, v: VarId, e: &Expr) {
        let r = (self.lower(e), self.upper(e));
        if r != (None, None) {
            self.vars.insert(v, r);
        }
    }

    pub fn lower(&self, e: &Expr) -> Option<i64> {
        self.bound(e, false)
    }

    pub fn upper(&self, e: &Expr) -> Option<i64> {
        self.bound(e, true)
    }

    /// Whether the range `start..=stop` is provably empty.
    pub fn empty(&self, start: &Expr, stop: &Expr) -> bool {
        matches!((self.lower(start), self.upper(stop)), (Some(a), Some(b)) if b < a)
    }

    fn bound(&self, e: &Expr, upper: bool) -> Option<i64> {
        match e {
            Expr::Const(Scalar::I64(c)) => Some(*c),
            Expr::Var(v) => self.vars.get(v).and_then(|r| if upper { r.1 } else { r.0 }),
            Expr::Binary(op, a, b) => {
                let (x, y) = (self.bound(a, upper), self.bound(b, upper));
                match op {
                    BinOp::Add => x?.checked_add(y?),
                    // The upper bound of a - b needs the lower bound of b, and vice versa.
                    BinOp::Sub => x?.checked_sub(self.bound(b, !upper)?),
                    // min(a, b) <= either bound; min(a, b) >= both lower bounds.
                    BinOp::Min if upper => match (x, y) {
                        (Some(x), Some(y)) => Some(x.min(y)),
                        (x, y) => x.or(y),
                    },
                    BinOp::Min => Some(x?.min(y?)),
                    BinOp::Max if !upper => match (x, y) {
                        (Some(x), Some(y)) => Some(x.max(y)),
                        (x, y) => x.or(y),
                    },
                    BinOp::Max => Some(x?.max(y?)),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build as b;

    #[test]
    fn bounds_follow_min_max_and_offsets() {
        let mut f = Facts::default();
        let (n, p) = (VarId(0), VarId(1));
        let stop = b::min(b::int(-2), b::var(n));
        assert_eq!(f.upper(&stop), Some(-2));
        assert!(f.empty(&b::int(0), &stop));
        assert!(!f.empty(&b::int(-5), &stop));
        f.record(p, &b::max(b::int(1), b::add(b::var(n), b::int(1))));
        assert_eq!(f.lower(&b::var(p)), Some(1));
        assert_eq!(f.upper(&b::var(p)), None);
        assert!(f.empty(&b::var(p), &b::sub(b::int(3), b::int(3))));
        // Nothing is known about a plain variable.
        assert!(!f.empty(&b::var(n), &b::int(0)));
    }
}
