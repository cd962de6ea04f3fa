"""The Tensor class and ``asarray``: tensors from NumPy, SciPy sparse, pydata/sparse, lists
and scalars, and back.

Copies: none where the layouts match. A C-contiguous NumPy array, and a canonical CSR
matrix's (or a 2-d row-compressed pydata/sparse GCXS's) ``data``, ``indices`` and ``indptr`` (4-byte indices as ``coord=i32``, 8-byte as
``coord=i64``), become the tensor's level buffers as they are: the tensor reads their memory
and holds a reference to the arrays (so it sees later writes to them, like ``np.asarray``),
and a kernel that writes the tensor copies it first, never writing the arrays. Copied are:
strided, unaligned or byte-swapped arrays, ``bool`` arrays, CSR matrices with mixed index
widths or non-canonical indices, and CSC, COO and the other SciPy formats, which are
converted. ``to_numpy()`` and ``to_scipy()`` are views of the tensor's memory where its
layout allows.
"""

import builtins

import numpy as np

from . import _tessera
from .errors import FormatError, IndexOutOfBoundsError, TensorError, UnsupportedDtypeError

DTYPES = ("float64", "float32", "int64", "int32", "int8", "uint8", "uint64", "bool")


def _dtype_name(dtype):
    name = np.dtype(dtype).name
    if name not in DTYPES:
        raise UnsupportedDtypeError(
            f"unsupported dtype `{name}` (Tessera has {', '.join(DTYPES)})"
        )
    return name


def _native(a):
    """``a`` as an array Tessera can share: native byte order and aligned (a copy only when
    it is neither)."""
    a = np.asarray(a)
    if not a.dtype.isnative or not a.flags.aligned:
        a = np.require(a, dtype=a.dtype.newbyteorder("="), requirements="A")
    return a


def _format_text(format):
    return None if format is None else str(format)


def _is_scipy_sparse(obj):
    module = type(obj).__module__ or ""
    if not module.startswith("scipy.sparse"):
        return False
    import scipy.sparse

    return scipy.sparse.issparse(obj)


def _is_pydata_sparse(obj):
    module = type(obj).__module__ or ""
    return module == "sparse" or module.startswith("sparse.")


def _from_scipy(obj, format):
    kind = obj.format
    if kind not in ("csr", "csc", "coo"):
        # DIA, BSR, LIL, DOK: SciPy's own conversion to CSR first (a copy).
        obj, kind = obj.tocsr(), "csr"
    dtype = _dtype_name(obj.dtype)
    if kind == "coo":
        coords = [np.asarray(c) for c in (obj.coords if hasattr(obj, "coords") else (obj.row, obj.col))]
        cdtype = np.result_type(*[c.dtype for c in coords]).name if coords else "int64"
        coords = [np.ascontiguousarray(c, dtype=cdtype) for c in coords]
        return _tessera.from_coo(list(obj.shape), coords, cdtype, _native(obj.data), dtype,
                                 _format_text(format) or ("csr" if obj.ndim == 2 else None))
    if not obj.has_canonical_format:
        # Tessera's SparseList needs sorted, distinct indices per row: sort and add duplicates.
        obj = obj.copy()
        obj.sum_duplicates()
    return _tessera.from_compressed(
        tuple(obj.shape), _native(obj.indptr), obj.indptr.dtype.name, _native(obj.indices),
        obj.indices.dtype.name, _native(obj.data), dtype, kind == "csc", _format_text(format),
    )


def _from_pydata(obj, format):
    fill = obj.fill_value
    if fill != 0 and not (obj.dtype == np.bool_ and not fill):
        raise FormatError(f"pydata/sparse array with fill value {fill!r}: only 0 is supported")
    dtype = _dtype_name(obj.dtype)
    axes = tuple(getattr(obj, "compressed_axes", None) or ())
    if obj.ndim == 2 and hasattr(obj, "indptr") and axes in ((0,), (1,)):
        # A 2-d GCXS is CSR (rows compressed) or CSC: its arrays are shared as SciPy's are.
        # Its indices are sorted within each row when pydata built it; hand-made unsorted
        # ones fail the structure check and take the COO route below.
        from .errors import TensorError

        try:
            return _tessera.from_compressed(
                tuple(obj.shape), _native(obj.indptr), obj.indptr.dtype.name,
                _native(obj.indices), obj.indices.dtype.name, _native(obj.data), dtype,
                axes == (1,), _format_text(format),
            )
        except TensorError:
            pass
    if not hasattr(obj, "coords"):
        obj = obj.tocoo()  # GCXS of other shapes and the other pydata formats
    coords = [np.ascontiguousarray(c, dtype=np.int64) for c in obj.coords]
    return _tessera.from_coo(list(obj.shape), coords, "int64", _native(obj.data), dtype,
                             _format_text(format))


