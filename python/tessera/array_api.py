"""A first part of the Python Array API standard (``Tensor.__array_namespace__()`` returns
this module). Elementwise functions, reductions, ``cumulative_sum``, ``matmul``,
``tensordot``, ``vecdot``, ``permute_dims`` and ``expand_dims`` run Tessera kernels and keep
sparse formats; the sorting and set functions (``_sets``) work on the stored entries plus the
count of fills; creation functions build dense tensors (``format=`` picks another);
``tril``/``triu``, ``count_nonzero``, ``matrix_transpose``, ``moveaxis`` and the broadcasts
are kernels too; ``reshape``, ``squeeze``, ``concat``, ``stack``, ``flip``, ``roll``,
``repeat``, ``tile``, ``unstack``, ``diff``, ``take``, ``take_along_axis``, ``argmax``,
``argmin``, ``nonzero`` and ``isin`` go through NumPy (a dense copy) for now. ``tests/test_array_api.py`` compares each with
``array_api_strict``.
"""

import builtins as _builtins

import numpy as np

from . import _compute as _c
from ._sets import argsort, searchsorted, sort, unique_all, unique_counts, unique_inverse, unique_values  # noqa: F401
from ._sets import _retyped_format
from ._tensor import DTYPES as _DTYPES
from ._tensor import Tensor, _as_dtype, _check_device, asarray, from_dlpack  # noqa: F401

__array_api_version__ = "2023.12"

bool = np.bool_
int8, uint8, int32, int64, uint64 = np.int8, np.uint8, np.int32, np.int64, np.uint64
float32, float64 = np.float32, np.float64
# (int16, uint16, uint32 and the complex types are not element types of Tessera.)

e, inf, nan, pi = np.e, np.inf, np.nan, np.pi
newaxis = None


# --- data types ------------------------------------------------------------------------
def _dtype_of(x):
    return x.dtype if isinstance(x, Tensor) else np.dtype(x)


class _FInfo:
    """The standard's ``finfo`` object: ``bits`` an int, ``eps max min smallest_normal``
    Python floats (NumPy's ``finfo`` gives NumPy scalars), ``dtype``."""

    __slots__ = ("bits", "eps", "max", "min", "smallest_normal", "dtype")

    def __init__(self, dtype):
        info = np.finfo(dtype)
        self.bits, self.dtype = int(info.bits), info.dtype
        self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
        self.smallest_normal = float(info.smallest_normal)

    def __repr__(self):
        return f"finfo(bits={self.bits}, eps={self.eps}, max={self.max}, min={self.min}, dtype={self.dtype})"


def finfo(type, /):
    """Machine limits of a float dtype (``bits eps max min smallest_normal dtype``)."""
    return _FInfo(_dtype_of(type))


def iinfo(type, /):
    return np.iinfo(_dtype_of(type))


_KINDS = {
    "bool": lambda d: d.kind == "b",
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": lambda d: d.kind == "f",
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iufc",
}


def isdtype(dtype, kind):
    """Whether ``dtype`` is of ``kind``: a dtype, a kind name (``"integral"``, ``"real
    floating"``, ...) or a tuple of those."""
    dtype = np.dtype(dtype)
    if isinstance(kind, tuple):
        return _builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"unknown dtype kind {kind!r} (one of {', '.join(_KINDS)})")
        return _KINDS[kind](dtype)
    return dtype == np.dtype(kind)


def result_type(*arrays_and_dtypes):
    """The standard's promotion of the operands' dtypes (Python scalars are weak); a
    ``TypeError`` where the result is not a Tessera dtype (``int8`` with ``uint8``)."""
    dtypes = [_dtype_of(a) for a in arrays_and_dtypes if not isinstance(a, (int, float, _builtins.bool))]
    scalars = [a for a in arrays_and_dtypes if isinstance(a, (int, float, _builtins.bool))]
    if not dtypes:
        raise TypeError("result_type needs at least one array or dtype")
    out = np.result_type(*dtypes, *scalars)
    if out.name not in _DTYPES:
        raise TypeError(f"{' and '.join(d.name for d in dtypes)} promote to {out.name}, "
                        f"which Tessera does not have")
    return out


