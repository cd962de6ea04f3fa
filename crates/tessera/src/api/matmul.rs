//! Matrix products and axis permutations: `matmul` is an einsum over the shared index
//! (NumPy's rules for 1-d operands: a vector on the left is a row, on the right a column, and
//! that dimension is dropped from the result); `transpose` and `permute_dims` are copies in
//! the input's format ([`Tensor::permute`]).

use super::cache::with_runner;
use super::einsum::einsum_with;
use crate::error::{Error, Result};
use crate::run::Runner;
use crate::tensor::Tensor;

/// `a @ b` for 1-d and 2-d operands; the output format follows einsum's plan (a product of
/// two CSR matrices is CSR).
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    with_runner(|r| matmul_with(r, a, b))
}

/// [`matmul`] through a kernel cache of your own.
pub fn matmul_with(runner: &Runner, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    einsum_with(runner, matmul_spec(a, b)?, &[("A", a), ("B", b)], None)
}

/// The einsum statement [`matmul`] runs for `a @ b` (operands `A`, `B`, result `C`), or a
/// usage error for operands that are not 1-d or 2-d.
pub fn matmul_spec(a: &Tensor, b: &Tensor) -> Result<&'static str> {
    match (a.rank(), b.rank()) {
        (2, 2) => Ok("C[i, j] += A[i, k] * B[k, j]"),
        (2, 1) => Ok("C[i] += A[i, k] * B[k]"),
        (1, 2) => Ok("C[j] += A[k] * B[k, j]"),
        (1, 1) => Ok("C[] += A[k] * B[k]"),
        _ => Err(Error::Usage(format!(
            "matmul takes 1-d and 2-d tensors, not shapes {:?} and {:?}",
            a.shape, b.shape
        ))),
    }
}

/// The tensor with its axes reversed (a matrix's transpose), in the same format.
pub fn transpose(a: &Tensor) -> Result<Tensor> {
    let perm: Vec<usize> = (0..a.rank()).rev().collect();
    a.permute(&perm)
}

/// The tensor whose dimension `d` is dimension `perm[d]` of `a`, in the same format.
pub fn permute_dims(a: &Tensor, perm: &[usize]) -> Result<Tensor> {
    a.permute(perm)
}
