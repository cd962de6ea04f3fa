"""Tessera tensors as the chunks of ``dask.array`` arrays: data larger than one process's
memory, split into blocks that each fit, computed by Tessera kernels on a Dask scheduler
(threads, processes or a ``distributed.LocalCluster``).

``from_array(x, chunks)`` cuts a NumPy array, SciPy sparse matrix or Tessera tensor into
Tessera blocks; ``from_blocks(make, shape, chunks)`` makes each block where it is needed,
so the whole matrix never exists in one place. The arrays' ``_meta`` is an empty Tessera
tensor of the blocks' format, so Dask knows the chunk type. Then:

- ``spmv(A, x)``: ``A @ x`` block by block (each row of blocks sums its products);
- ``map_blocks(fn, *arrays)``: any Tessera function of the blocks (elementwise chains,
  ``tessera.run`` programs), one task per block;
- ``reduce(A, how, axis)``: ``sum prod max min any all`` over the blocks, then over the
  partial results;
- elementwise operators on the Dask array itself (``A * 2 + 1``) run Tessera's operators on
  each block, and ``compute()`` joins the blocks into one Tensor.

Tensors pickle (by their level arrays, validated when unpickled), so blocks travel between
processes.
"""

import builtins
import functools
import itertools

import numpy as np

from ._tensor import Tensor, asarray

try:
    import dask
    import dask.array as da
    from dask.array.dispatch import concatenate_lookup
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError("tessera.dask needs dask[array]: pip install 'dask[array]'") from e


def _format_of(t):
    return t.format if isinstance(t, Tensor) else None


def meta(ndim, dtype, format=None):
    """An empty tensor of ``ndim`` dimensions, ``dtype`` and ``format``: the ``_meta`` of a
    Dask array whose blocks are Tessera tensors of that format."""
    return asarray(np.empty((0,) * ndim, dtype=dtype), format=format)


def _block(x, index, format):
    return asarray(x[index], format=format)


def _normalise_chunks(chunks, shape, dtype):
    return da.core.normalize_chunks(chunks, shape, dtype=np.dtype(dtype))


def from_array(x, chunks, format=None, name=None):
    """A Dask array of Tessera blocks cut from ``x`` (NumPy array, SciPy sparse matrix or
    array, Tessera tensor, or anything ``tessera.asarray`` takes and that slices), each in
    ``format`` (default: CSR for SciPy input, dense otherwise)."""
    if isinstance(x, Tensor):
        fmt = format or x.format
        x = x.to_scipy() if x.ndim == 2 and not x._raw.dense_view and not x.fill else x.to_numpy()
        format = fmt
    elif not hasattr(x, "shape"):
        x = np.asarray(x)
    if format is None and hasattr(x, "tocsr"):
        format = "csr"
    if hasattr(x, "tocsr"):
        x = x.tocsr()  # slices cheaply by rows and columns
    chunks = _normalise_chunks(chunks, x.shape, x.dtype)
    name = name or "tessera-from-array-" + dask.base.tokenize(id(x), chunks, format)
    offsets = [np.concatenate([[0], np.cumsum(c)]) for c in chunks]
    graph = {}
    for idx in itertools.product(*[range(len(c)) for c in chunks]):
        index = tuple(slice(int(o[i]), int(o[i + 1])) for o, i in zip(offsets, idx))
        graph[(name,) + idx] = (_block, x, index, format)
    first = asarray(x[tuple(slice(0, 0) for _ in x.shape)], format=format)
    return da.Array(graph, name, chunks, meta=first)


def from_blocks(make, shape, chunks, dtype="float64", format=None, name=None):
    """A Dask array of Tessera blocks made by ``make(block_index, slices)`` (a tensor, or
    anything ``asarray`` takes, of that block's shape) when a task needs them: the blocks of
    a matrix too large for one process are generated or read where they are used."""
    chunks = _normalise_chunks(chunks, tuple(shape), dtype)
    name = name or "tessera-from-blocks-" + dask.base.tokenize(make, shape, chunks, format)
    offsets = [np.concatenate([[0], np.cumsum(c)]) for c in chunks]
    graph = {}
    for idx in itertools.product(*[range(len(c)) for c in chunks]):
        index = tuple(slice(int(o[i]), int(o[i + 1])) for o, i in zip(offsets, idx))
        graph[(name,) + idx] = (_made, make, idx, index, format)
    return da.Array(graph, name, chunks, meta=meta(len(shape), dtype, format))