def can_cast(from_, to, /):
    return np.can_cast(_dtype_of(from_), np.dtype(to), casting="safe")


# --- creation --------------------------------------------------------------------------
def zeros(shape, *, dtype=None, device=None, format=None):
    _check_device(device)
    return asarray(np.zeros(shape, dtype=dtype or np.float64), format=format)


def ones(shape, *, dtype=None, device=None, format=None):
    _check_device(device)
    return asarray(np.ones(shape, dtype=dtype or np.float64), format=format)


def full(shape, fill_value, *, dtype=None, device=None, format=None):
    _check_device(device)
    return asarray(np.full(shape, fill_value, dtype=dtype), format=format)


def empty(shape, *, dtype=None, device=None, format=None):
    _check_device(device)
    return zeros(shape, dtype=dtype, format=format)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None, format=None):
    _check_device(device)
    return asarray(np.eye(n_rows, n_cols, k=k, dtype=dtype or np.float64), format=format)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    _check_device(device)
    return asarray(np.arange(start, stop, step, dtype=dtype))


def zeros_like(x, /, *, dtype=None, device=None):
    _check_device(device)
    return zeros(x.shape, dtype=dtype or x.dtype)


def ones_like(x, /, *, dtype=None, device=None):
    _check_device(device)
    return ones(x.shape, dtype=dtype or x.dtype)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    _check_device(device)
    return full(x.shape, fill_value, dtype=dtype or x.dtype)


def empty_like(x, /, *, dtype=None, device=None):
    _check_device(device)
    return zeros_like(x, dtype=dtype)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    _check_device(device)
    return asarray(np.linspace(start, stop, num, dtype=dtype or np.float64, endpoint=endpoint))


def meshgrid(*arrays, indexing="xy"):
    """Coordinate grids of 1-d tensors (dense: every point of a grid holds a value)."""
    return [asarray(g) for g in np.meshgrid(*[np.asarray(a) for a in arrays], indexing=indexing)]


def _triangle(x, k, lower):
    """``x`` where ``j <= i + k`` (``lower``) or ``j >= i + k`` on its last two axes, else 0:
    one kernel in ``x``'s format (with fill 0), visiting only what ``x`` stores when its fill
    is 0."""
    from ._compute import run

    x = asarray(x)
    if x.ndim < 2:
        raise ValueError("tril and triu need a tensor of at least two dimensions")
    if x.dtype == np.bool_:
        # `+=` adds numbers: bools go through int8 and back (formats kept).
        return _as_dtype(_triangle(_as_dtype(x, np.int8), k, lower), np.bool_)
    idx = [f"i{d}" for d in range(x.ndim)]
    i, j = idx[-2], idx[-1]
    shift = f"{i} + {k}" if k >= 0 else f"{i} - {-k}"
    test = f"{j} <= {shift}" if lower else f"{j} >= {shift}"
    at = ", ".join(idx)
    program = (f"for {', '.join(f'{d} = _' for d in idx)}\n  if {test}\n    y[{at}] += x[{at}]\n"
               "  end\nend\n")
    return run(program, out={"y": _retyped_format(x.format, 0, x.dtype)}, shapes={"y": list(x.shape)},
               x=x)["y"]


def tril(x, /, *, k=0):
    return _triangle(x, int(k), True)


def triu(x, /, *, k=0):
    return _triangle(x, int(k), False)


# --- elementwise -----------------------------------------------------------------------
add, subtract, multiply, divide = _c.add, _c.subtract, _c.multiply, _c.divide
less, less_equal, greater, greater_equal = _c.less, _c.less_equal, _c.greater, _c.greater_equal
equal, not_equal, minimum, maximum = _c.equal, _c.not_equal, _c.minimum, _c.maximum
logical_and, logical_or, logical_not = _c.logical_and, _c.logical_or, _c.logical_not
negative, abs, sqrt, exp, log = _c.negative, _c.abs, _c.sqrt, _c.exp, _c.log
floor = _c.floor
sin, cos, tan, asin, acos, atan = _c.sin, _c.cos, _c.tan, _c.asin, _c.acos, _c.atan
sinh, cosh, tanh, asinh, acosh, atanh = _c.sinh, _c.cosh, _c.tanh, _c.asinh, _c.acosh, _c.atanh
expm1, log1p, log2, log10, atan2, hypot = _c.expm1, _c.log1p, _c.log2, _c.log10, _c.atan2, _c.hypot


