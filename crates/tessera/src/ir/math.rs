//! The float functions beyond arithmetic: trigonometric, hyperbolic, the accurate `expm1` and
//! `log1p`, logarithms to bases 2 and 10, rounding, `pow`, `atan2`, `hypot`, `copysign`,
//! `logaddexp`, `nextafter` and the floored `mod` and `fld` (the Array API's elementwise
//! functions). They are called, never expanded inline: the JIT and the C backend call the
//! `extern "C"` functions here through pointers, and the interpreter and the evaluator call
//! the same Rust functions (`f64::sin`, ...), so every backend gives the same bits.
//!
//! `mod` and `fld` are also defined on integers ([`Math2::on_integers`]); there they are exact
//! and expanded inline from the IR's never-trapping `%` and `div` (`semantics::builtin`), and
//! only their float versions are called.

/// A function of one float.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Math1 {
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    /// `e^x - 1`, accurate near 0.
    Expm1,
    /// `ln(1 + x)`, accurate near 0.
    Log1p,
    Log2,
    Log10,
    /// Round half to even (the Array API's and NumPy's `round`).
    Round,
    Ceil,
    /// Round toward zero.
    Trunc,
}

/// A function of two floats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Math2 {
    /// `x^y` (C's `pow`: `pow(x, 0) == 1` even for NaN `x`).
    Pow,
    /// The angle of the point `(x, y)` as `atan2(y, x)`, in `[-π, π]`.
    Atan2,
    /// `sqrt(x² + y²)` without overflow or underflow in between.
    Hypot,
    /// `|x|` with the sign bit of `y` (also of a NaN `y`).
    Copysign,
    /// `ln(e^x + e^y)` without overflow (NumPy's `logaddexp`).
    Logaddexp,
    /// The next float after `x` in the direction of `y` (C's `nextafter`).
    Nextafter,
    /// The remainder of the floored division: `x - y * floor(x / y)` with the sign of `y`,
    /// computed as NumPy's `remainder` (Python's `%`); `mod(x, 0.0)` is NaN. On integers
    /// `mod(x, 0) == 0`.
    Mod,
    /// The floored quotient `floor(x / y)`, computed as NumPy's `floor_divide` (Python's
    /// `//`): `fld(x, 0.0)` is `x / 0.0`. On integers `fld(x, 0) == 0` and
    /// `fld(i64::MIN, -1) == i64::MIN` (wrapping).
    Fld,
}

macro_rules! math1 {
    ($($v:ident $name:literal $c:ident $f:expr;)*) => {
        impl Math1 {
            pub const ALL: [Math1; 19] = [$(Math1::$v),*];
            /// The name a program calls it by.
            pub fn name(self) -> &'static str {
                match self { $(Math1::$v => $name),* }
            }
            /// Its value.
            pub fn eval(self, x: f64) -> f64 {
                match self { $(Math1::$v => $f(x)),* }
            }
            /// The function the backends call.
            pub fn pointer(self) -> *const () {
                match self { $(Math1::$v => $c as *const ()),* }
            }
        }
        $(
            extern "C" fn $c(x: f64) -> f64 {
                Math1::$v.eval(x)
            }
        )*
    };
}

math1! {
    Sin "sin" tessera_sin f64::sin;
    Cos "cos" tessera_cos f64::cos;
    Tan "tan" tessera_tan f64::tan;
    Asin "asin" tessera_asin f64::asin;
    Acos "acos" tessera_acos f64::acos;
    Atan "atan" tessera_atan f64::atan;
    Sinh "sinh" tessera_sinh f64::sinh;
    Cosh "cosh" tessera_cosh f64::cosh;
    Tanh "tanh" tessera_tanh f64::tanh;
    Asinh "asinh" tessera_asinh f64::asinh;
    Acosh "acosh" tessera_acosh f64::acosh;
    Atanh "atanh" tessera_atanh f64::atanh;
    Expm1 "expm1" tessera_expm1 f64::exp_m1;
    Log1p "log1p" tessera_log1p f64::ln_1p;
    Log2 "log2" tessera_log2 f64::log2;
    Log10 "log10" tessera_log10 f64::log10;
    Round "round" tessera_round f64::round_ties_even;
    Ceil "ceil" tessera_ceil f64::ceil;
    Trunc "trunc" tessera_trunc f64::trunc;
}

macro_rules! math2 {
    ($($v:ident $name:literal $c:ident $f:expr;)*) => {
        impl Math2 {
            pub const ALL: [Math2; 8] = [$(Math2::$v),*];
            /// The name a program calls it by.
            pub fn name(self) -> &'static str {
                match self { $(Math2::$v => $name),* }
            }
            /// Its value.
            pub fn eval(self, x: f64, y: f64) -> f64 {
                match self { $(Math2::$v => $f(x, y)),* }
            }
            /// The function the backends call.
            pub fn pointer(self) -> *const () {
                match self { $(Math2::$v => $c as *const ()),* }
            }
        }
        $(
            extern "C" fn $c(x: f64, y: f64) -> f64 {
                Math2::$v.eval(x, y)
            }
        )*
    };
}

