//! How a real loop is visited: the pieces of every access it drives, mapped back to the loop's
//! coordinate, partition the line; their common refinement, clipped to the loop's range, is
//! the fewest cells on each of which every such access is constant (seed §1.4). A cell is a
//! pinpoint `[p, p]` or an interval of positive length.

use crate::limit::Limit;
use crate::notation::ast::{Access, Expr, ExprKind, Extent, Stmt, StmtKind};
use crate::notation::visit;

/// One cell of a real loop's range: a closed interval of `Limit` endpoints.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    pub lo: Limit<f64>,
    pub hi: Limit<f64>,
}

impl Cell {
    /// The Lebesgue measure (0 for a pinpoint).
    pub fn measure(self) -> f64 {
        if self.is_gap() {
            self.hi.val - self.lo.val
        } else {
            0.0
        }
    }

    /// Whether the cell has positive length (it is not a pinpoint).
    pub fn is_gap(self) -> bool {
        self.lo < self.hi
    }

    /// A point of the cell: the pinpoint, or a point strictly inside the interval (its
    /// middle, or a step of at least 1 inward from a finite end when the other is infinite).
    pub fn sample(self) -> f64 {
        let (lo, hi) = (self.lo.val, self.hi.val);
        if lo == hi {
            return lo;
        }
        match (lo.is_finite(), hi.is_finite()) {
            (true, true) => {
                let mid = lo + (hi - lo) / 2.0;
                if mid.is_finite() {
                    mid
                } else {
                    lo / 2.0 + hi / 2.0
                }
            }
            (false, true) => hi - 1f64.max(hi.abs()),
            (true, false) => lo + 1f64.max(lo.abs()),
            (false, false) => 0.0,
        }
    }
}

/// The cells of the range `[a, b]` cut where a piece of some partition starts (`starts`: each
/// piece `[lo, hi]` starts at `lo` and its successor at `hi`'s next point): cell `k` runs from
/// the `k`-th start to the point before the next one.
pub fn cells(a: f64, b: f64, starts: &[Limit<f64>]) -> Vec<Cell> {
    if a.is_nan() || b.is_nan() || a > b || a == f64::INFINITY || b == f64::NEG_INFINITY {
        return vec![];
    }
    let (first, end) = (Limit::exact(a), Limit::exact(b));
    let mut s: Vec<Limit<f64>> = starts
        .iter()
        .copied()
        .filter(|s| *s > first && *s <= end && !s.val.is_nan())
        .chain([first])
        .collect();
    s.sort_by(|x, y| x.partial_cmp(y).expect("no NaN"));
    s.dedup();
    (0..s.len())
        .map(|k| Cell {
            lo: s[k],
            hi: s.get(k + 1).map_or(end, |n| n.prev()),
        })
        .collect()
}

/// Every access `body` reads, nested ones included, in program order: not the tensors its
/// assignments write (their left-hand sides' positions are read, with their accesses).
pub fn reads<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Access)) {
    fn exprs<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Access)) {
        visit::expr(e, &mut |x: &'a Expr| {
            if let ExprKind::Access(a) = &x.kind {
                f(a)
            }
        })
    }
    for s in body {
        match &s.kind {
            StmtKind::Declare { init, .. } => exprs(init, f),
            StmtKind::Assign { lhs, rhs, .. } => {
                for ix in &lhs.indices {
                    if let Some((lo, hi)) = &ix.window {
                        exprs(lo, f);
                        exprs(hi, f);
                    }
                    exprs(&ix.expr, f);
                }
                exprs(rhs, f);
            }
            StmtKind::Loop { extent, body, .. } => {
                if let Extent::Range(a, b) = extent {
                    exprs(a, f);
                    exprs(b, f);
                }
                reads(body, f);
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                exprs(cond, f);
                reads(then, f);
                reads(otherwise, f);
            }
            StmtKind::Let { value, body, .. } => {
                exprs(value, f);
                reads(body, f);
            }
            StmtKind::Block(b) => reads(b, f),
            StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => {}
        }
    }
}

/// Every loop statement in pre-order (the order `transforms::real` lists their kinds).
pub fn loops<'a>(body: &'a [Stmt], out: &mut Vec<&'a Stmt>) {
    for s in body {
        match &s.kind {
            StmtKind::Loop { body, .. } => {
                out.push(s);
                loops(body, out);
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                loops(then, out);
                loops(otherwise, out);
            }
            StmtKind::Let { body, .. } | StmtKind::Block(body) => loops(body, out),
            _ => {}
        }
    }
}

/// Every name `e` uses, nested accesses' positions included.
pub fn all_names(e: &Expr) -> Vec<&str> {
    let mut out = vec![];
    visit::expr(e, &mut |x: &Expr| {
        if let ExprKind::Name(n) = &x.kind {
            out.push(n.as_str())
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_split_into_the_common_refinement() {
        let (e, pe) = (Limit::exact, Limit::plus_eps);
        let c = |lo, hi| Cell { lo, hi };
        // Pieces [2, 6] and [6, 8] over [0, 9]: starts 2, 6+ε and 6, 8+ε.
        let got = cells(0.0, 9.0, &[e(2.0), pe(6.0), e(6.0), pe(8.0)]);
        assert_eq!(
            got,
            [
                c(e(0.0), Limit::minus_eps(2.0)),
                c(e(2.0), Limit::minus_eps(6.0)),
                c(e(6.0), e(6.0)),
                c(pe(6.0), e(8.0)),
                c(pe(8.0), e(9.0)),
            ]
        );
        assert_eq!(
            got.iter().map(|c| c.is_gap()).collect::<Vec<_>>(),
            [true, true, false, true, true]
        );
        assert_eq!(got[1].measure(), 4.0);
        assert_eq!(got[2].measure(), 0.0);
        assert_eq!(got[1].sample(), 4.0);
        let inf = f64::INFINITY;
        assert_eq!(cells(-inf, inf, &[]), [c(e(-inf), e(inf))]);
        assert_eq!(cells(-inf, inf, &[]).first().unwrap().sample(), 0.0);
        // Starts outside the range are dropped; a one-point range is a pinpoint.
        assert_eq!(cells(3.0, 3.0, &[e(5.0), e(1.0)]), [c(e(3.0), e(3.0))]);
        assert_eq!(cells(3.0, 2.0, &[]), []);
        assert_eq!(
            cells(-inf, 4.0, &[e(1.0), pe(1.0)]),
            [
                c(e(-inf), Limit::minus_eps(1.0)),
                c(e(1.0), e(1.0)),
                c(pe(1.0), e(4.0))
            ]
        );
        assert_eq!(c(e(-inf), Limit::minus_eps(-4.0)).sample(), -8.0);
        assert_eq!(c(pe(2.0), e(inf)).sample(), 4.0);
        assert_eq!(c(pe(2.0), e(inf)).measure(), inf);
    }
}