def _float(x):
    return np.issubdtype(asarray(x).dtype, np.floating)


# Every elementwise function gives the dtype of the standard's promotion of its tensor
# operands (`_tensor._standard_dtype`: Tessera computes integers in int64 and floats in
# float64, and a narrower result, `int8 & int8` or `sin(float32)`, is converted back).
# Floored division (NumPy's `remainder` and `floor_divide`: the remainder takes the divisor's
# sign; integer division by zero gives 0, without NumPy's warning), exact on integers.
remainder, floor_divide = _c.remainder, _c.floor_divide
copysign, logaddexp = _c.copysign, _c.logaddexp
signbit = _c.signbit
# Bitwise on integers, logical on bools; shifts by amounts outside 0..63 give NumPy's results
# (0, or the sign for `>>`).
bitwise_and, bitwise_or = _c.bitwise_and, _c.bitwise_or
bitwise_xor, bitwise_invert = _c.bitwise_xor, _c.bitwise_invert
bitwise_left_shift = _c.bitwise_left_shift
bitwise_right_shift = _c.bitwise_right_shift


def nextafter(x1, x2, /):
    """The next float after ``x1`` towards ``x2``. float32 steps are float32's own: those
    operands go through NumPy (Tessera computes floats in float64)."""
    dtypes = [a.dtype for a in (x1, x2) if isinstance(a, Tensor)]
    if dtypes and np.result_type(*dtypes) == np.float32:
        # (a Python float beside a float32 tensor is float32, as the standard's weak scalars)
        a, b = (np.asarray(v) if isinstance(v, Tensor) else np.asarray(v, dtype=np.float32)
                for v in (x1, x2))
        return asarray(np.nextafter(a, b))
    return _c.nextafter(x1, x2)


# Rounding keeps integers as they are (the standard's rule); floats round as NumPy does
# (`round` half to even).
def ceil(x, /):
    x = asarray(x)
    return _c.ceil(x) if _float(x) else x


def trunc(x, /):
    x = asarray(x)
    return _c.trunc(x) if _float(x) else x


def round(x, /):
    x = asarray(x)
    return _c.round(x) if _float(x) else x


def pow(x1, x2, /):
    """``x1 ** x2`` as floats (integer powers of integers are not kept as integers here)."""
    return _c.pow(x1, x2)


def reciprocal(x, /):
    return _c.divide(1.0, asarray(x))


def conj(x, /):
    """Tessera's dtypes are real: ``x`` itself (as ``real``)."""
    return asarray(x)


real = conj


def imag(x, /):
    """Tessera's dtypes are real: zeros of ``x``'s shape and dtype."""
    return zeros_like(asarray(x))


def positive(x, /):
    return asarray(x)


def square(x, /):
    return multiply(x, x)


def sign(x, /):
    x = asarray(x)
    one = x.dtype.type(1)
    if np.issubdtype(x.dtype, np.unsignedinteger) or x.dtype == np.bool_:
        # (`!= 0`, not `> 0`: the core compares a uint64 at or above 2**63 as a negative int64)
        return where(not_equal(x, x.dtype.type(0)), one, x)
    # NaN falls through to itself; a zero of either sign gives +0 (the standard's 0).
    zero = where(equal(x, 0), x.dtype.type(0), x)
    return where(greater(x, 0), one, where(less(x, 0), x.dtype.type(-1), zero))


def isnan(x, /):
    x = asarray(x)
    return not_equal(x, x)


def isinf(x, /):
    x = asarray(x)
    if not _float(x):
        return not_equal(x, x)  # all false
    return equal(abs(x), np.inf)


def isfinite(x, /):
    x = asarray(x)
    if not _float(x):
        return equal(x, x)  # all true
    return less(abs(x), np.inf)


def logical_xor(x1, x2, /):
    return not_equal(asarray(x1), asarray(x2))


def clip(x, /, min=None, max=None):
    x = asarray(x)
    if min is not None:
        x = maximum(x, min)
    if max is not None:
        x = minimum(x, max)
    return x


