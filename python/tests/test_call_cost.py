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


# --- issue 19, helper `pycall`: what a call site keeps -------------------------------------
# `run` keeps a Kernel per thread by (program text, outputs, backend); `Kernel(out=array)`
# and `run` cross into Rust once; an einsum/matmul compares its last plan and its last output
# shape in place. None of it may outlive a change of formats, shapes, dtypes or scalars.

import threading  # noqa: E402

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tessera import _compute  # noqa: E402
from test_out import bad_arrays  # noqa: E402
from threads import in_threads  # noqa: E402

A_FORMATS = ["csr", "dense", "dcsr", "coo"]


def a_as(a, fmt):
    if fmt == "dense":
        return ts.asarray(a.toarray())
    if fmt == "coo":
        return ts.asarray(a.tocoo())
    return ts.asarray(a) if fmt == "csr" else ts.asarray(a, format=fmt)


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_shares_a_kernel_between_equal_texts_only(backend):
    kernels = _compute._run_kernels()
    kernels.clear()
    a, x = csr(6, 5, 1), np.arange(5.0)
    text = "".join(list(SPMV))  # equal in value, another object
    assert text == SPMV and text is not SPMV
    y = ts.run(SPMV, out="y", backend=backend, A=ts.asarray(a), x=ts.asarray(x))
    np.testing.assert_allclose(y.to_numpy(), a @ x)
    kernel = kernels[(SPMV, "y", backend)]
    y = ts.run(text, out="y", backend=backend, A=ts.asarray(a), x=ts.asarray(x))
    np.testing.assert_allclose(y.to_numpy(), a @ x)
    assert len(kernels) == 1 and kernels[(text, "y", backend)] is kernel
    # Another text (its value differs by one character): its own kernel, its own result.
    doubled = SPMV.replace("* x[j]", "* x[j] * 2")
    y = ts.run(doubled, out="y", backend=backend, A=ts.asarray(a), x=ts.asarray(x))
    np.testing.assert_allclose(y.to_numpy(), 2 * (a @ x))
    assert len(kernels) == 2
    y = ts.run(SPMV, out="y", backend=backend, A=ts.asarray(a), x=ts.asarray(x))
    np.testing.assert_allclose(y.to_numpy(), a @ x)
    # A list of outputs is another key; a syntax error is raised on every call, kept nowhere.
    s, = ts.run(SPMV.replace("y", "s"), out=["s"], backend=backend, A=ts.asarray(a), x=ts.asarray(x))
    np.testing.assert_allclose(s.to_numpy(), a @ x)
    assert len(kernels) == 3
    for _ in range(2):
        with pytest.raises(ts.ParseError):
            ts.run(SPMV.replace("+=", "+=="), out="y", backend=backend, A=ts.asarray(a), x=ts.asarray(x))
    assert len(kernels) == 3


@given(st.lists(st.tuples(st.sampled_from(A_FORMATS), st.integers(1, 7), st.integers(1, 7),
                          st.sampled_from([np.float64, np.float32, np.int64]),
                          st.integers(0, 1000)),
                min_size=1, max_size=6),
       st.sampled_from(BACKENDS))
