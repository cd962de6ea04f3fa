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
use tessera::levels::{Format, LevelKind};
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

/// Keeps a NumPy array alive while a [`Store`] reads its memory, and keeps that memory where
/// it is. The reference alone does not: `ndarray.resize` refuses an array with other
/// references, but `resize(n, refcheck=False)` skips that count and reallocates the memory
/// under the store (NumPy 2.4: it still refuses an array that has a base or weak references).
/// So the store also holds a weak reference to the array that owns the memory (the end of the
/// `base` chain: resizing it would move its views' memory too), which makes NumPy refuse to
/// resize it, with or without `refcheck`, while the store lives. Both are held only to keep
/// them alive.
struct Lent(
    #[allow(dead_code)] Py<PyAny>,
    #[allow(dead_code)] Option<Py<pyo3::types::PyWeakrefReference>>,
);

impl Lent {
    fn new(obj: &Bound<'_, PyAny>) -> PyResult<Lent> {
        Ok(Lent(obj.clone().unbind(), resize_guard(obj)?))
    }
}

/// A weak reference to the NumPy array whose memory `obj` is or views, which makes NumPy
/// refuse to resize that array (`Lent`); `None` when there is no such array to guard (the
/// memory belongs to another kind of object, which NumPy never resizes).
fn resize_guard(obj: &Bound<'_, PyAny>) -> PyResult<Option<Py<pyo3::types::PyWeakrefReference>>> {
    if !obj.is_instance_of::<numpy::PyUntypedArray>() {
        return Ok(None);
    }
    let mut owner = obj.clone();
    loop {
        let base = owner.getattr(pyo3::intern!(obj.py(), "base"))?;
        if base.is_none() {
            // NumPy resizes only arrays without a base: this one.
            let weak = pyo3::types::PyWeakrefReference::new(&owner)?;
            return Ok(Some(weak.unbind()));
        }
        if !base.is_instance_of::<numpy::PyUntypedArray>() {
            return Ok(None);
        }
        owner = base;
    }
}

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
            let owner: Arc<dyn std::any::Any + Send + Sync> = Arc::new(Lent::new(obj)?);
            // SAFETY: `s` is the array's whole memory, `len` initialised elements of `T`
            // (rust-numpy checked the dtype), non-null and aligned (checked above); `owner`
            // holds a reference to the array, so the memory lives as long as the store and its
            // clones. NumPy cannot free or move it meanwhile: `ndarray.resize` refuses an
            // array with other references, and the owner of the memory, even with
            // `refcheck=False`, while `Lent` holds a weak reference to it. The store never
            // writes it (copy-on-write).
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

/// An output array given with `out=`: its memory lent as the output's values, which the
/// kernel writes in place (no allocation, no copy).
pub struct OutArray {
    /// The output's name (empty for einsum's and matmul's one output).
    pub name: String,
    /// How messages name the argument: `out=y`, or `out=` for einsum's.
    pub label: String,
    /// The array (a reference: it stays alive while the call writes it).
    pub array: Py<PyAny>,
    pub shape: Vec<usize>,
    pub elem: ElemType,
    /// Its memory, `[start, end)` in bytes (empty for an empty array).
    pub bytes: (usize, usize),
    /// The lent buffer; taken for the call.
    pub buffer: Option<Buffer>,
}

/// Keeps an output array alive while a lent [`Store`] writes its memory, and keeps NumPy from
/// resizing it meanwhile (the weak reference of [`Lent`]).
struct Lender(
    #[allow(dead_code)] Py<PyAny>,
    #[allow(dead_code)] Option<Py<pyo3::types::PyWeakrefReference>>,
);

/// A span of memory, `[start, end)` in bytes.
type Bytes = (usize, usize);

