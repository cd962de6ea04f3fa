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
    let spec = match (a.rank(), b.rank()) {
        (2, 2) => "C[i, j] += A[i, k] * B[k, j]",
        (2, 1) => "C[i] += A[i, k] * B[k]",
        (1, 2) => "C[j] += A[k] * B[k, j]",
        (1, 1) => "C[] += A[k] * B[k]",
        _ => {
            return Err(Error::Usage(format!(
                "matmul takes 1-d and 2-d tensors, not shapes {:?} and {:?}",
                a.shape, b.shape
            )));
        }
    };
    einsum_with(runner, spec, &[("A", a), ("B", b)], None)
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
