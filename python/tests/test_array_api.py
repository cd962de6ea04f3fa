"""The Array API functions tessera.array_api has, compared with array_api_strict on random
inputs (dense and CSR)."""

import array_api_strict as xps
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tessera as ts
from strategies import arrays

xp = ts.asarray(np.zeros(1)).__array_namespace__()


def same(got, want):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "less", "greater_equal", "equal",
                                  "minimum", "maximum"])
@given(data=st.data())
def test_binary(name, data):
    a = data.draw(arrays("float64", (3, 4)))
    b = data.draw(arrays("float64", (4,)))
    fmt = data.draw(st.sampled_from(["dense", "csr"]))
    same(getattr(xp, name)(ts.asarray(a, format=fmt), ts.asarray(b)),
         getattr(xps, name)(xps.asarray(a), xps.asarray(b)))


@pytest.mark.parametrize("name", ["sum", "max", "min", "prod", "any", "all"])
@given(a=arrays("float64", (2, 3)), axis=st.sampled_from([None, 0, 1, -1]), keep=st.booleans())
def test_reductions(name, a, axis, keep):
    got = getattr(xp, name)(ts.asarray(a, format="csr"), axis=axis, keepdims=keep)
    want = getattr(xps, name)(xps.asarray(a), axis=axis, keepdims=keep)
    assert tuple(np.asarray(got).shape) == tuple(want.shape)
    same(got, want)


@given(a=arrays("float64", (2, 3, 4)), b=arrays("float64", (3, 4, 2)), x=arrays("float64", (4,)))
def test_linear_algebra(a, b, x):
    ta, tb = ts.asarray(a), ts.asarray(b)
    same(xp.tensordot(ta, tb, axes=2), xps.tensordot(xps.asarray(a), xps.asarray(b), axes=2))
    same(xp.tensordot(ta, tb, axes=([1], [0])), xps.tensordot(xps.asarray(a), xps.asarray(b), axes=([1], [0])))
    same(xp.vecdot(ta, ts.asarray(x)), xps.vecdot(xps.asarray(a), xps.asarray(x)))
    same(xp.matmul(ts.asarray(a[0]), ts.asarray(b[:, :, 0].T)), xps.matmul(xps.asarray(a[0]), xps.asarray(b[:, :, 0].T)))


@given(a=arrays("float64", (2, 1, 3)))
def test_manipulation_and_searching(a):
    t, s = ts.asarray(a), xps.asarray(a)
    same(xp.permute_dims(t, (2, 0, 1)), xps.permute_dims(s, (2, 0, 1)))
    same(xp.expand_dims(t, axis=1), xps.expand_dims(s, axis=1))
    same(xp.reshape(t, (3, 2)), xps.reshape(s, (3, 2)))
    same(xp.squeeze(t, 1), xps.squeeze(s, 1))
    same(xp.concat([t, t], axis=2), xps.concat([s, s], axis=2))
    same(xp.stack([t, t], axis=0), xps.stack([s, s], axis=0))
    same(xp.argmax(t, axis=2), xps.argmax(s, axis=2))
    same(xp.argmin(t, axis=0), xps.argmin(s, axis=0))
    same(xp.where(t > 0, t, -t), xps.where(s > 0, s, -s))
    for g, w in zip(xp.nonzero(t), xps.nonzero(s)):
        same(g, w)


def test_creation():
    same(xp.zeros((2, 3)), xps.zeros((2, 3)))
    same(xp.ones((2,), dtype=xp.int64), xps.ones((2,), dtype=xps.int64))
    same(xp.full((2, 2), 3.5), xps.full((2, 2), 3.5))
    same(xp.eye(3, k=1), xps.eye(3, k=1))
    same(xp.arange(5), xps.arange(5))
    assert xp.eye(4, format="csr").nnz == 4


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round", "square", "sign", "isnan",
                                  "isinf", "isfinite", "positive"])
@given(data=st.data())
def test_more_elementwise(name, data):
    a = data.draw(arrays("float64", (3, 4))) * 0.37  # fractions, negative ones too
    a[0, :2] = [np.nan, -np.inf] if name.startswith("is") else a[0, :2]
    fmt = data.draw(st.sampled_from(["dense", "csr"]))
    same(getattr(xp, name)(ts.asarray(a, format=fmt)), getattr(xps, name)(xps.asarray(a)))
    ints = data.draw(arrays("int64", (5,)))
    same(getattr(xp, name)(ts.asarray(ints)), getattr(xps, name)(xps.asarray(ints)))


