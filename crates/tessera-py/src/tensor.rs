//! The tensor class the Python `tessera.Tensor` wraps, and the constructors from NumPy
//! buffers: dense arrays, compressed rows/columns (SciPy CSR/CSC) and coordinates (COO).

use crate::convert::{
    buffer_from_numpy, buffer_to_numpy, buffer_view, coords_from_numpy, dtype_of_elem,
    elem_of_dtype, values_are_dense,
};
use crate::errors::IntoPy;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList};
use std::sync::Arc;
use tessera::levels::format::Coord;
use tessera::levels::{Format, LevelKind};
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::{ElemType, Scalar};

/// A Tessera tensor, immutable from Python: operations return new tensors, so one value can
/// be shared by several Python objects (and threads) without copies.
///
/// Its arrays are reference-counted (`Tensor::share`): the core's API takes tensors by value,
/// and the copy a call takes (`CallTensors`) shares their memory, so any number of threads can run
/// kernels on one tensor at once; a kernel that writes a tensor copies the arrays it writes.
#[pyclass(name = "RawTensor", module = "tessera._tessera", frozen)]
pub struct PyTensor {
    tensor: Arc<Tensor>,
}

impl PyTensor {
    /// A Python tensor owning `t`, its arrays made reference-counted.
    pub fn new(mut t: Tensor) -> PyTensor {
        t.share();
        PyTensor {
            tensor: Arc::new(t),
        }
    }

    /// The tensor, shared.
    pub fn arc(&self, _py: Python<'_>) -> Arc<Tensor> {
        self.tensor.clone()
    }

    /// The tensor, shared (without the GIL's token).
    pub fn shared(&self) -> Arc<Tensor> {
        self.tensor.clone()
    }

    /// The tensor, borrowed.
    pub fn tensor(&self) -> &Tensor {
        &self.tensor
    }
}

/// A Python number for a scalar.
pub fn scalar_to_py(py: Python<'_>, s: Scalar) -> PyResult<Bound<'_, PyAny>> {
    Ok(match s {
        Scalar::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
        Scalar::U8(x) => PyInt::new(py, x).into_any(),
        Scalar::I8(x) => PyInt::new(py, x).into_any(),
        Scalar::I32(x) => PyInt::new(py, x).into_any(),
        Scalar::I64(x) => PyInt::new(py, x).into_any(),
        Scalar::U64(x) => PyInt::new(py, x).into_any(),
        Scalar::F32(x) => PyFloat::new(py, f64::from(x)).into_any(),
        Scalar::F64(x) => PyFloat::new(py, x).into_any(),
        Scalar::Limit(l) => PyFloat::new(py, l.val).into_any(),
    })
}

/// A format from its text for a tensor of `rank` dimensions. A shorthand (`csr`, `dense`,
/// `dcsr`: text without a constructor) takes the element type `elem`, so `asarray(ints,
/// format="csr")` stays integer; a constructor names its own element type by its fill.
pub fn format_for(text: &str, rank: usize, elem: Option<ElemType>) -> tessera::Result<Format> {
    let f = Format::parse(text, Some(rank))?;
    match elem {
        Some(ty) if !text.contains('(') && f.elem() != ty => {
            let mut levels = f.levels.clone();
            let last = levels.len() - 1;
            if let LevelKind::Element(_) = levels[last] {
                levels[last] = LevelKind::Element(Scalar::zero(ty));
            }
            Format::new(levels)
        }
        _ => Ok(f),
    }
}

/// `f`, a walk over the tensor's arrays, for a tensor whose arrays may have changed since it was
/// built. Memory someone else owns (a SciPy matrix's `indptr`, lent by `asarray`) can be
/// rewritten by its owner at any time, and the walks index by the positions they read, so a
/// rewritten structure (a row pointer past the entries) is checked first and is a typed error
/// (`tensor.validate`), never a panic; a rewrite racing the walk itself (another thread, the
/// GIL released) is caught as the same error. Tensors Tessera owns cannot change: walked as
/// they are.
fn walked<R>(t: &Tensor, f: impl FnOnce(&Tensor) -> R) -> PyResult<R> {
    if !t.levels.iter().flatten().any(Buffer::is_foreign) {
        return Ok(f(t));
    }
    t.validate("tensor").py_err()?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(t))).map_err(|_| {
        crate::errors::to_py(tessera::Error::tensor(
            "tensor",
            "its arrays changed while they were read (memory shared with NumPy, rewritten \
             meanwhile)",
        ))
    })
}

