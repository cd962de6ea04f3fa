"""SpMV on a SciPy CSR matrix shared zero-copy (`ts.asarray(csr)`): its arrays are NumPy's,
which their owner may rewrite at any time, so they carry no checked bound. Each kernel run
reads the row pointers (`indptr`, O(rows)) as a private copy checked on that run, and its loops
over a row's entries run without bounds checks; the indices and values (O(entries)) stay
shared. Rewriting the arrays between or during runs gives SciPy's result for what they hold,
or a typed error; never a crash. NumPy cannot resize a shared array meanwhile."""

import weakref

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

import tessera as ts
from tessera import _tessera
from threads import in_threads

SPMV = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n"


def address(a):
    return a.__array_interface__["data"][0]


def csr(index="int32", shape=(60, 45), seed=3):
    a = sp.random_array(shape, density=0.15, random_state=seed, format="csr")
    a.indptr, a.indices = a.indptr.astype(index), a.indices.astype(index)
    return a


def rows_spmv(ptr, idx, val, x):
    """The loop the kernel runs, row by row: a row whose end is before its start is empty."""
    y = np.zeros(len(ptr) - 1)
    for i in range(len(ptr) - 1):
        for q in range(ptr[i], ptr[i + 1]):
            y[i] += val[q] * x[idx[q]]
    return y


@pytest.mark.parametrize("backend", ["c", "jit"])
@pytest.mark.parametrize("index", ["int32", "int64"])
def test_shared_csr_reads_a_checked_copy_of_its_row_pointers(backend, index):
    a = csr(index)
    t = ts.asarray(a)
    x = np.random.default_rng(2).random(45)
    k = ts.compile(SPMV, out="y", backend=backend, A=t, x=x)
    y = np.empty(60)
    for step in range(3):
        x = x + step
        assert k(A=t, x=x, out=y) is y
        np.testing.assert_allclose(y, a @ x, rtol=1e-12, atol=1e-12)
        # The row pointers went to the kernel as a copy with a bound (one past the largest,
        # nnz): its versioned loops over a row's entries take their unchecked copy.
        assert _tessera.last_snapshots(backend) == [("A", 1, 0, a.nnz + 1)]
        np.testing.assert_allclose(k(A=t, x=x).to_numpy(), a @ x, rtol=1e-12, atol=1e-12)
    # Still zero-copy: the tensor's three arrays are SciPy's.
    _, (ptr, idx), (val,) = t.level_buffers()
    assert address(ptr) == address(a.indptr)
    assert address(idx) == address(a.indices)
    assert address(val) == address(a.data)
    # A matrix Tessera owns (checked once when it was built) needs no copy.
    owned = ts.asarray(a.tocoo()).to_format(t.format)
    assert owned.format == t.format
    ko = ts.compile(SPMV, out="y", backend=backend, A=owned, x=x)
    np.testing.assert_allclose(ko(A=owned, x=x).to_numpy(), a @ x, rtol=1e-12, atol=1e-12)
    assert _tessera.last_snapshots(backend) == []


@pytest.mark.parametrize("backend", ["c", "jit"])
def test_rewritten_row_pointers_are_read_as_they_are_at_each_call(backend):
    a = csr()
    t = ts.asarray(a)
    x = np.random.default_rng(4).random(45)
    k = ts.compile(SPMV, out="y", backend=backend, A=t, x=x)
    ptr = a.indptr
    # A valid rewrite: row 10's first entry moves to row 9.
    assert ptr[10] < ptr[11]
    ptr[10] += 1
    np.testing.assert_allclose(k(A=t, x=x).to_numpy(), rows_spmv(ptr, a.indices, a.data, x),
                               rtol=1e-12, atol=1e-12)
    # Decreasing pointers: the rows between run empty, as the checked loop ran them.
    ptr[20], ptr[21] = ptr[21], ptr[20]
    np.testing.assert_allclose(k(A=t, x=x).to_numpy(), rows_spmv(ptr, a.indices, a.data, x),
                               rtol=1e-12, atol=1e-12)
    assert _tessera.last_snapshots(backend)[0][3] == ptr.max() + 1


@pytest.mark.parametrize("backend", ["c", "jit"])
@pytest.mark.parametrize("where, value", [(-1, 10**6), (30, 10**6), (-1, 2**31 - 1),
                                          (5, -3), (0, -1)])