/// Whether the array may be written (NumPy's `WRITEABLE` flag).
fn writeable(arr: &Bound<'_, numpy::PyUntypedArray>) -> bool {
    // SAFETY: `arr` is a live NumPy array (the cast checked it), and we hold the GIL; its
    // fields are read, not written (rust-numpy's `is_c_contiguous` reads the flags the same way).
    let flags = unsafe { (*numpy::npyffi::_PyArray_GET_ITEM_DATA(arr.as_array_ptr())).flags };
    flags & numpy::npyffi::NPY_ARRAY_WRITEABLE != 0
}

/// The array's memory lent as a store, if its dtype is `T` (`None`: another dtype).
fn lend<T: Element + Copy + Send + Sync + 'static>(
    label: &str,
    obj: &Bound<'_, PyAny>,
    untyped: &Bound<'_, numpy::PyUntypedArray>,
) -> PyResult<Option<(Store<T>, Bytes)>> {
    let Ok(arr) = obj.cast::<PyArrayDyn<T>>() else {
        return Ok(None);
    };
    if !untyped.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{label}: the array is not C-contiguous (the kernel writes it in place)"
        )));
    }
    if !writeable(untyped) {
        return Err(PyValueError::new_err(format!(
            "{label}: the array is read-only: pass a writable array"
        )));
    }
    let (ptr, len) = (arr.data(), arr.len());
    if len == 0 {
        return Ok(Some((Store::new(), (0, 0))));
    }
    if !ptr.is_aligned() {
        return Err(PyValueError::new_err(format!(
            "{label}: the array's memory is not aligned for its dtype"
        )));
    }
    let start = ptr as usize;
    let bytes = (start, start + len * std::mem::size_of::<T>());
    let owner: Arc<dyn std::any::Any + Send + Sync> =
        Arc::new(Lender(obj.clone().unbind(), resize_guard(obj)?));
    // SAFETY: `ptr` is the array's whole memory, `len` initialised, aligned (checked above)
    // elements of `T` (rust-numpy checked the dtype; the array is C-contiguous and writable,
    // checked above); `owner` holds a reference to the array, so the memory lives as long as
    // the store, and NumPy refuses to resize it (or the array it views) while the weak
    // reference `resize_guard` made lives, `refcheck=False` or not. Nothing in
    // Tessera reads or writes it otherwise: the caller refuses an out= array whose memory
    // overlaps an input's or another output's (`check_overlaps`). Other Python threads may
    // touch it while the GIL is released, as with NumPy's own `out=`: that is the caller's race.
    Ok(Some((unsafe { Store::lent(ptr, len, owner) }, bytes)))
}

/// An `out=` array a bound call (`Kernel.bind`) lends again for each run: checked once by
/// [`lend_out`], its memory kept alive and unresizable ([`Lender`]) for as long as the bound
/// call lives, so each run only asks [`Lendable::still`] whether its owner changed the array
/// in place (shape, dtype, flags can be set on a live array) and takes a new store of the
/// same memory.
pub struct Lendable {
    /// The array as [`lend_out`] checked it, its buffer taken (each run lends a new one).
    pub out: OutArray,
    /// What the array's fields were then ([`Lendable::still`] compares them).
    data: usize,
    descr: usize,
    flags: std::ffi::c_int,
    len: usize,
    owner: Arc<dyn std::any::Any + Send + Sync>,
}

/// The fields of a NumPy array that say where and what its elements are.
fn array_fields(arr: &Bound<'_, numpy::PyUntypedArray>) -> (usize, usize, std::ffi::c_int) {
    // SAFETY: `arr` is a live NumPy array (the cast checked it), and we hold the GIL; its
    // fields are read, not written (as `writeable` does).
    let f = unsafe { &*numpy::npyffi::_PyArray_GET_ITEM_DATA(arr.as_array_ptr()) };
    (f.data as usize, f.descr as usize, f.flags)
}

