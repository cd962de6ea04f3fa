"""`out=`: outputs written in place into the caller's NumPy arrays (compiled kernels, `run`,
`einsum`, `matmul`), NumPy's conventions, and the errors for arrays that cannot be written."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

import tessera as ts
from tessera import _tessera
from threads import in_threads

SPMV = """
y .= 0
for i = _, j = _
  y[i] += A[i, j] * x[j]
end
"""

# Formats of A: SciPy's CSR (zero-copy, coord=i32), CSC and COO (converted), and Tessera
# formats made from them.
A_KINDS = ["csr", "csc", "coo", "dense", "dcsr", "Dense(SparseList(Element(0.0)))",
           "SparseList(SparseList(Element(0.0)))"]


def matrix(kind, shape=(30, 20), density=0.2, seed=0):
    m = sp.random_array(shape, density=density, random_state=seed, format="csr")
    if kind in ("csr", "csc", "coo"):
        return m, ts.asarray(m.asformat(kind))
    if kind == "dense":
        return m, ts.asarray(m.toarray())
    return m, ts.asarray(m, format=kind)


def garbage(shape, dtype=np.float64):
    """An output array full of values the kernel must overwrite."""
    a = np.empty(shape, dtype)
    a[...] = np.nan if np.dtype(dtype).kind == "f" else 77
    return a


@pytest.mark.parametrize("kind", A_KINDS)
@pytest.mark.parametrize("backend", ["c", "jit", "tiered"])
def test_kernel_out_writes_the_array_in_place(kind, backend):
    m, a = matrix(kind)
    x = np.random.default_rng(1).random(20)
    k = ts.compile(SPMV, out="y", backend=backend, A=a, x=x)
    y = garbage(30)
    before = _tessera.out_copies()
    for step in range(3):
        x = x + step
        got = k(A=a, x=x, out=y)
        assert got is y, "NumPy's convention: the out array is returned"
        np.testing.assert_allclose(y, m @ x, rtol=1e-12, atol=1e-12)
    assert _tessera.out_copies() == before, "written in place, never copied in"
    # The same as the call without out=.
    np.testing.assert_array_equal(k(A=a, x=x).to_numpy(), y)


@given(st.integers(1, 40), st.integers(1, 40), st.floats(0.0, 1.0), st.integers(0, 2**31),
       st.sampled_from(A_KINDS))
def test_kernel_out_matches_scipy(rows, cols, density, seed, kind):
    m, a = matrix(kind, (rows, cols), density, seed)
    x = np.random.default_rng(seed).standard_normal(cols)
    k = ts.compile(SPMV, out="y", A=a, x=x)
    y = garbage(rows)
    assert k(A=a, x=x, out=y) is y
    np.testing.assert_allclose(y, m @ x, rtol=1e-12, atol=1e-12)


def test_out_of_other_dtypes_and_ranks():
    hist = "for i = _\n  h[I[i]] += 1\nend\n"
    idx = np.array([0, 2, 2, 3, 2])
    k = ts.compile(hist, out={"h": "Dense(Element(0))"}, shapes={"h": [4]}, I=idx)
    h = garbage(4, np.int64)
    assert k(I=idx, out=h)["h"] is h, "a dict out= at compile time gives a dict"
    np.testing.assert_array_equal(h, np.bincount(idx, minlength=4))
    k32 = ts.compile("for i = _\n  z[i] = v[i] * 2\nend", out={"z": "Dense(Element(0.0, f32))"},
                     v=np.ones(3, np.float32))
    z = garbage(3, np.float32)
    assert k32(v=np.arange(3, dtype=np.float32), out=z)["z"] is z
    np.testing.assert_array_equal(z, np.array([0, 2, 4], np.float32))
    # A matrix output, and a 0-d one.
    m, a = matrix("csr", (6, 5))
    outer = "for i = _, j = _\n  C[i, j] = A[i, j] * 3\nend\n"
    c = garbage((6, 5))
    assert ts.compile(outer, out="C", A=a)(A=a, out=c) is c
    np.testing.assert_allclose(c, m.toarray() * 3)
    total = "s .= 0\nfor i = _, j = _\n  s[] += A[i, j]\nend\n"
    s = garbage(())
    assert ts.compile(total, out="s", A=a)(A=a, out=s) is s
    assert s[()] == pytest.approx(m.sum())


@pytest.mark.parametrize("backend", ["c", "jit"])
def test_bool_out_is_written_in_place(backend):
    """A bool output into a bool array; bytes other than 0 and 1 (a uint8 array viewed as
    bool) are read as true, as NumPy reads them, and never as invalid Rust bools."""
    prog = "for i = _\n  m[i] = v[i] > 0.5\nend\n"
    v = np.array([0.1, 0.9, 0.7, 0.2, 0.6])
    k = ts.compile(prog, out={"m": "Dense(Element(false))"}, backend=backend, v=v)
    m = np.array([7, 0, 200, 1, 0], np.uint8).view(bool)
    before = _tessera.out_copies()
    assert k(v=v, out=m)["m"] is m
    np.testing.assert_array_equal(m, v > 0.5)
    np.testing.assert_array_equal(k(v=1 - v, out=m)["m"], v < 0.5)
    assert _tessera.out_copies() == before, "written in place"
    # An or-reduction: the program's declaration fills the array first (`m .= false`), odd
    # bytes included.
    acc = "for i = _\n  m[i] |= v[i] > 0.5\nend\n"
    ka = ts.compile(acc, out={"m": "Dense(Element(false))"}, backend=backend, v=v)
    m = np.array([9, 0, 0, 0, 0], np.uint8).view(bool)
    ka(v=v, out=m)
    np.testing.assert_array_equal(m, v > 0.5)


def test_several_outputs_by_tuple_and_by_dict():
    prog = "s .= 0\nfor i = _\n  B[i] = A[i] * c\n  s[] += A[i]\nend\n"
    v = np.arange(5.0)
    k = ts.compile(prog, out=["B", "s"], A=v, c=2.0)
    b = garbage(5)
    got_b, got_s = k(A=v, c=2.0, out=(b, None))
    assert got_b is b and isinstance(got_s, ts.Tensor)
    np.testing.assert_array_equal(b, v * 2)
    assert float(got_s) == v.sum()
    s = garbage(())
    got_b, got_s = k(A=v, c=3.0, out=(None, s))
    assert got_s is s and s[()] == v.sum()
    np.testing.assert_array_equal(got_b.to_numpy(), v * 3)
    b2, s2 = garbage(5), garbage(())
    assert k(A=v, c=4.0, out={"s": s2, "B": b2}) == (b2, s2)
    np.testing.assert_array_equal(b2, v * 4)
    kd = ts.compile(prog, out={"B": None, "s": None}, A=v, c=2.0)
    res = kd(A=v, c=1.0, out={"B": b})
    assert res["B"] is b and isinstance(res["s"], ts.Tensor)


def test_run_takes_arrays_in_its_out_dict():
    m, a = matrix("csr")
    x = np.random.default_rng(2).random(20)
    y = garbage(30)
    res = ts.run(SPMV, out={"y": y}, A=a, x=x)
    assert res["y"] is y
    np.testing.assert_allclose(y, m @ x)


@pytest.mark.parametrize("kind", A_KINDS)
def test_einsum_and_matmul_out(kind):
    m, a = matrix(kind)
    x = np.random.default_rng(3).random(20)
    before = _tessera.out_copies()
    y = garbage(30)
    assert ts.einsum("y[i] += A[i, j] * x[j]", A=a, x=x, out=y) is y
    np.testing.assert_allclose(y, m @ x)
    y2 = garbage(30)
    assert ts.matmul(a, x, out=y2) is y2
    np.testing.assert_allclose(y2, m @ x)
    # Sparse times sparse is planned sparse; with out= it is computed into the dense array.
    c = garbage((30, 30))
    assert ts.matmul(a, a.T, out=c) is c
    np.testing.assert_allclose(c, (m @ m.T).toarray())
    # Vector times matrix, and the 0-d dot product.
    r = garbage(20)
    assert ts.matmul(np.arange(30.0), a, out=r) is r
    np.testing.assert_allclose(r, np.arange(30.0) @ m)
    d = garbage(())
    assert ts.matmul(x, x, out=d) is d
    assert d[()] == pytest.approx(x @ x)
    assert _tessera.out_copies() == before


def test_parallel_einsum_writes_in_place():
    """Above the work threshold the einsum's row loop runs on every core; the chunks write
    the lent array directly."""
    m = sp.random_array((20000, 20000), density=0.002, random_state=4, format="csr")
    a = ts.asarray(m)
    x = np.random.default_rng(4).random(20000)
    y = garbage(20000)
    before = _tessera.out_copies()
    for _ in range(3):
        assert ts.einsum("y[i] += A[i, j] * x[j]", A=a, x=x, out=y) is y
        np.testing.assert_allclose(y, m @ x)
    assert _tessera.out_copies() == before


def test_out_in_threads():
    m, a = matrix("csr")
    k = ts.compile(SPMV, out="y", A=a, x=np.ones(20))

    def step():
        x = np.random.default_rng().random(20)
        y = garbage(30)
        k(A=a, x=x, out=y)
        np.testing.assert_allclose(y, m @ x)
        return True

    assert all(in_threads(step))


# --- errors: never a silently wrong result ------------------------------------------------
@pytest.fixture
def spmv():
    m, a = matrix("csr")
    x = np.random.default_rng(5).random(20)
    return ts.compile(SPMV, out="y", A=a, x=x), a, x


def bad_arrays():
    ro = np.zeros(30)
    ro.flags.writeable = False
    return [
        (np.zeros(29), ValueError, "shape (30,), the array (29,)"),
        (np.zeros((30, 1)), ValueError, "shape"),
        (np.zeros(30, np.float32), TypeError, "float64, the array float32"),
        (np.zeros(30, np.int64), TypeError, "float64, the array int64"),
        (np.zeros(30, bool), TypeError, "float64, the array bool"),
        (np.zeros(30, np.complex128), TypeError, "unsupported dtype"),
        (np.zeros(30, ">f8"), TypeError, "byte order"),
        (np.zeros(60)[::2], ValueError, "not C-contiguous"),
        (ro, ValueError, "read-only"),
        ([0.0] * 30, TypeError, "NumPy array"),
        (ts.asarray(np.zeros(30)), TypeError, "immutable"),
    ]


@pytest.mark.parametrize("bad,exc,message", bad_arrays())
def test_bad_out_arrays_raise_naming_the_argument(spmv, bad, exc, message):
    k, a, x = spmv
    with pytest.raises(exc, match="out=y") as e:
        k(A=a, x=x, out=bad)
    assert message in str(e.value)
    if isinstance(bad, np.ndarray) and bad.flags.writeable and bad.dtype != bool:
        assert not np.isnan(bad).any() and not bad.any(), "left untouched"


def test_fortran_order_is_refused():
    m, a = matrix("csr", (6, 5))
    outer = "for i = _, j = _\n  C[i, j] = A[i, j] * 3\nend\n"
    k = ts.compile(outer, out="C", A=a)
    with pytest.raises(ValueError, match="out=C: the array is not C-contiguous"):
        k(A=a, out=np.zeros((6, 5), order="F"))
    with pytest.raises(ValueError, match="out=: the array is not C-contiguous"):
        ts.matmul(a, np.ones((5, 6)), out=np.zeros((6, 6), order="F"))


def test_out_sharing_memory_with_an_input_is_refused(spmv):
    k, a, x = spmv
    scratch = np.zeros(50)
    xs = scratch[:20]
    with pytest.raises(ValueError, match="out=y: the array shares memory with input `x`"):
        k(A=a, x=xs, out=scratch[10:40])
    # The matrix's own arrays (shared zero-copy from SciPy) count too.
    m = sp.random_array((30, 30), density=0.9, random_state=0, format="csr")
    with pytest.raises(ValueError, match="shares memory with input `A`"):
        ts.einsum("y[i] += A[i, j] * x[j]", A=m, x=np.ones(30), out=m.data[:30])
    with pytest.raises(ValueError, match="out=: the array shares memory with input `v`"):
        ts.einsum("y[i] += v[i]", v=scratch[:30], out=scratch[20:50])
    assert not scratch.any(), "nothing written"
    # Two outputs in one array.
    prog = "for i = _\n  B[i] = A[i]\n  C[i] = A[i]\nend\n"
    k2 = ts.compile(prog, out=["B", "C"], A=np.ones(4))
    both = np.zeros(8)
    with pytest.raises(ValueError, match="shares memory with out="):
        k2(A=np.ones(4), out=(both[:4], both[2:6]))
    k2(A=np.ones(4), out=(both[:4], both[4:]))
    np.testing.assert_array_equal(both, np.ones(8))


def test_out_naming_errors(spmv):
    k, a, x = spmv
    with pytest.raises(ValueError, match="out=z: `z` is not an output"):
        k(A=a, x=x, out={"z": np.zeros(30)})
    with pytest.raises(ValueError, match="2 arrays for 1 outputs"):
        k(A=a, x=x, out=(np.zeros(30), np.zeros(30)))
    prog = "for i = _\n  B[i] = A[i]\n  C[i] = A[i]\nend\n"
    k2 = ts.compile(prog, out=["B", "C"], A=np.ones(4))
    with pytest.raises(TypeError, match="pass a tuple or a dict"):
        k2(A=np.ones(4), out=np.zeros(4))
    # An output also given as an input starts from its contents: not with out= too.
    acc = "for i = _\n  y[i] += x[i]\nend\n"
    k3 = ts.compile(acc, out="y", x=np.ones(3), y=np.ones(3))
    with pytest.raises(ValueError, match="out=y: `y` is also given as an input"):
        k3(x=np.ones(3), y=np.ones(3), out=np.zeros(3))


def test_sparse_outputs_are_refused_by_kernels():
    m, a = matrix("csr", (6, 5))
    scale = "for i = _, j = _\n  C[i, j] = A[i, j] * 3\nend\n"
    k = ts.compile(scale, out={"C": "csr"}, A=a)
    with pytest.raises(ValueError, match="out=C: the output is stored as .*SparseList.*dense"):
        k(A=a, out=np.zeros((6, 5)))


def test_einsum_out_dtype_is_not_cast():
    m, a = matrix("csr")
    with pytest.raises(TypeError, match="out=: the output is float64, the array float32"):
        ts.einsum("y[i] += A[i, j] * x[j]", A=a, x=np.ones(20), out=np.zeros(30, np.float32))
    with pytest.raises(ValueError, match=r"out=: the output has shape \(30,\), the array \(20,\)"):
        ts.matmul(a, np.ones(20), out=np.zeros(20))


def test_einsum_takes_format_or_out():
    m, a = matrix("csr")
    y = garbage(30)
    with pytest.raises(ValueError, match="format= or out=, not both"):
        ts.einsum("y[i] += A[i, j] * x[j]", format="dense", out=y, A=a, x=np.ones(20))
    assert np.isnan(y).all()
