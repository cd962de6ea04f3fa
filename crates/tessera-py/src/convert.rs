//! NumPy arrays to `Buffer`s and back. NumPy dtypes map one to one onto Tessera's element
//! types (`float64` f64, `float32` f32, `int64` i64, `int32` i32, `int8` i8, `uint8` u8,
//! `uint64` u64, `bool` bool); any other dtype is refused by the Python side before it gets
//! here. Reading a C-contiguous array shares its memory (a copy-on-write `Store` holding a
//! reference to the array: no copy, the tensor sees later writes to the array, and a kernel
//! that writes the tensor copies it first); a strided array is gathered in C order, and `bool`
//! arrays are copied (NumPy does not guarantee their bytes are 0 or 1). Writing hands the
//! buffer's `Vec` to NumPy without a copy (`IntoPyArray` keeps the allocation alive).

use numpy::ndarray::{ArrayViewD, IxDyn};
use numpy::{
    Element, IntoPyArray, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::sync::Arc;
use tessera::ElemType;
use tessera::levels::LevelKind;
use tessera::runtime::Buffer;
use tessera::runtime::store::Store;
use tessera::tensor::Tensor;

/// The Tessera element type of a NumPy dtype name.
pub fn elem_of_dtype(dtype: &str) -> PyResult<ElemType> {
    Ok(match dtype {
        "float64" => ElemType::F64,
        "float32" => ElemType::F32,
        "int64" => ElemType::I64,
        "int32" => ElemType::I32,
        "int8" => ElemType::I8,
        "uint8" => ElemType::U8,
        "uint64" => ElemType::U64,
        "bool" => ElemType::Bool,
        other => {
            return Err(PyTypeError::new_err(format!(
                "unsupported dtype `{other}` (Tessera has float64, float32, int64, int32, int8, uint8, uint64, bool)"
            )));
        }
    })
}

/// The NumPy dtype name of an element type.
pub fn dtype_of_elem(t: ElemType) -> &'static str {
    match t {
        ElemType::F64 => "float64",
        ElemType::F32 => "float32",
        ElemType::I64 => "int64",
        ElemType::I32 => "int32",
        ElemType::I8 => "int8",
        ElemType::U8 => "uint8",
        ElemType::U64 => "uint64",
        ElemType::Bool => "bool",
        ElemType::Limit => "limit",
    }
}

/// Keeps a NumPy array alive while a [`Store`] reads its memory.
struct Lent(#[allow(dead_code)] Py<PyAny>);

/// The elements of a NumPy array of element type `T`, in C order: its own memory when it is
/// C-contiguous (no copy), else gathered.
fn read<T: Element + Copy + Send + Sync + 'static>(obj: &Bound<'_, PyAny>) -> PyResult<Store<T>> {
    let arr: PyReadonlyArrayDyn<'_, T> = obj.extract()?;
    // `as_slice` also accepts Fortran order (a transposed array), whose memory is not in C
    // order: only a C-contiguous array is taken as it is.
    let c_order = arr.is_c_contiguous();
    match arr.as_slice() {
        Ok([]) => Ok(Store::new()),
        Ok(s) if c_order => {
            let (ptr, len) = (s.as_ptr(), s.len());
            if !ptr.is_aligned() {
                // The Python side passes aligned arrays (`_native`); a hand-made unaligned
                // view reaching here is refused rather than read unaligned.
                return Err(PyValueError::new_err(
                    "array memory is not aligned for its dtype (copy it with np.require(a, requirements='A'))",
                ));
            }
            let owner: Arc<dyn std::any::Any + Send + Sync> = Arc::new(Lent(obj.clone().unbind()));
            // SAFETY: `s` is the array's whole memory, `len` initialised elements of `T`
            // (rust-numpy checked the dtype), non-null and aligned (checked above); `owner`
            // holds a reference to the array, so the memory lives as long as the store and its
            // clones. NumPy cannot free or move it meanwhile: `ndarray.resize` refuses an
            // array with other references. The store never writes it (copy-on-write).
            Ok(unsafe { Store::shared(ptr, len, owner) })
        }
        // Strided and Fortran-ordered views are gathered in logical (C) order.
        _ => Ok(arr.as_array().iter().copied().collect()),
    }
}

/// The elements of a NumPy array, in C order, as a buffer of the matching type (sharing the
/// array's memory where [`read`] can).
pub fn buffer_from_numpy(obj: &Bound<'_, PyAny>, dtype: &str) -> PyResult<Buffer> {
    Ok(match elem_of_dtype(dtype)? {
        ElemType::F64 => Buffer::F64(read(obj)?),
        ElemType::F32 => Buffer::F32(read(obj)?),
        ElemType::I64 => Buffer::I64(read(obj)?),
        ElemType::I32 => Buffer::I32(read(obj)?),
        ElemType::I8 => Buffer::I8(read(obj)?),
        ElemType::U8 => Buffer::U8(read(obj)?),
        ElemType::U64 => Buffer::U64(read(obj)?),
        // Read as bytes: a `bool` array viewed from other bytes may hold values other than 0
        // and 1, which are not valid Rust `bool`s.
        ElemType::Bool => {
            let bytes = obj.call_method1("view", ("uint8",))?;
            Buffer::Bool(read::<u8>(&bytes)?.iter().map(|&b| b != 0).collect())
        }
        ElemType::Limit => return Err(PyValueError::new_err("limit buffers have no dtype")),
    })
}