impl Lendable {
    /// `obj` as output `name`'s array, if [`lend_out`] accepts it and its dtype is lent as
    /// is (a bool array's bytes are made 0 or 1 before each lending: not kept).
    pub fn keep(name: &str, obj: &Bound<'_, PyAny>) -> Option<Lendable> {
        let mut out = lend_out(name, obj).ok()?;
        out.buffer = None;
        if matches!(out.elem, ElemType::Bool | ElemType::Limit) {
            return None;
        }
        let untyped = obj.cast::<numpy::PyUntypedArray>().ok()?;
        let (data, descr, flags) = array_fields(untyped);
        Some(Lendable {
            len: out.shape.iter().product(),
            out,
            data,
            descr,
            flags,
            owner: Arc::new(Lender(obj.clone().unbind(), resize_guard(obj).ok()?)),
        })
    }

    /// Whether `obj` is still the array [`Lendable::keep`] checked, unchanged: the same
    /// object, memory, shape, dtype object and flags (C-contiguous, writable, aligned).
    pub fn still(&self, obj: &Bound<'_, PyAny>) -> bool {
        if obj.as_ptr() != self.out.array.as_ptr() {
            return false;
        }
        let Ok(untyped) = obj.cast::<numpy::PyUntypedArray>() else {
            return false;
        };
        array_fields(untyped) == (self.data, self.descr, self.flags)
            && untyped.shape() == self.out.shape.as_slice()
    }

    /// The array's memory lent for one run, as [`lend_out`] lends it.
    pub fn lend(&self) -> Option<Buffer> {
        fn store<T: Copy>(l: &Lendable) -> Store<T> {
            if l.len == 0 {
                return Store::new();
            }
            // SAFETY: the memory [`lend_out`] checked when the array was kept (`len` aligned,
            // initialised elements of `T`, C-contiguous, writable), which `still` found
            // unchanged (same address, shape, dtype and flags); `owner` keeps the array alive
            // and NumPy from resizing it. No input shares it (checked by the keyword call that
            // kept it; inputs are immutable tensors), and the store is the only writer
            // while it lives, as with `lend`.
            unsafe { Store::lent(l.data as *mut T, l.len, l.owner.clone()) }
        }
        Some(match self.out.elem {
            ElemType::F64 => Buffer::F64(store(self)),
            ElemType::F32 => Buffer::F32(store(self)),
            ElemType::I64 => Buffer::I64(store(self)),
            ElemType::I32 => Buffer::I32(store(self)),
            ElemType::I8 => Buffer::I8(store(self)),
            ElemType::U8 => Buffer::U8(store(self)),
            ElemType::U64 => Buffer::U64(store(self)),
            ElemType::Bool | ElemType::Limit => return None,
        })
    }
}

/// A bool `out=` array lent as a store ([`lend`]), if its dtype is bool. NumPy stores a bool
/// as one byte and does not promise it is 0 or 1 (a `uint8` array viewed as bool), while a
/// Rust `bool` must be: any other byte is first written as 1, the same truth value, before
/// the store reads the memory as `bool`s.
fn lend_bool(
    label: &str,
    obj: &Bound<'_, PyAny>,
    untyped: &Bound<'_, numpy::PyUntypedArray>,
) -> PyResult<Option<(Store<bool>, Bytes)>> {
    let Ok(arr) = obj.cast::<PyArrayDyn<bool>>() else {
        return Ok(None);
    };
    if untyped.is_c_contiguous() && writeable(untyped) && arr.len() > 0 {
        // The bytes read in place (a `view("uint8")` per call cost more than a small
        // kernel with three bool outputs).
        // SAFETY: a C-contiguous, writable array of one-byte elements: `len` initialised
        // bytes at `data()`, alive while `arr` is; we hold the GIL, no slice of it is held,
        // and the bytes are read as `u8` (no `bool` is made of them before they are 0 or 1).
        let all = unsafe { std::slice::from_raw_parts_mut(arr.data().cast::<u8>(), arr.len()) };
        // A read-only pass first (vectorised, no branch per byte): an array of 0s and 1s,
        // the usual case, is not written; otherwise nonzero bytes become 1.
        if all.iter().fold(0u8, |acc, &b| acc | (b & !1)) != 0 {
            for b in all.iter_mut() {
                *b = u8::from(*b != 0);
            }
        }
    }
    // Every byte is now 0 or 1 (or the array is refused below, unread).
    lend::<bool>(label, obj, untyped)
}

