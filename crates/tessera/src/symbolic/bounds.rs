//! A small prover for extent facts, so the lowering can drop phases that are provably empty
//! (a mask phase `j < 0` of a loop that starts at 0, the second of two masks cutting at the
//! same place) and lower phases of at most one coordinate as a point (the edge phases a
//! permissive access `A[~(j - 1)]` cuts at `j = 0` and `j = size - 1`).
//!
//! Bounds are linear forms over opaque terms (variables without facts, loads, dimensions), so
//! `min(n - 1, stop)` with `stop = n - 1` and `max(start, n - 2 + 1)` compare symbolically. An
//! expression has several candidate bounds (`min(a, b)` is below both `a` and `b`); a
//! comparison holds when some pair of candidates differs by a constant of the right sign.

use crate::ir::{BinOp, Expr, VarId};
use crate::types::Scalar;
use std::cell::RefCell;
use std::collections::HashMap;

/// At most this many candidate bounds per expression (the simplest are kept).
const CANDIDATES: usize = 8;

/// `c + Σ k·term`: a bound as a linear form.
#[derive(Clone, Debug, PartialEq)]
struct Lin {
    c: i64,
    terms: Vec<(Expr, i64)>,
}

impl Lin {
    fn constant(c: i64) -> Lin {
        Lin { c, terms: vec![] }
    }
    fn term(e: &Expr) -> Lin {
        Lin {
            c: 0,
            terms: vec![(e.clone(), 1)],
        }
    }
    fn scaled(&self, k: i64) -> Option<Lin> {
        Some(Lin {
            c: self.c.checked_mul(k)?,
            terms: self
                .terms
                .iter()
                .map(|(e, x)| Some((e.clone(), x.checked_mul(k)?)))
                .collect::<Option<_>>()?,
        })
    }
    fn plus(&self, o: &Lin) -> Option<Lin> {
        let mut r = self.clone();
        r.c = r.c.checked_add(o.c)?;
        for (e, k) in &o.terms {
            match r.terms.iter().position(|(f, _)| f == e) {
                Some(p) => {
                    r.terms[p].1 = r.terms[p].1.checked_add(*k)?;
                    if r.terms[p].1 == 0 {
                        r.terms.remove(p);
                    }
                }
                None => r.terms.push((e.clone(), *k)),
            }
        }
        Some(r)
    }
    /// `self - o` when it is a constant.
    fn minus_const(&self, o: &Lin) -> Option<i64> {
        let d = self.plus(&o.scaled(-1)?)?;
        d.terms.is_empty().then_some(d.c)
    }
}

/// Candidate bounds by (variable, upper); `None` while being computed.
type Cache = HashMap<(VarId, bool), Option<Vec<Lin>>>;

/// Bounds of variables assigned from known expressions (phase starts and stops, pinned
/// extents), of loop variables (the extent they run over) and equalities of dimensions.
#[derive(Default)]
pub struct Facts {
    vars: HashMap<VarId, (Option<Expr>, Option<Expr>)>,
    /// The candidate bounds of each variable, computed once (facts never change once
    /// recorded); `None` while being computed, which stops a cycle.
    cache: RefCell<Cache>,
}

impl Facts {
    /// `v` always holds the value of `e`.
    pub fn record(&mut self, v: VarId, e: &Expr) {
        self.record_range(v, Some(e.clone()), Some(e.clone()));
    }

    /// `lo <= v <= hi` wherever `v` is read. Facts are recorded for fresh variables, before
    /// any bound mentions them, so no cached bound depends on an older fact of `v`.
    pub fn record_range(&mut self, v: VarId, lo: Option<Expr>, hi: Option<Expr>) {
        self.vars.insert(v, (lo, hi));
        let mut cache = self.cache.borrow_mut();
        cache.remove(&(v, false));
        cache.remove(&(v, true));
    }

    pub fn lower(&self, e: &Expr) -> Option<i64> {
        let all = self.bounds(e, false);
        all.iter().filter(|l| l.terms.is_empty()).map(|l| l.c).max()
    }

    pub fn upper(&self, e: &Expr) -> Option<i64> {
        let all = self.bounds(e, true);
        all.iter().filter(|l| l.terms.is_empty()).map(|l| l.c).min()
    }

    /// The largest proven value of `b - a` (None when nothing is known).
    fn max_gap(&self, a: &Expr, b: &Expr) -> Option<i64> {
        let lows = self.bounds(a, false);
        let highs = self.bounds(b, true);
        highs
            .iter()
            .flat_map(|h| lows.iter().filter_map(move |l| h.minus_const(l)))
            .min()
    }

    /// The smallest proven value of `b - a` (None when nothing is known).
    fn min_gap(&self, a: &Expr, b: &Expr) -> Option<i64> {
        let highs = self.bounds(a, true);
        let lows = self.bounds(b, false);
        lows.iter()
            .flat_map(|l| highs.iter().filter_map(move |h| l.minus_const(h)))
            .max()
    }

    /// Whether `a <= b` always.
    pub fn le(&self, a: &Expr, b: &Expr) -> bool {
        self.min_gap(a, b).is_some_and(|g| g >= 0)
    }

    /// Whether `a < b` always.
    pub fn lt(&self, a: &Expr, b: &Expr) -> bool {
        self.min_gap(a, b).is_some_and(|g| g > 0)
    }

    /// Whether the range `start..=stop` is provably empty.
    pub fn empty(&self, start: &Expr, stop: &Expr) -> bool {
        self.max_gap(start, stop).is_some_and(|g| g < 0)
    }

    /// Whether the range `start..=stop` provably holds at most one coordinate (`start`).
    pub fn at_most_one(&self, start: &Expr, stop: &Expr) -> bool {
        self.max_gap(start, stop).is_some_and(|g| g <= 0)
    }