/// Integer coordinates (any NumPy integer array) as `i64`s.
pub fn coords_from_numpy(obj: &Bound<'_, PyAny>, dtype: &str) -> PyResult<Vec<i64>> {
    Ok(match dtype {
        "int64" => read::<i64>(obj)?.into_vec(),
        "int32" => read::<i32>(obj)?.iter().map(|&x| i64::from(x)).collect(),
        other => {
            return Err(PyTypeError::new_err(format!(
                "coordinates must be int32 or int64, not {other}"
            )));
        }
    })
}

/// A 1-D NumPy array owning the buffer's memory (no copy).
pub fn buffer_to_numpy(py: Python<'_>, b: Buffer) -> Bound<'_, PyAny> {
    match b {
        Buffer::F64(v) => v.into_vec().into_pyarray(py).into_any(),
        Buffer::F32(v) => v.into_vec().into_pyarray(py).into_any(),
        Buffer::I64(v) => v.into_vec().into_pyarray(py).into_any(),
        Buffer::I32(v) => v.into_vec().into_pyarray(py).into_any(),
        Buffer::I8(v) => v.into_vec().into_pyarray(py).into_any(),
        Buffer::U8(v) => v.into_vec().into_pyarray(py).into_any(),
        Buffer::U64(v) => v.into_vec().into_pyarray(py).into_any(),
        Buffer::Bool(v) => v.into_vec().into_pyarray(py).into_any(),
    }
}

/// The base object of the NumPy arrays that share a tensor's memory: it holds the tensor, so
/// the memory lives as long as any such array. The tensor is immutable (kernels that write
/// get copies, and a tensor is only moved out for a kernel while nothing else holds it), so
/// the arrays are marked read-only and never see it change.
#[pyclass(frozen)]
pub struct Shared {
    _tensor: Arc<Tensor>,
}

fn shared_view<'py, T: Element>(
    py: Python<'py>,
    values: &[T],
    shape: &[usize],
    keep: &Arc<Tensor>,
) -> PyResult<Bound<'py, PyAny>> {
    let n: usize = shape.iter().product();
    let view = ArrayViewD::from_shape(IxDyn(shape), &values[..n])
        .map_err(|e| PyValueError::new_err(format!("internal error: {e}")))?;
    let base = Bound::new(
        py,
        Shared {
            _tensor: keep.clone(),
        },
    )?
    .into_any();
    // SAFETY: `base` holds an `Arc` of the tensor that owns `values`, and becomes the array's
    // base object, so the memory outlives the array; the tensor is never mutated or moved
    // while shared (see `Shared`), so the buffer is not reallocated either.
    let array = unsafe { PyArrayDyn::<T>::borrow_from_array(&view, base) };
    array.readwrite().make_nonwriteable();
    Ok(array.into_any())
}

/// Buffer `k` of level `level` of the tensor (its first `shape`-product elements, in C order
/// in `shape`) as a read-only NumPy array sharing its memory.
pub fn buffer_view<'py>(
    py: Python<'py>,
    t: &Arc<Tensor>,
    level: usize,
    k: usize,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    match &t.levels[level][k] {
        Buffer::F64(v) => shared_view(py, v, shape, t),
        Buffer::F32(v) => shared_view(py, v, shape, t),
        Buffer::I64(v) => shared_view(py, v, shape, t),
        Buffer::I32(v) => shared_view(py, v, shape, t),
        Buffer::I8(v) => shared_view(py, v, shape, t),
        Buffer::U8(v) => shared_view(py, v, shape, t),
        Buffer::U64(v) => shared_view(py, v, shape, t),
        Buffer::Bool(v) => shared_view(py, v, shape, t),
    }
}

/// Whether the tensor's values are its dense array as they are: every level `Dense` down to
/// an `Element` leaf whose buffer holds at least one value per entry, in C order.
pub fn values_are_dense(t: &Tensor) -> bool {
    let levels = &t.format.levels;
    let n: usize = t.shape.iter().product();
    levels[..levels.len() - 1]
        .iter()
        .all(|l| matches!(l, LevelKind::Dense))
        && matches!(levels.last(), Some(LevelKind::Element(_)))
        && t.levels.last().and_then(|b| b.first()).map(Buffer::len) >= Some(n)
}