def astype(x, dtype, /, *, copy=True, device=None):
    _check_device(device)
    x = asarray(x)
    if not copy and np.dtype(dtype) == x.dtype:
        return x
    # A compiled conversion in x's format (the format's leaf names the dtype, so
    # `asarray(x, dtype=..., format=x.format)` would keep the old one).
    return asarray(x, copy=True) if np.dtype(dtype) == x.dtype else _as_dtype(x, dtype)


# --- reductions ------------------------------------------------------------------------
def _keep_dims(out, x, axis):
    """``out`` (a reduction of ``x`` over ``axis``) with each reduced axis kept, of size 1."""
    axes = range(x.ndim) if axis is None else ([axis] if isinstance(axis, int) else axis)
    for a in sorted(a % x.ndim for a in axes):
        out = expand_dims(out, axis=a)
    return out


def _sum_dtype(x, dtype):
    """The dtype of ``sum`` and ``prod``: ``dtype`` if given, else the standard's default:
    int64 for signed integers and bools, uint64 for unsigned, the input's own float dtype."""
    if dtype is not None:
        return np.dtype(dtype)
    kind = x.dtype.kind
    return np.dtype(np.uint64) if kind == "u" else np.dtype(np.int64) if kind in "bi" else x.dtype


def _reduction(f, accumulates):
    """A reduction of the namespace: ``axis``, ``keepdims`` and the standard's result dtype
    (the core reduces integers in int64 and floats in float64): ``sum`` and ``prod``
    (``accumulates``) give :func:`_sum_dtype`, ``max`` and ``min`` the input's dtype."""

    def reduce(x, /, *, axis=None, keepdims=False):
        x = asarray(x)
        out = f(x, axis=axis)
        if keepdims:
            out = _keep_dims(out, x, axis)
        if f in (_c.any, _c.all):
            # (`axis=()` reduces nothing: the values themselves, as truth values)
            return out if out.dtype == np.bool_ else _c.not_equal(out, 0)
        if out.dtype != np.bool_ and out.dtype != x.dtype and x.dtype != np.bool_:
            out = _as_dtype(out, x.dtype)
        return out

    def accumulate(x, /, *, axis=None, dtype=None, keepdims=False):
        x = asarray(x)
        want = _sum_dtype(x, dtype)
        if want.kind == "f" and x.dtype.kind != "f":
            x = _as_dtype(x, want)  # sum(int8, dtype=float32): the values as floats first
        out = f(x, axis=axis)
        if keepdims:
            out = _keep_dims(out, x, axis)
        return _as_dtype(out, want)

    g = accumulate if accumulates else reduce
    g.__name__ = f.__name__
    g.__doc__ = reduce.__doc__ if not accumulates else accumulate.__doc__
    return g


sum, prod = _reduction(_c.sum, True), _reduction(_c.prod, True)
max, min, any, all = (_reduction(f, False) for f in (_c.max, _c.min, _c.any, _c.all))


def mean(x, /, *, axis=None, keepdims=False):
    x = asarray(x)
    axes = range(x.ndim) if axis is None else ([axis] if isinstance(axis, int) else axis)
    count = int(np.prod([x.shape[a] for a in axes]))
    # (divide keeps a float32 sum float32: the Python float is weak)
    return divide(sum(x, axis=axis, keepdims=keepdims), float(count))


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    x = asarray(x)
    axes = range(x.ndim) if axis is None else ([axis] if isinstance(axis, int) else axis)
    count = int(np.prod([x.shape[a] for a in axes]))
    centred = subtract(x, mean(x, axis=axis, keepdims=True))
    return divide(sum(square(centred), axis=axis, keepdims=keepdims), float(count - correction))


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return sqrt(var(x, axis=axis, correction=correction, keepdims=keepdims))


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    return _cumulative(x, axis, dtype, include_initial, "+")


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """The running products along ``axis``, as :func:`cumulative_sum` (the empty product, 1,
    first with ``include_initial``)."""
    return _cumulative(x, axis, dtype, include_initial, "*")


