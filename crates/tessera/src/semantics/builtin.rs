//! The built-in functions (`min(a, b)`, `sqrt(x)`, ...), in one place: the name each is called
//! by, its arity, its typing rule, its value and the IR it lowers to. Every other module —
//! checker, evaluator, simplifier, emission, the array API — resolves a call's name here once
//! and then matches on [`Builtin`], so adding a function is one variant and its arms below.

use super::{arith, convert, int_div, join, max_f, min_f};
use crate::ir::math::{Math1, Math2};
use crate::ir::{BinOp, Expr, UnOp, build as b};
use crate::types::{Class, Scalar};

/// A built-in function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    Min,
    Max,
    Abs,
    Sqrt,
    Exp,
    Log,
    Floor,
    /// `ifloor(x)`: the largest integer not above `x`, as an integer (saturating; NaN gives
    /// 0, as the IR's float-to-integer cast): the index of the sample left of a real
    /// position, which probes of fields (`transforms::fields`) address images with.
    IFloor,
    /// Truncating quotient (`div(-7, 2) == -3`), for floats as for integers.
    Div,
    /// `ifelse(c, x, y)`: `x` where the bool `c` holds, else `y`.
    IfElse,
    /// `coalesce(a, b)`: `a`, or `b` where `a` is `missing` (resolved before evaluation).
    Coalesce,
    /// `size(A, d)`: the extent of dimension `d` (a literal) of tensor `A`. Its first argument
    /// names a tensor, so it is resolved from the shapes before typing and evaluation.
    Size,
    /// `d(x)`, `d(x, y, ...)`: the Lebesgue measure of the real loops named (loop index names
    /// of real loops, issue 14). It has no value of its own: as a factor of the right-hand side
    /// of a `+=` or `-=` inside those loops it turns the counting sum over them into an
    /// integral (each piece contributes its length times the rest of the product).
    /// `transforms::real` checks where it may appear; the lowering and the continuous reference
    /// evaluator replace it by the measure of the piece being visited.
    D,
    /// `sample(A, i, j, ...)`: entry `(i, j, ...)` of the dense tensor `A` as a float, read
    /// directly from its values (no looplet, no loop): the image reads of field probes
    /// (`transforms::fields`), whose indices are already clamped into the tensor. Its first
    /// argument names a tensor, so the lowering and the evaluator resolve it; in the
    /// lowering it becomes `sample(len(values), flat index)`, which [`Builtin::emit`]
    /// turns into the load.
    Sample,
    /// A float function of one argument: `sin`, `tanh`, `expm1`, `round`, ... (`ir::math`).
    Math(Math1),
    /// A function of two: `pow(x, y)`, `atan2(y, x)`, `hypot(x, y)`, `copysign(x, y)`, ...
    /// Floats, except `mod` and `fld`, which keep integers integer ([`Math2::on_integers`]).
    Math2(Math2),
    /// `signbit(x)`: is the sign bit of the float `x` set (`-0.0` and a negative NaN too)?
    Signbit,
    /// `lshift(x, n)`: `x << n` on integers as NumPy's `left_shift`: 0 when `n` is negative
    /// or at least 64 (the `<<` operator takes `n` modulo 64 instead).
    Lshift,
    /// `rshift(x, n)`: arithmetic `x >> n` as NumPy's `right_shift`: the sign (0 or -1) when
    /// `n` is negative or at least 64.
    Rshift,
}

impl Builtin {
    /// Every built-in, in the order the documentation lists them.
    pub const ALL: [Builtin; 17] = [
        Builtin::Min,
        Builtin::Max,
        Builtin::Abs,
        Builtin::Sqrt,
        Builtin::Exp,
        Builtin::Log,
        Builtin::Floor,
        Builtin::IFloor,
        Builtin::Div,
        Builtin::IfElse,
        Builtin::Coalesce,
        Builtin::Size,
        Builtin::D,
        Builtin::Sample,
        Builtin::Signbit,
        Builtin::Lshift,
        Builtin::Rshift,
    ];

