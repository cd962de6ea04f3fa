//! `Limit`: a number plus an infinitesimal sign, the endpoint type of real-valued extents
//! (the continuous tensor abstraction, §5.3). `Limit(a, +1)` is `a + ε`, where ε is positive and
//! smaller than every positive real — not machine epsilon. With it every interval is closed:
//! `[a, b)` is `[a, b - ε]`, `(a, b]` is `[a + ε, b]`, and a pinpoint `a` is `[a, a]`, so the
//! lowering compares, intersects and steps over intervals with one set of rules whatever
//! their inclusiveness.
//!
//! Arithmetic saturates the infinitesimal to `{-ε, 0, +ε}` (`(1+ε) + (1+ε) = 2+ε`); order is
//! lexicographic on (value, infinitesimal). Saturation makes `+` commutative but not
//! associative (`((1+ε)+ε)−ε = 1+0` while `(1+ε)+(ε−ε) = 1+ε`), exactly as in the paper and
//! Finch.jl; code that adds several endpoints fixes the order.

use std::cmp::Ordering;
use std::fmt;
use std::ops::{Add, Mul, Neg, Sub};

/// The infinitesimal part of a [`Limit`]: `-ε`, `0` or `+ε`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Eps {
    Minus,
    #[default]
    Zero,
    Plus,
}

impl Eps {
    pub fn sign(self) -> i8 {
        match self {
            Eps::Minus => -1,
            Eps::Zero => 0,
            Eps::Plus => 1,
        }
    }

    /// The sign of `s`, saturated to `{-1, 0, +1}`.
    pub fn saturate(s: i32) -> Eps {
        match s.signum() {
            -1 => Eps::Minus,
            0 => Eps::Zero,
            _ => Eps::Plus,
        }
    }
}

impl Neg for Eps {
    type Output = Eps;
    fn neg(self) -> Eps {
        Eps::saturate(-i32::from(self.sign()))
    }
}

/// What a [`Limit`] can be built over: the plain numbers of real-valued coordinates.
pub trait LimitValue:
    Copy
    + PartialOrd
    + fmt::Display
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
{
    fn zero() -> Self;
}

macro_rules! limit_value {
    ($($t:ty => $z:expr),*) => {$(
        impl LimitValue for $t {
            fn zero() -> Self {
                $z
            }
        }
    )*};
}
limit_value!(f64 => 0.0, f32 => 0.0, i64 => 0, i32 => 0);

/// `val + eps·ε`.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Limit<T> {
    pub val: T,
    pub eps: Eps,
}

impl<T: LimitValue> Limit<T> {
    pub fn new(val: T, eps: Eps) -> Limit<T> {
        Limit { val, eps }
    }
    /// `x` itself (`x + 0`).
    pub fn exact(val: T) -> Limit<T> {
        Limit::new(val, Eps::Zero)
    }
    /// `x + ε`: the first point after `x`.
    pub fn plus_eps(val: T) -> Limit<T> {
        Limit::new(val, Eps::Plus)
    }
    /// `x - ε`: the last point before `x`.
    pub fn minus_eps(val: T) -> Limit<T> {
        Limit::new(val, Eps::Minus)
    }
    /// The real part: the Lebesgue measure of `[a, b]` is `(b - a).drop_eps()`.
    pub fn drop_eps(self) -> T {
        self.val
    }
    /// The first point after this one: where the next piece starts when a piece ends here.
    /// After a closed end `b` that is `b + ε`; after `b - ε` it is `b` itself.
    pub fn next(self) -> Limit<T> {
        self + Limit::plus_eps(T::zero())
    }
    /// The last point before this one (the end of a piece that the next one starts at `self`).
    pub fn prev(self) -> Limit<T> {
        self - Limit::plus_eps(T::zero())
    }
    pub fn min(self, other: Limit<T>) -> Limit<T> {
        if other < self { other } else { self }
    }
    pub fn max(self, other: Limit<T>) -> Limit<T> {
        if other > self { other } else { self }
    }
}

impl<T: LimitValue> From<T> for Limit<T> {
    /// A plain number is `Limit(x, 0)`, so mixed comparisons and sums behave as on exact values.
    fn from(val: T) -> Limit<T> {
        Limit::exact(val)
    }
}

impl<T: LimitValue> Add for Limit<T> {
    type Output = Limit<T>;
    fn add(self, y: Limit<T>) -> Limit<T> {
        let eps = i32::from(self.eps.sign()) + i32::from(y.eps.sign());
        Limit::new(self.val + y.val, Eps::saturate(eps))
    }
}

