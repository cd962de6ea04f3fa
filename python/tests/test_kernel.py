"""`tessera.compile`: a program compiled once for some formats, called on new data."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import tessera as ts
from threads import in_threads

SPMV = """
y .= 0
for i = _, j = _
  y[i] += A[i, j] * x[j]
end
"""


def test_compiled_kernel_runs_new_data_of_the_same_formats():
    a = sp.random_array((7, 5), density=0.5, random_state=1, format="csr")
    k = ts.compile(SPMV, out="y", A=a, x=np.ones(5))
    assert isinstance(k, ts.Kernel) and k.outputs == ["y"] and "A[i, j]" in k.program
    for seed in range(4):
        b = sp.random_array((7, 5), density=0.3 + 0.1 * seed, random_state=seed, format="csr")
        x = np.arange(5.0) + seed
        np.testing.assert_allclose(k(A=b, x=x).to_numpy(), b @ x)


@settings(max_examples=25)
@given(m=st.integers(1, 9), n=st.integers(1, 9), seed=st.integers(0, 10**6))
def test_shapes_may_change_between_calls(m, n, seed):
    """Output shapes are inferred again when the inputs' shapes change."""
    k = ts.compile(SPMV, out="y", A=sp.random_array((3, 4), density=0.5, random_state=0, format="csr"), x=np.ones(4))
    b = sp.random_array((m, n), density=0.4, random_state=seed, format="csr")
    x = np.random.default_rng(seed).standard_normal(n)
    y = k(A=b, x=x)
    assert y.shape == (m,)
    np.testing.assert_allclose(y.to_numpy(), b @ x)
    with pytest.raises(ts.DimensionMismatchError):
        k(A=b, x=np.ones(n + 1))


def test_other_formats_compile_again_and_give_the_same_results():
    a = sp.random_array((6, 6), density=0.4, random_state=2, format="csr")
    x = np.arange(6.0)
    k = ts.compile(SPMV, out="y", backend="jit", A=a, x=x)
    for fmt in ("dense", "dcsr", "csr", ts.formats.csr("float64", index="int32")):
        np.testing.assert_allclose(k(A=ts.asarray(a, format=fmt), x=x).to_numpy(), a @ x)


def test_several_outputs_come_in_the_order_given():
    a = sp.random_array((5, 4), density=0.6, random_state=3, format="csr")
    prog = "for i = _, j = _\n  s[] += A[i, j]\n  B[i, j] = A[i, j] * c[]\nend"
    k = ts.compile(prog, out=["s", "B"], A=a, c=2.0)
    s, b = k(A=a, c=3.0)
    assert float(s) == pytest.approx(a.sum())
    np.testing.assert_allclose(b.to_numpy(), 3 * a.toarray())
    b2, s2 = ts.compile(prog, out=["B", "s"], A=a, c=2.0)(A=a, c=2.0)
    assert float(s2) == pytest.approx(a.sum()) and b2.shape == (5, 4)
    only_b = prog.replace("s[] += A[i, j]\n  ", "")
    d = ts.compile(only_b, out={"B": "csr"}, A=a, c=1.0)(A=a, c=1.0)
    assert d["B"].format == "Dense(SparseList(Element(0.0)))"


def test_integer_scalars_that_size_loops_are_followed():
    prog = "for i = 0:m - 1\n  v[i] = i * 2\nend"
    k = ts.compile(prog, out="v", m=np.int64(3))
    np.testing.assert_array_equal(k(m=np.int64(3)).to_numpy(), [0, 2, 4])
    np.testing.assert_array_equal(k(m=np.int64(5)).to_numpy(), [0, 2, 4, 6, 8])


def test_errors_name_the_place_and_leave_inputs_intact():
    with pytest.raises(ts.ParseError):
        ts.compile("for i = _\n  y[i] += \nend", out="y", x=np.ones(3))
    with pytest.raises(ts.ProgramError, match="unknown tensor `x`"):
        ts.compile("for i = _\n  y[i] += x[i]\nend", out="y")
    k = ts.compile("for i = _\n  h[I[i]] += 1\nend", out="h", shapes={"h": [3]}, I=np.array([0, 1]))
    idx = ts.asarray(np.array([0, 9, 1]))
    with pytest.raises(ts.KernelError):
        k(I=idx)
    np.testing.assert_array_equal(idx.to_numpy(), [0, 9, 1])
    np.testing.assert_array_equal(k(I=np.array([2, 2, 0])).to_numpy(), [1, 0, 2])
    with pytest.raises(ts.TesseraError):
        k()  # the index tensor is missing


def test_a_kernel_runs_from_other_threads():
    a = sp.random_array((20, 10), density=0.3, random_state=5, format="csr")
    t, x = ts.asarray(a), ts.asarray(np.arange(10.0))
    k = ts.compile(SPMV, out="y", A=t, x=x)
    results = in_threads(lambda: k(A=t, x=x).to_numpy())
    assert len(results) == 30
    for r in results:
        np.testing.assert_allclose(r, a @ np.arange(10.0))


def test_run_keeps_its_kernel_per_call_signature():
    """`run` called again with new data of the same formats compiles nothing, and a change of
    output format or shapes is a new kernel, not a stale one."""
    from tessera import _tessera

    a = sp.random_array((9, 8), density=0.3, random_state=4, format="csr")
    prog = "for i = _, j = _\n  W[i, j] = A[i, j] * 2\nend"
    ts.run(prog, out="W", A=a)
    n = _tessera.kernel_cache_len()
    w = ts.run(prog, out="W", A=sp.random_array((9, 8), density=0.6, random_state=1, format="csr"))
    assert _tessera.kernel_cache_len() == n and w.format.startswith("Dense(Dense(")
    w = ts.run(prog, out={"W": "csr"}, A=a)["W"]
    assert w.format == "Dense(SparseList(Element(0.0)))"
    np.testing.assert_allclose(w.to_numpy(), 2 * a.toarray())
    h = "for i = _\n  h[I[i]] += 1\nend"
    assert ts.run(h, out="h", shapes={"h": [4]}, I=np.array([3])).shape == (4,)
    assert ts.run(h, out="h", shapes={"h": [6]}, I=np.array([3])).shape == (6,)
