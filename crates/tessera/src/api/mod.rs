//! The high-level interface on top of kernels: [`einsum`] plans a loop program from one
//! index-notation statement and the inputs' formats, and runs it through the kernel cache;
//! elementwise operations with broadcasting ([`map`], [`add`]...), reductions over axes
//! ([`reduce`], [`sum`]...) and [`matmul`] are einsum statements written for you.

mod broadcast;
mod cache;
mod einsum;
mod elementwise;
mod fills;
pub mod grad;
mod lazy;
mod matmul;
pub mod plan;
mod reduce;
pub mod spec;

pub use broadcast::broadcast_shape;
pub use einsum::{
    einsum, einsum_with, formats_of, input_work, plan_einsum, prepare, prepare_created,
    prepare_created_but_output,
};
pub use elementwise::{
    Op, abs, add, and, div, eq, exp, ge, gt, le, log, lt, map, map_with, maximum, minimum, mul, ne,
    neg, not, or, scalar, sqrt, sub,
};
pub use lazy::{Lazy, lazy};
pub use matmul::{matmul, matmul_spec, matmul_with, permute_dims, transpose};
pub use plan::{Plan, Transpose, Workspace};
pub use reduce::{Reduction, all, any, max, min, norm, norm_with, prod, reduce, reduce_with, sum};
