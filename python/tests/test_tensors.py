"""asarray and the way back: every input kind, several formats, the properties."""

import numpy as np
import pytest
import scipy.sparse as sp
import sparse
from hypothesis import given
from hypothesis import strategies as st

import tessera as ts
from strategies import arrays, matrices

DTYPES = ["float64", "float32", "int64", "int32", "int8", "uint8", "uint64", "bool"]

# Formats of a matrix, as text and as objects; each must give back the same values.
MATRIX_FORMATS = [
    "dense",
    "csr",
    "dcsr",
    "Dense(SparseList(Element(0.0), coord=i32))",
    ts.formats.csr(index="int32"),
    ts.formats.dcsr(),
    ts.formats.Dense(ts.formats.SparseByteMap(ts.formats.Element(0.0))),
    ts.formats.Dense(ts.formats.SparseRunList(ts.formats.Element(0.0))),
    ts.formats.Dense(ts.formats.SparseSliceList(ts.formats.Element(0.0), coord="i32")),
    ts.formats.Dense(ts.formats.SparseBlockList(ts.formats.Element(0.0))),
    ts.formats.SparseCOO(2, ts.formats.Element(0.0)),
    ts.formats.Dense(ts.formats.SparseDict(ts.formats.Element(0.0))),
]


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_numpy_round_trip_every_dtype(dtype, data):
    a = data.draw(arrays(dtype))
    t = ts.asarray(a)
    assert t.shape == a.shape and t.dtype == a.dtype and t.format.startswith("Dense(Dense(")
    b = t.to_numpy()
    assert b.dtype == a.dtype
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(np.asarray(t), a)


@pytest.mark.parametrize("fmt", MATRIX_FORMATS, ids=str)
@given(a=matrices())
def test_round_trip_in_formats(fmt, a):
    t = ts.asarray(a, format=fmt)
    assert t.format == ts.formats.parse(fmt, 2, "float64")
    np.testing.assert_array_equal(t.to_numpy(), a)
    assert t.nnz == t.countstored()
    # Lists and COO store exactly the nonzeros (run lists count runs, byte maps touched slots).
    if "SparseList" in t.format or "SparseCOO" in t.format:
        assert t.nnz == np.count_nonzero(a)
    # and back to dense through another conversion
    np.testing.assert_array_equal(t.to_format("dense").to_numpy(), a)


@pytest.mark.parametrize("kind", ["csr", "csc", "coo", "dia", "bsr", "lil", "dok"])
@pytest.mark.parametrize("container", [sp.csr_array, sp.csr_matrix])
@given(a=matrices())
def test_scipy_inputs(kind, container, a):
    m = container(a).asformat(kind)
    t = ts.asarray(m)
    np.testing.assert_array_equal(t.to_numpy(), a)
    assert t.shape == a.shape


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "bool"])
@given(data=st.data())
def test_to_scipy(dtype, data):
    a = data.draw(matrices(dtype))
    for fmt in (None, "dcsr", "dense"):
        t = ts.asarray(sp.csr_array(a)) if fmt is None else ts.asarray(a, format=fmt)
        m = t.to_scipy()
        assert isinstance(m, sp.csr_array) and m.dtype == a.dtype
        np.testing.assert_array_equal(m.toarray(), a)
    assert ts.asarray(a).to_scipy("coo").format == "coo"


def test_scipy_index_widths_and_unsorted_rows():
    a = np.array([[0, 1.5, 0, 2], [3, 0, 0, 0], [0, 0, 0, 0]])
    m32 = sp.csr_array(a)
    assert m32.indices.dtype == np.int32
    assert "coord=i32" in ts.asarray(m32).format
    m64 = sp.csr_array((m32.data, m32.indices.astype(np.int64), m32.indptr.astype(np.int64)), shape=a.shape)
    t64 = ts.asarray(m64)
    assert "coord" not in t64.format
    np.testing.assert_array_equal(t64.to_numpy(), a)
    # Unsorted column indices and a duplicate are made canonical (sorted, added), as SciPy would.
    messy = sp.csr_array((np.array([2.0, 1.5, 0.5]), np.array([3, 1, 1]), np.array([0, 3, 3, 3])), shape=(3, 4))
    np.testing.assert_array_equal(ts.asarray(messy).to_numpy(), messy.toarray())