def test_hostile_row_pointers_raise_a_kernel_error(backend, where, value):
    a = csr()
    t = ts.asarray(a)
    x = np.ones(45)
    k = ts.compile(SPMV, out="y", backend=backend, A=t, x=x)
    good = k(A=t, x=x).to_numpy()
    saved = a.indptr[where]
    a.indptr[where] = value
    for _ in range(2):
        with pytest.raises(ts.KernelError, match="out of bounds|outside"):
            k(A=t, x=x)
    # A negative pointer fails its check: the kernel keeps every bounds check.
    assert (_tessera.last_snapshots(backend)[0][3] is None) == (value < 0)
    # The interpreter lives, and the repaired matrix runs again.
    a.indptr[where] = saved
    np.testing.assert_array_equal(k(A=t, x=x).to_numpy(), good)


def test_row_pointers_rewritten_while_kernels_run_never_crash():
    """The GIL is released while a kernel runs: another thread rewrites `indptr` with hostile
    values meanwhile. The kernel reads its copy, so every call returns SciPy's result for
    some state of the array, or raises a typed error."""
    a = csr(shape=(400, 300), seed=5)
    t = ts.asarray(a)
    x = np.random.default_rng(6).random(300)
    k = ts.compile(SPMV, out="y", backend="c", A=t, x=x)
    ptr, nnz = a.indptr, a.nnz
    rng = np.random.default_rng(7)

    def step():
        if rng.random() < 0.5:
            at = int(rng.integers(0, len(ptr)))
            ptr[at] = rng.choice([nnz + 10**5, -5, 0, nnz, ptr[at]])
            return None
        try:
            return k(A=t, x=x).to_numpy()
        except ts.KernelError:
            return None

    results = in_threads(step, threads=3, repeats=60)
    ran = [r for r in results if r is not None]
    assert all(r.shape == (400,) and np.isfinite(r).all() for r in ran)
    # Repaired (pointers made nondecreasing from 0 to nnz), the matrix gives SciPy's result.
    ptr[:] = np.maximum.accumulate(np.clip(ptr, 0, nnz))
    ptr[0], ptr[-1] = 0, nnz
    want = sp.csr_array((a.data, a.indices, ptr), shape=a.shape) @ x
    np.testing.assert_allclose(k(A=t, x=x).to_numpy(), want, rtol=1e-12, atol=1e-12)


def test_numpy_cannot_resize_a_shared_array():
    """`ndarray.resize` would move the memory a tensor reads: refused while Tessera shares it,
    even with `refcheck=False` (a weak reference to the array makes NumPy refuse), and allowed
    again once the tensor is gone."""
    import gc

    a = csr()
    t = ts.asarray(a)
    for arr in (a.indptr, a.indices, a.data):
        with pytest.raises(ValueError, match="cannot resize"):
            arr.resize(len(arr) + 10**6, refcheck=False)
    # The array behind a view is guarded too.
    base = np.arange(100.0)
    u = ts.asarray(base[10:50])
    with pytest.raises(ValueError, match="cannot resize"):
        base.resize(10**6, refcheck=False)
    np.testing.assert_array_equal(u.to_numpy(), np.arange(10.0, 50.0))
    # out= arrays, written in place, are guarded while the kernel holds them; afterwards the
    # array is the caller's again.
    y = np.empty(60)
    ts.compile(SPMV, out="y", backend="jit", A=t, x=np.ones(45))(A=t, x=np.ones(45), out=y)
    del t, u
    gc.collect()
    a.indptr.resize(len(a.indptr) + 5, refcheck=False)
    y.resize(70, refcheck=False)
    assert len(y) == 70 and weakref.getweakrefcount(y) == 0


