//! The extent of the loop being lowered, generic over the kind of index it ranges over.
//!
//! An extent is a closed interval `[start, stop]` of *points* of an [`IndexKind`]. Every rule
//! that cuts an extent (a sequence's phases, a spike's body and tail, a stepper's chunks) does
//! so through the kind: the piece that ends where the next starts at `p` ends at
//! [`IndexKind::before`]`(p)`, the piece after one ending at `p` starts at
//! [`IndexKind::after`]`(p)`, and integrating a body that does not depend on the index
//! multiplies by [`IndexKind::measure`].
//!
//! - [`Integer`] (the instance the engine lowers today): points are IR integer values,
//!   `after(p) = p + 1`, `before(p) = p - 1`, measure `stop - start + 1` (the number of
//!   coordinates).
//! - A real-valued instance (issue 14) takes `crate::limit::Limit` endpoints, so half-open and
//!   open ends are closed ones moved by ε: `after(p) = p + ε`, `before(p) = p - ε`, measure
//!   `stop - start` with the ε dropped, ε-saturating `add`/`sub`, and lexicographic order on
//!   (value, ε). The laws below hold for both; the tests check them on the integer instance and
//!   on `Limit<f64>` values.
//!
//! Laws (for exact points `p`, `a <= m <= b`):
//! - `before(p) < p < after(p)`, and `before(after(p)) == p == after(before(p))`;
//! - the measure is additive over a cut: `measure(a, b) == measure(a, before(m)) + measure(m, b)`;
//! - the empty extent `[p, before(p)]` measures 0; a point `[p, p]` measures 1 on integers
//!   (one coordinate), 0 on reals (a pinpoint has no length).

use crate::ir::cx::Cx;
use crate::ir::{BinOp, Expr, UnOp, build as b};
use crate::limit::Limit;
use crate::types::{ElemType, Scalar};
use std::fmt;

/// What an extent needs from the index it ranges over: its endpoints, how to step past one,
/// their arithmetic and order, and the measure of an extent.
pub trait IndexKind {
    /// An endpoint of an extent.
    type Point: Clone + PartialEq + fmt::Debug;
    /// The first point after `p` (where a piece starts when the previous one ends at `p`).
    fn after(p: &Self::Point) -> Self::Point;
    /// The last point before `p` (where a piece ends when the next one starts at `p`).
    fn before(p: &Self::Point) -> Self::Point;
    /// `a + b` (saturating the infinitesimals on reals).
    fn add(a: &Self::Point, b: &Self::Point) -> Self::Point;
    /// `a - b` (saturating the infinitesimals on reals).
    fn sub(a: &Self::Point, b: &Self::Point) -> Self::Point;
    /// The measure of the closed extent `[start, stop]`.
    fn measure(start: &Self::Point, stop: &Self::Point) -> Self::Point;
    /// `Some(a <= b)` when the order is known without running the kernel (constants, equal
    /// values), `None` otherwise; the engine's facts decide the rest.
    fn known_le(a: &Self::Point, b: &Self::Point) -> Option<bool>;
}

/// Integer indices: closed intervals of IR `i64` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Integer;

impl IndexKind for Integer {
    type Point = Expr;
    fn after(p: &Expr) -> Expr {
        b::add(p.clone(), b::int(1))
    }
    fn before(p: &Expr) -> Expr {
        b::sub(p.clone(), b::int(1))
    }
    fn add(a: &Expr, c: &Expr) -> Expr {
        b::add(a.clone(), c.clone())
    }
    fn sub(a: &Expr, c: &Expr) -> Expr {
        b::sub(a.clone(), c.clone())
    }
    fn measure(start: &Expr, stop: &Expr) -> Expr {
        b::add(b::sub(stop.clone(), start.clone()), b::int(1))
    }
    fn known_le(a: &Expr, c: &Expr) -> Option<bool> {
        match (a, c) {
            (Expr::Const(Scalar::I64(x)), Expr::Const(Scalar::I64(y))) => Some(x <= y),
            _ if a == c => Some(true),
            _ => None,
        }
    }
}

/// Real indices: closed intervals of IR `Limit` values (`ElemType::Limit`), whose ends are
/// moved by ε: `after(p) = p + ε`, `before(p) = p - ε` (saturating), and whose measure is the
/// length `val(stop) - val(start)` (an F64 value; ε dropped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Real;