def test_run_on_one_text_follows_every_format_shape_and_dtype(calls, backend):
    """One program text (so one kept kernel) run on a sequence of matrices of random
    formats, shapes and vector dtypes: every result is SciPy's, every bad shape an error."""
    for fmt, m, n, dtype, seed in calls:
        a = csr(m, n, seed, density=0.5)
        x = np.random.default_rng(seed).integers(-3, 4, n).astype(dtype)
        y = ts.run(SPMV, out="y", backend=backend, A=a_as(a, fmt), x=ts.asarray(x))
        np.testing.assert_allclose(y.to_numpy(), a @ x.astype(np.float64), rtol=1e-6)
        with pytest.raises(ts.DimensionMismatchError):
            ts.run(SPMV, out="y", backend=backend, A=a_as(a, fmt), x=ts.asarray(np.ones(n + 1, dtype)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_follows_integer_scalars(backend):
    w = np.arange(1.0, 9.0)
    for m in (4, 4, 2, 6, 4):
        got = ts.run(SUM_M, out="s", backend=backend, w=ts.asarray(w[:m]), m=ts.asarray(np.int64(m)))
        assert float(got) == w[:m].sum()
        with pytest.raises(ts.DimensionMismatchError):
            ts.run(SUM_M, out="s", backend=backend, w=ts.asarray(w[:m]), m=ts.asarray(np.int64(m + 1)))
    # A Python int as the scalar (converted, so the general path) gives the same.
    assert float(ts.run(SUM_M, out="s", backend=backend, w=w[:3], m=3)) == w[:3].sum()


def test_run_keeps_kernels_per_thread():
    a, x = csr(9, 7, 4), np.arange(7.0)

    def work():
        k = threading.get_ident() % 1000
        for seed in range(5):
            b = csr(9, 7, seed + k)
            y = ts.run(SPMV, out="y", backend="jit", A=ts.asarray(b), x=ts.asarray(x))
            np.testing.assert_allclose(y.to_numpy(), b @ x)
        return (SPMV, "y", "jit") in _compute._run_kernels()

    assert all(in_threads(work, 3, 4))
    np.testing.assert_allclose(ts.run(SPMV, out="y", backend="jit", A=a, x=x).to_numpy(), a @ x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_kernel_out_on_tensors_follows_shapes_formats_and_dtypes(backend):
    """`Kernel(out=array)` on Tensors (one crossing): right after any change of the
    matrix's format or shape, the array's shape, or the vector's dtype."""
    a0 = csr(5, 4, 0)
    k = ts.compile(SPMV, out="y", backend=backend, A=ts.asarray(a0), x=ts.asarray(np.ones(4)))
    for seed, (fmt, m, n, dtype) in enumerate([("csr", 5, 4, np.float64), ("csr", 5, 4, np.float64),
                                               ("dense", 5, 4, np.float64), ("csr", 8, 3, np.float32),
                                               ("dcsr", 1, 1, np.float64), ("csr", 5, 4, np.float64)]):
        a = csr(m, n, seed)
        x = np.arange(1.0, n + 1).astype(dtype)
        y = np.full(m, np.nan)
        assert k(A=a_as(a, fmt), x=ts.asarray(x), out=y) is y
        np.testing.assert_allclose(y, a @ x.astype(np.float64), rtol=1e-6)
        # The array of the last call's shape, when the matrix changed: refused, untouched.
        with pytest.raises(ValueError, match="out=y: the output has shape"):
            k(A=a_as(csr(m + 1, n, seed), fmt), x=ts.asarray(x), out=y)
        with pytest.raises(ts.DimensionMismatchError):
            k(A=a_as(a, fmt), x=ts.asarray(np.ones(n + 1)), out=y)
        np.testing.assert_allclose(y, a @ x.astype(np.float64), rtol=1e-6)


@pytest.mark.parametrize("bad,exc,message", bad_arrays())
def test_bad_out_arrays_on_tensors_after_good_calls(bad, exc, message):
    m, x = csr(30, 20, 0, density=0.2), np.random.default_rng(5).random(20)
    a, tx = ts.asarray(m), ts.asarray(x)
    k = ts.compile(SPMV, out="y", A=a, x=tx)
    y = np.zeros(30)
    for _ in range(2):
        k(A=a, x=tx, out=y)
    with pytest.raises(exc, match="out=y") as e:
        k(A=a, x=tx, out=bad)
    assert message in str(e.value)
    np.testing.assert_allclose(k(A=a, x=tx, out=y), m @ x)


def test_out_on_tensors_sharing_memory_or_also_an_input():
    acc = "for i = _\n  y[i] += x[i]\nend\n"
    k = ts.compile(acc, out="y", x=ts.asarray(np.ones(3)), y=ts.asarray(np.ones(3)))
    with pytest.raises(ValueError, match="out=y: `y` is also given as an input"):
        k(x=ts.asarray(np.ones(3)), y=ts.asarray(np.ones(3)), out=np.zeros(3))
    # An input's own memory (a Tensor sharing a NumPy array) as the output.
    scale = "y .= 0\nfor i = _\n  y[i] = x[i] * 2\nend\n"
    k = ts.compile(scale, out="y", x=ts.asarray(np.ones(4)))
    buf = np.arange(8.0)
    x = ts.asarray(buf[:4])
    np.testing.assert_array_equal(k(x=x, out=np.zeros(4)), 2 * buf[:4])
    if np.shares_memory(np.asarray(x), buf):
        with pytest.raises(ValueError, match="shares memory with input `x`"):
            k(x=x, out=buf[2:6])
    np.testing.assert_array_equal(buf, np.arange(8.0))


@given(st.lists(st.tuples(st.sampled_from(A_FORMATS), st.integers(1, 6), st.integers(1, 6),
                          st.sampled_from(["mv", "mm"]), st.integers(0, 1000)),
                min_size=1, max_size=6))
def test_matmul_out_follows_formats_and_shapes(calls):
    """`matmul(A, B, out=C)` and one einsum alternating (the last plan and output shape
    kept): every result is SciPy's; a shape the last call's would have fitted is refused."""
    for fmt, m, n, kind, seed in calls:
        a = csr(m, n, seed, density=0.5)
        b = np.random.default_rng(seed).standard_normal(n if kind == "mv" else (n, 3))
        c = np.full((a @ b).shape, np.nan)
        assert ts.matmul(a_as(a, fmt), ts.asarray(b), out=c) is c
        np.testing.assert_allclose(c, a @ b, atol=1e-12)
        with pytest.raises(ValueError, match="out=: the output has shape"):
            ts.matmul(a_as(a, fmt), ts.asarray(b), out=np.zeros((m + 1,) + c.shape[1:]))
        with pytest.raises(ts.DimensionMismatchError):
            ts.matmul(a_as(a, fmt), ts.asarray(np.ones((n + 1,) + b.shape[1:])), out=c)
        y = np.zeros(m)
        ts.einsum("y[i] += A[i, j]", A=a_as(a, fmt), out=y)
        np.testing.assert_allclose(y, np.asarray(a.sum(axis=1)).ravel(), atol=1e-12)


def test_einsum_out_by_position_follows_operands_swapped_and_faults():
    """`matmul`/`einsum(..., out=C)` run the plan's kernel with its tensors by position
    (kept slots, refilled per call): operands swapped between the names, keywords in
    another order and a matrix of other values must give their own products; a bad
    shape or an operand the plan does not know is an error, and the next call is right."""
    rng = np.random.default_rng(19)
    a = csr(5, 5, 3, density=0.6)
    b = sp.csr_array(rng.standard_normal((5, 5)))
    ta, tb = ts.asarray(a), ts.asarray(b)
    c = np.full((5, 5), np.nan)
    before = site_calls()
    for _ in range(2):
        assert ts.matmul(ta, tb, out=c) is c
        np.testing.assert_allclose(c, (a @ b).toarray(), atol=1e-12)
        ts.matmul(tb, ta, out=c)
        np.testing.assert_allclose(c, (b @ a).toarray(), atol=1e-12)
        spec = "C[i, j] += A[i, k] * B[k, j]"
        ts.einsum(spec, B=ta, A=tb, out=c)
        np.testing.assert_allclose(c, (b @ a).toarray(), atol=1e-12)
        ts.einsum(spec, A=ta, B=tb, out=c)
        np.testing.assert_allclose(c, (a @ b).toarray(), atol=1e-12)
        x = rng.standard_normal(5)
        y = np.full(5, np.nan)
        ts.einsum("y[i] += A[i, j] * x[j]", x=ts.asarray(x), A=ta, out=y)
        np.testing.assert_allclose(y, a @ x, atol=1e-12)
        with pytest.raises(ts.DimensionMismatchError):
            ts.einsum("y[i] += A[i, j] * x[j]", x=ts.asarray(np.ones(6)), A=ta, out=y)
        np.testing.assert_allclose(y, a @ x, atol=1e-12)
        with pytest.raises(Exception, match="z"):
            ts.einsum("y[i] += A[i, j] * z[j]", x=ts.asarray(x), A=ta, out=y)
    assert site_calls() - before >= 10, "no einsum ran by position"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_call_site_keeps_no_input_alive_and_no_stale_tensor(backend):
    """A kernel keeps its last call's tensor map (names, shapes, formats) to refill it in
    place, never the arrays: an input shared from NumPy is freed once the caller drops it.
    Keywords in another order, another set of names, a missing or extra tensor: right
    results or the same errors."""
    import gc
    import weakref

    a = csr(6, 5, 2)
    k = ts.compile(SPMV, out="y", backend=backend, A=ts.asarray(a), x=ts.asarray(np.ones(5)))
    x = np.arange(5.0)
    alive = weakref.ref(x)
    tx = ts.asarray(x)
    assert np.shares_memory(np.asarray(tx), x), "asarray shares a float64 vector"
    y = np.zeros(6)
    for _ in range(3):
        np.testing.assert_allclose(k(A=ts.asarray(a), x=tx, out=y), a @ x)
        np.testing.assert_allclose(k(A=ts.asarray(a), x=tx).to_numpy(), a @ x)
    del tx, x
    gc.collect()
    assert alive() is None, "the kernel kept the last input alive"
    # Keywords in the other order, then a dict whose keys are other str objects.
    x = np.arange(5.0) + 1
    np.testing.assert_allclose(k(x=ts.asarray(x), A=ts.asarray(a), out=y), a @ x)
    kw = {"".join(["A"]): ts.asarray(a), "".join(["x"]): ts.asarray(2 * x)}
    np.testing.assert_allclose(k(**kw, out=y), a @ (2 * x))
    np.testing.assert_allclose(k(**kw).to_numpy(), a @ (2 * x))
    # A missing tensor (an error), an extra one the program does not read (ignored), then
    # the call site as before.
    with pytest.raises(Exception, match="x"):
        k(A=ts.asarray(a), out=y)
    np.testing.assert_allclose(k(A=ts.asarray(a), x=ts.asarray(x), z=ts.asarray(x), out=y), a @ x)
    np.testing.assert_allclose(k(A=ts.asarray(a), x=ts.asarray(x), out=y), a @ x)
    # A matrix of another format and shape at the same call site, then the first again.
    b = csr(3, 5, 7)
    np.testing.assert_allclose(k(A=ts.asarray(b.toarray()), x=ts.asarray(x)).to_numpy(), b @ x)
    np.testing.assert_allclose(k(A=ts.asarray(a), x=ts.asarray(x), out=y), a @ x)


# `Kernel(..., out=array)` called again like the last call (the same keyword objects, the
# tensors' formats and shapes) runs the kernel with its tensors by position (a call site
# kept per thread, `Runner::execute_at`); `_tessera.site_calls()` counts those runs, so each
# test below checks that it exercised that path, not only the map path around it.
ASYM = "y .= 0\nfor i = _\n  y[i] = a[i] - 2 * b[i]\nend\n"


def site_calls():
    return ts._tessera.site_calls()


@pytest.mark.parametrize("backend", BACKENDS)
def test_site_follows_tensors_swapped_between_keywords(backend):
    """The kernel's tensors are found by position once per call site: tensors swapped
    between the keywords, or the keywords in another order, must give their own results."""
    u, v = np.arange(1.0, 6.0), np.arange(10.0, 15.0)
    tu, tv = ts.asarray(u), ts.asarray(v)
    k = ts.compile(ASYM, out="y", backend=backend, a=tu, b=tv)
    y = np.empty(5)
    before = site_calls()
    for _ in range(3):
        np.testing.assert_array_equal(k(a=tu, b=tv, out=y), u - 2 * v)
        np.testing.assert_array_equal(k(a=tv, b=tu, out=y), v - 2 * u)
        np.testing.assert_array_equal(k(b=tu, a=tv, out=y), v - 2 * u)
        np.testing.assert_array_equal(k(b=tv, a=tu, out=y), u - 2 * v)
        # The same without `out=`: a new output per call, by position too.
        np.testing.assert_array_equal(k(a=tu, b=tv).to_numpy(), u - 2 * v)
        np.testing.assert_array_equal(k(a=tv, b=tu).to_numpy(), v - 2 * u)
        np.testing.assert_array_equal(k(b=tu, a=tv).to_numpy(), v - 2 * u)
    # Each second call in a row with the same keyword order runs by position (three per
    # round); a call in the other order takes the map path and makes the site again.
    assert site_calls() - before >= 9, "no call ran by position"


@given(st.lists(st.tuples(st.sampled_from(A_FORMATS), st.integers(1, 6), st.integers(1, 6),
                          st.sampled_from([np.float64, np.float32]),
                          st.sampled_from(["good", "short", "long", "f32", "x+1"]),
                          st.integers(0, 1000)),
                min_size=1, max_size=8),
       st.sampled_from(BACKENDS))
def test_site_after_changes_of_format_shape_dtype_and_out(calls, backend):
    """One kernel, one call site, called twice per step (so the second runs by position):
    after each change of the matrix's format or shape, the vector's dtype, or a bad `out=`
    array or vector, the result is SciPy's or the map path's error, and a refused call
    leaves the array as it was."""
    k = ts.compile(SPMV, out="y", backend=backend, A=ts.asarray(csr(3, 3, 0)),
                   x=ts.asarray(np.ones(3)))
    before = site_calls()
    goods = 0
    for fmt, m, n, dtype, how, seed in calls:
        a = csr(m, n, seed, density=0.5)
        x = np.random.default_rng(seed).integers(-3, 4, n).astype(dtype)
        A, X = a_as(a, fmt), ts.asarray(x)
        want = a @ x.astype(np.float64)
        y = np.full(m, np.nan)
        for _ in range(2):
            assert k(A=A, x=X, out=y) is y
            np.testing.assert_allclose(y, want, rtol=1e-6)
            np.testing.assert_allclose(k(A=A, x=X).to_numpy(), want, rtol=1e-6)
            goods += 2
        bad, exc, msg = {
            "good": (None, None, None),
            "short": (np.zeros(m - 1), ValueError, "out=y: the output has shape"),
            "long": (np.zeros(m + 1), ValueError, "out=y: the output has shape"),
            "f32": (np.zeros(m, np.float32), TypeError, "out=y: the output is float64"),
            "x+1": (y, ts.DimensionMismatchError, ""),
        }[how]
        if how == "x+1":
            with pytest.raises(exc):
                k(A=A, x=ts.asarray(np.ones(n + 1, dtype)), out=y)
        elif bad is not None:
            kept = bad.copy()
            with pytest.raises(exc, match=msg):
                k(A=A, x=X, out=bad)
            np.testing.assert_array_equal(bad, kept)
        np.testing.assert_allclose(y, want, rtol=1e-6)
        np.testing.assert_allclose(k(A=A, x=X, out=y), want, rtol=1e-6)
    assert site_calls() - before >= goods // 2, "the second call of a step ran by position"


def test_site_refuses_what_the_map_path_refuses():
    """Every bad array of `test_out.py`, given at a call site's second call, and an array
    sharing an input's memory: the same errors as the map path, nothing written."""
    m, x = csr(30, 20, 0, density=0.2), np.random.default_rng(5).random(20)
    a, tx = ts.asarray(m), ts.asarray(x)
    k = ts.compile(SPMV, out="y", A=a, x=tx)
    y = np.zeros(30)
    for bad, exc, message in bad_arrays():
        k(A=a, x=tx, out=y)
        before = site_calls()
        with pytest.raises(exc, match="out=y") as e:
            k(A=a, x=tx, out=bad)
        assert message in str(e.value)
        np.testing.assert_allclose(k(A=a, x=tx, out=y), m @ x)
        assert site_calls() > before
    scale = "y .= 0\nfor i = _\n  y[i] = x[i] * 2\nend\n"
    buf = np.arange(8.0)
    xs = ts.asarray(buf[:4])
    k = ts.compile(scale, out="y", x=xs)
    if np.shares_memory(np.asarray(xs), buf):
        for _ in range(2):
            np.testing.assert_array_equal(k(x=xs, out=np.zeros(4)), 2 * buf[:4])
        with pytest.raises(ValueError, match="shares memory with input `x`"):
            k(x=xs, out=buf[2:6])
        np.testing.assert_array_equal(buf, np.arange(8.0))


def test_site_on_large_inputs_in_threads():
    """Above the size a call runs without releasing the GIL: several threads calling one
    kernel, each with its own call site and arrays, get their own results."""
    a = csr(300, 200, 3, density=0.2)
    k = ts.compile(SPMV, out="y", backend="jit", A=ts.asarray(a), x=ts.asarray(np.ones(200)))
    before = site_calls()

    def work():
        seed = threading.get_ident() % 1000
        b = csr(300, 200, seed, density=0.2)
        A = ts.asarray(b)
        y = np.empty(300)
        for r in range(6):
            x = np.random.default_rng(seed + r).random(200)
            np.testing.assert_allclose(k(A=A, x=ts.asarray(x), out=y), b @ x)
        return True

    assert all(in_threads(work, 3, 2))
    assert site_calls() - before >= 3 * 5


def test_kernel_is_the_rust_type_and_keeps_its_python_api():
    a = csr(4, 3, 1)
    k = ts.compile(SPMV, out="y", A=ts.asarray(a), x=ts.asarray(np.ones(3)))
    assert isinstance(k, ts.Kernel) and isinstance(k, ts._tessera.RawKernel)
    assert k.outputs == ["y"] and "A[i, j]" in k.program and "Kernel" in repr(k)
    # The general path from the Rust `__call__`: NumPy and SciPy values, `out=` as a dict
    # and a tuple, a list of outputs.
    x = np.arange(3.0)
    np.testing.assert_allclose(k(A=a, x=x).to_numpy(), a @ x)
    y = np.zeros(4)
    assert k(A=a, x=x, out={"y": y}) is y
    np.testing.assert_allclose(y, a @ x)
    y[:] = 0
    assert k(A=a, x=x, out=(y,)) is y
    np.testing.assert_allclose(y, a @ x)
    k2 = ts.compile(SPMV, out=["y"], A=ts.asarray(a), x=ts.asarray(x))
    (got,) = k2(A=ts.asarray(a), x=ts.asarray(x))
    np.testing.assert_allclose(got.to_numpy(), a @ x)
    got = k2(A=ts.asarray(a), x=ts.asarray(x), out=y)
    assert isinstance(got, tuple) and got[0] is y
    with pytest.raises(TypeError):
        k(A=a, x=x, out=[0.0] * 4)


# Kernels with several outputs (a workspace declared as an output, as the image study's
# erosion has `mid` and `tmp`) run by position too: their outputs returned new, or written
# into `out=` arrays given as a dict or a tuple, some or all.
TWO_OUT = ("t .= 0\nfor i = _\n  t[i] = a[i] - 2 * b[i]\nend\n"
           "y .= 0\nfor i = _\n  y[i] = t[i] * t[i] + 1\nend\n")


@pytest.mark.parametrize("backend", BACKENDS)
def test_site_with_several_outputs_returned_or_written(backend):
    u, v = np.arange(1.0, 6.0), np.arange(10.0, 15.0)
    tu, tv = ts.asarray(u), ts.asarray(v)
    t_want, y_want = u - 2 * v, (u - 2 * v) ** 2 + 1
    k = ts.compile(TWO_OUT, out={"t": None, "y": None}, backend=backend, a=tu, b=tv)
    before = site_calls()
    t, y = np.full(5, np.nan), np.full(5, np.nan)
    for _ in range(3):
        got = k(a=tu, b=tv)
        assert sorted(got) == ["t", "y"]
        np.testing.assert_array_equal(got["t"].to_numpy(), t_want)
        np.testing.assert_array_equal(got["y"].to_numpy(), y_want)
        # Swapped tensors at the same site: their own result.
        got = k(a=tv, b=tu)
        np.testing.assert_array_equal(got["y"].to_numpy(), (v - 2 * u) ** 2 + 1)
    for _ in range(3):
        got = k(a=tu, b=tv, out={"t": t, "y": y})
        assert got["t"] is t and got["y"] is y
        np.testing.assert_array_equal(y, y_want)
        np.testing.assert_array_equal(t, t_want)
    for _ in range(3):
        # One array, the other output new.
        y[:] = np.nan
        got = k(a=tu, b=tv, out={"y": y})
        assert got["y"] is y
        np.testing.assert_array_equal(y, y_want)
        np.testing.assert_array_equal(got["t"].to_numpy(), t_want)
    assert site_calls() - before >= 9, "no call ran by position"
    # A tuple in the kernel's order (`k.outputs`), a list kernel returning a tuple.
    kt = ts.compile(TWO_OUT, out=["y", "t"], backend=backend, a=tu, b=tv)
    for _ in range(3):
        y[:] = np.nan
        got = kt(a=tu, b=tv, out=(y, None))
        assert isinstance(got, tuple) and got[0] is y
        np.testing.assert_array_equal(y, y_want)
        np.testing.assert_array_equal(got[1].to_numpy(), t_want)
        yy, tt = kt(a=tu, b=tv)
        np.testing.assert_array_equal(yy.to_numpy(), y_want)


def test_site_with_several_outputs_refuses_what_the_map_path_refuses():
    """Bad arrays at a several-output site's second call: the map path's errors, nothing
    written; an array given for two outputs, or for an input, is refused."""
    u = np.arange(30.0)
    tu, tv = ts.asarray(u), ts.asarray(u + 1)
    k = ts.compile(TWO_OUT, out={"t": None, "y": None}, a=tu, b=tv)
    t, y = np.zeros(30), np.zeros(30)
    for bad, exc, message in bad_arrays():
        if not isinstance(bad, np.ndarray) or type(bad) is not np.ndarray:
            continue
        k(a=tu, b=tv, out={"t": t, "y": y})
        kept = bad.copy()
        with pytest.raises(exc, match="out=y") as e:
            k(a=tu, b=tv, out={"t": t, "y": bad})
        assert message in str(e.value)
        if bad.flags.writeable:
            np.testing.assert_array_equal(bad, kept)
    k(a=tu, b=tv, out={"t": t, "y": y})
    with pytest.raises(ValueError, match="out="):
        k(a=tu, b=tv, out={"t": y, "y": y})
    with pytest.raises(ValueError, match="out=q"):
        k(a=tu, b=tv, out={"q": y})
    shared = np.arange(30.0)
    with pytest.raises(ValueError, match="out=y"):
        k(a=ts.asarray(shared), b=tv, out={"t": t, "y": shared})


@pytest.mark.parametrize("backend", BACKENDS)
def test_bool_out_arrays_of_any_bytes(backend):
    """A bool `out=` array viewed from bytes other than 0 and 1 (NumPy allows it): written
    as the kernel says, read back as the right bools, at a site and through the map."""
    prog = "y .= false\nfor i = _\n  y[i] = a[i] > 2\nend\nz .= false\nfor i = _\n  z[i] = !y[i]\nend\n"
    a = np.arange(6.0)
    k = ts.compile(prog, out={"y": "Dense(Element(false))", "z": "Dense(Element(false))"},
                   backend=backend, a=ts.asarray(a))
    raw_y, raw_z = np.full(6, 7, np.uint8), np.full(6, 255, np.uint8)
    y, z = raw_y.view(bool), raw_z.view(bool)
    for _ in range(3):
        k(a=ts.asarray(a), out={"y": y, "z": z})
        np.testing.assert_array_equal(y, a > 2)
        np.testing.assert_array_equal(z, ~(a > 2))
        assert set(raw_y.tolist()) <= {0, 1} and set(raw_z.tolist()) <= {0, 1}
        raw_y[:] = 9
