//! Elementwise operations with NumPy broadcasting: `add(&a, &b)` writes and runs one einsum
//! statement, `C[i0, i1] = A0[i0, i1] + A1[i0, i1]`, so the output's fill and structure follow
//! the fill algebra of [`super::fills`]: the fill is the operation applied to the inputs'
//! fills, and a dimension is stored sparsely where the result is that fill wherever some
//! sparse input stores nothing (`*` of two CSR matrices visits and stores the intersection,
//! `+` the union, `a + 1` keeps `a`'s structure with fill 1, `min(a, 0)` with fill `Inf` keeps
//! it with fill 0). The output keeps the level kinds of the first full-shape sparse input when
//! they fit that structure (CSR in, CSR out); otherwise it takes einsum's choice.
//!
//! Broadcasting ([`super::broadcast`]): an input with a size-1 dimension stretched to another
//! extent is read through a copy without it; a 0-d input (see [`scalar`]) is a constant of
//! the statement.

use super::broadcast::{broadcast_shape, kept_dims, squeeze};
use super::cache::with_runner;
use super::einsum::{einsum_with, plan_einsum};
use crate::error::{Error, Result};
use crate::ir::math::{Math1, Math2};
use crate::levels::{Format, LevelKind};
use crate::run::Runner;
use crate::semantics::Builtin;
use crate::tensor::Tensor;
use crate::types::Scalar;

/// An elementwise operation. Comparisons give `bool` tensors; `Div` is float division, as
/// NumPy's `/`; `Sqrt`, `Exp` and `Log` give floats; `Floor` keeps the type; `Where` is
/// `ifelse(condition, a, b)`, NumPy's `where`. `And`, `Or`, `Xor` and `Not` are logical on
/// bools and bitwise on integers; `Lshift` and `Rshift` are NumPy's shifts (`lshift`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
    Xor,
    /// NumPy's `left_shift`: 0 for amounts outside `0..64` (`Builtin::Lshift`).
    Lshift,
    /// NumPy's `right_shift` (arithmetic): the sign for amounts outside `0..64`.
    Rshift,
    /// Is the float's sign bit set (`-0.0`, negative NaN too)? A bool tensor.
    Signbit,
    Neg,
    Not,
    Abs,
    Sqrt,
    Exp,
    Log,
    Floor,
    Where,
    /// A float function of one operand: `sin`, `tanh`, `round`, ... (`ir::math`).
    Math(Math1),
    /// A function of two: `pow`, `atan2`, `hypot`, `copysign`, `logaddexp`, `nextafter` on
    /// floats, and the floored `mod` and `fld` (NumPy's `remainder` and `floor_divide`), exact
    /// on integers.
    Math2(Math2),
}

impl Op {
    pub fn arity(self) -> usize {
        match self {
            Op::Neg | Op::Not | Op::Abs | Op::Sqrt | Op::Exp | Op::Log | Op::Floor => 1,
            Op::Math(_) | Op::Signbit => 1,
            Op::Where => 3,
            _ => 2,
        }
    }

    /// The right side of the statement applying the operation to these operand texts.
    pub(super) fn apply(self, x: &[String]) -> String {
        let infix = |op: &str| format!("{} {op} {}", x[0], x[1]);
        let call = |f: Builtin| format!("{}({})", f.name(), x.join(", "));
        match self {
            Op::Add => infix("+"),
            Op::Sub => infix("-"),
            Op::Mul => infix("*"),
            Op::Div => infix("/"),
            Op::Lt => infix("<"),
            Op::Le => infix("<="),
            Op::Gt => infix(">"),
            Op::Ge => infix(">="),
            Op::Eq => infix("=="),
            Op::Ne => infix("!="),
            Op::And => infix("&"),
            Op::Or => infix("|"),
            Op::Xor => infix("xor"),
            Op::Lshift => call(Builtin::Lshift),
            Op::Rshift => call(Builtin::Rshift),
            Op::Signbit => call(Builtin::Signbit),
            Op::Min => call(Builtin::Min),
            Op::Max => call(Builtin::Max),
            Op::Neg => format!("-{}", x[0]),
            Op::Not => format!("!{}", x[0]),
            Op::Abs => call(Builtin::Abs),
            Op::Sqrt => call(Builtin::Sqrt),
            Op::Exp => call(Builtin::Exp),
            Op::Log => call(Builtin::Log),
            Op::Floor => call(Builtin::Floor),
            Op::Where => call(Builtin::IfElse),
            Op::Math(f) => call(Builtin::Math(f)),
            Op::Math2(f) => call(Builtin::Math2(f)),
        }
    }
}

/// A 0-d tensor holding `v`, to combine a constant with a tensor (`add(&a, &scalar(Scalar::F64(1.0)))`).
pub fn scalar(v: Scalar) -> Tensor {
    let mut values = crate::runtime::Buffer::new(v.ty());
    values.push(v);
    let format = Format {
        levels: vec![LevelKind::Element(v)],
    };
    Tensor::from_dense(&format, &[], &values).expect("a 0-d dense tensor holds one value")
}

/// Apply `op` to `inputs` (as many as its arity) with NumPy broadcasting.
///
/// ```
/// use tessera::api::{Op, map};
/// use tessera::runtime::Buffer;
/// use tessera::tensor::Tensor;
/// let a = Tensor::from_slice("csr", &[2, 2], &Buffer::F64(vec![1.0, 0.0, 0.0, 2.0].into())).unwrap();
/// let row = Tensor::from_slice("dense", &[1, 2], &Buffer::F64(vec![10.0, 20.0].into())).unwrap();
/// let c = map(Op::Mul, &[&a, &row]).unwrap();
/// assert_eq!(c.to_dense(), Buffer::F64(vec![10.0, 0.0, 0.0, 40.0].into()));
/// assert_eq!(c.format.to_string(), "Dense(SparseList(Element(0.0)))");
/// ```
pub fn map(op: Op, inputs: &[&Tensor]) -> Result<Tensor> {
    with_runner(|r| map_with(r, op, inputs))
}

