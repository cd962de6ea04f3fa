//! The runtime side of kernels: typed buffers and the boundary the backends call through.

pub mod abi;
pub mod buffer;
pub mod flag_scan;
pub mod huge;
pub mod intrinsics;
pub mod largest;
pub mod memory;
pub mod short_sort;
pub mod store;

pub use buffer::Buffer;
