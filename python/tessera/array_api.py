"""A first part of the Python Array API standard (``Tensor.__array_namespace__()`` returns
this module). Elementwise functions, reductions, ``cumulative_sum``, ``matmul``,
``tensordot``, ``vecdot``, ``permute_dims`` and ``expand_dims`` run Tessera kernels and keep
sparse formats; the sorting and set functions (``_sets``) work on the stored entries plus the
count of fills; creation functions build dense tensors (``format=`` picks another);
``reshape``, ``squeeze``, ``concat``, ``stack``, ``argmax``, ``argmin`` and ``nonzero`` go
through NumPy (a dense copy) for now. ``tests/test_array_api.py`` compares each with
``array_api_strict``.
"""

import numpy as np

from . import _compute as _c
from ._sets import argsort, searchsorted, sort, unique_all, unique_counts, unique_inverse, unique_values  # noqa: F401
from ._sets import _retyped_format
from ._tensor import DTYPES as _DTYPES
from ._tensor import Tensor, asarray, from_dlpack  # noqa: F401  (part of the namespace)

__array_api_version__ = "2023.12"

bool = np.bool_
int8, uint8, int32, int64, uint64 = np.int8, np.uint8, np.int32, np.int64, np.uint64
float32, float64 = np.float32, np.float64


# --- creation --------------------------------------------------------------------------
def zeros(shape, *, dtype=None, format=None):
    return asarray(np.zeros(shape, dtype=dtype or np.float64), format=format)


def ones(shape, *, dtype=None, format=None):
    return asarray(np.ones(shape, dtype=dtype or np.float64), format=format)


def full(shape, fill_value, *, dtype=None, format=None):
    return asarray(np.full(shape, fill_value, dtype=dtype), format=format)


def empty(shape, *, dtype=None, format=None):
    return zeros(shape, dtype=dtype, format=format)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, format=None):
    return asarray(np.eye(n_rows, n_cols, k=k, dtype=dtype or np.float64), format=format)


def arange(start, /, stop=None, step=1, *, dtype=None):
    return asarray(np.arange(start, stop, step, dtype=dtype))


def zeros_like(x, /, *, dtype=None):
    return zeros(x.shape, dtype=dtype or x.dtype)


def ones_like(x, /, *, dtype=None):
    return ones(x.shape, dtype=dtype or x.dtype)


def full_like(x, /, fill_value, *, dtype=None):
    return full(x.shape, fill_value, dtype=dtype or x.dtype)


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


def _as_dtype(t, dtype):
    """``t`` with elements of ``dtype``, by a compiled conversion that keeps its format
    (integers wrap, as NumPy's ``astype``)."""
    dtype = np.dtype(dtype)
    if t.dtype == dtype:
        return t
    fill = np.asarray(t.fill).astype(dtype).item()
    return t.to_format(_retyped_format(t.format, fill, dtype))


def _promoted(f):
    """``f`` giving the dtype of the standard's type promotion of its tensor operands (Python
    scalars are weak): Tessera computes integers in int64 and floats in float64, and a
    narrower result (``int8 & int8``) is converted back. Mixed kinds NumPy would widen to a
    type Tessera lacks (``int8`` with ``uint8`` is ``int16``) stay int64."""

    def g(*args):
        out = f(*args)
        dtypes = [a.dtype for a in args if isinstance(a, Tensor)]
        want = np.result_type(*dtypes) if dtypes else out.dtype
        if out.dtype == want or out.dtype == np.bool_ or want.name not in _DTYPES:
            return out
        return _as_dtype(out, want)

    g.__name__ = f.__name__
    g.__doc__ = f.__doc__
    return g


# Floored division (NumPy's `remainder` and `floor_divide`: the remainder takes the divisor's
# sign; integer division by zero gives 0, without NumPy's warning), exact on integers.
remainder, floor_divide = _promoted(_c.remainder), _promoted(_c.floor_divide)
copysign, logaddexp = _promoted(_c.copysign), _promoted(_c.logaddexp)
signbit = _c.signbit
# Bitwise on integers, logical on bools; shifts by amounts outside 0..63 give NumPy's results
# (0, or the sign for `>>`).
bitwise_and, bitwise_or = _promoted(_c.bitwise_and), _promoted(_c.bitwise_or)
bitwise_xor, bitwise_invert = _promoted(_c.bitwise_xor), _promoted(_c.bitwise_invert)
bitwise_left_shift = _promoted(_c.bitwise_left_shift)
bitwise_right_shift = _promoted(_c.bitwise_right_shift)


