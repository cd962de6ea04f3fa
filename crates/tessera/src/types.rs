//! Element types and scalar values shared by every layer.
//!
//! Arithmetic semantics (the evaluator and every backend agree on this): values are computed in
//! one of three *compute classes* — `bool`, `i64` for all integer types, `f64` for both float
//! types. Loads widen to the compute class, stores narrow to the element type: float → int
//! truncates toward zero saturating at the i64 range (NaN → 0) and then wraps like int → narrower
//! int does; anything → bool is `!= 0`.
//!
//! The loop IR has one more compute type, [`ElemType::Limit`]: the points of a loop over a
//! real-valued index (`crate::limit::Limit<f64>`, a value plus an infinitesimal sign). It is
//! its own class, never an element type of a tensor or buffer (it is not in
//! [`ElemType::ALL`], so no format, parser or file reader accepts it).

use crate::limit::{Eps, Limit};
use std::fmt;

/// The element type of a tensor or buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ElemType {
    Bool,
    U8,
    I8,
    I32,
    I64,
    U64,
    F32,
    F64,
    /// A point of a real-valued loop (`Limit<f64>`): an IR compute type only, never stored.
    Limit,
}

/// The class an element type is computed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Bool,
    Int,
    Float,
}

impl ElemType {
    pub const ALL: [ElemType; 8] = [
        ElemType::Bool,
        ElemType::U8,
        ElemType::I8,
        ElemType::I32,
        ElemType::I64,
        ElemType::U64,
        ElemType::F32,
        ElemType::F64,
    ];

    pub fn class(self) -> Class {
        match self {
            ElemType::Bool => Class::Bool,
            // Points are built over f64 values. `Class` is the notation's classification of
            // tensor elements, which are never points, so `Limit` gets no class of its own;
            // `compute` and the `Scalar` conversions treat it apart.
            ElemType::F32 | ElemType::F64 | ElemType::Limit => Class::Float,
            _ => Class::Int,
        }
    }

    /// Size in bytes of one element in a buffer (for `Limit`, which no buffer holds, the
    /// size of the native backends' 128-bit encoding).
    pub fn size(self) -> usize {
        match self {
            ElemType::Bool | ElemType::U8 | ElemType::I8 => 1,
            ElemType::I32 | ElemType::F32 => 4,
            ElemType::I64 | ElemType::U64 | ElemType::F64 => 8,
            ElemType::Limit => 16,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ElemType::Bool => "bool",
            ElemType::U8 => "u8",
            ElemType::I8 => "i8",
            ElemType::I32 => "i32",
            ElemType::I64 => "i64",
            ElemType::U64 => "u64",
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
            ElemType::Limit => "limit",
        }
    }

    pub fn from_name(s: &str) -> Option<ElemType> {
        ElemType::ALL.iter().copied().find(|t| t.name() == s)
    }

    /// The compute-class representative type (`Bool`, `I64` or `F64`); `Limit` is its own.
    pub fn compute(self) -> ElemType {
        match self.class() {
            _ if self == ElemType::Limit => ElemType::Limit,
            Class::Bool => ElemType::Bool,
            Class::Int => ElemType::I64,
            Class::Float => ElemType::F64,
        }
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scalar value of one element type.
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    Bool(bool),
    U8(u8),
    I8(i8),
    I32(i32),
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
    /// A point of a real-valued loop (see [`Scalar::limit`] for the canonical form).
    Limit(Limit<f64>),
}

impl PartialEq for Scalar {
    /// Bitwise-exact for floats of the same type (so NaN == NaN and 0.0 != -0.0 are *not*
    /// conflated); values of different types are never equal.
    fn eq(&self, other: &Self) -> bool {
        use Scalar::*;
        match (self, other) {
            (Bool(a), Bool(b)) => a == b,
            (U8(a), U8(b)) => a == b,
            (I8(a), I8(b)) => a == b,
            (I32(a), I32(b)) => a == b,
            (I64(a), I64(b)) => a == b,
            (U64(a), U64(b)) => a == b,
            (F32(a), F32(b)) => a.to_bits() == b.to_bits(),
            (F64(a), F64(b)) => a.to_bits() == b.to_bits(),
            (Limit(a), Limit(b)) => a.val.to_bits() == b.val.to_bits() && a.eps == b.eps,
            _ => false,
        }
    }
}

impl std::hash::Hash for Scalar {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.ty().hash(state);
        self.to_bits().hash(state);
        if let Scalar::Limit(l) = self {
            l.eps.hash(state);
        }
    }
}

impl Eq for Scalar {}

impl Scalar {
    pub fn ty(&self) -> ElemType {
        match self {
            Scalar::Bool(_) => ElemType::Bool,
            Scalar::U8(_) => ElemType::U8,
            Scalar::I8(_) => ElemType::I8,
            Scalar::I32(_) => ElemType::I32,
            Scalar::I64(_) => ElemType::I64,
            Scalar::U64(_) => ElemType::U64,
            Scalar::F32(_) => ElemType::F32,
            Scalar::F64(_) => ElemType::F64,
            Scalar::Limit(_) => ElemType::Limit,
        }
    }