def _cumulative(x, axis, dtype, include_initial, op):
    """The running sums (``op`` ``+``) or products (``*``) along ``axis`` (optional for one
    dimension), one kernel: a running total carried from one iteration of the innermost loop
    to the next. ``include_initial`` puts the empty sum (0) or product (1) first. Integers and bools sum in int64 (uint64 for unsigned),
    floats in their own type unless ``dtype`` says otherwise (float32 sums are computed in
    float64 and rounded once, so they may differ from NumPy's float32 running sums in the last
    bit). The result is dense (a running
    sum changes at every stored entry and keeps its value across the fills only when the fill
    is 0, so it is dense in general)."""
    from ._compute import run

    x = asarray(x)
    if axis is None:
        if x.ndim != 1:
            raise ValueError("a cumulative sum or product needs an axis for a tensor of more than "
                             "one dimension")
        axis = 0
    if not -x.ndim <= axis < x.ndim:
        raise IndexError(f"axis {axis} is out of bounds for a tensor of {x.ndim} dimensions")
    axis %= x.ndim
    if dtype is None:
        kind = x.dtype.kind
        dtype = np.uint64 if kind == "u" else (np.int64 if kind in "bi" else x.dtype)
    dtype = np.dtype(dtype)
    # The sum is computed in the result's class (int64 or float64), then stored as `dtype`.
    idx = [f"i{d}" for d in range(x.ndim)]
    order = [d for d in range(x.ndim) if d != axis] + [axis]
    out_idx = list(idx)
    if include_initial:
        out_idx[axis] = f"{idx[axis]} + 1"
    acc_fill = "0.0" if dtype.kind == "f" else "0"
    start = acc_fill if op == "+" else ("1.0" if dtype.kind == "f" else "1")
    lines = ["acc .= " + acc_fill]
    for depth, d in enumerate(order):
        pad = "  " * depth
        if d == axis:
            lines.append(f"{pad}acc[] = {start}")
            if include_initial:
                # The empty sum or product: written where the running value starts.
                first = list(idx)
                first[axis] = "0"
                lines.append(f"{pad}y[{', '.join(first)}] = acc[]")
        lines.append(f"{pad}for {idx[d]} = _")
    pad = "  " * len(order)
    lines.append(f"{pad}acc[] = acc[] {op} x[{', '.join(idx)}]")
    lines.append(f"{pad}y[{', '.join(out_idx)}] = acc[]")
    for depth in reversed(range(len(order))):
        lines.append("  " * depth + "end")
    shape = list(x.shape)
    if include_initial:
        shape[axis] += 1
    wide = np.dtype(np.float64) if dtype.kind == "f" else np.dtype(np.int64)
    fmt = "Dense(" * x.ndim + f"Element({acc_fill})" + ")" * x.ndim
    acc_fmt = f"Element({acc_fill})"
    out = run("\n".join(lines) + "\n", out={"y": fmt, "acc": acc_fmt}, shapes={"y": shape}, x=x)["y"]
    out = out if out.dtype == wide else _as_dtype(out, wide)
    return _as_dtype(out, dtype)


# --- linear algebra --------------------------------------------------------------------
def matmul(x1, x2, /):
    """The standard's ``matmul``: matrices and vectors by the core's ``matmul``, stacks of
    matrices (more than two dimensions, batch axes broadcast) by one einsum over the
    broadcast operands; the result in the promoted dtype."""
    x1, x2 = asarray(x1), asarray(x2)
    want = result_type(x1, x2)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError("matmul needs operands of at least one dimension (use multiply)")
    if x1.ndim <= 2 and x2.ndim <= 2:
        return _as_dtype(_c.matmul(x1, x2), want)
    a = expand_dims(x1, axis=0) if x1.ndim == 1 else x1
    b = expand_dims(x2, axis=-1) if x2.ndim == 1 else x2
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: shapes {x1.shape} and {x2.shape} do not align "
                         f"({a.shape[-1]} != {b.shape[-2]})")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = broadcast_to(a, batch + a.shape[-2:])
    b = broadcast_to(b, batch + b.shape[-2:])
    bi = [f"b{k}" for k in range(len(batch))]
    spec = (f"C[{', '.join(bi + ['i', 'k'])}] += A[{', '.join(bi + ['i', 'j'])}] * "
            f"B[{', '.join(bi + ['j', 'k'])}]")
    out = _c.einsum(spec, A=a, B=b)
    if x1.ndim == 1:
        out = squeeze(out, axis=-2)
    if x2.ndim == 1:
        out = squeeze(out, axis=-1)
    return _as_dtype(out, want)
