//! Tessera: a compiler and runtime for sparse, structured and continuous tensor programs.
//!
//! Pipeline (see DESIGN.md): text program → [`notation`] AST → [`transforms`] normal form →
//! lowering through [`levels`] and [`looplets`] (simplified by [`symbolic`]) → [`ir`] loop IR →
//! [`backend`] native kernel. [`eval`] is the dense reference evaluator used as the test oracle.

pub mod algorithms;
pub mod api;
pub mod backend;
pub mod convert;
pub mod error;
pub mod eval;
pub mod explain;
pub mod fields;
pub mod io;
pub mod ir;
pub mod kernel_error;
pub mod levels;
pub mod limit;
pub mod looplets;
pub mod lower;
pub mod memory;
pub mod notation;
pub mod run;
pub mod runtime;
pub mod semantics;
pub mod span;
pub mod symbolic;
pub mod tensor;
pub mod transforms;
pub mod types;

/// The unit tests run on the allocator the binaries install, so every test exercises it.
#[cfg(test)]
#[global_allocator]
static ALLOC: runtime::huge::HugePages = runtime::huge::HugePages;

pub use error::{Error, Result};
pub use kernel_error::{KernelError, KernelErrorKind};
pub use types::{ElemType, Scalar};