    /// The canonical IR point `val + sign(eps)·ε` (`Expr::MakeLimit`'s semantics): `-0.0`
    /// becomes `+0.0`, so equal reals are equal points, and every NaN becomes the one quiet
    /// NaN [`CANONICAL_NAN`] with the sign bit clear, which orders above `+Inf` (the lowering
    /// never makes a NaN point from valid data; this just keeps one defined on every backend).
    pub fn limit(val: f64, eps: i64) -> Scalar {
        Scalar::Limit(canonical_limit(Limit::new(
            val,
            Eps::saturate(eps.signum() as i32),
        )))
    }

    /// The raw bits, zero-extended to 64 bits (used for hashing and by backends for constants;
    /// for a `Limit`, its value's bits).
    pub fn to_bits(&self) -> u64 {
        match *self {
            Scalar::Bool(b) => b as u64,
            Scalar::U8(v) => v as u64,
            Scalar::I8(v) => v as u8 as u64,
            Scalar::I32(v) => v as u32 as u64,
            Scalar::I64(v) => v as u64,
            Scalar::U64(v) => v,
            Scalar::F32(v) => v.to_bits() as u64,
            Scalar::F64(v) => v.to_bits(),
            Scalar::Limit(l) => l.val.to_bits(),
        }
    }

    /// The zero of a type (`false` for bool, `0+0` for a limit).
    pub fn zero(ty: ElemType) -> Scalar {
        Scalar::from_i64(0, ty)
    }

    pub fn as_f64(&self) -> f64 {
        match *self {
            Scalar::Bool(b) => b as i64 as f64,
            Scalar::U8(v) => v as f64,
            Scalar::I8(v) => v as f64,
            Scalar::I32(v) => v as f64,
            Scalar::I64(v) => v as f64,
            Scalar::U64(v) => v as f64,
            Scalar::F32(v) => v as f64,
            Scalar::F64(v) => v,
            Scalar::Limit(l) => l.val,
        }
    }

    pub fn as_i64(&self) -> i64 {
        match *self {
            Scalar::Bool(b) => b as i64,
            Scalar::U8(v) => v as i64,
            Scalar::I8(v) => v as i64,
            Scalar::I32(v) => v as i64,
            Scalar::I64(v) => v,
            Scalar::U64(v) => v as i64,
            Scalar::F32(v) => v as i64,
            Scalar::F64(v) => v as i64,
            Scalar::Limit(l) => l.val as i64,
        }
    }

    pub fn as_bool(&self) -> bool {
        match *self {
            Scalar::Bool(b) => b,
            Scalar::F32(v) => v != 0.0,
            Scalar::F64(v) => v != 0.0,
            Scalar::Limit(l) => l.val != 0.0 || l.eps != Eps::Zero,
            _ => self.as_i64() != 0,
        }
    }

    /// Widen to the compute class (`Bool`, `I64` or `F64`).
    pub fn widen(&self) -> Scalar {
        match self.ty().class() {
            _ if self.ty() == ElemType::Limit => *self,
            Class::Bool => Scalar::Bool(self.as_bool()),
            Class::Int => Scalar::I64(self.as_i64()),
            Class::Float => Scalar::F64(self.as_f64()),
        }
    }

    pub fn from_i64(v: i64, ty: ElemType) -> Scalar {
        match ty {
            ElemType::Bool => Scalar::Bool(v != 0),
            ElemType::U8 => Scalar::U8(v as u8),
            ElemType::I8 => Scalar::I8(v as i8),
            ElemType::I32 => Scalar::I32(v as i32),
            ElemType::I64 => Scalar::I64(v),
            ElemType::U64 => Scalar::U64(v as u64),
            ElemType::F32 => Scalar::F32(v as f32),
            ElemType::F64 => Scalar::F64(v as f64),
            ElemType::Limit => Scalar::limit(v as f64, 0),
        }
    }

    pub fn from_f64(v: f64, ty: ElemType) -> Scalar {
        match ty {
            ElemType::Bool => Scalar::Bool(v != 0.0),
            ElemType::F32 => Scalar::F32(v as f32),
            ElemType::F64 => Scalar::F64(v),
            ElemType::Limit => Scalar::limit(v, 0),
            // Rust's `as` saturates and maps NaN to 0, which is what every backend must do too.
            _ => Scalar::from_i64(v as i64, ty),
        }
    }

    /// Convert (narrow or widen) to another element type with the store semantics above. A
    /// limit converts as its value (the IR itself has no casts from or to `Limit`).
    pub fn cast(&self, ty: ElemType) -> Scalar {
        match self.ty().class() {
            _ if ty == ElemType::Limit => match *self {
                Scalar::Limit(l) => Scalar::Limit(canonical_limit(l)),
                _ => Scalar::limit(self.as_f64(), 0),
            },
            Class::Float => Scalar::from_f64(self.as_f64(), ty),
            Class::Bool => Scalar::from_i64(self.as_bool() as i64, ty),
            Class::Int => {
                if let Scalar::U64(u) = *self
                    && ty.class() == Class::Float
                {
                    return Scalar::from_f64(u as f64, ty);
                }
                Scalar::from_i64(self.as_i64(), ty)
            }
        }
    }

