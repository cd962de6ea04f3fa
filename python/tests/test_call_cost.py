"""What a compiled kernel keeps between calls to make a call cheap (issues 18/19: the last
shapes and integer scalars, the formats it was compiled for, one crossing into Rust for a
call on Tensors) must never give a stale answer: every call with other shapes, values,
formats, dtypes or scalars is right or a typed error, on the JIT and the C backend."""

import numpy as np
import pytest
import scipy.sparse as sp

import tessera as ts

SPMV = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n"
SUM_M = "s .= 0\nfor k = 0:m - 1\n  s[] += w[k]\nend\n"
BACKENDS = ["jit", "c"]


def csr(m, n, seed, density=0.4):
    return sp.random_array((m, n), density=density, random_state=seed, format="csr")


@pytest.mark.parametrize("backend", BACKENDS)
def test_calls_on_tensors_follow_shapes_and_values(backend):
    a0 = ts.asarray(csr(5, 4, 0))
    k = ts.compile(SPMV, out="y", backend=backend, A=a0, x=ts.asarray(np.ones(4)))
    rng = np.random.default_rng(18)
    for seed, (m, n) in enumerate([(5, 4), (5, 4), (8, 8), (1, 1), (5, 4), (3, 9), (3, 9)]):
        a = csr(m, n, seed)
        x = rng.standard_normal(n)
        y = k(A=ts.asarray(a), x=ts.asarray(x))
        assert isinstance(y, ts.Tensor) and y.shape == (m,)
        np.testing.assert_allclose(y.to_numpy(), a @ x)
        # A disagreeing `x` is refused after any number of good calls, and changes nothing.
        with pytest.raises(ts.DimensionMismatchError):
            k(A=ts.asarray(a), x=ts.asarray(np.ones(n + 1)))
    # The same input tensors again, with new values in a new `x`: a new result.
    a = ts.asarray(csr(5, 4, 3))
    for v in (1.0, 2.0, -1.0):
        x = np.full(4, v)
        np.testing.assert_allclose(k(A=a, x=ts.asarray(x)).to_numpy(), csr(5, 4, 3) @ x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_calls_on_tensors_of_other_formats_and_dtypes(backend):
    a = csr(6, 6, 2)
    x = np.arange(6.0)
    k = ts.compile(SPMV, out="y", backend=backend, A=ts.asarray(a), x=ts.asarray(x))
    # Alternating formats: each call is compiled for (or finds) its own formats.
    for fmt in ("dense", "csr", "dcsr", "csr", ts.formats.csr("float64", index="int32"), "dense"):
        got = k(A=ts.asarray(a, format=fmt), x=ts.asarray(x))
        np.testing.assert_allclose(got.to_numpy(), a @ x)
    # A float32 `x`, then float64 again.
    for dt in (np.float32, np.float64, np.float32):
        got = k(A=ts.asarray(a), x=ts.asarray(x.astype(dt)))
        np.testing.assert_allclose(got.to_numpy(), a @ x, rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_scalars_are_followed_between_calls(backend):
    w = np.arange(1.0, 9.0)
    k = ts.compile(SUM_M, out="s", backend=backend, w=ts.asarray(w[:4]), m=ts.asarray(np.int64(4)))
    for m in (4, 4, 2, 6, 4):
        got = k(w=ts.asarray(w[:m]), m=ts.asarray(np.int64(m)))
        assert float(got) == w[:m].sum()
    # Only the scalar changes: the loop over `k` disagrees with `w`'s length.
    for m in (3, 5):
        with pytest.raises(ts.DimensionMismatchError):
            k(w=ts.asarray(w[:4]), m=ts.asarray(np.int64(m)))
    assert float(k(w=ts.asarray(w[:4]), m=ts.asarray(np.int64(4)))) == w[:4].sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensors_and_arrays_mixed_and_chained(backend):
    """A call on Tensors, on NumPy arrays, and on a mix gives the same result; an output fed
    back as the next call's input (two erosion steps) is read as it was written."""
    prog = "B .= 0\nfor i = _, j = _\n  B[i, j] = A[i, j] * 2\nend\n"
    a = np.arange(12.0).reshape(3, 4)
    k = ts.compile(prog, out="B", backend=backend, A=ts.asarray(a))
    np.testing.assert_array_equal(k(A=a).to_numpy(), 2 * a)
    np.testing.assert_array_equal(k(A=ts.asarray(a)).to_numpy(), 2 * a)
    b = k(A=ts.asarray(a))
    c = k(A=b)
    np.testing.assert_array_equal(c.to_numpy(), 4 * a)
    np.testing.assert_array_equal(b.to_numpy(), 2 * a)  # the first output is unchanged
    # A missing tensor is an error, then the kernel runs as before.
    with pytest.raises(Exception) as e:
        k()
    assert "A" in str(e.value)
    np.testing.assert_array_equal(k(A=ts.asarray(a)).to_numpy(), 2 * a)


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_follows_shapes_on_tensors(backend):
    for seed, (m, n) in enumerate([(4, 4), (4, 4), (2, 7), (4, 4)]):
        a = csr(m, n, seed)
        x = np.arange(float(n))
        y = ts.run(SPMV, out="y", backend=backend, A=ts.asarray(a), x=ts.asarray(x))
        np.testing.assert_allclose(y.to_numpy(), a @ x)
        with pytest.raises(ts.DimensionMismatchError):
            ts.run(SPMV, out="y", backend=backend, A=ts.asarray(a), x=ts.asarray(np.ones(n + 2)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_outputs_on_tensors(backend):
    """Kernels with several outputs (the images study's erosion: `output` and `tmp`) take the
    one-crossing path too; the outputs come named or in order, right on every call."""
    prog = "for i = _, j = _\n  s[] += A[i, j]\n  B[i, j] = A[i, j] * c[]\nend"
    a0 = csr(5, 4, 3, density=0.6)
    as_list = ts.compile(prog, out=["s", "B"], backend=backend, A=ts.asarray(a0), c=ts.asarray(2.0))
    as_dict = ts.compile(prog, out={"B": None, "s": None}, backend=backend, A=ts.asarray(a0), c=ts.asarray(2.0))
    for seed, (m, n, c) in enumerate([(5, 4, 2.0), (5, 4, 3.0), (2, 7, -1.0), (5, 4, 2.0)]):
        a = csr(m, n, seed, density=0.6)
        s, b = as_list(A=ts.asarray(a), c=ts.asarray(c))
        assert float(s) == pytest.approx(a.sum())
        np.testing.assert_allclose(b.to_numpy(), c * a.toarray())
        got = as_dict(A=ts.asarray(a), c=ts.asarray(c))
        assert set(got) == {"B", "s"}
        np.testing.assert_allclose(got["B"].to_numpy(), c * a.toarray())
        assert float(got["s"]) == pytest.approx(a.sum())
        with pytest.raises(ts.DimensionMismatchError):
            as_list(A=ts.asarray(a), c=ts.asarray(np.ones(2)))