def _check_device(device):
    """Tessera computes on the CPU: ``device`` is None or ``"cpu"``."""
    if device is not None and device != "cpu":
        raise ValueError(f"Tessera tensors live on the CPU (device 'cpu'), not on {device!r}")


def asarray(obj, format=None, dtype=None, *, device=None, copy=None):
    """A Tessera tensor from ``obj``: a Tensor (converted if ``format`` differs), a NumPy
    array, a SciPy sparse array or matrix (CSR, CSC, COO, DIA, BSR, ...), a pydata/sparse
    COO or GCXS array, a nested list or a scalar. ``format`` is a format object or text
    (default: dense for arrays, CSR for SciPy matrices, compressed levels for COO);
    ``dtype`` converts the values first (NumPy's rules). ``copy`` is the Array API's:
    ``True`` never shares the memory of ``obj`` (a NumPy array's later writes are not seen),
    ``False`` raises ``ValueError`` where sharing is impossible, ``None`` shares where it
    can. ``device`` is None or ``"cpu"``."""
    _check_device(device)
    if copy is not None:
        return _asarray_copy(obj, format, dtype, bool(copy))
    if isinstance(obj, Tensor):
        if dtype is not None and np.dtype(dtype) != obj.dtype:
            obj = asarray(obj.to_numpy().astype(dtype), format=format or obj.format)
        return obj if format is None else obj.to_format(format)
    if _is_scipy_sparse(obj):
        if dtype is not None:
            obj = obj.astype(dtype)
        return Tensor(_from_scipy(obj, format))
    if _is_pydata_sparse(obj):
        if dtype is not None:
            obj = obj.astype(dtype)
        return Tensor(_from_pydata(obj, format))
    arr = _native(np.asarray(obj, dtype=dtype))
    name = _dtype_name(arr.dtype)
    # (Not np.ascontiguousarray: it makes 0-d arrays 1-d. Strided arrays are gathered in C
    # order by the extension.)
    return Tensor(_tessera.from_numpy(arr, name, list(arr.shape), _format_text(format)))


def _asarray_copy(obj, format, dtype, copy):
    """``asarray`` with the Array API's ``copy=True`` or ``copy=False``."""
    if isinstance(obj, Tensor):
        same = (dtype is None or np.dtype(dtype) == obj.dtype) and format is None
        if same:
            # A tensor is immutable: sharing its own arrays is a copy in every way a caller
            # can see; what `copy=True` must not share is memory a NumPy array lent it.
            return Tensor(obj._raw.owned()) if copy else obj
        if not copy:
            raise ValueError("asarray(copy=False): a copy is needed to change the dtype or format")
        return asarray(obj, format=format, dtype=dtype)
    if copy:
        if _is_scipy_sparse(obj) or _is_pydata_sparse(obj):
            # Built sharing the arrays (one structure check), then copied once into memory
            # Tessera owns, which also records the coordinates' checked bounds: kernels then
            # gather through them unchecked, as through a matrix read from a file (never
            # through arrays their owner may still rewrite, which zero-copy ones are).
            return Tensor(asarray(obj, format=format, dtype=dtype)._raw.owned())
        else:
            obj = np.array(obj, dtype=dtype, copy=True)
            dtype = None
        return asarray(obj, format=format, dtype=dtype)
    # copy=False: only a dense NumPy array whose memory the tensor can take as it is.
    arr = obj if isinstance(obj, np.ndarray) else None
    if (arr is None or format is not None or (dtype is not None and np.dtype(dtype) != arr.dtype)
            or arr.dtype.name not in DTYPES or arr.dtype == np.bool_ or not arr.flags.c_contiguous
            or not arr.flags.aligned or not arr.dtype.isnative):
        raise ValueError("asarray(copy=False): the values cannot be shared without a copy "
                         "(not a C-contiguous, aligned, native NumPy array of a Tessera dtype, "
                         "bool, or another dtype or format asked for)")
    return asarray(arr)