impl<T: LimitValue> Sub for Limit<T> {
    type Output = Limit<T>;
    fn sub(self, y: Limit<T>) -> Limit<T> {
        let eps = i32::from(self.eps.sign()) - i32::from(y.eps.sign());
        Limit::new(self.val - y.val, Eps::saturate(eps))
    }
}

impl<T: LimitValue> Neg for Limit<T> {
    type Output = Limit<T>;
    fn neg(self) -> Limit<T> {
        Limit::new(-self.val, -self.eps)
    }
}

impl<T: LimitValue> Mul for Limit<T> {
    type Output = Limit<T>;
    /// `(a + αε)(b + βε) = ab + (aβ + bα)ε` (the ε² term is below every ε), the sign saturated.
    fn mul(self, y: Limit<T>) -> Limit<T> {
        let sign_of = |v: T| -> i32 {
            if v > T::zero() {
                1
            } else if v < T::zero() {
                -1
            } else {
                0
            }
        };
        let part = |v: T, e: Eps| sign_of(v) * i32::from(e.sign());
        // aβ and bα have the signs of their factors; their sum's sign is known unless they
        // differ, where it depends on magnitudes: compare |a| against |b| then.
        let (s1, s2) = (part(self.val, y.eps), part(y.val, self.eps));
        let eps = if s1 == 0 || s2 == 0 || s1 == s2 {
            s1 + s2
        } else {
            let abs = |v: T| if v < T::zero() { -v } else { v };
            match abs(self.val).partial_cmp(&abs(y.val)) {
                Some(Ordering::Greater) => s1,
                Some(Ordering::Less) => s2,
                _ => 0,
            }
        };
        Limit::new(self.val * y.val, Eps::saturate(eps))
    }
}

impl<T: LimitValue> PartialOrd for Limit<T> {
    /// Lexicographic on (value, infinitesimal): `a - ε < a < a + ε < b - ε` for `a < b`.
    /// `None` only when a value is NaN.
    fn partial_cmp(&self, y: &Limit<T>) -> Option<Ordering> {
        match self.val.partial_cmp(&y.val)? {
            Ordering::Equal => Some(self.eps.cmp(&y.eps)),
            o => Some(o),
        }
    }
}

impl<T: LimitValue> PartialEq<T> for Limit<T> {
    fn eq(&self, y: &T) -> bool {
        *self == Limit::exact(*y)
    }
}

impl<T: LimitValue> PartialOrd<T> for Limit<T> {
    fn partial_cmp(&self, y: &T) -> Option<Ordering> {
        self.partial_cmp(&Limit::exact(*y))
    }
}

