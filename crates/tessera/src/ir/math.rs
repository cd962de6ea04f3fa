//! The float functions beyond arithmetic: trigonometric, hyperbolic, the accurate `expm1` and
//! `log1p`, logarithms to bases 2 and 10, rounding, `pow`, `atan2` and `hypot` (the Array
//! API's elementwise functions). They are called, never expanded inline: the JIT and the C
//! backend call the `extern "C"` functions here through pointers, and the interpreter and the
//! evaluator call the same Rust functions (`f64::sin`, ...), so every backend gives the same
//! bits.

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
            pub const ALL: [Math2; 3] = [$(Math2::$v),*];
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