math2! {
    Pow "pow" tessera_pow f64::powf;
    Atan2 "atan2" tessera_atan2 f64::atan2;
    Hypot "hypot" tessera_hypot f64::hypot;
    Copysign "copysign" tessera_copysign f64::copysign;
    Logaddexp "logaddexp" tessera_logaddexp logaddexp;
    Nextafter "nextafter" tessera_nextafter nextafter;
    Mod "mod" tessera_mod |x, y| divmod(x, y).1;
    Fld "fld" tessera_fld |x, y| divmod(x, y).0;
}

/// NumPy's `logaddexp` (`npy_logaddexp`): equal operands (also equal infinities, where the
/// difference would be NaN) give `x + ln 2`; otherwise the larger plus `log1p(exp(-|x - y|))`.
fn logaddexp(x: f64, y: f64) -> f64 {
    if x == y {
        return x + std::f64::consts::LN_2;
    }
    let d = x - y;
    if d > 0.0 {
        x + (-d).exp().ln_1p()
    } else if d <= 0.0 {
        y + d.exp().ln_1p()
    } else {
        // A NaN operand.
        d
    }
}

/// C's `nextafter`: NaN if either is NaN, `y` if they are equal (so `nextafter(0.0, -0.0)` is
/// `-0.0`), else one unit in the last place towards `y` (from a zero, the smallest subnormal).
fn nextafter(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x == y {
        y
    } else if y > x {
        x.next_up()
    } else {
        x.next_down()
    }
}

/// NumPy's `npy_divmod` for floats: the floored quotient and the remainder with the
/// divisor's sign, from C's `fmod` (exact), with the quotient snapped to the nearest whole
/// number (`(x - mod) / y` may be off by rounding). A zero divisor gives `(x / y, fmod)`,
/// that is `(±Inf or NaN, NaN)`, as NumPy's `floor_divide` and `remainder` do.
fn divmod(x: f64, y: f64) -> (f64, f64) {
    let mut m = x % y;
    if y == 0.0 {
        return (x / y, m);
    }
    let mut div = (x - m) / y;
    // `m != 0.0` holds for NaN, like C's `if (mod)`.
    if m != 0.0 {
        if (y < 0.0) != (m < 0.0) {
            m += y;
            div -= 1.0;
        }
    } else {
        m = 0.0f64.copysign(y);
    }
    let q = if div != 0.0 {
        let f = div.floor();
        if div - f > 0.5 { f + 1.0 } else { f }
    } else {
        0.0f64.copysign(x / y)
    };
    (q, m)
}

impl Math2 {
    /// Is it defined on integers too (exactly, as an integer function)? Then a call on
    /// integer operands stays integer, and [`Math2::eval_int`] is its value.
    pub fn on_integers(self) -> bool {
        matches!(self, Math2::Mod | Math2::Fld)
    }

    /// Its value on integers, for the functions [`Math2::on_integers`]: exact, wrapping, a
    /// zero divisor giving 0 (NumPy's results; never a trap).
    pub fn eval_int(self, x: i64, y: i64) -> Option<i64> {
        if y == 0 {
            return self.on_integers().then_some(0);
        }
        // `wrapping_rem(MIN, -1) == 0` and `wrapping_div(MIN, -1) == MIN`.
        let (q, r) = (x.wrapping_div(y), x.wrapping_rem(y));
        let adjust = r != 0 && (r ^ y) < 0;
        match self {
            Math2::Mod => Some(if adjust { r + y } else { r }),
            Math2::Fld => Some(if adjust { q - 1 } else { q }),
            _ => None,
        }
    }
}

impl Math1 {
    /// Its place in [`Math1::ALL`] (the C backend's helper table is in that order).
    pub fn index(self) -> usize {
        Math1::ALL.iter().position(|&f| f == self).expect("in ALL")
    }
}

impl Math2 {
    /// Its place in [`Math2::ALL`].
    pub fn index(self) -> usize {
        Math2::ALL.iter().position(|&f| f == self).expect("in ALL")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_values_are_the_std_functions() {
        let mut names: Vec<&str> = Math1::ALL.iter().map(|f| f.name()).collect();
        names.extend(Math2::ALL.iter().map(|f| f.name()));
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
        assert_eq!(Math1::Round.eval(2.5), 2.0);
        assert_eq!(Math1::Round.eval(-3.5), -4.0);
        assert_eq!(Math1::Trunc.eval(-2.7), -2.0);
        assert_eq!(Math2::Pow.eval(f64::NAN, 0.0), 1.0);
        assert_eq!(Math2::Atan2.eval(1.0, -1.0), 0.75 * std::f64::consts::PI);
        for (i, f) in Math1::ALL.iter().enumerate() {
            assert_eq!(f.index(), i);
            // The pointer the backends call computes the same bits.
            // SAFETY: `pointer` is an `extern "C" fn(f64) -> f64` by construction.
            let g: extern "C" fn(f64) -> f64 = unsafe { std::mem::transmute(f.pointer()) };
            assert_eq!(g(0.3).to_bits(), f.eval(0.3).to_bits(), "{}", f.name());
        }
    }
}