    /// The name a program calls it by.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Min => "min",
            Builtin::Max => "max",
            Builtin::Abs => "abs",
            Builtin::Sqrt => "sqrt",
            Builtin::Exp => "exp",
            Builtin::Log => "log",
            Builtin::Floor => "floor",
            Builtin::IFloor => "ifloor",
            Builtin::Div => "div",
            Builtin::IfElse => "ifelse",
            Builtin::Coalesce => "coalesce",
            Builtin::Size => "size",
            Builtin::D => "d",
            Builtin::Sample => "sample",
            Builtin::Math(f) => f.name(),
            Builtin::Math2(f) => f.name(),
            Builtin::Signbit => "signbit",
            Builtin::Lshift => "lshift",
            Builtin::Rshift => "rshift",
        }
    }

    /// Every built-in: [`Builtin::ALL`], then the float functions of `ir::math`.
    pub fn every() -> impl Iterator<Item = Builtin> {
        Builtin::ALL
            .into_iter()
            .chain(Math1::ALL.map(Builtin::Math))
            .chain(Math2::ALL.map(Builtin::Math2))
    }

    /// The built-in called `name`, if any.
    pub fn from_name(name: &str) -> Option<Builtin> {
        Builtin::every().find(|f| f.name() == name)
    }

    /// [`Builtin::from_name`] with the error a program gets for an unknown name.
    pub fn named(name: &str) -> Result<Builtin, String> {
        Builtin::from_name(name).ok_or_else(|| {
            if name == crate::notation::parse::COMPONENTS {
                "components in brackets after a call, `F(x, y)[k]`, select from a probe of a field or its derivative; the call is not one".into()
            } else {
                format!("unknown function `{name}`")
            }
        })
    }

    /// How many arguments it takes (the least number, for `d`, which takes one or more).
    pub fn arity(self) -> usize {
        match self {
            Builtin::D => 1,
            Builtin::Sample => 2,
            Builtin::Abs | Builtin::Sqrt | Builtin::Exp | Builtin::Log | Builtin::Floor => 1,
            Builtin::IFloor | Builtin::Math(_) | Builtin::Signbit => 1,
            Builtin::Math2(_) | Builtin::Lshift | Builtin::Rshift => 2,
            Builtin::Min | Builtin::Max | Builtin::Div | Builtin::Coalesce | Builtin::Size => 2,
            Builtin::IfElse => 3,
        }
    }

    /// The error for a call with `n` arguments, if that is not the arity.
    pub fn check_arity(self, n: usize) -> Result<(), String> {
        let arity = self.arity();
        if self == Builtin::Sample {
            return if n >= 2 {
                Ok(())
            } else {
                Err("`sample` takes a tensor and one index per dimension, `sample(A, i, j)`".into())
            };
        }
        if self == Builtin::D {
            return if n >= 1 {
                Ok(())
            } else {
                Err("`d` takes one or more loop indices, `d(x)` or `d(x, y)`".into())
            };
        }
        if n == arity {
            Ok(())
        } else {
            Err(format!(
                "`{}` takes {arity} argument(s), got {n}",
                self.name()
            ))
        }
    }

    /// `(operand classes, result class)` of a call with arguments of classes `args`: the
    /// arguments are converted to the operand classes before the function applies.
    pub fn classes(self, args: &[Class]) -> Result<(Vec<Class>, Class), String> {
        self.check_arity(args.len())?;
        Ok(match self {
            Builtin::Min | Builtin::Max | Builtin::Coalesce => {
                let c = join(args[0], args[1]);
                (vec![c, c], c)
            }
            Builtin::Abs | Builtin::Floor => {
                let c = join(args[0], Class::Int);
                (vec![c], c)
            }
            Builtin::Sqrt | Builtin::Exp | Builtin::Log | Builtin::Math(_) => {
                (vec![Class::Float], Class::Float)
            }
            Builtin::Math2(f) if f.on_integers() => {
                let c = arith(args[0], args[1]);
                (vec![c, c], c)
            }
            Builtin::Math2(_) => (vec![Class::Float, Class::Float], Class::Float),
            Builtin::Signbit => (vec![Class::Float], Class::Bool),
            Builtin::Lshift | Builtin::Rshift => {
                if args.contains(&Class::Float) {
                    return Err(format!(
                        "`{}` needs integer or bool operands, not floats",
                        self.name()
                    ));
                }
                (vec![Class::Int, Class::Int], Class::Int)
            }
            Builtin::IFloor => (vec![join(args[0], Class::Int)], Class::Int),
            Builtin::Div => {
                let c = arith(args[0], args[1]);
                (vec![c, c], c)
            }
            Builtin::IfElse => {
                if args[0] != Class::Bool {
                    return Err("the condition of `ifelse` must be a bool".into());
                }
                let c = join(args[1], args[2]);
                (vec![Class::Bool, c, c], c)
            }
            // The extent of a tensor's dimension; its arguments are a tensor name and a literal.
            Builtin::Size => (vec![Class::Int, Class::Int], Class::Int),
            // A measure: a length or an area, whatever the indices' values.
            Builtin::D => (vec![Class::Float; args.len()], Class::Float),
            // The first operand stands for the tensor (its class is the element's); the
            // indices are integers.
            Builtin::Sample => {
                let mut ops = vec![args[0]];
                ops.extend(std::iter::repeat_n(Class::Int, args.len() - 1));
                (ops, Class::Float)
            }
        })
    }

    /// Its value on `args` (`coalesce` here sees no `missing`: the evaluator resolves it
    /// before calling).
    pub fn eval(self, args: &[Scalar]) -> Result<Scalar, String> {
        let classes: Vec<Class> = args.iter().map(|a| a.ty().class()).collect();
        let (operands, _) = self.classes(&classes)?;
        let v: Vec<Scalar> = args
            .iter()
            .zip(&operands)
            .map(|(a, c)| convert(*a, *c))
            .collect();
        use Builtin as F;
        Ok(match (self, v.as_slice()) {
            (F::Min, [Scalar::Bool(a), Scalar::Bool(b)]) => Scalar::Bool(*a && *b),
            (F::Max, [Scalar::Bool(a), Scalar::Bool(b)]) => Scalar::Bool(*a || *b),
            (F::Min, [Scalar::I64(a), Scalar::I64(b)]) => Scalar::I64(if b < a { *b } else { *a }),
            (F::Max, [Scalar::I64(a), Scalar::I64(b)]) => Scalar::I64(if b > a { *b } else { *a }),
            (F::Min, [Scalar::F64(a), Scalar::F64(b)]) => Scalar::F64(min_f(*a, *b)),
            (F::Max, [Scalar::F64(a), Scalar::F64(b)]) => Scalar::F64(max_f(*a, *b)),
            (F::Abs, [Scalar::I64(a)]) => Scalar::I64(a.wrapping_abs()),
            (F::Abs, [Scalar::F64(a)]) => Scalar::F64(a.abs()),
            (F::Sqrt, [Scalar::F64(a)]) => Scalar::F64(a.sqrt()),
            (F::Exp, [Scalar::F64(a)]) => Scalar::F64(a.exp()),
            (F::Log, [Scalar::F64(a)]) => Scalar::F64(a.ln()),
            (F::Math(f), [Scalar::F64(a)]) => Scalar::F64(f.eval(*a)),
            (F::Math2(f), [Scalar::F64(a), Scalar::F64(b)]) => Scalar::F64(f.eval(*a, *b)),
            (F::Math2(f), [Scalar::I64(a), Scalar::I64(b)]) => Scalar::I64(
                f.eval_int(*a, *b)
                    .expect("`classes` gives integers to these only"),
            ),
            (F::Signbit, [Scalar::F64(a)]) => Scalar::Bool(a.is_sign_negative()),
            (F::Lshift, [Scalar::I64(a), Scalar::I64(n)]) => Scalar::I64(lshift(*a, *n)),
            (F::Rshift, [Scalar::I64(a), Scalar::I64(n)]) => Scalar::I64(rshift(*a, *n)),
            (F::Floor, [Scalar::I64(a)]) => Scalar::I64(*a),
            (F::Floor, [Scalar::F64(a)]) => Scalar::F64(a.floor()),
            (F::IFloor, [Scalar::I64(a)]) => Scalar::I64(*a),
            // `as` saturates and sends NaN to 0, like the IR's cast.
            (F::IFloor, [Scalar::F64(a)]) => Scalar::I64(a.floor() as i64),
            (F::Div, [Scalar::I64(a), Scalar::I64(b)]) => Scalar::I64(int_div(*a, *b)),
            (F::Div, [Scalar::F64(a), Scalar::F64(b)]) => Scalar::F64((a / b).trunc()),
            (F::IfElse, [Scalar::Bool(c), x, y]) => {
                if *c {
                    *x
                } else {
                    *y
                }
            }
            (F::Coalesce, [x, _]) => *x,
            (F::Size, _) => return Err("`size` needs a tensor, not a value".into()),
            (F::D, _) => return Err(D_HAS_NO_VALUE.into()),
            (F::Sample, _) => return Err("`sample` needs a tensor, not a value".into()),
            _ => unreachable!("`classes` admits only these combinations"),
        })
    }

    /// The IR of a call whose arguments `args` are already converted to the operand classes
    /// `operands` (from [`Builtin::classes`]). `None` for `size`, which names a tensor and is
    /// replaced by the dimension's value before emission, and for `d`, which the lowering
    /// replaces by the measure of a piece when it collapses a real loop.
    pub fn emit(self, args: Vec<Expr>, operands: &[Class]) -> Option<Expr> {
        let mut args = args.into_iter();
        let mut arg = || args.next().expect("`classes` checked the arity");
        let unary = |op: UnOp, x: Expr| Expr::Unary(op, Box::new(x));
        Some(match self {
            Builtin::Min | Builtin::Max => {
                let (x, y) = (arg(), arg());
                min_max(self == Builtin::Min, x, y, operands[0])
            }
            Builtin::Abs => unary(UnOp::Abs, arg()),
            Builtin::Sqrt => unary(UnOp::Sqrt, arg()),
            Builtin::Exp => unary(UnOp::Exp, arg()),
            Builtin::Log => unary(UnOp::Log, arg()),
            Builtin::Math(f) => unary(UnOp::Math(f), arg()),
            Builtin::Math2(f) if operands[0] == Class::Int => {
                let (x, y) = (arg(), arg());
                floored_int(f, x, y)
            }
            Builtin::Math2(f) => {
                let (x, y) = (arg(), arg());
                b::bin(BinOp::Math(f), x, y)
            }
            // `copysign(1.0, x) < 0`: the sign bit through a function every backend already
            // calls, so no backend needs a bit test of its own.
            Builtin::Signbit => {
                let s = b::bin(
                    BinOp::Math(Math2::Copysign),
                    Expr::Const(Scalar::F64(1.0)),
                    arg(),
                );
                b::lt(s, Expr::Const(Scalar::F64(0.0)))
            }
            // The IR's shifts take the amount modulo 64 (never undefined, never a trap); an
            // amount outside 0..64 selects NumPy's result instead.
            Builtin::Lshift => {
                let (x, n) = (arg(), arg());
                let inside = in_shift_range(n.clone());
                let shifted = b::bin(BinOp::Shl, x, n);
                b::select(inside, shifted, Expr::Const(Scalar::I64(0)))
            }
            Builtin::Rshift => {
                let (x, n) = (arg(), arg());
                let inside = in_shift_range(n.clone());
                let amount = b::select(inside, n, Expr::Const(Scalar::I64(63)));
                b::bin(BinOp::Shr, x, amount)
            }
            // Integers are already whole.
            Builtin::Floor if operands[0] == Class::Int => arg(),
            Builtin::Floor => unary(UnOp::Floor, arg()),
            Builtin::IFloor if operands[0] == Class::Int => arg(),
            Builtin::IFloor => b::cast(crate::types::ElemType::I64, unary(UnOp::Floor, arg())),
            Builtin::Div => {
                let (x, y) = (arg(), arg());
                if operands[0] == Class::Float {
                    // Truncating quotient, like the integer case.
                    let q = b::bin(BinOp::Div, x, y);
                    let neg = b::lt(q.clone(), Expr::Const(Scalar::F64(0.0)));
                    let down = unary(UnOp::Floor, q.clone());
                    let up = unary(UnOp::Neg, unary(UnOp::Floor, unary(UnOp::Neg, q)));
                    b::select(neg, up, down)
                } else {
                    b::bin(BinOp::Div, x, y)
                }
            }
            Builtin::IfElse => {
                let (c, x, y) = (arg(), arg(), arg());
                b::select(c, x, y)
            }
            Builtin::Coalesce => arg(),
            Builtin::Size | Builtin::D => return None,
            // `sample(len(values), flat)` from the lowering: the load, as a float.
            Builtin::Sample => {
                let (vals, flat) = (arg(), arg());
                let Expr::Len(buf) = vals else { return None };
                let load = b::load(buf, flat);
                if operands[0] == Class::Float {
                    load
                } else {
                    b::cast(crate::types::ElemType::F64, load)
                }
            }
        })
    }
}