/// `out=`'s array for output `name`: checked (a NumPy array of a Tessera dtype, in native
/// byte order, writable, C-contiguous, aligned) and its memory lent as a buffer.
pub fn lend_out(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<OutArray> {
    let label = if name.is_empty() {
        "out=".to_string()
    } else {
        format!("out={name}")
    };
    let untyped = obj.cast::<numpy::PyUntypedArray>().map_err(|_| {
        let ty = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        PyTypeError::new_err(format!("{label}: expected a NumPy array, not {ty}"))
    })?;
    let lent = if let Some((s, b)) = lend::<f64>(&label, obj, untyped)? {
        (Buffer::F64(s), b, ElemType::F64)
    } else if let Some((s, b)) = lend::<f32>(&label, obj, untyped)? {
        (Buffer::F32(s), b, ElemType::F32)
    } else if let Some((s, b)) = lend::<i64>(&label, obj, untyped)? {
        (Buffer::I64(s), b, ElemType::I64)
    } else if let Some((s, b)) = lend::<i32>(&label, obj, untyped)? {
        (Buffer::I32(s), b, ElemType::I32)
    } else if let Some((s, b)) = lend::<i8>(&label, obj, untyped)? {
        (Buffer::I8(s), b, ElemType::I8)
    } else if let Some((s, b)) = lend::<u8>(&label, obj, untyped)? {
        (Buffer::U8(s), b, ElemType::U8)
    } else if let Some((s, b)) = lend::<u64>(&label, obj, untyped)? {
        (Buffer::U64(s), b, ElemType::U64)
    } else if let Some((s, b)) = lend_bool(&label, obj, untyped)? {
        (Buffer::Bool(s), b, ElemType::Bool)
    } else {
        let dtype = untyped.dtype();
        let name: String = dtype.getattr("name")?.extract()?;
        let native = elem_of_dtype(&name).is_ok();
        return Err(PyTypeError::new_err(if native {
            format!("{label}: the array's dtype {name} is not in native byte order")
        } else {
            format!(
                "{label}: unsupported dtype {name} for out= (float64, float32, int64, int32, int8, uint8, uint64, bool)"
            )
        }));
    };
    let (buffer, bytes, elem) = lent;
    Ok(OutArray {
        name: name.to_string(),
        label,
        array: obj.clone().unbind(),
        shape: untyped.shape().to_vec(),
        elem,
        bytes,
        buffer: Some(buffer),
    })
}

/// The `[start, end)` bytes of every buffer of a tensor.
fn tensor_bytes(t: &Tensor) -> impl Iterator<Item = (usize, usize)> + '_ {
    t.levels.iter().flatten().map(|b| {
        let start = b.as_ptr() as usize;
        (start, start + b.len() * b.elem().size())
    })
}

/// Refuses out= arrays whose memory overlaps an input's (a NumPy array shared by
/// `asarray`, or a tensor's view) or another out= array's: the kernel would read what it has
/// already written.
pub fn check_overlaps<'a>(
    outs: &[OutArray],
    inputs: impl Iterator<Item = (&'a String, &'a Tensor)>,
) -> PyResult<()> {
    let overlap =
        |a: (usize, usize), b: (usize, usize)| a.0 < a.1 && b.0 < b.1 && a.0 < b.1 && b.0 < a.1;
    for (n, t) in inputs {
        for o in outs {
            if tensor_bytes(t).any(|b| overlap(o.bytes, b)) {
                return Err(PyValueError::new_err(format!(
                    "{}: the array shares memory with input `{n}` (pass an array of its own)",
                    o.label
                )));
            }
        }
    }
    for (k, o) in outs.iter().enumerate() {
        if let Some(p) = outs[..k].iter().find(|p| overlap(o.bytes, p.bytes)) {
            return Err(PyValueError::new_err(format!(
                "{}: the array shares memory with {}",
                o.label, p.label
            )));
        }
    }
    Ok(())
}

