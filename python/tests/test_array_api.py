"""The Array API functions tessera.array_api has, compared with array_api_strict on random
inputs (dense and CSR)."""

import array_api_strict as xps
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

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