impl IndexKind for Real {
    type Point = Expr;
    /// `after(before(q))` is `q` for every start of a real extent (a start is never `v - ε`,
    /// see `lower::continuous`), so the phase after a fill that ends just before a piece
    /// starts at the piece's own start.
    fn after(p: &Expr) -> Expr {
        match p {
            Expr::Unary(UnOp::Before, q) => (**q).clone(),
            p => b::after(p.clone()),
        }
    }
    fn before(p: &Expr) -> Expr {
        b::before(p.clone())
    }
    /// A point moved by a real offset: `val(a) + val(c)`, the infinitesimals added saturating.
    fn add(a: &Expr, c: &Expr) -> Expr {
        match (exact_zero(a), exact_zero(c)) {
            (true, _) => return c.clone(),
            (_, true) => return a.clone(),
            _ => {}
        }
        b::make_limit(
            b::add(b::limit_val(a.clone()), b::limit_val(c.clone())),
            add_eps(a, c, BinOp::Add),
        )
    }
    fn sub(a: &Expr, c: &Expr) -> Expr {
        if exact_zero(c) {
            return a.clone();
        }
        b::make_limit(
            b::sub(b::limit_val(a.clone()), b::limit_val(c.clone())),
            add_eps(a, c, BinOp::Sub),
        )
    }
    fn measure(start: &Expr, stop: &Expr) -> Expr {
        b::sub(b::limit_val(stop.clone()), b::limit_val(start.clone()))
    }
    fn known_le(a: &Expr, c: &Expr) -> Option<bool> {
        match (a, c) {
            (Expr::Const(Scalar::Limit(x)), Expr::Const(Scalar::Limit(y))) => {
                x.partial_cmp(y).map(|o| o.is_le())
            }
            _ if a == c => Some(true),
            _ => None,
        }
    }
}

/// Whether `e` is the point `0` (exactly: no infinitesimal), which moves nothing.
fn exact_zero(e: &Expr) -> bool {
    matches!(e, Expr::Const(Scalar::Limit(l)) if *l == Limit::exact(0.0))
}

/// The infinitesimal of `a ± c`: `eps(a)` when `c` is an exact point (a real offset),
/// else the saturating sum or difference.
fn add_eps(a: &Expr, c: &Expr, op: BinOp) -> Expr {
    match c {
        Expr::MakeLimit(_, eps) if **eps == b::int(0) => b::limit_eps(a.clone()),
        _ => Expr::Binary(
            op,
            Box::new(b::limit_eps(a.clone())),
            Box::new(b::limit_eps(c.clone())),
        ),
    }
}

/// Which [`IndexKind`] a loop's points are, known from their IR type: the looplet rules
/// lower integer and real loops with the same code and ask the kind where they differ (the
/// type of a loop variable, the point after or before another, the measure).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Integer,
    Real,
}

impl Kind {
    /// The kind of a point expression (a real point is an IR `Limit` value).
    pub fn of(cx: &Cx, e: &Expr) -> Kind {
        let real = match e {
            Expr::Const(c) => c.ty() == ElemType::Limit,
            Expr::Var(v) => cx.vars[v.0 as usize].ty == ElemType::Limit,
            Expr::MakeLimit(..) => true,
            Expr::Unary(UnOp::After | UnOp::Before, x)
            | Expr::Binary(BinOp::Min | BinOp::Max, x, _)
            | Expr::Select(_, x, _) => return Kind::of(cx, x),
            _ => false,
        };
        if real { Kind::Real } else { Kind::Integer }
    }
    /// Real when `real`, integer otherwise (a level's coordinates).
    pub fn from_real(real: bool) -> Kind {
        if real { Kind::Real } else { Kind::Integer }
    }
    /// The kind of an extent's points.
    pub fn of_ext(cx: &Cx, ext: &Ext) -> Kind {
        Kind::of(cx, &ext.start)
    }
    /// The IR type of a variable holding a point.
    pub fn ty(self) -> ElemType {
        match self {
            Kind::Integer => ElemType::I64,
            Kind::Real => ElemType::Limit,
        }
    }
    pub fn after(self, p: &Expr) -> Expr {
        match self {
            Kind::Integer => Integer::after(p),
            Kind::Real => Real::after(p),
        }
    }
    pub fn before(self, p: &Expr) -> Expr {
        match self {
            Kind::Integer => Integer::before(p),
            Kind::Real => Real::before(p),
        }
    }
    /// `a + c`: integer addition, or a real point moved by a real offset (ε saturating).
    pub fn add(self, a: &Expr, c: &Expr) -> Expr {
        match self {
            Kind::Integer => Integer::add(a, c),
            Kind::Real => Real::add(a, c),
        }
    }
    /// `a - c`, as [`Kind::add`].
    pub fn sub(self, a: &Expr, c: &Expr) -> Expr {
        match self {
            Kind::Integer => Integer::sub(a, c),
            Kind::Real => Real::sub(a, c),
        }
    }
    /// The measure of `[start, stop]`: an I64 count on integers, an F64 length on reals.
    pub fn measure(self, start: &Expr, stop: &Expr) -> Expr {
        match self {
            Kind::Integer => Integer::measure(start, stop),
            Kind::Real => Real::measure(start, stop),
        }
    }
}

