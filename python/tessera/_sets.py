"""The Array API's sorting, set and sorted-search functions (``sort argsort unique_values
unique_counts unique_inverse unique_all searchsorted``) on what a tensor stores.

A tensor is its stored entries (coordinates and values, ``_tessera.stored_entries``) plus the
fill at every other position. So the unique values of a sparse tensor are those of its stored
values plus the fill, counted ``size - stored`` times when some position is unstored; and a
sorted fiber is its sorted stored values with the fiber's unstored positions (all the fill)
as one block where the fill sorts. NumPy sorts the 1-D arrays of stored values; nothing is
expanded to a dense copy, except where the result is itself dense in every position
(``argsort``, whose indices differ everywhere) or where the fill is NaN (each unstored NaN is
a distinct value of its own, as the standard asks).
"""

from collections import namedtuple

import numpy as np

from . import _tessera
from ._tensor import Tensor, asarray
from .formats import _literal


def _entries(x):
    """``(coords, values)`` of the stored entries: one int64 array per dimension."""
    coords, values = _tessera.stored_entries(x._raw)
    return [np.asarray(c) for c in coords], np.asarray(values)


def _fill(x):
    return np.asarray(x.fill, dtype=x.dtype)


def _retyped_format(fmt, fill, dtype):
    """Format text ``fmt`` with its leaf holding ``dtype`` and fill ``fill``."""
    text = str(fmt)
    at = text.rfind("Element(")
    if at < 0:
        # A `Pattern()` leaf: the default leaf of the type instead.
        at = text.rfind("Pattern(")
    end = text.index(")", at)
    return text[:at] + f"Element({_literal(fill, dtype)})" + text[end + 1:]


def _build(shape, coords, values, fmt):
    """A tensor of ``shape`` storing ``values`` at ``coords`` in format ``fmt`` (text whose
    leaf has the values' dtype), or in Tessera's default sparse format when ``fmt`` cannot
    hold that structure (a band's width, a run's length)."""
    dtype = values.dtype.name
    coords = [np.ascontiguousarray(c, dtype=np.int64) for c in coords]
    values = np.ascontiguousarray(values)
    try:
        raw = _tessera.from_coo(list(shape), coords, "int64", values, dtype, fmt)
    except ValueError:
        raw = _tessera.from_coo(list(shape), coords, "int64", values, dtype, None)
    return Tensor(raw)


def _axis(axis, ndim):
    if not -ndim <= axis < ndim:
        raise IndexError(f"axis {axis} is out of bounds for a tensor of {ndim} dimensions")
    return axis % ndim


def _before_fill(values, fill):
    """Which values an ascending sort (NaN last, as NumPy's) puts before the fill's block."""
    if fill.dtype.kind == "f" and np.isnan(fill):
        return ~np.isnan(values)
    return values < fill


# --- sorting -------------------------------------------------------------------------------
def sort(x, /, *, axis=-1, descending=False, stable=True):
    """Each fiber along ``axis`` sorted (NaN last; ``descending`` reverses that order). A
    sparse tensor stays sparse in its format: each fiber's unstored positions become one
    block of the fill where the fill sorts, and the stored values move around it."""
    x = asarray(x)
    if x.ndim == 0:
        raise ValueError("sort needs a tensor of at least one dimension")
    a = _axis(axis, x.ndim)
    n = x.shape[a]
    coords, values = _entries(x)
    others = [c for d, c in enumerate(coords) if d != a]
    other_shape = [s for d, s in enumerate(x.shape) if d != a]
    fiber = np.ravel_multi_index(others, other_shape) if others else np.zeros(len(values), np.int64)
    order = np.lexsort((values, fiber))
    values, fiber = values[order], fiber[order]
    others = [c[order] for c in others]
    # Rank within the fiber, then past the fiber's unstored block for values after the fill.
    starts = np.searchsorted(fiber, fiber, side="left")
    rank = np.arange(len(values)) - starts
    stored_in = np.bincount(fiber, minlength=max(1, int(np.prod(other_shape, dtype=np.int64))))
    missing = n - stored_in[fiber]
    position = np.where(_before_fill(values, _fill(x)), rank, rank + missing)
    if descending:
        position = n - 1 - position
    out = list(others)
    out.insert(a, position)
    return _build(x.shape, out, values, str(x.format))


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    """The indices that sort each fiber along ``axis`` (``stable``: equal values keep their
    order, also when ``descending``, as the standard asks). The result holds a different
    index at every position, so it is dense, and is computed from the dense values."""
    x = asarray(x)
    a = np.asarray(x)
    kind = "stable" if stable else "quicksort"
    if not descending:
        return asarray(np.argsort(a, axis=axis, kind=kind))
    # NumPy has no descending sort: sort the flipped fibers ascending, so equal values keep
    # their order, and flip the indices back.
    flipped = np.flip(np.argsort(np.flip(a, axis=axis), axis=axis, kind=kind), axis=axis)
    return asarray(a.shape[axis] - 1 - flipped)


