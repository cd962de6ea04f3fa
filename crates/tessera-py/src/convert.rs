//! NumPy arrays to `Buffer`s and back. NumPy dtypes map one to one onto Tessera's element
//! types (`float64` f64, `float32` f32, `int64` i64, `int32` i32, `int8` i8, `uint8` u8,
//! `uint64` u64, `bool` bool); any other dtype is refused by the Python side before it gets
//! here. Reading copies the array into the buffer's `Vec` (one `memcpy`); writing hands the
//! `Vec` to NumPy without a copy (`IntoPyArray` keeps the allocation alive).

use numpy::{IntoPyArray, PyReadonlyArrayDyn};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use tessera::ElemType;
use tessera::runtime::Buffer;

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

fn read<T: numpy::Element + Copy>(obj: &Bound<'_, PyAny>) -> PyResult<Vec<T>> {
    let arr: PyReadonlyArrayDyn<'_, T> = obj.extract()?;
    match arr.as_slice() {
        Ok(s) => Ok(s.to_vec()),
        // Strided views are gathered in logical (C) order.
        Err(_) => Ok(arr.as_array().iter().copied().collect()),
    }
}

/// The elements of a NumPy array, in C order, as a buffer of the matching type.
pub fn buffer_from_numpy(obj: &Bound<'_, PyAny>, dtype: &str) -> PyResult<Buffer> {
    Ok(match elem_of_dtype(dtype)? {
        ElemType::F64 => Buffer::F64(read(obj)?),
        ElemType::F32 => Buffer::F32(read(obj)?),
        ElemType::I64 => Buffer::I64(read(obj)?),
        ElemType::I32 => Buffer::I32(read(obj)?),
        ElemType::I8 => Buffer::I8(read(obj)?),
        ElemType::U8 => Buffer::U8(read(obj)?),
        ElemType::U64 => Buffer::U64(read(obj)?),
        ElemType::Bool => Buffer::Bool(read(obj)?),
        ElemType::Limit => return Err(PyValueError::new_err("limit buffers have no dtype")),
    })
}

/// Integer coordinates (any NumPy integer array) as `i64`s.
pub fn coords_from_numpy(obj: &Bound<'_, PyAny>, dtype: &str) -> PyResult<Vec<i64>> {
    Ok(match dtype {
        "int64" => read::<i64>(obj)?,
        "int32" => read::<i32>(obj)?.into_iter().map(i64::from).collect(),
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
        Buffer::F64(v) => v.into_pyarray(py).into_any(),
        Buffer::F32(v) => v.into_pyarray(py).into_any(),
        Buffer::I64(v) => v.into_pyarray(py).into_any(),
        Buffer::I32(v) => v.into_pyarray(py).into_any(),
        Buffer::I8(v) => v.into_pyarray(py).into_any(),
        Buffer::U8(v) => v.into_pyarray(py).into_any(),
        Buffer::U64(v) => v.into_pyarray(py).into_any(),
        Buffer::Bool(v) => v.into_pyarray(py).into_any(),
    }
}