/// The tensor an out= array stands for, as output `name` of format `format` and shape
/// `shape`: refused unless the format is dense and its element type and the shape are the
/// array's.
pub fn out_tensor(out: &mut OutArray, format: &Format, shape: &[usize]) -> PyResult<Tensor> {
    out_fits(out, format, shape)?;
    let levels = &format.levels;
    let buffer = out
        .buffer
        .take()
        .ok_or_else(|| PyValueError::new_err(format!("{}: given for two outputs", out.label)))?;
    let mut bufs = vec![vec![]; levels.len()];
    bufs[levels.len() - 1] = vec![buffer];
    Ok(Tensor {
        shape: shape.to_vec(),
        format: format.clone(),
        levels: bufs,
    })
}

/// The checks of [`out_tensor`] without making the tensor: the format dense, its element
/// type and the shape the array's (a call site that keeps the output's tensor between calls
/// puts the lent buffer into it after these).
pub fn out_fits(out: &OutArray, format: &Format, shape: &[usize]) -> PyResult<()> {
    let levels = &format.levels;
    let dense = levels[..levels.len() - 1]
        .iter()
        .all(|l| matches!(l, LevelKind::Dense))
        && matches!(levels.last(), Some(LevelKind::Element(_)));
    if !dense {
        return Err(PyValueError::new_err(format!(
            "{}: the output is stored as {format}, and out= takes dense outputs",
            out.label
        )));
    }
    if format.elem() != out.elem {
        return Err(PyTypeError::new_err(format!(
            "{}: the output is {}, the array {} (out= is written without casting)",
            out.label,
            dtype_of_elem(format.elem()),
            dtype_of_elem(out.elem)
        )));
    }
    if shape != out.shape.as_slice() {
        return Err(PyValueError::new_err(format!(
            "{}: the output has shape {}, the array {}",
            out.label,
            shape_text(shape),
            shape_text(&out.shape)
        )));
    }
    Ok(())
}

/// A shape as Python prints a tuple: `(5,)`, `(2, 3)`.
fn shape_text(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}

/// How many times an out= array's values had to be copied in after a call ([`settle`]):
/// zero-copy calls leave it alone (for the tests).
pub static OUT_COPIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// After the call: the output tensor's values are in the array (written in place), or, if
/// the kernel had to move them (it grew the buffer), copied there.
pub fn settle(py: Python<'_>, out: &OutArray, t: &Tensor) -> PyResult<()> {
    let Some(values) = t.levels.last().and_then(|l| l.first()) else {
        return Err(PyValueError::new_err(format!(
            "internal error: out={} lost its values",
            out.label
        )));
    };
    let n: usize = out.shape.iter().product();
    if n == 0 || values.lent_at().map(|p| p as usize) == Some(out.bytes.0) && values.len() == n {
        return Ok(());
    }
    if values.len() < n {
        return Err(PyValueError::new_err(format!(
            "internal error: out={}: the kernel left {} values for {n} entries",
            out.label,
            values.len()
        )));
    }
    fn copy<T: Element + Copy>(py: Python<'_>, array: &Py<PyAny>, from: &[T]) -> PyResult<()> {
        let arr = array.bind(py).cast::<PyArrayDyn<T>>()?;
        let mut rw = arr
            .try_readwrite()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let s = rw
            .as_slice_mut()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let n = s.len();
        s.copy_from_slice(&from[..n]);
        Ok(())
    }
    OUT_COPIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    match values {
        Buffer::F64(v) => copy(py, &out.array, v),
        Buffer::F32(v) => copy(py, &out.array, v),
        Buffer::I64(v) => copy(py, &out.array, v),
        Buffer::I32(v) => copy(py, &out.array, v),
        Buffer::I8(v) => copy(py, &out.array, v),
        Buffer::U8(v) => copy(py, &out.array, v),
        Buffer::U64(v) => copy(py, &out.array, v),
        Buffer::Bool(v) => copy(py, &out.array, v),
    }
}