_LETTERS = "abcdefghijklmnopqrstuvw"


def tensordot(x1, x2, /, *, axes=2):
    x1, x2 = asarray(x1), asarray(x2)
    if isinstance(axes, int):
        a1, a2 = list(range(x1.ndim - axes, x1.ndim)), list(range(axes))
    else:
        a1, a2 = [a % x1.ndim for a in axes[0]], [a % x2.ndim for a in axes[1]]
    i1 = [f"i{k}" for k in range(x1.ndim)]
    i2 = [f"j{k}" for k in range(x2.ndim)]
    for p, q in zip(a1, a2):
        i2[q] = i1[p]
    out = [i for k, i in enumerate(i1) if k not in a1] + [i for k, i in enumerate(i2) if k not in a2]
    spec = f"C[{', '.join(out)}] += A[{', '.join(i1)}] * B[{', '.join(i2)}]"
    # (einsum sums integers in int64 and floats in float64: the promoted dtype again)
    return _as_dtype(_c.einsum(spec, A=x1, B=x2), result_type(x1, x2))


def vecdot(x1, x2, /, *, axis=-1):
    x1, x2 = asarray(x1), asarray(x2)
    # The contracted axis must match as it is (broadcasting applies to the other axes only);
    # it counts from the end (a non-negative one only between operands of equal rank).
    n = _builtins.min(x1.ndim, x2.ndim)
    if not (-n <= axis < 0 or (x1.ndim == x2.ndim and 0 <= axis < n)):
        raise ValueError(f"vecdot: axis {axis} is not within both operands' dimensions "
                         f"({x1.shape} and {x2.shape})")
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(f"vecdot: the axis {axis} sizes differ ({x1.shape} and {x2.shape})")
    # (the core sums integers in int64: the promoted dtype again, wrapping as NumPy)
    return _as_dtype(_c.sum(_c.multiply(x1, x2), axis=axis), result_type(x1, x2))


# --- manipulation ----------------------------------------------------------------------
def permute_dims(x, /, axes):
    return asarray(x).permute_dims(axes)


def expand_dims(x, /, axis=0):
    x = asarray(x)
    if not -x.ndim - 1 <= axis <= x.ndim:
        raise IndexError(f"expand_dims: axis {axis} is out of bounds for a result of "
                         f"{x.ndim + 1} dimensions")
    from .lazy import lazy

    # (the lazy expression computes in the core's wide types: x's dtype again)
    return _as_dtype(lazy(x).expand_dims(axis).compute(), x.dtype)


def reshape(x, /, shape, *, copy=None):
    return asarray(np.reshape(np.asarray(x), shape))


def squeeze(x, /, axis):
    return asarray(np.squeeze(np.asarray(x), axis=axis))


def matrix_transpose(x, /):
    x = asarray(x)
    if x.ndim < 2:
        raise ValueError("matrix_transpose needs a tensor of at least two dimensions")
    axes = list(range(x.ndim))
    axes[-2], axes[-1] = axes[-1], axes[-2]
    return x.permute_dims(axes)


def moveaxis(x, source, destination, /):
    x = asarray(x)
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError("moveaxis needs as many destinations as sources")
    src, dst = [s % x.ndim for s in src], [d % x.ndim for d in dst]
    rest = [a for a in range(x.ndim) if a not in src]
    order = [None] * x.ndim
    for s, d in zip(src, dst):
        order[d] = s
    it = iter(rest)
    return x.permute_dims([a if a is not None else next(it) for a in order])


def broadcast_shapes(*shapes):
    return tuple(np.broadcast_shapes(*shapes))