def _as_dtype(t, dtype):
    """``t`` with elements of ``dtype``, by a compiled conversion that keeps its format
    (integers wrap, as NumPy's ``astype``)."""
    from ._sets import _retyped_format

    dtype = np.dtype(dtype)
    if t.dtype == dtype:
        return t
    fill = np.asarray(t.fill).astype(dtype).item()
    return t.to_format(_retyped_format(t.format, fill, dtype))


def _standard_dtype(out, operands, keep_int_power=False):
    """``out`` (an elementwise result) in the dtype the Array API's promotion gives its
    tensor operands (Python scalars are weak). The core computes integers in int64 (uint64)
    and floats in float64, so ``uint8 + uint8`` and ``sin(float32)`` come back wide and are
    converted here (integers wrap, as in NumPy; a float64 result rounds once to float32).
    Results of another kind are left alone: comparisons (bool), and the quotient of
    integers (float64; the standard leaves it unspecified), except integer powers
    (``keep_int_power``), which the standard makes integers. Promotions to a dtype Tessera
    lacks (``int8`` with ``uint8`` is ``int16``) keep the wide result."""
    dtypes = [o.dtype for o in operands if isinstance(o, Tensor)]
    if not dtypes:
        return out
    want = np.result_type(*dtypes)
    have = out.dtype
    if have == want or want.name not in DTYPES:
        return out
    same_kind = (want.kind == have.kind == "f") or (want.kind in "iu" and have.kind in "iu")
    if same_kind or (keep_int_power and want.kind in "iu" and have.kind == "f"):
        return _as_dtype(out, want)
    return out


def _from_levels(shape, format, levels):
    levels = [[(_native(a), dtype) for a, dtype in level] for level in levels]
    return Tensor(_tessera.from_levels(shape, format, levels))


def from_dlpack(x, /, format=None, *, device=None, copy=None):
    """A tensor from any object with ``__dlpack__`` (PyTorch, JAX, CuPy on CPU, NumPy...):
    the dense values, in ``format`` (default dense). A dense tensor of a C-contiguous,
    aligned, native-order producer shares its memory (no copy, as ``asarray``); ``copy=True``
    always copies, and ``copy=False`` raises ``BufferError`` where sharing is impossible
    (a strided or byte-swapped producer, another format)."""
    _check_device(device)
    arr = np.from_dlpack(x)
    if copy:
        arr = arr.copy()
    elif copy is False:
        dense = format is None or _tessera.parse_format(str(format), arr.ndim, None).startswith(
            "Dense(" * arr.ndim + "Element(")
        if not (dense and arr.flags.c_contiguous and arr.flags.aligned and arr.dtype.isnative
                and arr.dtype.name in DTYPES and arr.dtype != np.bool_):
            raise BufferError("tessera.from_dlpack(copy=False): the values cannot be shared "
                              "(strided, unaligned, byte-swapped, bool, or another format)")
    return asarray(arr, format=format)


def _scalar_dtype(value, like):
    """NumPy's rule for a Python scalar beside an array: it takes the array's type when that
    is of its kind or wider (an int beside a float array is a float)."""
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, np.generic):
        return _dtype_name(value.dtype)
    kind = like.kind if like is not None else None
    if isinstance(value, int):
        return like.name if kind in ("i", "u", "f") else "int64"
    if isinstance(value, float):
        return like.name if kind == "f" else "float64"
    raise TypeError(f"cannot combine a tensor with {type(value).__name__}")


def _operand(value, like=None):
    """The raw tensor for an operand of an operator or function."""
    if isinstance(value, Tensor):
        return value._raw
    if isinstance(value, (bool, int, float, np.generic)):
        return _tessera.scalar(value.item() if isinstance(value, np.generic) else value,
                               _scalar_dtype(value, like))
    return asarray(value)._raw


def _axes(axis, ndim):
    if axis is None:
        return []
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise IndexError(f"axis {a} is out of bounds for a tensor of {ndim} dimensions")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis!r}")
    if not out:
        # `axis=()` reduces nothing; the core reads no axes as all of them.
        return None
    return sorted(out)


