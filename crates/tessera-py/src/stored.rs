//! A tensor's stored entries as NumPy arrays: the coordinates and values of what the tensor
//! stores, without its fills. The Array API's sorting and set functions
//! (`python/tessera/array_api.py`) work on these plus the count of unstored positions (each
//! holding the fill), so a sparse tensor is never expanded to a dense copy for them.

use crate::convert::buffer_to_numpy;
use crate::tensor::PyTensor;
use numpy::IntoPyArray;
use pyo3::prelude::*;
use tessera::runtime::Buffer;

/// `(coords, values)`: `coords` one int64 array per dimension and `values` an array of the
/// tensor's dtype, one entry per stored coordinate in storage order (a dense level stores
/// every coordinate; a run stores each coordinate it covers).
#[pyfunction]
pub fn stored_entries<'py>(
    py: Python<'py>,
    tensor: PyRef<'py, PyTensor>,
) -> PyResult<(Vec<Bound<'py, PyAny>>, Bound<'py, PyAny>)> {
    let t = tensor.arc(py);
    let (coords, values) = py.detach(move || {
        let mut coords: Vec<Vec<i64>> = vec![vec![]; t.rank()];
        let mut values = Buffer::new(t.elem());
        t.for_each_stored(&mut |c, v| {
            for (d, &x) in c.iter().enumerate() {
                coords[d].push(x as i64);
            }
            values.push(v);
        });
        (coords, values)
    });
    let coords = coords
        .into_iter()
        .map(|c| c.into_pyarray(py).into_any())
        .collect();
    Ok((coords, buffer_to_numpy(py, values)))
}