/// `0 <= n < 64`: a shift amount the IR's shifts take as it is.
fn in_shift_range(n: Expr) -> Expr {
    let zero = Expr::Const(Scalar::I64(0));
    let lo = b::bin(BinOp::Ge, n.clone(), zero);
    let hi = b::lt(n, Expr::Const(Scalar::I64(64)));
    b::bin(BinOp::And, lo, hi)
}

/// NumPy's `left_shift` on `i64`.
fn lshift(x: i64, n: i64) -> i64 {
    if (0..64).contains(&n) { x << n } else { 0 }
}

/// NumPy's `right_shift` on `i64` (arithmetic).
fn rshift(x: i64, n: i64) -> i64 {
    x >> if (0..64).contains(&n) { n } else { 63 }
}

/// `mod` or `fld` of integers (as [`Math2::eval_int`]) from the IR's truncating `%` and `div`,
/// which give 0 for a zero divisor and wrap `MIN / -1`: where the truncated remainder is
/// nonzero and its sign differs from the divisor's, the floored remainder adds the divisor
/// and the floored quotient is one less.
fn floored_int(f: Math2, x: Expr, y: Expr) -> Expr {
    let zero = || Expr::Const(Scalar::I64(0));
    let r = b::bin(BinOp::Rem, x.clone(), y.clone());
    let nonzero = b::bin(BinOp::Ne, r.clone(), zero());
    let signs_differ = b::lt(b::bin(BinOp::Xor, r.clone(), y.clone()), zero());
    let adjust = b::bin(BinOp::And, nonzero, signs_differ);
    match f {
        Math2::Mod => b::select(adjust, b::bin(BinOp::Add, r.clone(), y), r),
        Math2::Fld => {
            let q = b::bin(BinOp::Div, x, y);
            let less = b::bin(BinOp::Sub, q.clone(), Expr::Const(Scalar::I64(1)));
            b::select(adjust, less, q)
        }
        _ => unreachable!("only `mod` and `fld` are defined on integers"),
    }
}