@pytest.mark.parametrize("name", ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                                  "tanh", "asinh", "acosh", "atanh", "expm1", "log1p", "log2",
                                  "log10"])
@given(data=st.data())
def test_float_functions(name, data):
    # Rust's libm and NumPy's vectorised loops may differ in the last bits: 1e-12 relative,
    # NaN where NumPy has NaN (outside the domain), infinities alike.
    a = data.draw(arrays("float64", (3, 4))) * 0.37
    fmt = data.draw(st.sampled_from(["dense", "csr"]))
    got = np.asarray(getattr(xp, name)(ts.asarray(a, format=fmt)))
    with np.errstate(all="ignore"):
        want = np.asarray(getattr(xps, name)(xps.asarray(a)))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", ["pow", "atan2", "hypot"])
@given(data=st.data())
def test_float_functions_of_two(name, data):
    a = data.draw(arrays("float64", (3, 4)))
    b = data.draw(arrays("float64", (4,))) * 0.37
    got = np.asarray(getattr(xp, name)(ts.asarray(a, format="csr"), ts.asarray(b)))
    with np.errstate(all="ignore"):
        want = np.asarray(getattr(xps, name)(xps.asarray(a), xps.asarray(b)))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, equal_nan=True)


@given(a=arrays("float64", (3, 4)), b=arrays("float64", (4,)), lo=st.floats(-5, 0), hi=st.floats(0, 5))
def test_where_clip_xor_and_astype(a, b, lo, hi):
    t, s = ts.asarray(a, format="csr"), xps.asarray(a)
    same(xp.where(t > 0, t, ts.asarray(b)), xps.where(s > 0, s, xps.asarray(b)))
    same(xp.clip(t, min=lo, max=hi), xps.clip(s, min=lo, max=hi))
    same(xp.logical_xor(t > 0, t < 1), xps.logical_xor(s > 0, s < 1))
    same(xp.astype(t, xp.int64), xps.astype(s, xps.int64))
    assert xp.astype(t, xp.float64, copy=False) is t


@pytest.mark.parametrize("name", ["mean", "var", "std"])
@given(a=arrays("float64", (3, 4)), axis=st.sampled_from([None, 0, 1, (0, 1)]), keep=st.booleans())
def test_statistics(name, a, axis, keep):
    got = getattr(xp, name)(ts.asarray(a, format="csr"), axis=axis, keepdims=keep)
    want = getattr(xps, name)(xps.asarray(a), axis=axis, keepdims=keep)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-12)


# --- floored division, bitwise functions, copysign, logaddexp, nextafter, signbit -----------
FORMATS = ["dense", "csr", "Dense(RunList(Element(0)))", "SparseList(SparseList(Element(0)))"]


def _fmt(fmt, dtype):
    """A format of the list above for `dtype` (its leaf's fill the dtype's zero)."""
    if "Element" not in fmt:
        return fmt
    dtype = np.dtype(dtype)
    zero = "false" if dtype == np.bool_ else ("0.0" if dtype.kind == "f" else "0")
    suffix = {"int32": ", i32", "int8": ", i8", "uint8": ", u8", "uint64": ", u64", "float32": ", f32"}
    return fmt.replace("Element(0)", f"Element({zero}{suffix.get(dtype.name, '')})")