@given(a=arrays("float64", st.sampled_from([(4,), (3, 4), (2, 3, 4)])))
def test_pydata_sparse(a):
    for s in (sparse.COO.from_numpy(a), sparse.GCXS.from_numpy(a)):
        t = ts.asarray(s)
        np.testing.assert_array_equal(t.to_numpy(), a)
        assert t.nnz == np.count_nonzero(a)


def test_lists_and_scalars():
    t = ts.asarray([[1, 2], [3, 4]])
    assert t.dtype == np.int64 and t.shape == (2, 2)
    assert ts.asarray([1.5, 2]).dtype == np.float64
    assert ts.asarray([True, False]).dtype == np.bool_
    s = ts.asarray(3.5)
    assert s.shape == () and float(s) == 3.5 and s.to_numpy().shape == ()
    assert ts.asarray(7, dtype="int32").dtype == np.int32
    # a strided view is read in its logical order
    a = np.arange(12.0).reshape(3, 4)[:, ::2]
    np.testing.assert_array_equal(ts.asarray(a).to_numpy(), a)


def test_properties_and_indexing():
    a = np.array([[0.0, 2.0, 0.0], [1.0, 0.0, 0.0]])
    t = ts.asarray(a, format="csr")
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6
    assert t.nnz == 2 and t.countstored() == 2 and t.fill == 0.0
    assert t[0, 1] == 2.0 and t[1, -3] == 1.0 and t[0, 0] == 0.0
    assert t.format == "Dense(SparseList(Element(0.0)))"
    assert "nnz=2" in repr(t)
    # an int array asked for "csr" stays integer (shorthands take the array's dtype)
    assert ts.asarray(a.astype(np.int64), format="csr").dtype == np.int64
    bufs = t.level_buffers()
    assert [len(level) for level in bufs] == [0, 2, 1]
    np.testing.assert_array_equal(bufs[1][0], [0, 1, 2])


def test_format_objects_print_as_text():
    f = ts.formats
    assert str(f.Dense(f.SparseList(f.Element(0.0)))) == "Dense(SparseList(Element(0.0)))"
    assert str(f.csr(index="int32")) == "Dense(SparseList(Element(0.0), coord=i32))"
    assert str(f.Element(0, dtype="int32")) == "Element(0, i32)"
    assert str(f.dense(2, "bool")) == "Dense(Dense(Element(false)))"
    assert str(f.RunList(f.Element(0.0), merge=False)) == "RunList(Element(0.0), merge=false)"
    assert f.parse("csr", 2) == "Dense(SparseList(Element(0.0)))"
    for dtype in DTYPES:
        t = ts.asarray(np.zeros((2, 2), dtype=dtype), format=f.csr(dtype))
        assert t.dtype == np.dtype(dtype)


def test_dense_values_are_shared_read_only_with_numpy():
    import gc

    a = np.arange(12.0).reshape(3, 4)
    t = ts.asarray(a)
    v = t.to_numpy()
    assert not v.flags.writeable and np.shares_memory(v, t.to_numpy())
    (values,) = t.level_buffers()[-1]
    assert v.__array_interface__["data"][0] == values.__array_interface__["data"][0]
    with pytest.raises(ValueError):
        v[0, 0] = 1.0
    # a kernel run on the tensor while a view lives: right answer, view unchanged
    s = ts.run("for i = _, j = _\n  s[] += A[i, j]\nend", out="s", A=t)
    assert float(s) == a.sum()
    np.testing.assert_array_equal(v, a)
    # the view keeps the memory alive after the tensor is gone
    del t, s, values
    gc.collect()
    np.testing.assert_array_equal(v, a)
    # copies on request; sparse values are a new array
    w = np.array(ts.asarray(a), copy=True)
    assert w.flags.writeable and not np.shares_memory(w, v)
    sparse = ts.asarray(a, format="csr")
    assert not sparse._raw.dense_view
    np.testing.assert_array_equal(np.asarray(sparse), a)
    with pytest.raises(ValueError):
        np.asarray(sparse, copy=False)
    np.testing.assert_array_equal(np.asarray(ts.asarray(a), dtype=np.int64), a.astype(np.int64))