/// [`map`] through a kernel cache of your own.
pub fn map_with(runner: &Runner, op: Op, inputs: &[&Tensor]) -> Result<Tensor> {
    if inputs.len() != op.arity() {
        return Err(Error::Usage(format!(
            "{op:?} takes {} tensor(s), got {}",
            op.arity(),
            inputs.len()
        )));
    }
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
    let out_shape = broadcast_shape(&shapes)?;
    let index = |d: usize| format!("i{d}");
    let mut names = vec![];
    let mut operands = vec![];
    let mut reads = vec![];
    for (k, t) in inputs.iter().enumerate() {
        if let Some(v) = constant(t) {
            operands.push(format!("({v})"));
            continue;
        }
        let dims = kept_dims(&t.shape, &out_shape);
        let keep: Vec<bool> = dims.iter().map(Option::is_some).collect();
        let read = squeeze(t, &keep)?;
        let idx: Vec<String> = dims.iter().flatten().map(|&d| index(d)).collect();
        let name = format!("A{k}");
        operands.push(format!("{name}[{}]", idx.join(", ")));
        names.push(name);
        reads.push(read);
    }
    let out_idx: Vec<String> = (0..out_shape.len()).map(index).collect();
    let spec = format!("C[{}] = {}", out_idx.join(", "), op.apply(&operands));
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&reads).collect();
    let formats: Vec<(&str, &Format)> = named.iter().map(|(n, t)| (*n, &t.format)).collect();
    let chosen = plan_einsum(&spec, &formats, None)?.output_format;
    let output = kept_kinds(&reads, &out_shape, &chosen);
    let out = einsum_with(runner, &spec, &named, output.as_ref())?;
    debug_assert_eq!(out.shape, out_shape);
    Ok(out)
}

/// The value of a 0-d input whose type a literal has: written into the statement, so the
/// fill algebra knows it (`a + 1` keeps `a`'s structure; a `1[]` read would be unknown).
/// Each such constant compiles its own kernel. A NaN is read instead: the literal `NaN` has
/// no sign, and `signbit`/`copysign` of a `-NaN` must see it.
fn constant(t: &Tensor) -> Option<Scalar> {
    let literal = matches!(
        t.elem(),
        crate::types::ElemType::F64 | crate::types::ElemType::I64 | crate::types::ElemType::Bool
    );
    (t.rank() == 0 && literal)
        .then(|| t.to_dense().get(0))
        .filter(|v| !matches!(v, Scalar::F64(x) if x.is_nan()))
}

/// The format of the first input of the output's shape that has a sparse level, with
/// einsum's leaf, when its levels take writes in the order the statement makes them and it
/// is sparse only where einsum's `chosen` format is (so it stores no more than einsum would).
fn kept_kinds(reads: &[Tensor], out_shape: &[usize], chosen: &Format) -> Option<Format> {
    let t = reads
        .iter()
        .find(|t| t.shape == out_shape && !t.format.is_dense())?;
    let writable = |k: &LevelKind| {
        matches!(
            k,
            LevelKind::Dense | LevelKind::SparseList { .. } | LevelKind::SparseCOO(_)
        )
    };
    let per_dim = |f: &Format| -> Vec<bool> {
        f.levels
            .iter()
            .flat_map(|l| std::iter::repeat_n(l.is_sparse(), l.rank()))
            .collect()
    };
    let (mine, theirs) = (per_dim(&t.format), per_dim(chosen));
    let fits = mine.iter().zip(&theirs).all(|(m, c)| !m || *c);
    let inner = &t.format.levels[..t.format.levels.len() - 1];
    if !fits || !inner.iter().all(writable) {
        return None;
    }
    let mut levels = inner.to_vec();
    levels.push(chosen.leaf().clone());
    Some(Format { levels })
}

macro_rules! binary {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {$(
        $(#[$doc])*
        pub fn $name(a: &Tensor, b: &Tensor) -> Result<Tensor> {
            map(Op::$op, &[a, b])
        }
    )*};
}

macro_rules! unary {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {$(
        $(#[$doc])*
        pub fn $name(a: &Tensor) -> Result<Tensor> {
            map(Op::$op, &[a])
        }
    )*};
}

binary! {
    /// `a + b`: stored where either is (the union) when both fills are 0.
    add => Add,
    /// `a - b`.
    sub => Sub,
    /// `a * b`: stored where both are (the intersection) when the fills are 0.
    mul => Mul,
    /// `a / b`, float division.
    div => Div,
    /// NumPy's `minimum`.
    minimum => Min,
    /// NumPy's `maximum`.
    maximum => Max,
    /// `a < b`, a bool tensor.
    lt => Lt,
    /// `a <= b`.
    le => Le,
    /// `a > b`.
    gt => Gt,
    /// `a >= b`.
    ge => Ge,
    /// `a == b`.
    eq => Eq,
    /// `a != b`.
    ne => Ne,
    /// Logical (bool) or bitwise (integer) and.
    and => And,
    /// Logical (bool) or bitwise (integer) or.
    or => Or,
}

unary! {
    /// `-a`.
    neg => Neg,
    /// Logical (bool) or bitwise (integer) not.
    not => Not,
    /// `|a|`.
    abs => Abs,
    /// Square root (NaN below 0).
    sqrt => Sqrt,
    /// `e^a`.
    exp => Exp,
    /// Natural logarithm.
    log => Log,
}