def _made(make, idx, index, format):
    t = asarray(make(idx, index), format=format)
    want = tuple(s.stop - s.start for s in index)
    if t.shape != want:
        raise ValueError(f"block {idx} has shape {t.shape}, not {want}")
    return t


def _spmv_row(a_blocks, x_blocks):
    # One row of blocks: the sum of its products (concatenate=False: lists over j).
    from ._compute import einsum

    total = None
    for a, x in zip(a_blocks, x_blocks):
        y = einsum("y[i] += A[i, j] * x[j]", A=a, x=asarray(x)).to_numpy()
        total = y.copy() if total is None else total + y
    return total


def spmv(A, x):
    """``y = A @ x`` for a Dask array ``A`` of Tessera matrix blocks and a vector ``x``
    (NumPy or Dask, rechunked to ``A``'s columns): one Tessera SpMV per block, summed along
    each row of blocks. Returns a Dask array of NumPy blocks."""
    if A.ndim != 2:
        raise ValueError(f"spmv needs a matrix, not {A.ndim} dimensions")
    x = da.asarray(x)
    if x.shape != (A.shape[1],):
        raise ValueError(f"x has shape {x.shape}; A has {A.shape[1]} columns")
    x = x.rechunk((A.chunks[1],))
    return da.blockwise(
        _spmv_row, "i", A, "ij", x, "j",
        concatenate=False, dtype=np.result_type(A.dtype, x.dtype),
        meta=np.empty((0,), dtype=np.result_type(A.dtype, x.dtype)),
    )


def map_blocks(fn, *arrays, dtype=None, format=None, **kwargs):
    """``fn`` on each block (Tessera tensors in, a Tessera tensor out, of the same shape
    unless ``chunks=`` says otherwise); the result's blocks have ``format`` (default: the
    first input's meta format)."""
    first = arrays[0]
    fmt = format or _format_of(getattr(first, "_meta", None))
    dtype = dtype or first.dtype
    return da.map_blocks(
        fn, *arrays, dtype=dtype, meta=meta(first.ndim, dtype, fmt), **kwargs
    )


_IDENTITY = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
             "any": np.logical_or, "all": np.logical_and}


def _partial(block, how, axis, keepdims, **_):
    # Dask passes the axes as a tuple; Tessera reduces and NumPy keeps the dimensions.
    t = asarray(block)
    r = getattr(t, how)(axis=axis)
    r = np.asarray(r.to_numpy() if isinstance(r, Tensor) else r)
    if keepdims:
        r = np.expand_dims(r, tuple(axis)) if r.ndim < t.ndim else r
    return r


def _combine(parts, how, axis, keepdims, **_):
    return getattr(np, how)(parts, axis=axis, keepdims=keepdims)


def reduce(A, how="sum", axis=None):
    """``sum prod max min any all`` of a Dask array of Tessera blocks along ``axis`` (an int,
    a tuple or None for all): Tessera reduces each block, NumPy the partial results."""
    if how not in _IDENTITY:
        raise ValueError(f"unknown reduction `{how}` (sum, prod, max, min, any, all)")
    dtype = np.bool_ if how in ("any", "all") else A.dtype
    return da.reduction(
        A,
        functools.partial(_partial, how=how),
        functools.partial(_combine, how=how),
        axis=axis,
        dtype=dtype,
        meta=np.empty((0,) * (0 if axis is None else builtins.max(A.ndim - len(np.atleast_1d(axis)), 0)), dtype=dtype),
        concatenate=True,
    )


@concatenate_lookup.register(Tensor)
def _concatenate(tensors, axis=0):
    """Dask's join of Tessera blocks (``compute()``): sparse matrices through SciPy's
    ``vstack``/``hstack`` in the first block's format, anything else densely."""
    tensors = list(tensors)
    fmt = tensors[0].format
    if all(t.ndim == 2 and not t._raw.dense_view and not t.fill for t in tensors):
        import scipy.sparse as sp

        join = sp.vstack if axis == 0 else sp.hstack
        return asarray(join([t.to_scipy() for t in tensors], format="csr"), format=fmt)
    return asarray(np.concatenate([t.to_numpy() for t in tensors], axis=axis), format=fmt)


__all__ = ["from_array", "from_blocks", "map_blocks", "meta", "reduce", "spmv"]