def test_dlpack_shares_dense_memory_and_copies_otherwise():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = ts.asarray(a)
    d = np.from_dlpack(t)
    assert np.shares_memory(d, t.to_numpy()) and not d.flags.writeable
    assert t.__dlpack_device__() == (1, 0)
    # an old consumer (no max_version) cannot be told read-only: it gets a copy
    cap = t.__dlpack__()
    assert "dltensor" in repr(cap)
    with pytest.raises(BufferError):
        t.__dlpack__(copy=False)
    sparse = ts.asarray(a, format="csr")
    np.testing.assert_array_equal(np.from_dlpack(sparse), a)
    with pytest.raises(BufferError):
        sparse.__dlpack__(max_version=(1, 0), copy=False)
    back = ts.from_dlpack(np.arange(5.0), format="SparseList(Element(0.0))")
    assert back.format == "SparseList(Element(0.0))" and back.nnz == 4
    np.testing.assert_array_equal(back.to_numpy(), np.arange(5.0))
    assert ts.array_api.from_dlpack(a).shape == (2, 3)


def test_to_scipy_shares_the_csr_arrays():
    a = sp.random_array((30, 20), density=0.2, random_state=6, format="csr")
    t = ts.asarray(a)
    m = t.to_scipy()
    _, (ptr, idx), (val,) = t.level_buffers()
    assert np.shares_memory(m.data, val) and np.shares_memory(m.indices, idx)
    assert np.shares_memory(m.indptr, ptr) and not m.data.flags.writeable
    np.testing.assert_allclose(m @ np.ones(20), a @ np.ones(20))
    c = m.copy()
    c.eliminate_zeros()  # in-place methods work on a copy
    assert c.nnz == a.nnz


@pytest.mark.parametrize("index", ["int32", "int64"])
def test_asarray_shares_the_csr_arrays_it_is_given(index):
    """Zero-copy into Tessera: a canonical CSR's three arrays become the level buffers."""
    a = sp.random_array((40, 30), density=0.2, random_state=7, format="csr", dtype=np.float64)
    a.indptr, a.indices = a.indptr.astype(index), a.indices.astype(index)
    t = ts.asarray(a)
    _, (ptr, idx), (val,) = t.level_buffers()
    assert val.__array_interface__["data"][0] == a.data.__array_interface__["data"][0]
    assert idx.__array_interface__["data"][0] == a.indices.__array_interface__["data"][0]
    assert ptr.__array_interface__["data"][0] == a.indptr.__array_interface__["data"][0]
    assert idx.dtype == np.dtype(index)
    m = t.to_scipy()
    assert np.shares_memory(m.data, a.data) and np.shares_memory(m.indices, a.indices)
    x = np.arange(30.0)
    np.testing.assert_allclose(ts.run("for i = _, j = _\n  y[i] += A[i, j] * x[j]\nend", out="y",
                                      A=t, x=x).to_numpy(), a @ x)


def test_asarray_shares_dense_memory_and_never_writes_it():
    a = np.arange(12.0).reshape(3, 4)
    t = ts.asarray(a)
    assert np.shares_memory(t.to_numpy(), a)
    # Like np.asarray, the tensor sees later writes to the array it shares.
    a[0, 0] = 100.0
    assert t.to_numpy()[0, 0] == 100.0
    # A kernel that writes the tensor writes a copy: the array keeps its values.
    before = a.copy()
    y = ts.run("for i = _, j = _\n  y[i, j] += 1\nend", out="y", y=t)
    np.testing.assert_array_equal(y.to_numpy(), before + 1)
    np.testing.assert_array_equal(a, before)
    # Operators read it in place as well.
    np.testing.assert_array_equal((t * 2).to_numpy(), before * 2)