/// A closed interval `[start, stop]` of points of kind `K`.
pub struct Extent<K: IndexKind> {
    pub start: K::Point,
    pub stop: K::Point,
}

/// The extent of the loop being lowered. Its points are IR expressions: I64 values on an
/// integer loop, `Limit` values on a real one; [`Kind::of_ext`] tells which, and the rules
/// step and measure through [`Kind`] (the `Integer` parameter is the one the extent's own
/// helpers such as `end_after` use, only ever on integer loops).
pub type Ext = Extent<Integer>;

impl<K: IndexKind> Clone for Extent<K> {
    fn clone(&self) -> Self {
        Extent {
            start: self.start.clone(),
            stop: self.stop.clone(),
        }
    }
}

impl<K: IndexKind> fmt::Debug for Extent<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:?}, {:?}]", self.start, self.stop)
    }
}

impl<K: IndexKind> PartialEq for Extent<K> {
    fn eq(&self, other: &Self) -> bool {
        self.start == other.start && self.stop == other.stop
    }
}

impl<K: IndexKind> Extent<K> {
    pub fn new(start: K::Point, stop: K::Point) -> Self {
        Extent { start, stop }
    }
    /// The extent holding the point `p` alone.
    pub fn point(p: K::Point) -> Self {
        Extent {
            start: p.clone(),
            stop: p,
        }
    }
    /// Whether the extent is one point by construction (its ends are the same value).
    pub fn is_point(&self) -> bool {
        self.start == self.stop
    }
    /// `stop - start + 1` coordinates on integers, `stop - start` on reals.
    pub fn measure(&self) -> K::Point {
        K::measure(&self.start, &self.stop)
    }
    /// The two pieces of a cut before `at`: `[start, before(at)]` and `[at, stop]`.
    pub fn cut_before(&self, at: K::Point) -> (Self, Self) {
        (
            Extent::new(self.start.clone(), K::before(&at)),
            Extent::new(at, self.stop.clone()),
        )
    }
    /// The first point after the extent (the exclusive end of a loop over it).
    pub fn end_after(&self) -> K::Point {
        K::after(&self.stop)
    }
    /// `Some(true)` when the extent is known to hold a point, `Some(false)` when known empty.
    pub fn known_nonempty(&self) -> Option<bool> {
        K::known_le(&self.start, &self.stop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::{Eps, Limit};
    use proptest::prelude::*;

    /// Real points as the continuous instance will see them, evaluated: `Limit<f64>` endpoints.
    /// (The engine's real instance, with IR endpoints, is issue 14's.)
    struct RealValues;

    impl IndexKind for RealValues {
        type Point = Limit<f64>;
        fn after(p: &Limit<f64>) -> Limit<f64> {
            p.next()
        }
        fn before(p: &Limit<f64>) -> Limit<f64> {
            p.prev()
        }
        fn add(a: &Limit<f64>, c: &Limit<f64>) -> Limit<f64> {
            *a + *c
        }
        fn sub(a: &Limit<f64>, c: &Limit<f64>) -> Limit<f64> {
            *a - *c
        }
        fn measure(start: &Limit<f64>, stop: &Limit<f64>) -> Limit<f64> {
            Limit::exact((*stop - *start).drop_eps())
        }
        fn known_le(a: &Limit<f64>, c: &Limit<f64>) -> Option<bool> {
            a.partial_cmp(c).map(|o| o.is_le())
        }
    }

    fn int(v: i64) -> Expr {
        b::int(v)
    }

    /// The laws every instance keeps, on exact points `a <= m <= z`; `one` is the measure of a
    /// point and `zero` the measure of nothing.
    fn laws<K: IndexKind>(a: K::Point, m: K::Point, z: K::Point, zero: K::Point, one: K::Point) {
        for p in [&a, &m, &z] {
            assert_eq!(K::known_le(&K::before(p), p), Some(true));
            assert_eq!(K::known_le(p, &K::before(p)), Some(false));
            assert_eq!(K::known_le(p, &K::after(p)), Some(true));
            assert_eq!(K::known_le(&K::after(p), p), Some(false));
            assert_eq!(&K::before(&K::after(p)), p);
            assert_eq!(&K::after(&K::before(p)), p);
            assert_eq!(Extent::<K>::point(p.clone()).measure(), one);
            assert_eq!(K::measure(p, &K::before(p)), zero);
            assert_eq!(
                Extent::<K>::new(p.clone(), K::before(p)).known_nonempty(),
                Some(false)
            );
        }
        let whole = Extent::<K>::new(a.clone(), z.clone());
        let (left, right) = whole.cut_before(m.clone());
        assert_eq!(right.start, m);
        assert_eq!(K::after(&left.stop), m);
        assert_eq!(K::add(&left.measure(), &right.measure()), whole.measure());
        assert_eq!(K::sub(&whole.measure(), &left.measure()), right.measure());
        assert_eq!(whole.end_after(), K::after(&z));
    }

    proptest! {
        #[test]
        fn integer_extents_keep_the_laws(
            a in -1000i64..1000, d1 in 0i64..100, d2 in 0i64..100,
        ) {
            let (m, z) = (a + d1, a + d1 + d2);
            laws::<Integer>(int(a), int(m), int(z), int(0), int(1));
            // The measure counts coordinates.
            prop_assert_eq!(Extent::<Integer>::new(int(a), int(z)).measure(), int(z - a + 1));
        }

        #[test]
        fn limit_endpoints_keep_the_laws(
            a in -1000i32..1000, d1 in 0i32..100, d2 in 0i32..100,
        ) {
            let (a, m, z) = (f64::from(a), f64::from(a + d1), f64::from(a + d1 + d2));
            let exact = Limit::exact;
            laws::<RealValues>(exact(a), exact(m), exact(z), exact(0.0), exact(0.0));
            // The measure is the length; the ε of open ends does not count.
            let open = Extent::<RealValues>::new(Limit::plus_eps(a), Limit::minus_eps(z));
            prop_assert_eq!(open.measure(), exact(z - a));
        }
    }

    #[test]
    fn integer_extents_on_symbolic_ends() {
        let v = Expr::Var(crate::ir::VarId(0));
        let e = Extent::<Integer>::new(int(0), v.clone());
        // Unknown order is left to the facts; equal ends are a point.
        assert_eq!(e.known_nonempty(), None);
        assert!(Extent::<Integer>::point(v.clone()).is_point());
        assert_eq!(
            Extent::<Integer>::point(v.clone()).known_nonempty(),
            Some(true)
        );
        assert_eq!(
            e.measure(),
            b::add(b::sub(v.clone(), int(0)), int(1)),
            "stop - start + 1"
        );
        assert_eq!(Integer::after(&v), b::add(v.clone(), int(1)));
    }

    #[test]
    fn half_open_real_extents_are_closed_ones_moved_by_eps() {
        // [1, 3) is [1, 3 - ε]: the piece after it starts at 3 exactly.
        let e = Extent::<RealValues>::new(Limit::exact(1.0), Limit::minus_eps(3.0));
        assert_eq!(e.end_after(), Limit::exact(3.0));
        assert_eq!(e.measure(), Limit::exact(2.0));
        assert_eq!(Limit::minus_eps(3.0).eps, Eps::Minus);
        // (1, 3] starts at 1 + ε, after the point 1.
        let (left, right) = Extent::<RealValues>::new(Limit::exact(0.0), Limit::exact(3.0))
            .cut_before(Limit::plus_eps(1.0));
        assert_eq!(left.stop, Limit::exact(1.0));
        assert_eq!(right.start, Limit::plus_eps(1.0));
    }
}