def nextafter(x1, x2, /):
    """The next float after ``x1`` towards ``x2``. float32 steps are float32's own: those
    operands go through NumPy (Tessera computes floats in float64)."""
    dtypes = [a.dtype for a in (x1, x2) if isinstance(a, Tensor)]
    if dtypes and np.result_type(*dtypes) == np.float32:
        return asarray(np.nextafter(np.asarray(x1), np.asarray(x2)))
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


def positive(x, /):
    return asarray(x)


def square(x, /):
    return multiply(x, x)


def sign(x, /):
    x = asarray(x)
    one = x.dtype.type(1)
    if np.issubdtype(x.dtype, np.unsignedinteger) or x.dtype == np.bool_:
        return where(greater(x, x.dtype.type(0)), one, x)
    # Zeros and NaN fall through to themselves.
    return where(greater(x, 0), one, where(less(x, 0), x.dtype.type(-1), x))


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


def astype(x, dtype, /, *, copy=True):
    x = asarray(x)
    if not copy and np.dtype(dtype) == x.dtype:
        return x
    return asarray(x, dtype=dtype, format=x.format)


# --- reductions ------------------------------------------------------------------------
def _reduction(f):
    def reduce(x, /, *, axis=None, keepdims=False):
        out = f(x, axis=axis)
        if keepdims:
            axes = range(x.ndim) if axis is None else ([axis] if isinstance(axis, int) else axis)
            for a in sorted(a % x.ndim for a in axes):
                out = expand_dims(out, axis=a)
        return out

    reduce.__name__ = f.__name__
    return reduce


sum, prod, max, min, any, all = (_reduction(f) for f in (_c.sum, _c.prod, _c.max, _c.min, _c.any, _c.all))


def mean(x, /, *, axis=None, keepdims=False):
    x = asarray(x)
    axes = range(x.ndim) if axis is None else ([axis] if isinstance(axis, int) else axis)
    count = int(np.prod([x.shape[a] for a in axes]))
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
    """The running sums along ``axis`` (optional for one dimension), one kernel: a running
    total carried from one iteration of the innermost loop to the next. ``include_initial``
    puts the empty sum (0) first. Integers and bools sum in int64 (uint64 for unsigned),
    floats in their own type unless ``dtype`` says otherwise (float32 sums are computed in
    float64 and rounded once, so they may differ from NumPy's float32 running sums in the last
    bit). The result is dense (a running
    sum changes at every stored entry and keeps its value across the fills only when the fill
    is 0, so it is dense in general)."""
    from ._compute import run

    x = asarray(x)
    if axis is None:
        if x.ndim != 1:
            raise ValueError("cumulative_sum needs an axis for a tensor of more than one dimension")
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
    lines = ["acc .= " + acc_fill]
    for depth, d in enumerate(order):
        pad = "  " * depth
        if d == axis:
            lines.append(f"{pad}acc[] = {acc_fill}")
        lines.append(f"{pad}for {idx[d]} = _")
    pad = "  " * len(order)
    lines.append(f"{pad}acc[] = acc[] + x[{', '.join(idx)}]")
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
matmul = _c.matmul
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
    return _c.einsum(spec, A=x1, B=x2)


def vecdot(x1, x2, /, *, axis=-1):
    x1, x2 = asarray(x1), asarray(x2)
    return _c.sum(_c.multiply(x1, x2), axis=axis)


# --- manipulation ----------------------------------------------------------------------
def permute_dims(x, /, axes):
    return asarray(x).permute_dims(axes)


def expand_dims(x, /, *, axis=0):
    x = asarray(x)
    from .lazy import lazy

    return lazy(x).expand_dims(axis).compute()


def reshape(x, /, shape, *, copy=None):
    return asarray(np.reshape(np.asarray(x), shape))


def squeeze(x, /, axis):
    return asarray(np.squeeze(np.asarray(x), axis=axis))


def concat(arrays, /, *, axis=0):
    return asarray(np.concatenate([np.asarray(a) for a in arrays], axis=axis))


def stack(arrays, /, *, axis=0):
    return asarray(np.stack([np.asarray(a) for a in arrays], axis=axis))


# --- searching -------------------------------------------------------------------------
def argmax(x, /, *, axis=None, keepdims=False):
    return asarray(np.argmax(np.asarray(x), axis=axis, keepdims=keepdims))


def argmin(x, /, *, axis=None, keepdims=False):
    return asarray(np.argmin(np.asarray(x), axis=axis, keepdims=keepdims))


def nonzero(x, /):
    return tuple(asarray(i) for i in np.nonzero(np.asarray(x)))


def where(condition, x1, x2, /):
    return _c.where(condition, x1, x2)


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("np", "Tensor")]
