"""`Kernel.bind`: a call kept with its arguments. After its first run a bound call keeps the
kernel's slots filled and its `out=` array lent; these tests check that it never gives a stale
answer or skips a check the keyword call makes: new contents of shared arrays, an `out=` array
changed in place (shape, dtype, flags), kernel faults, the kernel compiled again for other
formats, other threads; and that the kept path is the one taken (`_tessera.bound_calls()`)."""

import threading

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import tessera as ts

SPMV = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n"
HIST = "h .= 0\nfor i = _\n  h[I[i]] += 1\nend\n"
BACKENDS = ["jit", "c"]
FORMATS = ["csr", "dense", "dcsr", "coo", "copy"]


def csr(m, n, seed, density=0.4):
    return sp.random_array((m, n), density=density, random_state=seed, format="csr")


def as_format(a, fmt):
    if fmt == "dense":
        return ts.asarray(a.toarray())
    if fmt == "coo":
        return ts.asarray(a.tocoo())
    if fmt == "copy":
        return ts.asarray(a, copy=True)
    return ts.asarray(a) if fmt == "csr" else ts.asarray(a, format=fmt)


def bound_calls():
    return ts._tessera.bound_calls()


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(FORMATS), st.integers(1, 40), st.integers(1, 40), st.integers(0, 10**6),
       st.sampled_from(BACKENDS), st.booleans())