def same_bits(got, want):
    """Equal values of equal dtypes, NaN where NaN, and the same sign of zeros."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("name", ["remainder", "floor_divide", "bitwise_and", "bitwise_or",
                                  "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8"])
@given(data=st.data())
def test_integer_functions(name, dtype, data):
    # Zero divisors included (NumPy gives 0 and warns); shift amounts 0..9 (the standard's
    # domain; out-of-range amounts are compared with NumPy below).
    a = data.draw(arrays(dtype, (3, 4)))
    b = data.draw(arrays(dtype, (4,)))
    if "shift" in name:
        b = np.abs(b)
    fmt = data.draw(st.sampled_from(FORMATS))
    got = getattr(xp, name)(ts.asarray(a, format=_fmt(fmt, dtype)), ts.asarray(b))
    with np.errstate(all="ignore"):
        want = getattr(xps, name)(xps.asarray(a), xps.asarray(b))
    same_bits(got, want)


@pytest.mark.parametrize("dtype", ["int64", "int8", "uint8"])
def test_integer_edges_against_numpy(dtype):
    # The extremes of each type, zero divisors, MIN // -1 (wraps), shifts by negative amounts
    # and by the width or more.
    info = np.iinfo(dtype)
    edge = np.array(sorted({info.min, info.min + 1, -7, -1, 0, 1, 2, 7, info.max} & set(range(info.min, info.max + 1))),
                    dtype=dtype) if info.bits < 64 else np.array([info.min, info.min + 1, -7, -1, 0, 1, 2, 7, info.max], dtype=dtype)
    a, b = np.repeat(edge, len(edge)), np.tile(edge, len(edge))
    ta, tb = ts.asarray(a), ts.asarray(b)
    with np.errstate(all="ignore"):
        same_bits(xp.remainder(ta, tb), np.remainder(a, b))
        same_bits(xp.floor_divide(ta, tb), np.floor_divide(a, b))
        # The operators follow the standard's promotion too (the type itself, wrapping).
        same_bits(ta % tb, np.remainder(a, b))
        same_bits(ta // tb, np.floor_divide(a, b))
    amounts = np.array([-64, -1, 0, 1, 7, 8, 9, 31, 62, 63, 64, 65, 1000], dtype=np.int64)
    x, n = np.repeat(edge, len(amounts)), np.tile(amounts, len(edge))
    if dtype != "int64":
        # NumPy's rule for the type itself: amounts are compared with its width.
        n = np.clip(n, -1, 127).astype(dtype)
    tx, tn = ts.asarray(x), ts.asarray(n)
    same_bits(xp.bitwise_left_shift(tx, tn), np.left_shift(x, n))
    same_bits(xp.bitwise_right_shift(tx, tn), np.right_shift(x, n))
    same_bits(xp.bitwise_invert(tx), np.invert(x))


def _floats(dtype):
    big = 1e300 if dtype == "float64" else 3e38
    edge = st.sampled_from([0.0, -0.0, 0.5, -1.5, 3.0, -7.25, big, np.inf, -np.inf, np.nan])
    return hnp.arrays(np.dtype(dtype), (3, 4), elements=st.one_of(st.just(0.0), edge, st.floats(-10, 10, width=32)))


@pytest.mark.parametrize("name", ["remainder", "floor_divide", "copysign", "logaddexp", "nextafter"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@given(data=st.data())
def test_float_functions_of_numpy(name, dtype, data):
    a = data.draw(_floats(dtype))
    b = data.draw(_floats(dtype))
    fmt = data.draw(st.sampled_from(FORMATS))
    t = ts.asarray(a, format=_fmt(fmt, dtype))
    a = np.asarray(t)  # what the tensor holds (a sparse format stores no -0.0 in a 0.0 fill)
    got = getattr(xp, name)(t, ts.asarray(b[0]))
    with np.errstate(all="ignore"):
        want = getattr(xps, name)(xps.asarray(a), xps.asarray(b[0]))
    if name == "logaddexp" or dtype == "float32" and name in ("remainder", "floor_divide"):
        # libm's exp and log1p against NumPy's may differ in the last bit; float32 floored
        # division is computed in float64 here and rounded, NumPy's in float32.
        assert np.asarray(got).dtype == np.asarray(want).dtype
        if name == "logaddexp" and dtype == "float32":
            # Computed in float64 and rounded once, against NumPy's float32 arithmetic, whose
            # error is relative to the operands, not to a result that cancels (logaddexp(-1.5,
            # -0.25) = 0.00193: NumPy's float32 is 3.6e-6 off, ours correctly rounded). The
            # oracle is NumPy's float64 result rounded to float32.
            with np.errstate(all="ignore"):
                want = np.logaddexp(a.astype(np.float64), np.float64(b[0])).astype(np.float32)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6 if dtype == "float32" else 1e-15,
                                   atol=0, equal_nan=True)
    else:
        same_bits(got, want)


@given(data=st.data())
def test_signbit_and_bool_bitwise(data):
    a = data.draw(_floats("float64"))
    fmt = data.draw(st.sampled_from(FORMATS))
    t = ts.asarray(a, format=_fmt(fmt, "float64"))
    a = np.asarray(t)  # what the tensor holds (a sparse format stores no -0.0 in a 0.0 fill)
    same_bits(xp.signbit(t), xps.signbit(xps.asarray(a)))
    p, q = a > 0, a < 1
    tp, tq = xp.greater(t, 0.0), xp.less(t, 1.0)
    sp, sq = xps.asarray(p), xps.asarray(q)
    same_bits(xp.bitwise_and(tp, tq), xps.bitwise_and(sp, sq))
    same_bits(xp.bitwise_or(tp, tq), xps.bitwise_or(sp, sq))
    same_bits(xp.bitwise_xor(tp, tq), xps.bitwise_xor(sp, sq))
    same_bits(xp.bitwise_invert(tp), xps.bitwise_invert(sp))


def test_functions_keep_the_structure_where_the_fill_maps_to_itself():
    a = np.zeros((50, 40), dtype=np.int64)
    a[::7, ::3] = np.arange(-56, 56).reshape(8, 14)
    t = ts.asarray(a, format="csr")
    for got in (xp.remainder(t, 3), xp.floor_divide(t, -4), xp.bitwise_and(t, 6),
                xp.bitwise_left_shift(t, 2), xp.bitwise_right_shift(t, 1), t % 5, t // 2, t << 3):
        assert got.format == "Dense(SparseList(Element(0)))"
        assert got.nnz <= t.nnz
    f = ts.asarray(a.astype(np.float64), format="csr")
    for got in (xp.copysign(f, -1.0), xp.signbit(f), xp.remainder(f, 2.5)):
        assert got.nnz <= f.nnz and got.format.startswith("Dense(SparseList(")


# --- cumulative_sum ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "int64", "int8", "uint8"])
@given(data=st.data())
def test_cumulative_sum(dtype, data):
    a = data.draw(arrays(dtype, (3, 4)))
    fmt = data.draw(st.sampled_from(FORMATS))
    axis = data.draw(st.sampled_from([0, 1, -1]))
    initial = data.draw(st.booleans())
    t = ts.asarray(a, format=_fmt(fmt, dtype))
    same_bits(xp.cumulative_sum(t, axis=axis, include_initial=initial),
              xps.cumulative_sum(xps.asarray(a), axis=axis, include_initial=initial))
    v = a[0]
    same_bits(xp.cumulative_sum(ts.asarray(v, format=_fmt("SparseList(Element(0))", dtype))),
              xps.cumulative_sum(xps.asarray(v)))
    same_bits(xp.cumulative_sum(t, axis=1, dtype=xp.float64),
              xps.cumulative_sum(xps.asarray(a), axis=1, dtype=xps.float64))


# --- sorting and sets ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "int64", "uint8", "int8"])
@given(data=st.data())
def test_sort_and_argsort(dtype, data):
    a = data.draw(arrays(dtype, (3, 5)) if dtype != "float64" else _floats("float64"))
    fmt = data.draw(st.sampled_from(FORMATS))
    axis = data.draw(st.sampled_from([0, 1, -1]))
    descending = data.draw(st.booleans())
    t = ts.asarray(a, format=_fmt(fmt, dtype))
    a = np.asarray(t)  # what the tensor holds (a sparse format stores no -0.0 in a 0.0 fill)
    s = xps.asarray(a)
    got = xp.sort(t, axis=axis, descending=descending)
    same_bits(got, xps.sort(s, axis=axis, descending=descending))
    if fmt in ("csr", "SparseList(SparseList(Element(0)))"):
        # The sorted tensor stays sparse: no more stored entries than the input's.
        assert got.nnz <= t.nnz
    same_bits(xp.argsort(t, axis=axis, descending=descending),
              xps.argsort(s, axis=axis, descending=descending))


@pytest.mark.parametrize("dtype", ["float64", "int64", "int8", "bool"])
@given(data=st.data())
def test_unique(dtype, data):
    # Mostly zeros, so sparse formats leave positions unstored; NaNs are distinct values.
    a = data.draw(arrays(dtype, (3, 4)) if dtype != "float64" else _floats("float64"))
    fmt = data.draw(st.sampled_from(FORMATS))
    t = ts.asarray(a, format=_fmt(fmt, dtype))
    a = np.asarray(t)  # what the tensor holds (a sparse format stores no -0.0 in a 0.0 fill)
    s = xps.asarray(a)
    # Which of equal `0.0` and `-0.0` stands for both is unspecified (the standard): values
    # compare without the sign of zero.
    same(xp.unique_values(t), xps.unique_values(s))
    for name in ("unique_counts", "unique_inverse", "unique_all"):
        for g, w in zip(getattr(xp, name)(t), getattr(xps, name)(s)):
            same(g, w)
            assert np.asarray(g).dtype == np.asarray(w).dtype


def test_unique_of_a_sparse_tensor_counts_the_fill_without_a_dense_copy():
    # 10^6 x 10^6 with three stored entries: the fill's count is size - 3.
    import scipy.sparse as sp

    m = sp.csr_array((np.array([2.0, -1.0, 2.0]), (np.array([0, 5, 999_999]), np.array([1, 5, 0]))),
                     shape=(1_000_000, 1_000_000))
    t = ts.asarray(m)
    values, counts = xp.unique_counts(t)
    assert np.asarray(values).tolist() == [-1.0, 0.0, 2.0]
    assert np.asarray(counts).tolist() == [1, 10**12 - 3, 2]
    v, index, inverse, c = xp.unique_all(t)
    assert np.asarray(index).tolist() == [5 * 10**6 + 5, 0, 1]
    assert inverse.nnz == 3 and inverse.fill == 1
    s = xp.sort(t, axis=1)
    assert s.nnz == 3 and s[999_999, 999_999] == 2.0 and s[5, 0] == -1.0


@pytest.mark.parametrize("dtype", ["float64", "int64"])
@given(data=st.data())
def test_searchsorted(dtype, data):
    # A sorted x1 (sparse: its fill is one block among the stored values), values x2 of
    # another format; with a sorter, an unsorted x1.
    raw = data.draw(arrays(dtype, (7,)) if dtype == "int64" else _floats("float64").map(lambda a: a[0]))
    x1 = np.sort(raw)
    fmt1 = data.draw(st.sampled_from(["dense", "SparseList(Element(0))", "RunList(Element(0))"]))
    t1 = ts.asarray(x1, format=_fmt(fmt1, dtype))
    x1 = np.asarray(t1)
    x2 = data.draw(arrays(dtype, (3, 4)) if dtype == "int64" else _floats("float64"))
    t2 = ts.asarray(x2, format=_fmt(data.draw(st.sampled_from(FORMATS)), dtype))
    x2 = np.asarray(t2)
    for side in ("left", "right"):
        same_bits(xp.searchsorted(t1, t2, side=side),
                  xps.searchsorted(xps.asarray(x1), xps.asarray(x2), side=side))
    order = np.argsort(raw, kind="stable")
    same_bits(xp.searchsorted(ts.asarray(raw), t2, sorter=ts.asarray(order)),
              xps.searchsorted(xps.asarray(raw), xps.asarray(x2), sorter=xps.asarray(order)))


# --- the rest of the namespace ---------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "int64", "int8"])
@given(data=st.data())
def test_cumulative_prod(dtype, data):
    a = data.draw(arrays(dtype, (3, 4)))
    if dtype != "float64":
        a = a % 5  # small factors: no overflow differences to reason about
    fmt = data.draw(st.sampled_from(FORMATS))
    axis = data.draw(st.sampled_from([0, 1, -1]))
    initial = data.draw(st.booleans())
    t = ts.asarray(a, format=_fmt(fmt, dtype))
    got = xp.cumulative_prod(t, axis=axis, include_initial=initial)
    want = xps.cumulative_prod(xps.asarray(a), axis=axis, include_initial=initial)
    assert got.dtype == np.asarray(want).dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)


@given(a=arrays("float64", (4, 5)), k=st.integers(-5, 5), fmt=st.sampled_from(["dense", "csr", "dcsr"]))
def test_tril_triu_keep_the_format(a, k, fmt):
    t, s = ts.asarray(a, format=fmt), xps.asarray(a)
    lo, up = xp.tril(t, k=k), xp.triu(t, k=k)
    same(lo, xps.tril(s, k=k))
    same(up, xps.triu(s, k=k))
    assert lo.format == t.format and lo.nnz <= t.nnz
    b = np.stack([a, -a]) > 0
    same(xp.tril(ts.asarray(b), k=k), xps.tril(xps.asarray(b), k=k))


@given(a=arrays("float64", (2, 1, 3)), i=hnp.arrays(np.int64, (4,), elements=st.integers(0, 2)))
def test_manipulation_and_gathers(a, i):
    t, s = ts.asarray(a, format="Dense(SparseList(SparseList(Element(0.0))))"), xps.asarray(a)
    same(xp.matrix_transpose(t), xps.matrix_transpose(s))
    same(xp.moveaxis(t, 0, -1), xps.moveaxis(s, 0, -1))
    same(xp.moveaxis(t, (0, 2), (1, 0)), xps.moveaxis(s, (0, 2), (1, 0)))
    same(xp.broadcast_to(t, (4, 2, 5, 3)), xps.broadcast_to(s, (4, 2, 5, 3)))
    for g, w in zip(xp.broadcast_arrays(t, ts.asarray(np.ones(3))),
                    xps.broadcast_arrays(s, xps.asarray(np.ones(3)))):
        same(g, w)
    assert xp.broadcast_shapes((2, 1), (3,)) == xps.broadcast_shapes((2, 1), (3,))
    same(xp.flip(t, axis=2), xps.flip(s, axis=2))
    same(xp.roll(t, 2, axis=2), xps.roll(s, 2, axis=2))
    same(xp.repeat(t, 2, axis=0), xps.repeat(s, 2, axis=0))
    same(xp.tile(t, (1, 2, 1)), xps.tile(s, (1, 2, 1)))
    same(xp.take(t, ts.asarray(i), axis=2), xps.take(s, xps.asarray(i), axis=2))
    ii = np.broadcast_to(i[:3].reshape(1, 1, 3), (2, 1, 3)).copy()
    same(xp.take_along_axis(t, ts.asarray(ii), axis=2), xps.take_along_axis(s, xps.asarray(ii), axis=2))
    for g, w in zip(xp.unstack(t, axis=2), xps.unstack(s, axis=2)):
        same(g, w)
    same(xp.diff(t, axis=2), xps.diff(s, axis=2))
    same(xp.count_nonzero(t, axis=2, keepdims=True), xps.count_nonzero(s, axis=2, keepdims=True))
    same(xp.count_nonzero(t), xps.count_nonzero(s))
    same(xp.isin(t, ts.asarray(a[0, 0])), np.isin(a, a[0, 0]))
    same(xp.reciprocal(ts.asarray(a + 10.0)), xps.reciprocal(xps.asarray(a + 10.0)))
    same(xp.real(t), a)
    same(xp.imag(t), np.zeros_like(a))


def test_dtype_functions_and_constants():
    assert xp.isdtype(xp.int8, "signed integer") and not xp.isdtype(xp.uint8, "signed integer")
    assert xp.isdtype(xp.float32, ("integral", "real floating"))
    assert xp.isdtype(xp.int64, xp.int64) and not xp.isdtype(xp.bool, "numeric")
    with pytest.raises(ValueError):
        xp.isdtype(xp.int8, "no such kind")
    assert xp.result_type(xp.int8, xp.int32) == np.int32
    assert xp.result_type(ts.asarray(np.zeros(2, np.float32)), 1.5) == np.float32
    with pytest.raises(TypeError):
        xp.result_type(xp.int8, xp.uint8)  # int16: not a Tessera dtype
    assert xp.can_cast(xp.int8, xp.int64) and not xp.can_cast(xp.float64, xp.int32)
    assert xp.finfo(xp.float32).eps == np.finfo(np.float32).eps
    assert xp.iinfo(xp.int8).min == -128
    assert xp.pi == np.pi and xp.newaxis is None and np.isnan(xp.nan) and xp.inf > 0
    same(xp.linspace(0.0, 1.0, 5), xps.linspace(0.0, 1.0, 5))
    for g, w in zip(xp.meshgrid(ts.asarray(np.arange(3.0)), ts.asarray(np.arange(2.0)), indexing="ij"),
                    xps.meshgrid(xps.asarray(np.arange(3.0)), xps.asarray(np.arange(2.0)), indexing="ij")):
        same(g, w)
    assert xp.empty_like(ts.asarray(np.ones((2, 2)))).shape == (2, 2)
