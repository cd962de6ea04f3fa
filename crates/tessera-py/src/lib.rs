//! The Python extension module `tessera._tessera`: the Rust half of the `tessera` Python
//! package (`python/tessera`). It holds what needs the core — building tensors from NumPy
//! buffers, reading them back, running kernels — and leaves the Python conveniences
//! (operators, broadcasting of Python scalars, SciPy and pydata/sparse dispatch) to the
//! pure-Python modules. Every Tessera error becomes an exception of `tessera.errors`.

mod bound;
mod compute;
mod convert;
mod errors;
mod kernel;
mod program;
mod stored;
mod tensor;

use pyo3::prelude::*;

/// Large arrays on huge pages (`tessera::runtime::huge`). Arrays handed to NumPy without a copy
/// are `Vec`s of this library, freed by it again, so they stay on this allocator.
#[global_allocator]
static ALLOC: tessera::runtime::huge::HugePages = tessera::runtime::huge::HugePages;

#[pymodule]
fn _tessera(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<tensor::PyTensor>()?;
    m.add_function(wrap_pyfunction!(tensor::from_numpy, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::from_compressed, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::from_levels, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::from_coo, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::parse_format, m)?)?;
    m.add_function(wrap_pyfunction!(stored::stored_entries, m)?)?;
    m.add_function(wrap_pyfunction!(compute::einsum, m)?)?;
    m.add_function(wrap_pyfunction!(compute::elementwise, m)?)?;
    m.add_function(wrap_pyfunction!(compute::reduce, m)?)?;
    m.add_function(wrap_pyfunction!(compute::matmul, m)?)?;
    m.add_function(wrap_pyfunction!(compute::permute_dims, m)?)?;
    m.add_function(wrap_pyfunction!(compute::scalar, m)?)?;
    m.add_function(wrap_pyfunction!(compute::lazy_compute, m)?)?;
    m.add_class::<kernel::PyKernel>()?;
    m.add_class::<bound::PyBound>()?;
    m.add_function(wrap_pyfunction!(program::bound_calls, m)?)?;
    m.add_function(wrap_pyfunction!(kernel::compile, m)?)?;
    m.add_function(wrap_pyfunction!(program::run, m)?)?;
    m.add_function(wrap_pyfunction!(program::code, m)?)?;
    m.add_function(wrap_pyfunction!(program::kernel_cache_len, m)?)?;
    m.add_function(wrap_pyfunction!(program::out_copies, m)?)?;
    m.add_function(wrap_pyfunction!(program::site_calls, m)?)?;
    m.add_function(wrap_pyfunction!(program::last_snapshots, m)?)?;
    Ok(())
}