class Tensor:
    """A Tessera tensor: a shape, a format (level chain) and the levels' arrays. Immutable:
    operations return new tensors. Python operators run Tessera kernels (``+ - * / // %``,
    comparisons, ``& | ^ ~ << >>``, ``@``), broadcasting as NumPy does; ``np.asarray(t)`` gives the
    dense values."""

    __slots__ = ("_raw", "__weakref__")
    # NumPy defers to our reflected operators (`ndarray + tensor` runs Tessera).
    __array_priority__ = 1000

    def __init__(self, raw):
        if not isinstance(raw, _tessera.RawTensor):
            raise TypeError("use tessera.asarray(...) to make a Tensor")
        self._raw = raw

    # --- description ---------------------------------------------------------------------
    @property
    def shape(self):
        return tuple(self._raw.shape)

    @property
    def ndim(self):
        return len(self._raw.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self):
        return np.dtype(self._raw.dtype)

    @property
    def format(self):
        """The format's text, e.g. ``Dense(SparseList(Element(0.0)))``."""
        return self._raw.format

    @property
    def fill(self):
        """The value of every entry the format does not store."""
        return self._raw.fill

    @property
    def nnz(self):
        """The number of stored entries (explicitly stored fills included)."""
        return self._raw.countstored()

    def countstored(self):
        return self._raw.countstored()

    def __repr__(self):
        try:
            nnz = self.nnz
        except TensorError:  # arrays shared with NumPy and rewritten inconsistently since
            nnz = "?"
        return f"tessera.Tensor(shape={self.shape}, dtype={self.dtype.name}, format={self.format}, nnz={nnz})"

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # --- conversion ----------------------------------------------------------------------
    def to_numpy(self):
        """Every entry, fills included, as a C-ordered NumPy array: when the values are
        stored densely (every level ``Dense``), a read-only view of the tensor's memory (no
        copy; the tensor is immutable), else a new array."""
        return self._raw.to_numpy()

    todense = to_numpy

    def __array__(self, dtype=None, copy=None):
        # NumPy 2's protocol: copy=False must not copy, copy=True must.
        shares = self._raw.dense_view and (dtype is None or np.dtype(dtype) == self.dtype)
        if copy is False and not shares:
            raise ValueError(
                "a copy is needed: the tensor's values are not stored densely"
                if not self._raw.dense_view else f"a copy is needed to convert {self.dtype} to {np.dtype(dtype)}"
            )
        a = self.to_numpy()
        if dtype is not None:
            a = a.astype(dtype, copy=False)
        return np.array(a, copy=True) if copy and a.base is not None else a

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export (CPU) of the dense values: the tensor's own memory, read-only, when
        they are stored densely and the consumer speaks DLPack 1.0 (which can say
        read-only); otherwise a copy — or ``BufferError`` when ``copy=False`` forbids it."""
        if dl_device is not None and tuple(dl_device) != (1, 0):
            raise BufferError(f"tessera tensors live on the CPU, not on device {tuple(dl_device)}")
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        if copy is False and not (self._raw.dense_view and versioned):
            raise BufferError(
                "a copy is needed: " + ("the values are not stored densely" if not self._raw.dense_view
                                        else "the consumer's DLPack version cannot mark memory read-only")
            )
        a = self.to_numpy()
        if copy or not versioned:
            a = np.array(a, copy=True)
        kwargs = {"max_version": max_version} if max_version is not None else {}
        return a.__dlpack__(**kwargs)

    def __reduce__(self):
        # By the level arrays (copied into the pickle), validated again when unpickled.
        levels = [[(np.asarray(a), np.asarray(a).dtype.name) for a in level] for level in self.level_buffers()]
        return (_from_levels, (list(self.shape), self.format, levels))

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0

    def to_format(self, format):
        """The same values in another format (a compiled conversion)."""
        return Tensor(self._raw.to_format(str(format)))

    def level_buffers(self):
        """Each level's arrays, root to leaf (``[[], [ptr, idx], [val]]`` for CSR): read-only
        NumPy arrays sharing the tensor's memory."""
        return self._raw.level_buffers()

    def to_scipy(self, kind="csr"):
        """A ``scipy.sparse.csr_array`` (``kind="csr"``), or ``csc``/``coo`` from it, of a
        matrix whose fill is zero. A CSR tensor's arrays become the result's arrays (shared,
        read-only: SciPy's in-place methods such as ``eliminate_zeros`` need ``.copy()``
        first); other formats are converted to CSR first."""
        import scipy.sparse

        if self.ndim != 2:
            raise ValueError(f"to_scipy needs a matrix, not a tensor of {self.ndim} dimensions")
        if self.fill:
            raise ValueError(f"to_scipy needs fill 0; this tensor's fill is {self.fill!r}")
        t = self
        if self._raw.level_kinds != ["Dense", "SparseList", "Element"]:
            t = self.to_format(f"Dense(SparseList(Element({_zero_text(self.dtype)})))")
        _, (ptr, idx), (val,) = t.level_buffers()
        n = int(ptr[-1])
        m = scipy.sparse.csr_array((val[:n], idx[:n], ptr), shape=self.shape)
        return m if kind == "csr" else m.asformat(kind)

    def __getitem__(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) == self.ndim and builtins.all(isinstance(i, (int, np.integer)) for i in index):
            if not index:
                return self  # `x[()]` of a 0-d tensor: itself (immutable)
            for i, n in zip(index, self.shape):
                if not -n <= int(i) < n:
                    raise IndexOutOfBoundsError(f"index {int(i)} is out of bounds for an axis of size {n}")
            norm = [int(i) % n for i, n in zip(index, self.shape)]
            # A 0-d tensor, as the Array API says (`float(t[i, j])` gives the Python value).
            return asarray(np.asarray(self._raw.get(norm), dtype=self.dtype))
        if builtins.all(isinstance(i, (int, np.integer, slice)) for i in index) and len(index) <= self.ndim:
            # Slices (a copy): through SciPy for a sparse matrix, else through NumPy; the
            # result keeps the format when it keeps the rank.
            sparse = self.ndim == 2 and not self._raw.dense_view and not self.fill
            part = (self.to_scipy() if sparse else self.to_numpy())[index]
            return asarray(part, format=self.format if part.ndim == self.ndim else None)
        return self._index_dense(index)

    def _index_dense(self, index):
        """The Array API's other keys, through NumPy on the dense values (a copy): ``...``,
        ``None`` (a new axis), a boolean tensor or array as a mask, and integer tensors or
        arrays (the 2024.12 standard's gathers, broadcast together, as NumPy's)."""
        key = []
        for i in index:
            if isinstance(i, Tensor):
                if i.dtype.kind not in "biu":
                    raise TypeError(f"a tensor used as an index holds bools or integers, not {i.dtype}")
                key.append(i.to_numpy())
            elif isinstance(i, np.ndarray) and i.dtype.kind in "biu":
                key.append(i)
            elif i is None or i is Ellipsis or isinstance(i, (bool, np.bool_, int, np.integer, slice)):
                key.append(i)
            else:
                raise TypeError("a Tensor is indexed by integers, slices, `...`, `None` and "
                                f"boolean masks, not by {type(i).__name__}")
        # The axes the key consumes: a mask its own rank, an integer array one.
        used = builtins.sum((k.ndim if k.dtype == np.bool_ else 1) if isinstance(k, np.ndarray)
                            else 0 if k is None or k is Ellipsis or isinstance(k, (bool, np.bool_))
                            else 1 for k in key)
        if used > self.ndim:
            # (IndexError, as NumPy's and the standard's)
            raise IndexError(f"a Tensor of {self.ndim} dimensions is indexed by one key per "
                             f"dimension at most, not {used}")
        part = self.to_numpy()[tuple(key)]
        return asarray(np.asarray(part))

    def __float__(self):
        return float(self._scalar())

    def __int__(self):
        return int(self._scalar())

    def __bool__(self):
        return bool(self._scalar())

    def __complex__(self):
        return complex(self._scalar())

    def __index__(self):
        """A 0-d integer tensor as a Python int (to index Python sequences); other dtypes
        raise ``TypeError``, as NumPy's do."""
        if self.dtype.kind not in "iu" or self.ndim != 0:
            raise TypeError(f"only a 0-d integer tensor is an index, not a {self.dtype} tensor "
                            f"of shape {self.shape}")
        return int(self._scalar())

    @property
    def device(self):
        """Tessera computes on the CPU."""
        return "cpu"

    def to_device(self, device, /, *, stream=None):
        _check_device(device)
        return self

    def _scalar(self):
        if self.size != 1:
            raise TypeError(f"only a tensor of one entry converts to a Python scalar, not {self.shape}")
        return self.to_numpy().reshape(()).item()

    # --- computation -----------------------------------------------------------------------
    def _map(self, op, *others, reflected=False):
        args = [self._raw] + [_operand(o, self.dtype) for o in others]
        if reflected:
            args.reverse()
        return _standard_dtype(Tensor(_tessera.elementwise(op, args)), (self,) + others,
                               keep_int_power=op == "pow")

    def __add__(self, o): return self._map("add", o)
    def __radd__(self, o): return self._map("add", o, reflected=True)
    def __sub__(self, o): return self._map("sub", o)
    def __rsub__(self, o): return self._map("sub", o, reflected=True)
    def __mul__(self, o): return self._map("mul", o)
    def __rmul__(self, o): return self._map("mul", o, reflected=True)
    def __truediv__(self, o): return self._map("div", o)
    def __rtruediv__(self, o): return self._map("div", o, reflected=True)
    def __lt__(self, o): return self._map("lt", o)
    def __le__(self, o): return self._map("le", o)
    def __gt__(self, o): return self._map("gt", o)
    def __ge__(self, o): return self._map("ge", o)
    def __eq__(self, o): return self._map("eq", o)
    def __ne__(self, o): return self._map("ne", o)
    def __and__(self, o): return self._map("and", o)
    def __rand__(self, o): return self._map("and", o, reflected=True)
    def __or__(self, o): return self._map("or", o)
    def __ror__(self, o): return self._map("or", o, reflected=True)
    def __xor__(self, o): return self._map("xor", o)
    def __rxor__(self, o): return self._map("xor", o, reflected=True)
    # Floored, as Python's and NumPy's `%` and `//` (an integer division by zero gives 0).
    def __mod__(self, o): return self._map("mod", o)
    def __rmod__(self, o): return self._map("mod", o, reflected=True)
    def __floordiv__(self, o): return self._map("fld", o)
    def __rfloordiv__(self, o): return self._map("fld", o, reflected=True)
    # NumPy's shifts: an amount outside 0..63 gives 0 (`<<`) or the sign (`>>`).
    def __lshift__(self, o): return self._map("lshift", o)
    def __rlshift__(self, o): return self._map("lshift", o, reflected=True)
    def __rshift__(self, o): return self._map("rshift", o)
    def __rrshift__(self, o): return self._map("rshift", o, reflected=True)
    def __neg__(self): return self._map("neg")
    def __abs__(self):
        # Unsigned values are their own magnitude (the core would read a uint64 at or above
        # 2**63 as a negative int64).
        return self if self.dtype.kind == "u" else self._map("abs")
    def __pos__(self): return self
    # Powers of floats are IEEE's `pow` (the language's `pow`); integer powers of integers are
    # computed as floats and converted back (exact below 2**53).
    def __pow__(self, o): return self._map("pow", o)
    def __rpow__(self, o): return self._map("pow", o, reflected=True)

    def __invert__(self):
        """Logical not of bools, bitwise not of integers."""
        if self.dtype.kind == "f":
            raise TypeError("~ is logical not of bools or bitwise not of integers, not of floats")
        return self._map("not")

    __hash__ = None

    # The standard's matmul (stacks of matrices broadcast, the promoted dtype): the core's
    # matmul for matrices and vectors.
    def __matmul__(self, o):
        from .array_api import matmul

        return matmul(self, o)

    def __rmatmul__(self, o):
        from .array_api import matmul

        return matmul(o, self)

    def _reduce(self, how, axis):
        axes = _axes(axis, self.ndim)
        if axes is None:
            return self
        return Tensor(_tessera.reduce(how, self._raw, axes))

    def sum(self, axis=None): return self._reduce("sum", axis)
    def prod(self, axis=None): return self._reduce("prod", axis)
    def max(self, axis=None): return self._reduce("max", axis)
    def min(self, axis=None): return self._reduce("min", axis)
    def any(self, axis=None): return self._reduce("any", axis)
    def all(self, axis=None): return self._reduce("all", axis)

    def mean(self, axis=None):
        axes = _axes(axis, self.ndim)
        count = self.size if not axes else int(np.prod([self.shape[a] for a in axes]))
        return self.sum(axis) / float(count)

    def permute_dims(self, axes):
        return Tensor(_tessera.permute_dims(self._raw, [int(a) % self.ndim for a in axes]))

    def transpose(self, axes=None):
        if axes is None:
            axes = list(range(self.ndim))[::-1]
        return self.permute_dims(axes)

    @property
    def T(self):
        return self.transpose()

    @property
    def mT(self):
        """The transpose of the last two axes (the Array API's matrix transpose)."""
        if self.ndim < 2:
            raise ValueError("mT needs a tensor of at least two dimensions")
        axes = list(range(self.ndim))
        axes[-2], axes[-1] = axes[-1], axes[-2]
        return self.permute_dims(axes)

    def matmul(self, other):
        return self @ other

    def __array_namespace__(self, *, api_version=None):
        """The Array API namespace (a first part of the standard: see tessera.array_api)."""
        from . import array_api

        return array_api


def _zero_text(dtype):
    from .formats import _leaf

    return str(_leaf(dtype))[len("Element("):-1]


