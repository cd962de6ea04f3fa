"""Matrices for the studies: generated sets (seeded, deterministic) and the shared catalogue.

Every generator returns a `scipy.sparse.csr_matrix` of float64 with sorted, unique indices.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

# The shared data folder next to the repository (`../shared/data`), never copied into it.
DATA = (Path(__file__).resolve().parent.parent / ".." / "shared" / "data").resolve()


def _csr(rows, cols, vals, shape) -> sp.csr_matrix:
    a = sp.coo_matrix((vals, (rows, cols)), shape=shape).tocsr()
    a.sum_duplicates()
    a.sort_indices()
    return a


def banded(n: int, half_bw: int, seed: int = 0) -> sp.csr_matrix:
    """n x n with every entry |i - j| <= half_bw stored; entry (i, j) = j - i + 1 as in the
    Finch benchmarks, plus a small seeded jitter so no value is an exact zero (j - i + 1 = 0 on
    the first subdiagonal would be a stored zero)."""
    rng = np.random.default_rng(seed)
    offsets = np.arange(-half_bw, half_bw + 1)
    rows = np.repeat(np.arange(n), len(offsets))
    cols = rows + np.tile(offsets, n)
    keep = (cols >= 0) & (cols < n)
    rows, cols = rows[keep], cols[keep]
    vals = (cols - rows + 1).astype(np.float64) + rng.uniform(0.01, 0.99, len(rows))
    return _csr(rows, cols, vals, (n, n))


def triu_dense(n: int = 1024, seed: int = 0) -> sp.csr_matrix:
    """The full upper triangle (diagonal included) of an n x n matrix, random values in (0, 1]."""
    rng = np.random.default_rng(seed)
    rows, cols = np.triu_indices(n)
    vals = 1.0 - rng.random(len(rows))
    return _csr(rows, cols, vals, (n, n))


def reverse_perm(n: int) -> sp.csr_matrix:
    """The reverse permutation: A[i, n - 1 - i] = 1."""
    rows = np.arange(n)
    return _csr(rows, n - 1 - rows, np.ones(n), (n, n))


def erdos_renyi(n: int, nnz_per_row: int, seed: int = 0) -> sp.csr_matrix:
    """n x n with exactly `nnz_per_row` distinct uniformly random columns per row (p =
    nnz_per_row / n), values uniform in [0.5, 1.5) so products never cancel."""
    rng = np.random.default_rng(seed)
    k = min(nnz_per_row, n)
    cols = rng.integers(0, n, size=(n, k))
    # Redraw rows holding a repeated column until every row's columns are distinct.
    while True:
        s = np.sort(cols, axis=1)
        bad = np.nonzero((s[:, 1:] == s[:, :-1]).any(axis=1))[0]
        if len(bad) == 0:
            break
        cols[bad] = rng.integers(0, n, size=(len(bad), k))
    rows = np.repeat(np.arange(n), k)
    vals = rng.uniform(0.5, 1.5, n * k)
    return _csr(rows, cols.ravel(), vals, (n, n))


def rmat(scale: int, edge_factor: int = 16, seed: int = 0, a=0.57, b=0.19, c=0.19) -> sp.csr_matrix:
    """R-MAT graph with 2**scale vertices and edge_factor * 2**scale generated edges
    (Graph500 parameters a, b, c = 0.57, 0.19, 0.19), symmetrised, without self loops or
    duplicate edges; values 1.0."""
    rng = np.random.default_rng(seed)
    n = 1 << scale
    m = edge_factor * n
    rows = np.zeros(m, dtype=np.int64)
    cols = np.zeros(m, dtype=np.int64)
    for bit in range(scale):
        r = rng.random(m)
        # Quadrants: a = (0, 0), b = (0, 1), c = (1, 0), d = (1, 1).
        down = r >= a + b
        right = ((r >= a) & (r < a + b)) | (r >= a + b + c)
        rows |= down.astype(np.int64) << bit
        cols |= right.astype(np.int64) << bit
    keep = rows != cols
    rows, cols = rows[keep], cols[keep]
    r2 = np.concatenate([rows, cols])
    c2 = np.concatenate([cols, rows])
    a_ = _csr(r2, c2, np.ones(len(r2)), (n, n))
    a_.data[:] = 1.0  # duplicates were summed
    return a_


def load_mtx(name: str, data_dir: Path | None = None) -> sp.csr_matrix:
    """A matrix of `../shared/data/matrices/` as float64 CSR (pattern entries are 1.0;
    symmetric files are expanded to both triangles)."""
    d = Path(data_dir) if data_dir else DATA
    path = d / "matrices" / (name if name.endswith(".mtx") else name + ".mtx")
    a = scipy.io.mmread(str(path))
    a = sp.csr_matrix(a, dtype=np.float64)
    a.sum_duplicates()
    a.sort_indices()
    return a


def write_mtx(a: sp.spmatrix, path: Path | str) -> Path:
    """Write `a` as a general real Matrix Market file with values at full precision."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.mmwrite(str(path), sp.coo_matrix(a), field="real", symmetry="general", precision=17)
    return path


def is_pattern(a: sp.spmatrix) -> bool:
    """True when every stored value is 1 (a pattern matrix read as 1.0)."""
    return a.nnz > 0 and bool(np.all(a.data == 1.0))
