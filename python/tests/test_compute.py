"""Computations compared with NumPy: einsum, elementwise operators with broadcasting,
reductions, matmul, run/code, the lazy API and the kernel cache."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tessera as ts
from strategies import arrays, matrices
from threads import in_threads

# Shorthands take the array's dtype; "csr32" is CSR with SciPy's 4-byte indices.
FORMATS = st.sampled_from(["dense", "csr", "dcsr", "csr32"])


def as_format(a, name):
    return ts.formats.csr(a.dtype, index="int32") if name == "csr32" else name
SPMV = """
y .= 0
for i = _, j = _
  y[i] += A[i, j] * x[j]
end
"""


def tensor_in(data, a, rank=2):
    fmt = data.draw(FORMATS) if rank == 2 else data.draw(st.sampled_from(["dense", "SparseList(Element(0.0))"]))
    return ts.asarray(a, format=as_format(a, fmt))


@given(data=st.data())
def test_einsum_matches_numpy(data):
    m, k, n = (data.draw(st.integers(1, 5)) for _ in range(3))
    a = data.draw(arrays("float64", (m, k)))
    b = data.draw(arrays("float64", (k, n)))
    x = data.draw(arrays("float64", (k,)))
    ta, tb, tx = tensor_in(data, a), tensor_in(data, b), tensor_in(data, x, 1)
    cases = [
        ("y[i] += A[i, j] * x[j]", dict(A=ta, x=tx), np.einsum("ij,j->i", a, x)),
        ("C[i, j] += A[i, k] * B[k, j]", dict(A=ta, B=tb), a @ b),
        ("s[] += A[i, j]", dict(A=ta), np.array(a.sum())),
        ("T[j, i] = A[i, j]", dict(A=ta), a.T),
        ("C[i, j] <<max>>= A[i, j]", dict(A=ta), a),
    ]
    for spec, inputs, expected in cases:
        out = ts.einsum(spec, **inputs)
        np.testing.assert_array_equal(out.to_numpy(), expected, err_msg=spec)


def test_einsum_output_format():
    a = sp.random_array((6, 5), density=0.4, random_state=3, format="csr")
    c = ts.einsum("C[i, j] += A[i, k] * B[k, j]", format="dcsr", A=a, B=a.T.tocsr())
    assert c.format == "SparseList(SparseList(Element(0.0)))"
    np.testing.assert_allclose(c.to_numpy(), (a @ a.T).toarray())


OPS = {
    "+": (lambda x, y: x + y, np.add),
    "-": (lambda x, y: x - y, np.subtract),
    "*": (lambda x, y: x * y, np.multiply),
    "/": (lambda x, y: x / y, np.divide),
    "<": (lambda x, y: x < y, np.less),
    ">=": (lambda x, y: x >= y, np.greater_equal),
    "==": (lambda x, y: x == y, np.equal),
    "!=": (lambda x, y: x != y, np.not_equal),
    "minimum": (ts.minimum, np.minimum),
    "maximum": (ts.maximum, np.maximum),
}


@pytest.mark.parametrize("op", list(OPS))
@given(data=st.data())
def test_elementwise_broadcasting(op, data):
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=2, max_side=4))
    dtype_a, dtype_b = data.draw(st.sampled_from([("float64", "float64"), ("int64", "int64"), ("float64", "int64")]))
    a = data.draw(arrays(dtype_a, shapes.input_shapes[0]))
    b = data.draw(arrays(dtype_b, shapes.input_shapes[1]))
    if op == "/":
        b = np.where(b == 0, 3, b).astype(b.dtype)  # the sign of 1/0's infinity is the zero's
    fa = data.draw(FORMATS) if a.ndim == 2 else "dense"
    ours, theirs = OPS[op]
    got = ours(ts.asarray(a, format=as_format(a, fa)), ts.asarray(b)).to_numpy()
    want = theirs(a, b)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if a.ndim == 2:
        assert got.dtype.kind == want.dtype.kind


@given(a=matrices("float64"), s=st.integers(-3, 3))
def test_scalars_and_reflected_operators(a, s):
    t = ts.asarray(a, format="csr")
    np.testing.assert_array_equal((t + s).to_numpy(), a + s)
    np.testing.assert_array_equal((s - t).to_numpy(), s - a)
    np.testing.assert_array_equal((2.5 * t).to_numpy(), 2.5 * a)
    np.testing.assert_array_equal((-t).to_numpy(), -a)
    np.testing.assert_array_equal(abs(t).to_numpy(), np.abs(a))
    np.testing.assert_array_equal((t > s).to_numpy(), a > s)
    np.testing.assert_array_equal((a * t).to_numpy(), a * a)  # an ndarray on the left
    np.testing.assert_array_equal(ts.sqrt(abs(t)).to_numpy(), np.sqrt(np.abs(a)))
    m = t > 0
    np.testing.assert_array_equal((~m).to_numpy(), ~(a > 0))
    np.testing.assert_array_equal((m & (t < 5)).to_numpy(), (a > 0) & (a < 5))


@given(data=st.data(), s=st.integers(-3, 3), n=st.integers(-2, 66))
def test_floored_and_bitwise_operators(data, s, n):
    # `% // & | ^ ~ << >>` on integer tensors, with Python scalars on either side, as NumPy's
    # int64 operators (a zero divisor gives 0; shifts by amounts outside 0..63 give 0 or the
    # sign). `%` and `//` of floats are NumPy's too.
    a = data.draw(matrices("int64"))
    b = data.draw(arrays("int64", (a.shape[1],)))
    t, u = ts.asarray(a, format=as_format(a, data.draw(FORMATS))), ts.asarray(b)
    with np.errstate(all="ignore"):
        for got, want in [(t % u, a % b), (t // u, a // b), (t % s, a % s), (s // t, s // a),
                          (t & u, a & b), (t | s, a | s), (t ^ u, a ^ b), (s ^ t, s ^ a), (~t, ~a),
                          (t << n, np.left_shift(a, n)), (t >> n, np.right_shift(a, n)),
                          (3 << t, np.left_shift(3, a)), (-9 >> abs(t), np.right_shift(-9, np.abs(a)))]:
            np.testing.assert_array_equal(got.to_numpy(), want)
            assert got.dtype == np.int64
        f = ts.asarray(a * 0.5, format="csr")
        np.testing.assert_array_equal((f % 1.5).to_numpy(), (a * 0.5) % 1.5)
        np.testing.assert_array_equal((f // -0.75).to_numpy(), (a * 0.5) // -0.75)
    with pytest.raises(TypeError):
        ~f


REDUCTIONS = ["sum", "max", "min", "any", "all", "prod"]


@pytest.mark.parametrize("how", REDUCTIONS)
@given(data=st.data())
def test_reductions(how, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3 if how == "prod" else 5))
    dtype = data.draw(st.sampled_from(["float64", "int64", "bool"] if how in ("any", "all") else ["float64", "int64"]))
    a = data.draw(arrays(dtype, shape))
    fmt = data.draw(FORMATS) if a.ndim == 2 else None
    t = ts.asarray(a, format=as_format(a, fmt) if fmt else None)
    axis = data.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1),
                               st.lists(st.integers(0, a.ndim - 1), unique=True, min_size=1).map(tuple)))
    got = getattr(t, how)(axis=axis)
    want = getattr(np, how)(a, axis=axis)
    np.testing.assert_array_equal(got.to_numpy(), want)
    np.testing.assert_array_equal(getattr(ts, how)(t, axis=axis).to_numpy(), want)


@given(data=st.data())
def test_matmul(data):
    m, k, n = (data.draw(st.integers(1, 5)) for _ in range(3))
    a = data.draw(arrays("float64", (m, k)))
    b = data.draw(arrays("float64", (k, n)))
    x = data.draw(arrays("float64", (k,)))
    ta, tb = tensor_in(data, a), tensor_in(data, b)
    np.testing.assert_array_equal((ta @ tb).to_numpy(), a @ b)
    np.testing.assert_array_equal(ts.matmul(ta, b).to_numpy(), a @ b)
    np.testing.assert_array_equal((ta @ x).to_numpy(), a @ x)
    np.testing.assert_array_equal(ta.T.to_numpy(), a.T)


def test_run_outputs_shapes_and_formats():
    a = sp.random_array((7, 5), density=0.5, random_state=1, format="csr")
    x = np.arange(5.0)
    y = ts.run(SPMV, out="y", A=a, x=x)
    np.testing.assert_allclose(y.to_numpy(), a @ x)
    # a list of outputs, a declared-only scalar input, a sparse output format
    prog = "for i = _, j = _\n  s[] += A[i, j]\n  B[i, j] = A[i, j] * c[]\nend"
    s, b = ts.run(prog, out=["s", "B"], A=a, c=2.0)
    assert float(s) == pytest.approx(a.sum())
    np.testing.assert_allclose(b.to_numpy(), 2 * a.toarray())
    d = ts.run(prog.replace("s[] += A[i, j]\n  ", ""), out={"B": "csr"}, A=a, c=2.0)
    assert d["B"].format == "Dense(SparseList(Element(0.0)))" and d["B"].nnz == a.nnz
    # an output only the shapes= argument sizes
    h = ts.run("for i = _\n  h[I[i]] += 1\nend", out="h", shapes={"h": [4]}, I=np.array([0, 3, 3, 1]))
    np.testing.assert_array_equal(h.to_numpy(), [1, 1, 0, 2])
    # an output given as input starts from its values; the caller's tensor is unchanged
    y0 = ts.asarray(np.ones(7))
    y1 = ts.run("for i = _, j = _\n  y[i] += A[i, j] * x[j]\nend", out="y", A=a, x=x, y=y0)
    np.testing.assert_allclose(y1.to_numpy(), 1 + a @ x)
    np.testing.assert_array_equal(y0.to_numpy(), np.ones(7))
    for backend in ("jit", "c"):
        np.testing.assert_allclose(ts.run(SPMV, out="y", backend=backend, A=a, x=x).to_numpy(), a @ x)


def test_code_shows_the_kernel():
    a = sp.random_array((4, 4), density=0.5, random_state=2, format="csr")
    ir = ts.code(SPMV, out="y", A=a, x=np.ones(4))
    assert "A_ptr" in ir and "A_idx" in ir
    c = ts.code(SPMV, out="y", backend="c", A=a, x=np.ones(4))
    assert "#include" in c or "int64_t" in c


def test_kernel_cache_is_shared_across_calls():
    from tessera import _tessera

    a = sp.random_array((9, 8), density=0.3, random_state=4, format="csr")
    prog = SPMV.replace("y[i]", "z[i]").replace("y .= 0", "z .= 0")
    ts.run(prog, out="z", A=a, x=np.ones(8))
    n = _tessera.kernel_cache_len()
    for seed in range(3):  # new data, same formats: nothing compiles
        b = sp.random_array((9, 8), density=0.5, random_state=seed, format="csr")
        ts.run(prog, out="z", A=b, x=np.arange(8.0))
    assert _tessera.kernel_cache_len() == n
    ts.run(prog, out="z", A=a.toarray(), x=np.ones(8))  # a dense A is another kernel
    assert _tessera.kernel_cache_len() == n + 1


@given(data=st.data())
def test_lazy_fuses_and_matches_numpy(data):
    a = data.draw(arrays("float64", (4, 3)))
    b = data.draw(arrays("float64", (4, 3)))
    la, lb = ts.lazy(ts.asarray(a, format=as_format(a, data.draw(FORMATS)))), ts.lazy(b)
    expr = (la * lb + 1.0).sum(axis=1)
    out, statements = expr.compute_explained()
    np.testing.assert_array_equal(out.to_numpy(), (a * b + 1.0).sum(axis=1))
    assert len(statements) == 1 and expr.shape == (4,)
    assert expr.explain() == statements
    np.testing.assert_allclose((la.T @ lb).compute().to_numpy(), a.T @ b)
    mask = ts.lazy(ts.asarray(np.eye(4) + np.eye(4, k=1), format="csr"))
    sddmm = mask * (lb @ lb.T)  # B Bᵀ only where the mask stores: one kernel
    out, statements = sddmm.compute_explained()
    np.testing.assert_allclose(out.to_numpy(), (np.eye(4) + np.eye(4, k=1)) * (b @ b.T))
    assert len(statements) == 1
    assert ts.lazy(a).expand_dims(0).compute().shape == (1, 4, 3)


def test_run_shares_inputs_and_never_changes_them():
    a = sp.random_array((30, 20), density=0.3, random_state=5, format="csr")
    t, x = ts.asarray(a), ts.asarray(np.arange(20.0))
    address = t.level_buffers()[2][0].__array_interface__["data"][0]
    for _ in range(2):
        np.testing.assert_allclose(ts.run(SPMV, out="y", A=t, x=x).to_numpy(), a @ np.arange(20.0))
    np.testing.assert_array_equal(t.to_numpy(), a.toarray())
    assert t.level_buffers()[2][0].__array_interface__["data"][0] == address
    # a given tensor the program writes is copied: the caller's keeps its values
    y0 = ts.asarray(np.ones(30))
    y1 = ts.run("for i = _, j = _\n  y[i] += A[i, j] * x[j]\nend", out="y", A=t, x=x, y=y0)
    np.testing.assert_allclose(y1.to_numpy(), 1 + a @ np.arange(20.0))
    np.testing.assert_array_equal(y0.to_numpy(), np.ones(30))
    # the same tensor under two names
    c = ts.run("for i = _, j = _\n  C[i, j] = A[i, j] + B[i, j]\nend", out="C", A=t, B=t)
    np.testing.assert_allclose(c.to_numpy(), 2 * a.toarray())
    # a failing kernel gives its inputs back too
    idx = ts.asarray(np.array([0, 9, 1]))
    with pytest.raises(ts.KernelError):
        ts.run("for i = _\n  h[I[i]] += 1\nend", out="h", shapes={"h": [3]}, I=idx)
    np.testing.assert_array_equal(idx.to_numpy(), [0, 9, 1])
    # threads sharing one input all read it at once and get the right answer
    pairs = in_threads(lambda: (ts.run(SPMV, out="y", A=t, x=x).to_numpy(), (t * 2).to_numpy().sum()),
                       repeats=20)
    assert len(pairs) == 60
    results, sums = [p[0] for p in pairs], [p[1] for p in pairs]
    for r in results:
        np.testing.assert_allclose(r, a @ np.arange(20.0))
    np.testing.assert_allclose(sums, 2 * a.sum())
    np.testing.assert_array_equal(t.to_numpy(), a.toarray())


def test_float_functions_at_the_top_level_keep_a_sparse_structure():
    x = sp.random(6, 5, density=0.3, random_state=4, format="csr")
    t = ts.asarray(x)
    dense = x.toarray()
    # sin(0) == 0: the result keeps the matrix's pattern; cos(0) == 1: its fill is 1.
    s = ts.sin(t)
    assert s.nnz == t.nnz
    np.testing.assert_allclose(s.to_numpy(), np.sin(dense), rtol=1e-12)
    np.testing.assert_allclose(ts.cos(t).to_numpy(), np.cos(dense), rtol=1e-12)
    np.testing.assert_array_equal(ts.round(ts.asarray(dense * 10)).to_numpy(), np.round(dense * 10))
    np.testing.assert_allclose(ts.pow(ts.asarray(dense + 1), 2.5).to_numpy(), (dense + 1) ** 2.5,
                               rtol=1e-12)
    np.testing.assert_allclose(ts.atan2(t, ts.asarray(dense + 1)).to_numpy(),
                               np.arctan2(dense, dense + 1), rtol=1e-12)
    # Through the lazy API: fused with a product, float result.
    got = (ts.lazy(t).map("sin") * 2.0).compute().to_numpy()
    np.testing.assert_allclose(got, 2.0 * np.sin(dense), rtol=1e-12)