@pytest.mark.parametrize("backend", ["c", "jit"])
@pytest.mark.parametrize("index", ["int32", "int64"])
def test_a_copied_csr_is_owned_and_its_coordinates_checked_once(backend, index):
    a = csr(index, seed=5)
    shared, copied = ts.asarray(a), ts.asarray(a, copy=True)
    assert copied.format == shared.format
    # Zero-copy arrays carry no bound (their owner may rewrite them); the copy's coordinates
    # were checked against the column count, its positions against their largest entry.
    assert shared._raw.checked_bounds() == [[], [None, None], [None]]
    assert copied._raw.checked_bounds() == [[], [a.nnz + 1, a.shape[1]], [None]]
    _, (ptr, idx), (val,) = copied._raw.level_buffers()
    for mine, theirs in ((ptr, a.indptr), (idx, a.indices), (val, a.data)):
        assert not np.shares_memory(mine, theirs)
    x = np.random.default_rng(4).random(a.shape[1])
    k = ts.compile(SPMV, out="y", backend=backend, A=copied, x=x)
    np.testing.assert_allclose(k(A=copied, x=x).to_numpy(), a @ x, rtol=1e-12, atol=1e-12)
    # Rewriting SciPy's arrays afterwards reaches the shared tensor only.
    before = a @ x
    a.indices[:] = 0
    a.data[:] = 1.0
    np.testing.assert_allclose(k(A=copied, x=x).to_numpy(), before, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(k(A=shared, x=x).to_numpy(), a @ x, rtol=1e-12, atol=1e-12)
    # A tensor copied again keeps its own arrays (immutable) and their bounds.
    again = ts.asarray(copied, copy=True)
    assert again._raw.checked_bounds() == copied._raw.checked_bounds()


def test_a_copied_tensor_never_shares_numpy_memory():
    v = np.arange(6.0)
    t = ts.asarray(v)
    c = ts.asarray(t, copy=True)
    assert np.shares_memory(t.to_numpy(), v)
    assert not np.shares_memory(c.to_numpy(), v)
    v[0] = 42.0
    assert c.to_numpy()[0] == 0.0


@given(rows=st.integers(1, 140), index=st.sampled_from(["int32", "int64"]),
       at=st.integers(0, 140), kind=st.sampled_from(["negative", "min", "large", "same"]))
def test_each_runs_row_pointer_bound_is_their_largest_wherever_it_is(rows, index, at, kind):
    """The per-run check of the row pointers' copy is one pass of lanes and a remainder
    (`runtime::largest`): whatever the length and wherever the largest or a negative pointer
    sits, the bound is `max + 1` (none for a negative one), the results SciPy's, and a bad
    pointer a typed error; the matrix stays zero-copy."""
    a = csr(index, shape=(rows, 20), seed=rows)
    t = ts.asarray(a)
    x = np.random.default_rng(rows).random(20)
    k = ts.compile(SPMV, out="y", backend="c", A=t, x=x)
    y = np.empty(rows)
    assert k(A=t, x=x, out=y) is y
    np.testing.assert_allclose(y, a @ x, rtol=1e-13, atol=1e-13)
    assert _tessera.last_snapshots("c") == [("A", 1, 0, a.nnz + 1)]
    ptr, nnz = a.indptr, a.nnz  # SciPy's `nnz` reads `indptr[-1]`, rewritten below
    at = at % len(ptr)
    value = {"negative": -1, "min": np.iinfo(index).min, "large": nnz + 1 + at,
             "same": ptr[at]}[kind]
    ptr[at] = value
    # The checked loop's meaning: a row whose end is not after its start is empty, any other
    # reads entries `ptr[i]..ptr[i + 1]`, which must lie in `0..nnz`.
    reads_outside = any(ptr[i] < ptr[i + 1] and (ptr[i] < 0 or ptr[i + 1] > nnz)
                        for i in range(rows))
    if reads_outside:
        with pytest.raises(ts.KernelError, match="out of bounds|outside"):
            k(A=t, x=x, out=y)
    else:
        k(A=t, x=x, out=y)
        np.testing.assert_allclose(y, rows_spmv(ptr, a.indices, a.data, x), rtol=1e-13,
                                   atol=1e-13)
    bound = _tessera.last_snapshots("c")[0][3]
    assert bound == (None if value < 0 else int(ptr.max()) + 1)
    _, (p, idx), (val,) = t.level_buffers()
    assert (address(p), address(idx), address(val)) == (
        address(a.indptr), address(a.indices), address(a.data))


@pytest.mark.parametrize("where, value", [(-1, 10**6), (1, 10**6), (3, -7), (0, -1)])
def test_a_rewritten_shared_structure_is_a_typed_error_when_walked(where, value):
    """Counting, printing, indexing or densifying a SciPy-shared tensor walks its row pointers:
    rewritten past the entries (or negative) by their owner, they give a typed error, not a
    panic inside the walk; repaired, the tensor reads as before."""
    a = csr(shape=(8, 6), seed=2)
    t = ts.asarray(a)
    nnz, dense = t.nnz, t.to_numpy()
    saved = a.indptr[where]
    a.indptr[where] = value
    for walk in (lambda: t.nnz, lambda: t.to_numpy(), lambda: t._raw.get([7, 5])):
        with pytest.raises(ts.errors.TensorError):
            walk()
    assert "nnz=?" in repr(t) and "inconsistent" in repr(t._raw)
    a.indptr[where] = saved
    assert t.nnz == nnz
    np.testing.assert_array_equal(t.to_numpy(), dense)


def long_rows(index="int32", rows=9, cols=70, seed=8):
    """A CSR matrix whose rows average more than 32 entries (one empty), so the kernel walks
    two adjacent rows at a time with their gathers tested (`ir::interleave`)."""
    rng = np.random.default_rng(seed)
    dense = np.zeros((rows, cols))
    for i in range(rows):
        if i == 4:
            continue
        n = int(rng.integers(33, cols))
        dense[i, rng.choice(cols, n, replace=False)] = rng.normal(size=n) * 10.0 ** rng.integers(-8, 8, n)
    a = sp.csr_array(dense)
    a.indptr, a.indices = a.indptr.astype(index), a.indices.astype(index)
    return a


@pytest.mark.parametrize("backend", ["c", "jit"])
@pytest.mark.parametrize("index", ["int32", "int64"])
def test_shared_long_rows_are_scipys_bit_for_bit(backend, index):
    a = long_rows(index)
    t = ts.asarray(a)
    x = np.random.default_rng(9).normal(size=a.shape[1])
    k = ts.compile(SPMV, out="y", backend=backend, A=t, x=x)
    y = np.empty(a.shape[0])
    assert k(A=t, x=x, out=y) is y
    # Each row summed in its stored order, as SciPy's loop does: the same bits.
    np.testing.assert_array_equal(y, a @ x)
    np.testing.assert_array_equal(y, rows_spmv(a.indptr, a.indices, a.data, x))
    _, (ptr, idx), (val,) = t.level_buffers()
    assert [address(b) for b in (ptr, idx, val)] == [address(b) for b in (a.indptr, a.indices, a.data)]


@pytest.mark.parametrize("backend", ["c", "jit"])
@pytest.mark.parametrize("index", ["int32", "int64"])
@pytest.mark.parametrize("value", [10**6, -1])
def test_a_bad_shared_index_faults_where_the_row_loop_does(backend, index, value):
    """A bad index anywhere (with a second one in the next row's first entry, which two rows
    walked together meet first): the error names the first in row order, the rows before it
    are written and none after, and the arrays stay SciPy's."""
    a = long_rows(index)
    t = ts.asarray(a)
    x = np.ones(a.shape[1])
    k = ts.compile(SPMV, out="y", backend=backend, A=t, x=x)
    good = a @ x
    ptr, idx = a.indptr, a.indices
    for row in range(a.shape[0]):
        for q in range(ptr[row], ptr[row + 1], 5):
            saved = idx.copy()
            idx[q] = value
            later = [r for r in range(row + 1, a.shape[0]) if ptr[r + 1] > ptr[r]]
            if later and q % 2 == 0:
                idx[ptr[later[0]]] = 10**6 + 1
            y = np.full(a.shape[0], 7.25)
            with pytest.raises(ts.KernelError, match="out of bounds|outside") as e:
                k(A=t, x=x, out=y)
            assert str(value) in str(e.value) and str(10**6 + 1) not in str(e.value)
            np.testing.assert_array_equal(y[:row], good[:row])
            assert (y[row:] == 7.25).all(), (row, q)
            idx[:] = saved
    _, (_, shared), _ = t.level_buffers()
    assert address(shared) == address(a.indices)
    np.testing.assert_array_equal(k(A=t, x=x).to_numpy(), good)


def test_indices_rewritten_while_long_rows_run_never_crash():
    """Another thread rewrites `indices` with hostile values while kernels walk two rows at a
    time: each call gives SciPy's result for some state of the array, or a typed error."""
    a = long_rows(rows=40, cols=120, seed=10)
    t = ts.asarray(a)
    x = np.random.default_rng(11).random(a.shape[1])
    k = ts.compile(SPMV, out="y", backend="c", A=t, x=x)
    idx = a.indices
    saved = idx.copy()
    rng = np.random.default_rng(12)

    def step():
        if rng.random() < 0.5:
            at = int(rng.integers(0, len(idx)))
            idx[at] = rng.choice([10**6, -5, 2**31 - 1, saved[at]])
            return None
        try:
            return k(A=t, x=x).to_numpy()
        except ts.KernelError:
            return None

    results = in_threads(step, threads=3, repeats=60)
    assert all(r.shape == (40,) and np.isfinite(r).all() for r in results if r is not None)
    idx[:] = saved
    np.testing.assert_array_equal(k(A=t, x=x).to_numpy(), a @ x)