# --- sets ----------------------------------------------------------------------------------
def _unique(x, want_index, want_inverse):
    """``(values, first flat index, inverse of the stored entries, inverse of the fill,
    counts, coords)`` of the unique values of ``x``, from its stored entries and the count of
    its unstored positions."""
    coords, values = _entries(x)
    flat = np.ravel_multi_index(coords, x.shape) if x.ndim else np.zeros(len(values), np.int64)
    if want_index:
        # Row-major order, so that the first occurrence of each value is its smallest index.
        order = np.argsort(flat, kind="stable")
        flat, values = flat[order], values[order]
        coords = [c[order] for c in coords]
    missing = x.size - len(values)
    fill = _fill(x)
    pool = np.concatenate([values, fill.reshape(1)]) if missing else values
    uniq, index, inverse, counts = np.unique(
        pool, return_index=True, return_inverse=True, return_counts=True, equal_nan=False
    )
    inverse = inverse.reshape(-1)[:len(values)]
    fill_at = None
    if missing:
        fill_at = int(np.searchsorted(uniq, fill))
        counts[fill_at] += missing - 1
    if want_index:
        stored = index < len(values)
        first = np.empty(len(index), np.int64)
        first[stored] = flat[index[stored]]
        if missing:
            # The first unstored position: the first gap in the sorted stored indices.
            gaps = np.nonzero(flat != np.arange(len(flat)))[0]
            gap = int(gaps[0]) if len(gaps) else len(flat)
            first[~stored] = gap
            first[fill_at] = min(first[fill_at], gap)
        index = first
    return uniq, index, inverse, fill_at, counts, coords


def _dense_fallback(x):
    """A NaN fill with unstored positions: each is a distinct NaN (the standard's rule), so
    the result has one entry per unstored position anyway; computed on the dense values."""
    return x.dtype.kind == "f" and np.isnan(_fill(x)) and x.size > x.nnz


def _inverse_tensor(x, coords, inverse, fill_at):
    """The inverse indices, shaped as ``x``: sparse as ``x`` when it has unstored positions
    (their index, the fill's, is the result's fill)."""
    fmt = _retyped_format(x.format, 0 if fill_at is None else fill_at, "int64")
    return _build(x.shape, coords, inverse.astype(np.int64), fmt)


# The standard's results: named tuples (`unique_counts(x).counts`), which unpack as before.
UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])


def unique_values(x, /):
    x = asarray(x)
    if _dense_fallback(x):
        return asarray(np.unique(np.asarray(x), equal_nan=False))
    return asarray(_unique(x, False, False)[0])


def unique_counts(x, /):
    x = asarray(x)
    if _dense_fallback(x):
        v, c = np.unique(np.asarray(x), return_counts=True, equal_nan=False)
        return UniqueCountsResult(asarray(v), asarray(c))
    uniq, _, _, _, counts, _ = _unique(x, False, False)
    return UniqueCountsResult(asarray(uniq), asarray(counts.astype(np.int64)))


def unique_inverse(x, /):
    x = asarray(x)
    if _dense_fallback(x):
        v, inv = np.unique(np.asarray(x), return_inverse=True, equal_nan=False)
        return UniqueInverseResult(asarray(v), asarray(inv.reshape(x.shape)))
    uniq, _, inverse, fill_at, _, coords = _unique(x, False, True)
    return UniqueInverseResult(asarray(uniq), _inverse_tensor(x, coords, inverse, fill_at))


def unique_all(x, /):
    x = asarray(x)
    if _dense_fallback(x):
        v, i, inv, c = np.unique(np.asarray(x), return_index=True, return_inverse=True,
                                 return_counts=True, equal_nan=False)
        return UniqueAllResult(asarray(v), asarray(i), asarray(inv.reshape(x.shape)), asarray(c))
    uniq, index, inverse, fill_at, counts, coords = _unique(x, True, True)
    return UniqueAllResult(asarray(uniq), asarray(np.asarray(index, dtype=np.int64)),
                           _inverse_tensor(x, coords, inverse, fill_at),
                           asarray(counts.astype(np.int64)))


# --- searching -----------------------------------------------------------------------------
def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Where each value of ``x2`` would go in the sorted 1-D ``x1`` (``side="left"``: before
    equal values). A sorted ``x1`` is its stored values (sorted among themselves, as a
    subsequence) with its unstored positions, all the fill, in one block: the count before
    ``v`` is the stored values' count plus the block's size where the fill sorts before ``v``
    (NaN last, as NumPy). The result has the shape and format of ``x2`` (its fill the index of
    ``x2``'s fill). With ``sorter`` (``x1`` not sorted), NumPy on the dense values."""
    x1, x2 = asarray(x1), asarray(x2)
    if x1.ndim != 1:
        raise ValueError("searchsorted needs a one-dimensional x1")
    if side not in ("left", "right"):
        raise ValueError(f"side is 'left' or 'right', not {side!r}")
    if sorter is not None:
        found = np.searchsorted(np.asarray(x1), np.asarray(x2), side=side, sorter=np.asarray(sorter))
        return asarray(found.astype(np.int64))
    _, stored = _entries(x1)
    missing = x1.size - len(stored)
    fill = _fill(x1).reshape(1)

    def place(v):
        at = np.searchsorted(stored, v, side=side)
        if missing:
            at = at + missing * np.searchsorted(fill, v, side=side)
        return np.asarray(at, dtype=np.int64)

    coords, values = _entries(x2)
    fill_at = int(place(_fill(x2)))
    fmt = _retyped_format(x2.format, fill_at, "int64")
    return _build(x2.shape, coords, place(values), fmt)