def test_bound_spmv_equals_scipy_on_every_format(fmt, m, n, seed, backend, into):
    a = csr(m, n, seed)
    x = np.random.default_rng(seed).standard_normal(n)
    A = as_format(a, fmt)
    k = ts.compile(SPMV, out="y", backend=backend, A=A, x=ts.asarray(x))
    y = np.full(m, np.nan)
    b = k.bind(A=A, x=x, out=y) if into else k.bind(A=A, x=x)
    before = bound_calls()
    for _ in range(3):
        got = b()
        if into:
            assert got is y
        else:
            got = got.to_numpy()
        np.testing.assert_allclose(got, a @ x, rtol=1e-12, atol=1e-12)
        # Bit-identical to the keyword call.
        want = k(A=A, x=ts.asarray(x)).to_numpy()
        np.testing.assert_array_equal(got, want)
    assert bound_calls() - before >= 2, "no bound call ran on kept slots"


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_contents_of_shared_arrays_are_seen(backend):
    """`x` shared zero-copy with NumPy, the matrix's values with SciPy: writes between calls
    reach the next call."""
    a = csr(20, 15, 1)
    x = np.random.default_rng(2).random(15)
    k = ts.compile(SPMV, out="y", backend=backend, A=ts.asarray(a), x=ts.asarray(x))
    y = np.empty(20)
    b = k.bind(A=a, x=x, out=y)
    for step in range(4):
        x[:] = np.random.default_rng(step).random(15)
        a.data[:] = np.random.default_rng(100 + step).random(a.nnz)
        np.testing.assert_allclose(b(), a @ x, rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_changed_in_place_is_checked_again(backend):
    a, x = csr(8, 6, 3), np.arange(6.0)
    A, X = ts.asarray(a), ts.asarray(x)
    k = ts.compile(SPMV, out="y", backend=backend, A=A, x=X)
    y = np.zeros(8)
    b = k.bind(A=A, x=X, out=y)
    np.testing.assert_allclose(b(), a @ x)
    before = bound_calls()
    np.testing.assert_allclose(b(), a @ x)
    assert bound_calls() == before + 1
    # A new shape set on the same memory: the keyword call's error.
    y.shape = (2, 4)
    with pytest.raises(ValueError, match="out=y: the output has shape"):
        b()
    y.shape = (8,)
    np.testing.assert_allclose(b(), a @ x)
    # Read-only, then writable again.
    y.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        b()
    y.flags.writeable = True
    y[:] = -1
    np.testing.assert_allclose(b(), a @ x)
    # Another dtype of the same size viewed in place.
    y.dtype = np.int64
    with pytest.raises(TypeError, match="out=y: the output is float64"):
        b()
    y.dtype = np.float64
    np.testing.assert_allclose(b(), a @ x)
    # NumPy refuses to resize the array while the bound call lends it.
    with pytest.raises(ValueError):
        y.resize(16, refcheck=False)
    np.testing.assert_allclose(b(), a @ x)


def test_out_sharing_an_input_is_refused():
    buf = np.arange(8.0)
    x = ts.asarray(buf[:4])
    k = ts.compile("y .= 0\nfor i = _\n  y[i] = x[i] * 2\nend\n", out="y", x=x)
    if np.shares_memory(np.asarray(x), buf):
        b = k.bind(x=x, out=buf[:4])
        with pytest.raises(ValueError, match="out=y"):
            b()
        with pytest.raises(ValueError, match="out=y"):
            b()


@pytest.mark.parametrize("backend", BACKENDS)
def test_faults_then_good_calls(backend):
    """A data-dependent index rewritten out of range between calls: the kernel's fault, then
    right answers again once it is fixed."""
    idx = np.array([0, 2, 2, 1], dtype=np.int64)
    k = ts.compile(HIST, out="h", shapes={"h": [3]}, backend=backend, I=ts.asarray(idx))
    h = np.zeros(3)
    b = k.bind(I=idx, out=h)
    np.testing.assert_array_equal(b(), [1, 1, 2])
    before = bound_calls()
    np.testing.assert_array_equal(b(), [1, 1, 2])
    assert bound_calls() == before + 1
    idx[3] = 7
    with pytest.raises(ts.KernelError, match="h"):
        b()
    idx[3] = 0
    np.testing.assert_array_equal(b(), [2, 0, 2])
    np.testing.assert_array_equal(b(), [2, 0, 2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_kernel_compiled_again_in_between(backend):
    """The kernel called with tensors of another format compiles again; the bound call's
    slots were filled for the old state and must not be used with the new one."""
    a, x = csr(12, 9, 4), np.random.default_rng(4).random(9)
    A, X = ts.asarray(a), ts.asarray(x)
    k = ts.compile(SPMV, out="y", backend=backend, A=A, x=X)
    y = np.zeros(12)
    b = k.bind(A=A, x=X, out=y)
    for fmt in ["dense", "csr", "dcsr", "coo", "csr"]:
        np.testing.assert_allclose(b(), a @ x, rtol=1e-12)
        np.testing.assert_allclose(b(), a @ x, rtol=1e-12)
        other = csr(5, 9, 7)
        np.testing.assert_allclose(k(A=as_format(other, fmt), x=X).to_numpy(), other @ x,
                                   rtol=1e-12)


def test_other_threads():
    a, x = csr(50, 40, 5), np.random.default_rng(5).random(40)
    k = ts.compile(SPMV, out="y", A=ts.asarray(a), x=ts.asarray(x))
    b = k.bind(A=a, x=x)
    want = a @ x
    errors = []

    def work():
        try:
            for _ in range(50):
                np.testing.assert_allclose(b().to_numpy(), want, rtol=1e-12)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    work()
    for t in threads:
        t.join()
    assert not errors, errors


def test_several_outputs_and_accessors():
    prog = "s .= 0\nt .= 0\nfor i = _\n  s[] += x[i]\n  t[] += x[i] * x[i]\nend\n"
    x = np.arange(5.0)
    k = ts.compile(prog, out=["s", "t"], x=ts.asarray(x))
    b = k.bind(x=x)
    s, t = b()
    assert s.to_numpy() == 10.0 and t.to_numpy() == 30.0
    x[0] = 10.0
    s, t = b()
    assert s.to_numpy() == 20.0 and t.to_numpy() == 130.0
    assert b.kernel is k and sorted(b.tensors) == ["x"] and b.out is None
    assert "BoundKernel" in repr(b)


def test_bad_bindings_fail_on_call_like_the_keyword_call():
    a = csr(4, 3, 6)
    k = ts.compile(SPMV, out="y", A=ts.asarray(a), x=ts.asarray(np.ones(3)))
    with pytest.raises(ts.DimensionMismatchError):
        k.bind(A=a, x=np.ones(4))()
    with pytest.raises(TypeError, match="out=y"):
        k.bind(A=a, x=np.ones(3), out=[0.0] * 4)()
    with pytest.raises(TypeError, match="out=y: the output is float64"):
        k.bind(A=a, x=np.ones(3), out=np.zeros(4, dtype=np.float32))()