/// What evaluating `d(...)` as a plain value reports: a measure means something only where a
/// real loop's reduction collapses it.
pub const D_HAS_NO_VALUE: &str =
    "`d(...)` is a measure: it has a value only as a factor of a `+=` inside its real loops";

/// `min`/`max` of two operands of class `class` (also the `min=`/`max=` reducers): on bools
/// they are `and`/`or`.
pub fn min_max(is_min: bool, x: Expr, y: Expr, class: Class) -> Expr {
    if class == Class::Bool {
        return b::bin(if is_min { BinOp::And } else { BinOp::Or }, x, y);
    }
    b::bin(if is_min { BinOp::Min } else { BinOp::Max }, x, y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_variants_correspond_one_to_one() {
        for f in Builtin::every() {
            assert_eq!(Builtin::from_name(f.name()), Some(f));
        }
        assert_eq!(
            Builtin::from_name("atan2"),
            Some(Builtin::Math2(Math2::Atan2))
        );
        assert_eq!(
            Builtin::from_name("tanh").unwrap().eval(&[Scalar::I64(0)]),
            Ok(Scalar::F64(0.0))
        );
        assert_eq!(Builtin::from_name("nope"), None);
        assert_eq!(
            Builtin::named("nope").unwrap_err(),
            "unknown function `nope`"
        );
    }

    #[test]
    fn arity_is_checked_with_the_name() {
        assert_eq!(
            Builtin::Min.classes(&[Class::Int]).unwrap_err(),
            "`min` takes 2 argument(s), got 1"
        );
        assert_eq!(Builtin::Sqrt.eval(&[Scalar::I64(4)]), Ok(Scalar::F64(2.0)));
        // `d` takes any positive number of indices and is a float measure.
        assert!(Builtin::D.check_arity(0).is_err());
        assert_eq!(Builtin::D.check_arity(3), Ok(()));
        assert_eq!(
            Builtin::D.classes(&[Class::Float, Class::Float]).unwrap().1,
            Class::Float
        );
        assert_eq!(
            Builtin::D.eval(&[Scalar::F64(1.0)]).unwrap_err(),
            D_HAS_NO_VALUE
        );
    }

    #[test]
    fn emission_follows_the_operand_classes() {
        let (x, y) = (b::int(1), b::int(2));
        assert_eq!(
            Builtin::Min.emit(vec![x.clone(), y.clone()], &[Class::Int, Class::Int]),
            Some(b::bin(BinOp::Min, x.clone(), y.clone()))
        );
        assert_eq!(
            Builtin::Max.emit(vec![x.clone(), y.clone()], &[Class::Bool, Class::Bool]),
            Some(b::bin(BinOp::Or, x.clone(), y))
        );
        assert_eq!(Builtin::Floor.emit(vec![x.clone()], &[Class::Int]), Some(x));
        assert_eq!(Builtin::Size.emit(vec![], &[]), None);
    }
}