impl<T: LimitValue> fmt::Display for Limit<T> {
    /// As Finch.jl prints them: `1+ϵ`, `1-ϵ`, `1+0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = match self.eps {
            Eps::Minus => "-ϵ",
            Eps::Zero => "+0",
            Eps::Plus => "+ϵ",
        };
        write!(f, "{}{e}", self.val)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn l(v: f64, e: i32) -> Limit<f64> {
        Limit::new(v, Eps::saturate(e))
    }

    #[test]
    fn order_is_lexicographic() {
        // §5.1.1: a-ε < a < a+ε < b-ε for a < b.
        let (a, b) = (1.0, 2.0);
        let chain = [l(a, -1), l(a, 0), l(a, 1), l(b, -1), l(b, 0)];
        for w in chain.windows(2) {
            assert!(w[0] < w[1], "{} < {}", w[0], w[1]);
        }
        assert!(Limit::exact(1.0) < Limit::plus_eps(1.0));
        assert!(Limit::exact(1.0) >= Limit::minus_eps(1.0));
    }

    #[test]
    fn sums_saturate_the_infinitesimal() {
        // §5.1.2.
        assert_eq!(Limit::plus_eps(1) + Limit::plus_eps(1), Limit::plus_eps(2));
        assert_eq!(Limit::plus_eps(1) + Limit::minus_eps(1), Limit::exact(2));
        assert_eq!(
            Limit::minus_eps(1) - Limit::plus_eps(1),
            Limit::minus_eps(0)
        );
        assert_eq!(-Limit::plus_eps(3), Limit::minus_eps(-3));
    }

    #[test]
    fn measure_drops_the_infinitesimal() {
        // §5.1.3: [1, 3-ε] has length 2; [3, 3] has length 0.
        assert_eq!((Limit::minus_eps(3.0) - Limit::exact(1.0)).drop_eps(), 2.0);
        assert_eq!((Limit::exact(3.0) - Limit::exact(3.0)).drop_eps(), 0.0);
        // Inclusiveness does not change the measure: (1, 3) = [1+ε, 3-ε].
        assert_eq!(
            (Limit::minus_eps(3.0) - Limit::plus_eps(1.0)).drop_eps(),
            2.0
        );
    }

    #[test]
    fn the_next_piece_starts_after_the_last() {
        // §5.1.4: after a piece ending at closed b the next starts at b+ε; after b-ε, at b.
        assert_eq!(Limit::exact(4.0).next(), Limit::plus_eps(4.0));
        assert_eq!(Limit::minus_eps(4.0).next(), Limit::exact(4.0));
        assert_eq!(Limit::plus_eps(4.0).prev(), Limit::exact(4.0));
    }

    #[test]
    fn plain_numbers_compare_as_exact_limits() {
        // §5.1.5.
        assert!(Limit::plus_eps(2.0) > 2.0);
        assert!(Limit::minus_eps(2.0) < 2.0);
        assert!(Limit::exact(2.0) == 2.0);
        assert_eq!(Limit::from(7_i64), Limit::exact(7));
    }

    #[test]
    fn products_follow_the_first_order_term() {
        // (2+ε)(3+0) = 6 + 3ε → 6+ε; (2+ε)(-3) = -6 - 3ε → -6-ε; (2+ε)(3-ε) = 6 + (-2+3)ε.
        assert_eq!(
            Limit::plus_eps(2.0) * Limit::exact(3.0),
            Limit::plus_eps(6.0)
        );
        assert_eq!(
            Limit::plus_eps(2.0) * Limit::exact(-3.0),
            Limit::minus_eps(-6.0)
        );
        assert_eq!(
            Limit::plus_eps(2.0) * Limit::minus_eps(3.0),
            Limit::plus_eps(6.0)
        );
        assert_eq!(
            Limit::plus_eps(3.0) * Limit::minus_eps(3.0),
            Limit::exact(9.0)
        );
        assert_eq!(
            Limit::plus_eps(0.0) * Limit::exact(5.0),
            Limit::plus_eps(0.0)
        );
    }

    #[test]
    fn min_and_max_use_the_order() {
        assert_eq!(
            Limit::exact(1.0).min(Limit::minus_eps(1.0)),
            Limit::minus_eps(1.0)
        );
        assert_eq!(
            Limit::exact(1.0).max(Limit::plus_eps(1.0)),
            Limit::plus_eps(1.0)
        );
        assert_eq!(format!("{}", Limit::plus_eps(1.5)), "1.5+ϵ");
        assert_eq!(format!("{}", Limit::exact(1)), "1+0");
    }

    fn limit_i64() -> impl Strategy<Value = Limit<i64>> {
        (-1000_i64..1000, -1_i32..=1).prop_map(|(v, e)| Limit::new(v, Eps::saturate(e)))
    }

    proptest! {
        #[test]
        fn order_is_total_and_consistent(a in limit_i64(), b in limit_i64(), c in limit_i64()) {
            let ab = a.partial_cmp(&b).unwrap();
            prop_assert_eq!(ab, b.partial_cmp(&a).unwrap().reverse());
            prop_assert_eq!(ab == Ordering::Equal, a == b);
            if a <= b && b <= c {
                prop_assert!(a <= c);
            }
            if a.val != b.val {
                prop_assert_eq!(ab, a.val.cmp(&b.val));
            }
        }

        #[test]
        fn addition_laws(a in limit_i64(), b in limit_i64(), c in limit_i64()) {
            prop_assert_eq!(a + b, b + a);
            prop_assert_eq!(a + Limit::exact(0), a);
            prop_assert_eq!(a - b, a + (-b));
            prop_assert_eq!((a - a).val, 0);
            // Monotone: a <= b implies a + c <= b + c (exact on integers; float rounding can
            // merge two values and then the infinitesimals decide).
            if a <= b {
                prop_assert!(a + c <= b + c);
            }
            prop_assert_eq!(a.min(b).max(a.max(b)), a.max(b));
        }

        #[test]
        fn multiplication_laws(a in limit_i64(), b in limit_i64()) {
            prop_assert_eq!(a * b, b * a);
            prop_assert_eq!(a * Limit::exact(1), a);
            prop_assert_eq!((a * b).val, a.val * b.val);
        }
    }
}