def broadcast_to(x, /, shape):
    """``x`` repeated along the axes it is broadcast over: one elementwise kernel with a
    zero of the shape (the result's format is what that kernel gives: dense where the
    zero is)."""
    x = asarray(x)
    shape = tuple(shape)
    if np.broadcast_shapes(x.shape, shape) != shape:
        raise ValueError(f"a tensor of shape {x.shape} cannot be broadcast to {shape}")
    if x.shape == shape:
        return x
    if x.dtype == np.bool_:
        return _c.logical_or(x, zeros(shape, dtype=np.bool_))
    return _as_dtype(_c.add(x, zeros(shape, dtype=x.dtype)), x.dtype)


def broadcast_arrays(*arrays):
    arrays = [asarray(a) for a in arrays]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    return [broadcast_to(a, shape) for a in arrays]


# Rearrangements and gathers through NumPy on the dense values, for now (a dense copy).
def flip(x, /, *, axis=None):
    return asarray(np.flip(np.asarray(x), axis=axis))


def roll(x, /, shift, *, axis=None):
    return asarray(np.roll(np.asarray(x), shift, axis=axis))


def repeat(x, repeats, /, *, axis=None):
    r = np.asarray(repeats) if isinstance(repeats, Tensor) else repeats
    return asarray(np.repeat(np.asarray(x), r, axis=axis))


def tile(x, repetitions, /):
    return asarray(np.tile(np.asarray(x), repetitions))


def take(x, indices, /, *, axis=None):
    return asarray(np.take(np.asarray(x), np.asarray(indices), axis=axis))


def take_along_axis(x, indices, /, *, axis=-1):
    return asarray(np.take_along_axis(np.asarray(x), np.asarray(indices), axis=axis))


def unstack(x, /, *, axis=0):
    a = np.asarray(x)
    return tuple(asarray(p) for p in np.moveaxis(a, axis, 0))


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    kw = {}
    if prepend is not None:
        kw["prepend"] = np.asarray(prepend)
    if append is not None:
        kw["append"] = np.asarray(append)
    return asarray(np.diff(np.asarray(x), n=n, axis=axis, **kw))


def concat(arrays, /, *, axis=0):
    return asarray(np.concatenate([np.asarray(a) for a in arrays], axis=axis))


def stack(arrays, /, *, axis=0):
    return asarray(np.stack([np.asarray(a) for a in arrays], axis=axis))


# --- searching -------------------------------------------------------------------------
def argmax(x, /, *, axis=None, keepdims=False):
    return asarray(np.argmax(np.asarray(x), axis=axis, keepdims=keepdims))


def argmin(x, /, *, axis=None, keepdims=False):
    return asarray(np.argmin(np.asarray(x), axis=axis, keepdims=keepdims))


def count_nonzero(x, /, *, axis=None, keepdims=False):
    """The number of nonzero entries (one kernel: a sum of ``x != 0`` as integers)."""
    x = asarray(x)
    nz = x if x.dtype == np.bool_ else _c.not_equal(x, 0)
    return sum(_as_dtype(nz, np.int64), axis=axis, keepdims=keepdims)


def isin(x1, x2, /, *, invert=False):
    return asarray(np.isin(np.asarray(x1), np.asarray(x2), invert=invert))


def nonzero(x, /):
    return tuple(asarray(i) for i in np.nonzero(np.asarray(x)))


def where(condition, x1, x2, /):
    return _c.where(condition, x1, x2)


class _Info:
    """The inspection namespace (``__array_namespace_info__()``): Tessera runs on the CPU,
    with its dtypes (no complex, no int16/uint16/uint32)."""

    def capabilities(self):
        # Boolean indexing and data-dependent output shapes (`nonzero`, `unique_*`) exist
        # (the latter through the stored entries); `max dimensions` is not limited.
        return {"boolean indexing": False, "data-dependent shapes": True, "max dimensions": None}

    def default_device(self):
        return "cpu"

    def devices(self):
        return ["cpu"]

    def default_dtypes(self, *, device=None):
        _check_device(device)
        return {"real floating": np.dtype(float64), "integral": np.dtype(int64),
                "indexing": np.dtype(int64)}

    def dtypes(self, *, device=None, kind=None):
        _check_device(device)
        names = [n for n in _DTYPES]
        out = {n: np.dtype(n) for n in names}
        if kind is None:
            return out
        return {n: d for n, d in out.items() if isdtype(d, kind)}


def __array_namespace_info__():
    return _Info()


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("np", "Tensor")]
