//! The high-level interface on top of kernels: [`einsum`] plans a loop program from one
//! index-notation statement and the inputs' formats, and runs it through the kernel cache.

mod einsum;
mod fills;
pub mod plan;
pub mod spec;

pub use einsum::{einsum, einsum_with, formats_of, plan_einsum, prepare};
pub use plan::{Plan, Transpose, Workspace};