    /// Candidate upper (or lower) bounds of `e`, simplest first.
    fn bounds(&self, e: &Expr, upper: bool) -> Vec<Lin> {
        let mut out = match e {
            Expr::Const(Scalar::I64(c)) => return vec![Lin::constant(*c)],
            Expr::Var(v) => {
                if let Some(known) = self.cache.borrow().get(&(*v, upper)) {
                    return known.clone().unwrap_or_else(|| vec![Lin::term(e)]);
                }
                self.cache.borrow_mut().insert((*v, upper), None);
                let mut out = vec![];
                if let Some((lo, hi)) = self.vars.get(v)
                    && let Some(d) = if upper { hi } else { lo }
                {
                    out = self.bounds(d, upper);
                }
                out.push(Lin::term(e));
                let out = simplest(out);
                self.cache
                    .borrow_mut()
                    .insert((*v, upper), Some(out.clone()));
                return out;
            }
            Expr::Binary(op, a, b) => self.binary(*op, a, b, upper),
            _ => vec![],
        };
        // Every expression bounds itself; opaque ones compare as terms.
        out.push(Lin::term(e));
        simplest(out)
    }

    fn binary(&self, op: BinOp, a: &Expr, b: &Expr, upper: bool) -> Vec<Lin> {
        let pairs = |x: Vec<Lin>, y: Vec<Lin>, f: &dyn Fn(&Lin, &Lin) -> Option<Lin>| {
            let mut out = vec![];
            for p in &x {
                for q in &y {
                    if let Some(r) = f(p, q)
                        && !out.contains(&r)
                    {
                        out.push(r);
                    }
                }
            }
            out
        };
        match op {
            BinOp::Add => pairs(self.bounds(a, upper), self.bounds(b, upper), &|p, q| {
                p.plus(q)
            }),
            // The upper bound of a - b needs the lower bound of b, and vice versa.
            BinOp::Sub => pairs(self.bounds(a, upper), self.bounds(b, !upper), &|p, q| {
                p.plus(&q.scaled(-1)?)
            }),
            BinOp::Mul => match (a, b) {
                (Expr::Const(Scalar::I64(k)), x) | (x, Expr::Const(Scalar::I64(k))) => {
                    let flip = *k < 0;
                    self.bounds(x, upper != flip)
                        .iter()
                        .filter_map(|l| l.scaled(*k))
                        .collect()
                }
                _ => vec![],
            },
            // min(a, b) is below each of a and b; it is above a bound of both.
            BinOp::Min if upper => {
                let mut out = self.bounds(a, true);
                out.extend(self.bounds(b, true));
                out
            }
            BinOp::Max if !upper => {
                let mut out = self.bounds(a, false);
                out.extend(self.bounds(b, false));
                out
            }
            BinOp::Min | BinOp::Max => {
                pairs(self.bounds(a, upper), self.bounds(b, upper), &|p, q| {
                    // The weaker of two comparable bounds holds for both.
                    let d = p.minus_const(q)?;
                    let p_weaker = if upper { d >= 0 } else { d <= 0 };
                    Some(if p_weaker { p.clone() } else { q.clone() })
                })
            }
            _ => vec![],
        }
    }
}

/// Distinct candidates, the simplest (fewest terms) first, at most `CANDIDATES`.
fn simplest(all: Vec<Lin>) -> Vec<Lin> {
    let mut unique: Vec<Lin> = vec![];
    for l in all {
        if !unique.contains(&l) {
            unique.push(l);
        }
    }
    unique.sort_by_key(|l| l.terms.len());
    unique.truncate(CANDIDATES);
    unique
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

    #[test]
    fn symbolic_bounds_find_points_and_empty_phases() {
        let mut f = Facts::default();
        let (n, stop, hi, next) = (VarId(0), VarId(1), VarId(2), VarId(3));
        let dim = b::var(n);
        f.record(stop, &b::sub(dim.clone(), b::int(1)));
        // The first phase of a mask `j >= 1` over 0..=stop: at most the point 0.
        assert!(f.at_most_one(&b::int(0), &b::min(b::int(0), b::var(stop))));
        assert!(!f.empty(&b::int(0), &b::min(b::int(0), b::var(stop))));
        // The middle phase up to n - 2, then the rest of the loop: at most the point n - 1.
        f.record(hi, &b::min(b::sub(dim.clone(), b::int(2)), b::var(stop)));
        f.record(next, &b::max(b::int(1), b::add(b::var(hi), b::int(1))));
        assert!(f.at_most_one(&b::var(next), &b::var(stop)));
        assert!(!f.at_most_one(&b::int(1), &b::var(hi)));
        // A phase cut at n leaves nothing after the loop's stop n - 1.
        let cut = b::min(dim.clone(), b::var(stop));
        assert!(f.empty(&b::max(b::int(0), b::add(cut, b::int(1))), &b::var(stop)));
        // Loop variables: i in 2..=stop, so `i - 3 < i` but nothing fixes `i` itself.
        let i = VarId(4);
        f.record_range(i, Some(b::int(2)), Some(b::var(stop)));
        assert_eq!(f.lower(&b::var(i)), Some(2));
        assert!(f.empty(&b::var(i), &b::sub(b::var(i), b::int(3))));
        assert!(f.at_most_one(&b::var(i), &b::var(i)));
        assert!(!f.at_most_one(&b::var(i), &b::var(stop)));
        assert!(f.le(&b::var(i), &b::var(stop)) && f.lt(&b::sub(b::var(i), b::int(1)), &b::var(i)));
        assert!(!f.le(&b::var(stop), &b::var(i)) && !f.lt(&b::var(i), &b::var(i)));
    }
}