/// Convert `t` to the format named by `format`, if one is named and it differs.
fn converted(py: Python<'_>, t: Tensor, format: Option<&str>) -> PyResult<Tensor> {
    let Some(text) = format else { return Ok(t) };
    let f = format_for(text, t.rank(), Some(t.elem())).py_err()?;
    if f == t.format {
        return Ok(t);
    }
    py.detach(|| t.to_format(&f)).py_err()
}

/// A dense tensor from a NumPy array (its dtype name given by the caller), then converted.
#[pyfunction]
#[pyo3(signature = (array, dtype, shape, format=None))]
pub fn from_numpy(
    py: Python<'_>,
    array: &Bound<'_, PyAny>,
    dtype: &str,
    shape: Vec<usize>,
    format: Option<&str>,
) -> PyResult<PyTensor> {
    let values = buffer_from_numpy(array, dtype)?;
    let elem = values.elem();
    let dense = Format::dense(shape.len(), Scalar::zero(elem));
    let mut levels = vec![vec![]; shape.len()];
    levels.push(vec![values]);
    let t = Tensor {
        shape,
        format: dense,
        levels,
    };
    t.validate("array").py_err()?;
    Ok(PyTensor::new(converted(py, t, format)?))
}

/// A tensor from its format, shape and every level's arrays (`level_buffers()`'s layout, as
/// `(array, dtype name)` pairs): how tensors are pickled. The structure is validated, so
/// hand-made arrays that break the format's invariants are a `TensorError`, never a kernel
/// reading out of bounds.
#[pyfunction]
pub fn from_levels(
    shape: Vec<usize>,
    format: &str,
    levels: Vec<Vec<(Bound<'_, PyAny>, String)>>,
) -> PyResult<PyTensor> {
    let format = format_for(format, shape.len(), None).py_err()?;
    let levels = levels
        .iter()
        .map(|bufs| {
            bufs.iter()
                .map(|(a, dtype)| buffer_from_numpy(a, dtype))
                .collect::<PyResult<Vec<Buffer>>>()
        })
        .collect::<PyResult<Vec<_>>>()?;
    let t = Tensor {
        shape,
        format,
        levels,
    };
    t.validate("tensor").py_err()?;
    Ok(PyTensor::new(t))
}

/// CSR (or, with `columns`, CSC) arrays as a `Dense(SparseList(Element(0)))` tensor whose
/// level buffers are those arrays; 4-byte indices give `coord=i32`. A CSC matrix is the CSR
/// of its transpose and is transposed once (a copy).
#[pyfunction]
#[pyo3(signature = (shape, indptr, indptr_dtype, indices, indices_dtype, data, dtype, columns=false, format=None))]
#[allow(clippy::too_many_arguments)]
pub fn from_compressed(
    py: Python<'_>,
    shape: (usize, usize),
    indptr: &Bound<'_, PyAny>,
    indptr_dtype: &str,
    indices: &Bound<'_, PyAny>,
    indices_dtype: &str,
    data: &Bound<'_, PyAny>,
    dtype: &str,
    columns: bool,
    format: Option<&str>,
) -> PyResult<PyTensor> {
    let values = buffer_from_numpy(data, dtype)?;
    let narrow = indptr_dtype == "int32" && indices_dtype == "int32";
    let (ptr, idx, coord) = if narrow {
        let ptr = buffer_from_numpy(indptr, "int32")?;
        let idx = buffer_from_numpy(indices, "int32")?;
        (ptr, idx, Coord::I32)
    } else {
        // 8-byte arrays are shared as they are; a 4-byte one beside an 8-byte one is widened.
        let wide = |a: &Bound<'_, PyAny>, dtype: &str| -> PyResult<Buffer> {
            match dtype {
                "int64" => buffer_from_numpy(a, "int64"),
                _ => Ok(Buffer::I64(coords_from_numpy(a, dtype)?.into())),
            }
        };
        let (ptr, idx) = (wide(indptr, indptr_dtype)?, wide(indices, indices_dtype)?);
        (ptr, idx, Coord::I64)
    };
    let stored_shape = if columns {
        vec![shape.1, shape.0]
    } else {
        vec![shape.0, shape.1]
    };
    let elem = values.elem();
    let f = Format::new(vec![
        LevelKind::Dense,
        LevelKind::SparseList { coord },
        LevelKind::Element(Scalar::zero(elem)),
    ])
    .py_err()?;
    let t = Tensor {
        shape: stored_shape,
        format: f,
        levels: vec![vec![], vec![ptr, idx], vec![values]],
    };
    t.validate("matrix").py_err()?;
    let t = if columns {
        py.detach(|| t.permute(&[1, 0])).py_err()?
    } else {
        t
    };
    Ok(PyTensor::new(converted(py, t, format)?))
}