def test_shared_arrays_outlive_their_python_names():
    import gc

    a = sp.random_array((50, 50), density=0.1, random_state=8, format="csr")
    want = a.toarray()
    t = ts.asarray(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(t.to_numpy(), want)
    d = np.random.default_rng(1).random((7, 5))
    u = ts.asarray(d)
    want = d.copy()
    del d
    gc.collect()
    np.testing.assert_array_equal(u.to_numpy(), want)


def test_arrays_that_cannot_be_shared_are_copied_correctly():
    base = np.arange(24.0).reshape(4, 6)
    strided = base[:, ::2]
    np.testing.assert_array_equal(ts.asarray(strided).to_numpy(), strided)
    swapped = base.astype(">f8")
    t = ts.asarray(swapped)
    np.testing.assert_array_equal(t.to_numpy(), base)
    assert not np.shares_memory(t.to_numpy(), swapped)
    raw = np.zeros(8 * 5 + 1, dtype=np.uint8)
    unaligned = raw[1:].view(np.float64)
    unaligned[:] = [1.5, -2.0, 3.25, 0.0, 7.0]
    np.testing.assert_array_equal(ts.asarray(unaligned).to_numpy(), [1.5, -2.0, 3.25, 0.0, 7.0])
    # bool arrays whose bytes are not 0/1 read as True, never as invalid values
    bools = np.array([0, 1, 2, 255], dtype=np.uint8).view(np.bool_)
    np.testing.assert_array_equal(ts.asarray(bools).to_numpy(), [False, True, True, True])
    # mixed index widths are widened
    a = sp.random_array((10, 10), density=0.3, random_state=9, format="csr")
    a.indptr = a.indptr.astype(np.int64)
    a.indices = a.indices.astype(np.int32)
    np.testing.assert_array_equal(ts.asarray(a).to_numpy(), a.toarray())


def test_from_dlpack_shares_or_refuses_to_when_told_not_to_copy():
    a = np.arange(6.0).reshape(2, 3)
    t = ts.from_dlpack(a, copy=False)
    assert np.shares_memory(t.to_numpy(), a)
    assert not np.shares_memory(ts.from_dlpack(a, copy=True).to_numpy(), a)
    with pytest.raises(BufferError):
        ts.from_dlpack(a, copy=False, format="csr")
    with pytest.raises(BufferError):
        ts.from_dlpack(a[:, ::2], copy=False)


def test_pydata_gcxs_matrices_share_their_arrays():
    a = np.array([[0, 1.5, 0, 0], [2.0, 0, 3.0, 0], [0, 0, 0, 0], [0, 4.0, 0, 5.0]])
    g = sparse.GCXS.from_numpy(a, compressed_axes=(0,))
    t = ts.asarray(g)
    _, (ptr, idx), (val,) = t.level_buffers()
    assert np.shares_memory(val, g.data) and np.shares_memory(idx, g.indices)
    assert np.shares_memory(ptr, g.indptr)
    np.testing.assert_array_equal(t.to_numpy(), a)
    # columns compressed: the CSC route (transposed once), same values
    np.testing.assert_array_equal(ts.asarray(sparse.GCXS.from_numpy(a, compressed_axes=(1,))).to_numpy(), a)
    # unsorted hand-made indices are not shared but still read right
    bad = sparse.GCXS((np.array([2.0, 1.0]), np.array([1, 0]), np.array([0, 2, 2])), shape=(2, 2))
    np.testing.assert_array_equal(ts.asarray(bad).to_numpy(), bad.todense())


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_any_memory_layout_reads_right_and_contiguous_native_ones_are_shared(dtype, data):
    """Views with steps, reversed axes, transposes, the other byte order and unaligned
    copies: each reads as NumPy sees it; only C-contiguous, aligned, native, non-bool
    arrays share memory."""
    a = data.draw(arrays(dtype, shape=st.tuples(st.integers(1, 6), st.integers(1, 6))))
    variant = data.draw(st.sampled_from(["plain", "step", "reversed", "transposed", "swapped",
                                         "unaligned"]))
    if variant == "step":
        a = a[::2, ::-1]
    elif variant == "reversed":
        a = a[::-1]
    elif variant == "transposed":
        a = a.T
    elif variant == "swapped":
        a = a.astype(a.dtype.newbyteorder(">" if a.dtype.byteorder != ">" else "<"))
    elif variant == "unaligned" and a.dtype.itemsize > 1:
        raw = np.zeros(a.nbytes + 1, dtype=np.uint8)
        u = raw[1:].view(a.dtype).reshape(a.shape)
        u[...] = a
        a = u
    t = ts.asarray(a)
    np.testing.assert_array_equal(t.to_numpy(), a)
    shareable = (a.flags.c_contiguous and a.flags.aligned and a.dtype.isnative
                 and a.dtype != np.bool_ and a.size > 0)
    assert np.shares_memory(t.to_numpy(), a) == shareable
