"""Regression tests for what the standard's own suite (data-apis/array-api-tests, run by
scripts/array-api-tests.sh) found in tessera.array_api and the Tensor operators, each
compared with array_api_strict or NumPy."""

import operator

import array_api_strict as xps
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tessera as ts
from strategies import arrays

xp = ts.array_api

NARROW = ["int8", "uint8", "int32", "uint64", "float32"]
FORMATS = ["dense", "csr"]


def same_typed(got, want):
    """Equal values (NaN where NaN) of the same dtype and shape."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


# --- result dtypes: the standard's promotion, not the core's int64/float64 ------------------
@pytest.mark.parametrize("dtype", NARROW)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "mod", "floordiv", "and", "or", "xor"])
@given(data=st.data())
def test_operators_keep_the_promoted_dtype(dtype, op, data):
    if op in ("and", "or", "xor") and dtype == "float32":
        return
    a = data.draw(arrays(dtype, (2, 3)))
    b = data.draw(arrays(dtype, (3,)))
    fmt = data.draw(st.sampled_from(FORMATS))
    f = getattr(operator, op if op not in ("and", "or") else op + "_")
    ta, tb = ts.asarray(a, format=fmt), ts.asarray(b)
    with np.errstate(all="ignore"):
        want = f(xps.asarray(a), xps.asarray(b))
        got = f(ta, tb)
        # A Python scalar is weak: the tensor's dtype stays.
        want_scalar = f(xps.asarray(a), 3)
        got_scalar = f(ta, 3)
    if dtype == "float32" and op == "mul":
        # Tessera's `0 * inf == 0` (README "x * 0 == 0"): compare where the product is IEEE's.
        ok = ~(np.isinf(np.asarray(want)) | np.isnan(np.asarray(want)))
        assert np.asarray(got).dtype == np.float32
        np.testing.assert_array_equal(np.asarray(got)[ok], np.asarray(want)[ok])
        return
    same_typed(got, want)
    same_typed(got_scalar, want_scalar)


@pytest.mark.parametrize("name", ["sin", "exp", "sqrt", "log1p", "atan", "abs", "negative",
                                  "floor", "square", "sign"])
@given(a=arrays("float32", (5,)))
def test_float32_functions_give_float32(name, a):
    with np.errstate(all="ignore"):
        want = getattr(xps, name)(xps.asarray(a))
    got = getattr(xp, name)(ts.asarray(a))
    assert np.asarray(got).dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-7, equal_nan=True)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "uint64"])
@pytest.mark.parametrize("name", ["abs", "negative", "sign", "bitwise_invert", "square"])
def test_integer_unary_dtypes(dtype, name):
    info = np.iinfo(dtype)
    a = np.array([info.min, 0, 1, 7, info.max], dtype=dtype)
    with np.errstate(all="ignore"):
        want = getattr(xps, name)(xps.asarray(a))
    same_typed(getattr(xp, name)(ts.asarray(a)), want)


def test_sign_of_zeros_is_plus_zero():
    got = np.asarray(xp.sign(ts.asarray(np.array([-0.0, 0.0, -2.0, np.nan]))))
    np.testing.assert_array_equal(np.signbit(got[:2]), [False, False])
    np.testing.assert_array_equal(got[2], -1.0)
    assert np.isnan(got[3])


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "uint64", "float32", "float64"])
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
@given(data=st.data())
def test_reduction_dtypes(dtype, name, data):
    a = data.draw(arrays(dtype, (2, 3)))
    axis = data.draw(st.sampled_from([None, 0, 1]))
    keep = data.draw(st.booleans())
    with np.errstate(all="ignore"):
        want = getattr(xps, name)(xps.asarray(a), axis=axis, keepdims=keep)
    got = getattr(xp, name)(ts.asarray(a), axis=axis, keepdims=keep)
    if dtype.startswith("float") and name == "prod":
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
        assert np.asarray(got).dtype == np.asarray(want).dtype
    elif dtype == "float32" and name == "sum":
        # (the core sums float32 in float64 and rounds once: NumPy's pairwise float32 sum
        # may differ in the last bits)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-30)
        assert np.asarray(got).dtype == np.float32
    else:
        same_typed(got, want)


def test_sum_dtype_keyword():
    a = np.array([[100, 100], [100, 27]], dtype=np.int8)
    same_typed(xp.sum(ts.asarray(a), dtype=xp.float32), xps.sum(xps.asarray(a), dtype=xps.float32))
    same_typed(xp.prod(ts.asarray(a), axis=0, dtype=xp.int8), xps.prod(xps.asarray(a), axis=0, dtype=xps.int8))


@given(a=arrays("uint8", (2, 3)), b=arrays("uint8", (3, 2)))
def test_linear_algebra_dtypes(a, b):
    same_typed(xp.tensordot(ts.asarray(a), ts.asarray(b), axes=1), xps.tensordot(xps.asarray(a), xps.asarray(b), axes=1))
    same_typed(xp.vecdot(ts.asarray(a), ts.asarray(b.T)), xps.vecdot(xps.asarray(a), xps.asarray(b.T)))
    same_typed(xp.matmul(ts.asarray(a), ts.asarray(b)), xps.matmul(xps.asarray(a), xps.asarray(b)))
    same_typed(xp.expand_dims(ts.asarray(a), axis=1), xps.expand_dims(xps.asarray(a), axis=1))


@given(a=arrays("float64", (2, 1, 3, 4)), b=arrays("float64", (5, 4, 2)), v=arrays("float64", (4,)))
def test_batched_matmul(a, b, v):
    # Stacks of matrices, batch axes broadcast (2, 1) with (5,); vectors on either side.
    sa, sb, sv = xps.asarray(a), xps.asarray(b), xps.asarray(v)
    ta, tb, tv = ts.asarray(a), ts.asarray(b), ts.asarray(v)
    np.testing.assert_allclose(np.asarray(xp.matmul(ta, tb)), np.asarray(xps.matmul(sa, sb)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ta @ tb), np.asarray(xps.matmul(sa, sb)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(xp.matmul(ta, tv)), np.asarray(xps.matmul(sa, sv)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(xp.matmul(tv, tb)), np.asarray(xps.matmul(sv, sb)), rtol=1e-12)
    with pytest.raises(ValueError):
        xp.matmul(ta, ts.asarray(np.zeros((3, 3))))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int64", "float32", "float64"])
def test_pow_operator(dtype):
    a = np.array([0, 1, 2, 3, 5], dtype=dtype)
    b = np.array([0, 1, 2, 3, 2], dtype=dtype)
    same_typed(ts.asarray(a) ** ts.asarray(b), xps.asarray(a) ** xps.asarray(b))
    same_typed(ts.asarray(a) ** 2, xps.asarray(a) ** 2)
    same_typed(2 ** ts.asarray(b), 2 ** xps.asarray(b))
    same_typed(xp.pow(ts.asarray(a), ts.asarray(b)), xps.pow(xps.asarray(a), xps.asarray(b)))


def test_bitwise_invert_of_uint64_fill():
    # The fill of ~x is ~0 = 2**64 - 1: a u64 fill above i64's range in the format text.
    a = np.array([0, 5, 2**64 - 1], dtype=np.uint64)
    same_typed(~ts.asarray(a), ~a)
    same_typed(xp.bitwise_invert(ts.asarray(a)), np.invert(a))


def test_astype_changes_the_dtype_keeping_the_format():
    a = np.array([[0, 200], [255, 0]], dtype=np.uint8)
    t = xp.astype(ts.asarray(a, format="csr"), xp.int8)
    same_typed(t, a.astype(np.int8))
    assert "SparseList" in t.format


# --- the array object -----------------------------------------------------------------------
def test_integer_indexing_gives_0d_tensors():
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    t = ts.asarray(a)
    v = t[1, -1]
    assert isinstance(v, ts.Tensor) and v.shape == () and v.dtype == np.float32
    assert float(v) == 5.0
    assert v[()] is v  # x[()] of a 0-d tensor is itself
    with pytest.raises(IndexError):
        t[2, 0]
    with pytest.raises(IndexError):
        t[0, -4]
    # Iteration (by IndexError) and 0-d conversions.
    assert [float(x) for x in ts.asarray(np.array([1.0, 2.0]))] == [1.0, 2.0]
    assert [1, 2, 3][ts.asarray(np.array(1))] == 2
    with pytest.raises(TypeError):
        [1, 2][ts.asarray(np.array(1.0))]
    assert complex(ts.asarray(np.array(2.5))) == 2.5 + 0j


@given(a=arrays("float64", (3, 4)), mask=arrays("bool", (3, 4)), row=arrays("bool", (3,)))
def test_ellipsis_none_and_masks_as_numpy(a, mask, row):
    t = ts.asarray(a)
    same_typed(t[..., 1], a[..., 1])
    same_typed(t[None, 1:, ...], a[None, 1:, ...])
    same_typed(t[ts.asarray(mask)], a[mask])
    same_typed(t[ts.asarray(row), 2:], a[row, 2:])
    # Integer tensors gather as NumPy's integer arrays (the 2024.12 standard's).
    rows, cols = np.array([[0], [2]]), np.array([1, 3, -1])
    same_typed(t[ts.asarray(rows), ts.asarray(cols)], a[rows, cols])
    same_typed(t[1, ts.asarray(cols)], a[1, cols])
    with pytest.raises(IndexError):
        t[ts.asarray(np.array([3])), 0]
    with pytest.raises(TypeError):
        t[ts.asarray(np.array([0.5]))]
    with pytest.raises(IndexError):
        t[ts.asarray(np.ones((3, 4, 1), dtype=bool))]  # a mask of more dimensions
    with pytest.raises(IndexError):
        t[0, 0, ...][ts.asarray(np.ones(2, dtype=bool))]  # a mask of a 0-d tensor


def test_reduction_keywords_and_checks():
    a = np.array([[0.0, 2.0], [3.0, 0.0]])
    # axis=(): nothing reduced, any/all still give bools.
    same_typed(xp.all(ts.asarray(a), axis=()), xps.all(xps.asarray(a), axis=()))
    same_typed(xp.any(ts.asarray(a), axis=()), xps.any(xps.asarray(a), axis=()))
    with pytest.raises(ValueError):
        xp.vecdot(ts.asarray(np.zeros(0)), ts.asarray(np.zeros(1)))  # no broadcast on the axis
    with pytest.raises(IndexError):
        xp.expand_dims(ts.asarray(a), axis=3)
    same_typed(xp.expand_dims(ts.asarray(a), axis=-3), xps.expand_dims(xps.asarray(a), axis=-3))


def test_signbit_of_a_0d_negative_nan():
    # A 0-d operand is written into the kernel as a literal unless it is a NaN (whose sign
    # the literal would lose).
    neg = ts.asarray(np.array(-np.nan))
    assert bool(xp.signbit(neg))
    assert not bool(xp.signbit(ts.asarray(np.array(np.nan))))
    assert np.signbit(np.asarray(xp.copysign(ts.asarray(np.array([1.0, 2.0])), neg))).all()


def test_array_attributes():
    t = ts.asarray(np.arange(6.0).reshape(1, 2, 3))
    same_typed(t.mT, np.swapaxes(np.arange(6.0).reshape(1, 2, 3), -1, -2))
    assert t.device == "cpu" and t.to_device("cpu") is t
    with pytest.raises(ValueError):
        t.to_device("gpu")
    same_typed(+t, np.asarray(t))


# --- creation and inspection ----------------------------------------------------------------
def test_asarray_copy():
    a = np.arange(4.0)
    shared, copied = xp.asarray(a), xp.asarray(a, copy=True)
    a[0] = 9.0
    assert float(shared[0]) == 9.0 and float(copied[0]) == 0.0
    assert xp.asarray(a, copy=False).to_numpy()[0] == 9.0
    with pytest.raises(ValueError):
        xp.asarray([1.0, 2.0], copy=False)  # a list is always copied
    with pytest.raises(ValueError):
        xp.asarray(a, dtype=xp.float32, copy=False)
    t = xp.asarray(a)
    assert xp.asarray(t, copy=False) is t
    same_typed(xp.asarray(t, copy=True), np.asarray(t))
    with pytest.raises(ValueError):
        xp.asarray(a, device="gpu")
    same_typed(xp.zeros((2,), dtype=xp.int8, device="cpu"), np.zeros(2, dtype=np.int8))


def test_finfo_and_info_namespace():
    info = xp.finfo(xp.float32)
    for name in ("eps", "max", "min", "smallest_normal"):
        assert type(getattr(info, name)) is float
        assert getattr(info, name) == float(getattr(np.finfo(np.float32), name))
    assert info.bits == 32 and info.dtype == np.float32
    ns = xp.__array_namespace_info__()
    assert ns.default_device() == "cpu" and ns.devices() == ["cpu"]
    assert ns.default_dtypes()["real floating"] == np.float64
    assert set(ns.dtypes(kind="integral")) == {"int8", "uint8", "int32", "int64", "uint64"}
    assert set(ns.dtypes()) == {"bool", "int8", "uint8", "int32", "int64", "uint64", "float32", "float64"}


def test_unique_results_are_named():
    a = np.array([3, 1, 3, 0, 0, 0], dtype=np.int64)
    t = ts.asarray(a, format="SparseList(Element(0))")
    counts = xp.unique_counts(t)
    same_typed(counts.values, np.array([0, 1, 3]))
    same_typed(counts.counts, np.array([3, 1, 2]))
    inv = xp.unique_inverse(t)
    same_typed(xp.take(inv.values, ts.asarray(np.asarray(inv.inverse_indices))), a)
    full = xp.unique_all(t)
    same_typed(full.indices, np.array([3, 1, 0]))
    values, _, _, _ = full  # still a tuple
    same_typed(values, np.array([0, 1, 3]))


def test_nextafter_of_float32_and_a_python_float():
    a = np.array([0.0, 1.0, -2.5], dtype=np.float32)
    same_typed(xp.nextafter(ts.asarray(a), 10.0), xps.nextafter(xps.asarray(a), 10.0))
    same_typed(xp.nextafter(-10.0, ts.asarray(a)), xps.nextafter(-10.0, xps.asarray(a)))