/// A tensor from coordinates (`coords[d][k]`) and values; repeated coordinates are added
/// (SciPy's and pydata/sparse's convention). Without a format: `SparseList` for a vector,
/// `Dense` then `SparseList`s for more dimensions.
#[pyfunction]
#[pyo3(signature = (shape, coords, coords_dtype, data, dtype, format=None))]
pub fn from_coo(
    py: Python<'_>,
    shape: Vec<usize>,
    coords: Vec<Bound<'_, PyAny>>,
    coords_dtype: &str,
    data: &Bound<'_, PyAny>,
    dtype: &str,
    format: Option<&str>,
) -> PyResult<PyTensor> {
    if coords.len() != shape.len() {
        return Err(PyValueError::new_err(format!(
            "{} coordinate arrays for a tensor of {} dimensions",
            coords.len(),
            shape.len()
        )));
    }
    let values = buffer_from_numpy(data, dtype)?;
    let elem = elem_of_dtype(dtype)?;
    let coords: Vec<Vec<i64>> = coords
        .iter()
        .map(|c| coords_from_numpy(c, coords_dtype))
        .collect::<PyResult<_>>()?;
    let f = match format {
        Some(text) => format_for(text, shape.len(), Some(elem)).py_err()?,
        None => {
            let mut levels = vec![];
            for d in 0..shape.len() {
                levels.push(match (d, shape.len()) {
                    (0, n) if n > 1 => LevelKind::Dense,
                    _ => LevelKind::SparseList { coord: Coord::I64 },
                });
            }
            levels.push(LevelKind::Element(Scalar::zero(elem)));
            Format::new(levels).py_err()?
        }
    };
    let t = py
        .detach(|| {
            Tensor::from_coo(
                &f,
                &shape,
                &coords,
                &values,
                tessera::tensor::add_duplicates,
            )
        })
        .py_err()?;
    Ok(PyTensor::new(t))
}

/// The canonical text of a format (`csr` → `Dense(SparseList(Element(0.0)))`), checking it.
#[pyfunction]
#[pyo3(signature = (text, rank, dtype=None))]
pub fn parse_format(text: &str, rank: usize, dtype: Option<&str>) -> PyResult<String> {
    let elem = dtype.map(elem_of_dtype).transpose()?;
    Ok(format_for(text, rank, elem).py_err()?.to_string())
}

#[pymethods]
impl PyTensor {
    #[getter]
    fn shape(&self, py: Python<'_>) -> Vec<usize> {
        self.arc(py).shape.clone()
    }

    #[getter]
    fn format(&self, py: Python<'_>) -> String {
        self.arc(py).format.to_string()
    }

