//! Reductions over any set of axes, as NumPy's `sum(a, axis=...)`: one einsum statement
//! `R[i0, i2] += A[i0, i1, i2]` whose reduced indices are the axes. Every coordinate takes
//! part, the fills included (a sum over a fill-1 tensor counts each fill), because einsum
//! reduces over the whole iteration space; the output starts from the reducer's identity.

use super::cache::with_runner;
use super::einsum::einsum_with;
use super::elementwise::{Op, map_with};
use crate::error::{Error, Result};
use crate::run::Runner;
use crate::tensor::Tensor;
use crate::types::{Class, ElemType};

/// How a reduction combines the values along its axes. `Any` and `All` test values against
/// zero (or take booleans as they are) and give `bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    Sum,
    Prod,
    Max,
    Min,
    Any,
    All,
}

/// Reduce `a` over `axes` (distinct, each `< a.rank()`); no axes reduces over all of them,
/// giving a 0-d tensor.
///
/// ```
/// use tessera::api::{Reduction, reduce};
/// use tessera::runtime::Buffer;
/// use tessera::tensor::Tensor;
/// let a = Tensor::from_slice("csr", &[2, 3], &Buffer::F64(vec![1.0, 0.0, 2.0, 0.0, 0.0, 3.0].into())).unwrap();
/// assert_eq!(reduce(Reduction::Sum, &a, &[1]).unwrap().to_dense(), Buffer::F64(vec![3.0, 3.0].into()));
/// assert_eq!(reduce(Reduction::Max, &a, &[]).unwrap().to_dense(), Buffer::F64(vec![3.0].into()));
/// ```
pub fn reduce(how: Reduction, a: &Tensor, axes: &[usize]) -> Result<Tensor> {
    with_runner(|r| reduce_with(r, how, a, axes))
}

/// [`reduce`] through a kernel cache of your own.
pub fn reduce_with(runner: &Runner, how: Reduction, a: &Tensor, axes: &[usize]) -> Result<Tensor> {
    let reduced = reduced_axes(a, axes)?;
    let index = |d: usize| format!("i{d}");
    let all: Vec<String> = (0..a.rank()).map(index).collect();
    let kept: Vec<String> = (0..a.rank()).filter(|d| !reduced[*d]).map(index).collect();
    let read = format!("A[{}]", all.join(", "));
    let test = || match a.elem().class() {
        Class::Bool => read.clone(),
        Class::Int => format!("{read} != 0"),
        Class::Float => format!("{read} != 0.0"),
    };
    let (op, rhs) = match how {
        Reduction::Sum => ("+=", read.clone()),
        Reduction::Prod => ("*=", read.clone()),
        Reduction::Max => ("<<max>>=", read.clone()),
        Reduction::Min => ("<<min>>=", read.clone()),
        Reduction::Any => ("|=", test()),
        Reduction::All => ("&=", test()),
    };
    let spec = format!("R[{}] {op} {rhs}", kept.join(", "));
    einsum_with(runner, &spec, &[("A", a)], None)
}

/// Per axis, whether it is reduced; an empty list reduces them all.
fn reduced_axes(a: &Tensor, axes: &[usize]) -> Result<Vec<bool>> {
    let mut reduced = vec![axes.is_empty(); a.rank()];
    for &d in axes {
        if d >= a.rank() {
            return Err(Error::Usage(format!(
                "axis {d} is outside the {} dimensions of a tensor of shape {:?}",
                a.rank(),
                a.shape
            )));
        }
        if std::mem::replace(&mut reduced[d], true) {
            return Err(Error::Usage(format!("axis {d} is listed twice")));
        }
    }
    Ok(reduced)
}

macro_rules! reductions {
    ($($(#[$doc:meta])* $name:ident => $how:ident),* $(,)?) => {$(
        $(#[$doc])*
        pub fn $name(a: &Tensor, axes: &[usize]) -> Result<Tensor> {
            reduce(Reduction::$how, a, axes)
        }
    )*};
}

reductions! {
    /// The sum over `axes` (all when empty).
    sum => Sum,
    /// The product over `axes`.
    prod => Prod,
    /// The largest value over `axes` (`-Inf` for floats over an empty axis).
    max => Max,
    /// The smallest value over `axes`.
    min => Min,
    /// Whether some value over `axes` is nonzero (true).
    any => Any,
    /// Whether every value over `axes` is nonzero (true).
    all => All,
}

/// The 2-norm over `axes` (all when empty): the square root of the sum of squares, a float.
pub fn norm(a: &Tensor, axes: &[usize]) -> Result<Tensor> {
    with_runner(|r| norm_with(r, a, axes))
}

/// [`norm`] through a kernel cache of your own.
pub fn norm_with(runner: &Runner, a: &Tensor, axes: &[usize]) -> Result<Tensor> {
    let reduced = reduced_axes(a, axes)?;
    let all: Vec<String> = (0..a.rank()).map(|d| format!("i{d}")).collect();
    let kept: Vec<&String> = all
        .iter()
        .enumerate()
        .filter(|(d, _)| !reduced[*d])
        .map(|(_, v)| v)
        .collect();
    let read = format!("A[{}]", all.join(", "));
    // Squared as floats so integer inputs cannot overflow.
    let x = if a.elem() == ElemType::F64 {
        read
    } else {
        format!("({read} + 0.0)")
    };
    let kept: Vec<&str> = kept.iter().map(|s| s.as_str()).collect();
    let spec = format!("S[{}] += {x} * {x}", kept.join(", "));
    let squares = einsum_with(runner, &spec, &[("A", a)], None)?;
    map_with(runner, Op::Sqrt, &[&squares])
}