    pub fn is_nan(&self) -> bool {
        match *self {
            Scalar::F32(v) => v.is_nan(),
            Scalar::F64(v) => v.is_nan(),
            Scalar::Limit(l) => l.val.is_nan(),
            _ => false,
        }
    }
}

impl fmt::Display for Scalar {
    /// Prints so that the text parses back to the same value (`Inf`, `NaN`, floats keep a `.`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn float(f: &mut fmt::Formatter<'_>, v: f64, text: String) -> fmt::Result {
            if v.is_nan() {
                f.write_str("NaN")
            } else if v.is_infinite() {
                f.write_str(if v > 0.0 { "Inf" } else { "-Inf" })
            } else if text.contains(['.', 'e', 'E']) {
                f.write_str(&text)
            } else {
                write!(f, "{text}.0")
            }
        }
        match *self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::U8(v) => write!(f, "{v}"),
            Scalar::I8(v) => write!(f, "{v}"),
            Scalar::I32(v) => write!(f, "{v}"),
            Scalar::I64(v) => write!(f, "{v}"),
            Scalar::U64(v) => write!(f, "{v}"),
            Scalar::F32(v) => float(f, v as f64, format!("{v:?}")),
            Scalar::F64(v) => float(f, v, format!("{v:?}")),
            // As `limit.rs` (and Finch.jl) print them: `1.0+ϵ`, `1.0-ϵ`, `1.0+0`.
            Scalar::Limit(l) => {
                float(f, l.val, format!("{:?}", l.val))?;
                f.write_str(match l.eps {
                    Eps::Minus => "-ϵ",
                    Eps::Zero => "+0",
                    Eps::Plus => "+ϵ",
                })
            }
        }
    }
}

/// The one NaN a canonical `Limit` value may hold (a positive quiet NaN).
pub const CANONICAL_NAN: u64 = 0x7ff8_0000_0000_0000;

/// `l` with `-0.0` made `+0.0` and any NaN made [`CANONICAL_NAN`] (see [`Scalar::limit`]).
pub fn canonical_limit(l: Limit<f64>) -> Limit<f64> {
    let val = if l.val.is_nan() {
        f64::from_bits(CANONICAL_NAN)
    } else if l.val == 0.0 {
        0.0
    } else {
        l.val
    };
    Limit::new(val, l.eps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_round_trips_floats() {
        for v in [0.1, 1.0, -2.5e-300, 1e300, f64::MIN_POSITIVE, 123456789.125] {
            let text = Scalar::F64(v).to_string();
            assert_eq!(text.parse::<f64>().unwrap(), v, "{text}");
        }
        assert_eq!(Scalar::F64(f64::INFINITY).to_string(), "Inf");
        assert_eq!(Scalar::F64(3.0).to_string(), "3.0");
    }

    #[test]
    fn cast_saturates_and_truncates() {
        assert_eq!(Scalar::F64(-2.7).cast(ElemType::I64), Scalar::I64(-2));
        assert_eq!(
            Scalar::F64(1e300).cast(ElemType::I64),
            Scalar::I64(i64::MAX)
        );
        assert_eq!(Scalar::I64(300).cast(ElemType::U8), Scalar::U8(44));
        assert_eq!(Scalar::I64(2).cast(ElemType::Bool), Scalar::Bool(true));
    }

    #[test]
    fn limits_are_canonical_ir_values_but_no_element_type() {
        assert_eq!(ElemType::from_name("limit"), None);
        // So formats refuse it as an element type.
        let e = crate::levels::Format::parse("Dense(Element(0.0, limit))", None).unwrap_err();
        assert!(
            e.to_string().contains("unknown element type `limit`"),
            "{e}"
        );
        assert!(crate::levels::Format::parse("Dense(Element(0.0, f64))", None).is_ok());
        assert!(!ElemType::ALL.contains(&ElemType::Limit));
        assert_eq!(ElemType::Limit.compute(), ElemType::Limit);
        assert_eq!(
            Scalar::zero(ElemType::Limit),
            Scalar::Limit(Limit::exact(0.0))
        );
        // -0.0 is +0.0 and every NaN the same one; the sign of eps is clamped.
        assert_eq!(Scalar::limit(-0.0, 0), Scalar::limit(0.0, 0));
        assert_eq!(Scalar::limit(-0.0, 0).as_f64().to_bits(), 0);
        let nan = Scalar::limit(-f64::NAN, -7);
        assert_eq!(nan.as_f64().to_bits(), CANONICAL_NAN);
        assert_eq!(
            nan,
            Scalar::Limit(Limit::minus_eps(f64::from_bits(CANONICAL_NAN)))
        );
        assert_eq!(Scalar::limit(1.5, 9).to_string(), "1.5+ϵ");
        assert_eq!(Scalar::limit(2.0, 0).to_string(), "2.0+0");
        assert_eq!(Scalar::limit(f64::NEG_INFINITY, -1).to_string(), "-Inf-ϵ");
        assert_ne!(Scalar::limit(1.0, 1), Scalar::limit(1.0, 0));
    }
}
