"""Print the SciPy reference checksums used by tests/matrices.rs.

Run: python3 scripts/scipy_golden.py  (needs scipy; the tests themselves need no Python)
Each checksum is a weighted sum of a result, so a wrong value at any position changes it.
"""
import numpy as np
import scipy.io
import scipy.sparse as sp

NAMES = ["west0067", "lp_afiro", "ash219", "1138_bus", "impcol_a", "karate", "Groebner_id2003_aug"]

for name in NAMES:
    A = sp.csr_matrix(scipy.io.mmread(f"../shared/data/matrices/{name}.mtx")).astype(np.float64)
    m, n = A.shape
    x = (np.arange(n) % 7) - 3.0
    y = A @ x
    spmv = float(np.dot(y, (np.arange(m) % 5) + 1.0))
    xt = (np.arange(m) % 5) - 2.0
    z = A.T @ xt
    spmv_t = float(np.dot(z, (np.arange(n) % 3) + 1.0))
    B = ((np.arange(n)[:, None] + np.arange(4)[None, :]) % 4) - 1.5
    C = A @ B
    W = (np.arange(m)[:, None] % 3) + np.arange(4)[None, :]
    spmm = float(np.sum(C * W))
    triu = float(sp.triu(A).sum())
    nnz_row = np.diff(A.indptr)
    r1 = int(np.argmax(nnz_row))
    r2 = (r1 + 1) % m
    a = A[r1, :].toarray().ravel()
    b = A[r2, :].toarray().ravel()
    w = (np.arange(n) % 4) + 1.0
    dot = float(a @ b)
    add = float(np.dot(a + b, w))
    mul = float(np.dot(a * b, w))
    print(f'    ("{name}", [{spmv!r}, {spmv_t!r}, {spmm!r}, {triu!r}, {dot!r}, {add!r}, {mul!r}], {r1}),')