    #[getter]
    fn dtype(&self, py: Python<'_>) -> &'static str {
        dtype_of_elem(self.arc(py).elem())
    }

    #[getter]
    fn fill<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        scalar_to_py(py, self.arc(py).fill())
    }

    /// The level constructors root to leaf (`["Dense", "SparseList", "Element"]`).
    #[getter]
    fn level_kinds(&self, py: Python<'_>) -> Vec<String> {
        self.arc(py)
            .format
            .levels
            .iter()
            .map(|l| l.name())
            .collect()
    }

    fn countstored(&self, py: Python<'_>) -> PyResult<usize> {
        let t = self.arc(py);
        py.detach(move || walked(&t, Tensor::countstored))
    }

    /// Every entry, fills included, as a C-ordered NumPy array of the tensor's shape: a
    /// read-only view of the tensor's memory when its values are stored densely, else a new
    /// array.
    fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = self.arc(py);
        if values_are_dense(&t) {
            let last = t.levels.len() - 1;
            return buffer_view(py, &t, last, 0, &t.shape);
        }
        let shape = t.shape.clone();
        let values = py
            .detach(move || walked(&t, Tensor::try_to_dense))?
            .py_err()?;
        let flat = buffer_to_numpy(py, values);
        flat.call_method1("reshape", (shape,))
    }

    /// Whether `to_numpy` shares the tensor's memory (no copy).
    #[getter]
    fn dense_view(&self, py: Python<'_>) -> bool {
        values_are_dense(&self.arc(py))
    }

    /// Each level's arrays, root to leaf, as read-only NumPy arrays sharing the tensor's
    /// memory.
    fn level_buffers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let t = self.arc(py);
        let out = PyList::empty(py);
        for (l, level) in t.levels.iter().enumerate() {
            let arrays = PyList::empty(py);
            for (k, b) in level.iter().enumerate() {
                arrays.append(buffer_view(py, &t, l, k, &[b.len()])?)?;
            }
            out.append(arrays)?;
        }
        Ok(out)
    }

    /// The tensor with every array in memory Tessera owns: arrays shared with memory someone
    /// else owns (NumPy's, lent by `asarray`) are copied, the tensor's own stay shared (it is
    /// immutable), and the coordinates are checked once and their bounds recorded
    /// (`Tensor::mark_coordinates`). A kernel then gathers through them without bounds checks,
    /// which it never does through arrays their owner may rewrite (`asarray(copy=True)`).
    fn owned(&self, py: Python<'_>) -> PyTensor {
        let t = self.arc(py);
        PyTensor::new(py.detach(move || {
            let mut t = (*t).clone();
            for b in t.levels.iter_mut().flatten() {
                if b.is_foreign() {
                    b.make_owned();
                }
            }
            t.mark_coordinates();
            t
        }))
    }

    /// Each level's arrays' checked bounds (`None` where none is recorded), root to leaf, as
    /// `level_buffers` lists them: what lets kernels gather through them unchecked.
    fn checked_bounds(&self, py: Python<'_>) -> Vec<Vec<Option<u64>>> {
        let t = self.arc(py);
        t.levels
            .iter()
            .map(|l| l.iter().map(|b| b.below()).collect())
            .collect()
    }

    fn to_format(&self, py: Python<'_>, format: &str) -> PyResult<PyTensor> {
        let t = (*self.arc(py)).clone();
        Ok(PyTensor::new(converted(py, t, Some(format))?))
    }

    fn get<'py>(&self, py: Python<'py>, index: Vec<usize>) -> PyResult<Bound<'py, PyAny>> {
        let t = self.arc(py);
        scalar_to_py(py, walked(&t, |t| t.get(&index))?.py_err()?)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let t = self.arc(py);
        let stored = walked(&t, Tensor::countstored)
            .map_or_else(|_| "? (inconsistent arrays)".to_string(), |n| n.to_string());
        format!(
            "RawTensor(shape={:?}, format={}, stored={stored})",
            t.shape, t.format,
        )
    }
}
