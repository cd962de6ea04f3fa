"""Print the NumPy/SciPy reference values used by tests/einsum.rs.

Run: /work/venv/bin/python scripts/einsum_golden.py  (needs numpy and scipy; the tests need no
Python). Each checksum is a weighted sum of a result, so a wrong value anywhere changes it; the
weights and the generated tensors are formulas the tests repeat in Rust.
"""
import numpy as np
import scipy.io
import scipy.sparse as sp

MATRICES = ["west0479", "1138_bus", "lp_afiro"]


def weights2(m, n):
    return ((np.arange(m)[:, None] * 3 + np.arange(n)[None, :] * 7) % 11) + 1.0


def weights1(m):
    return (np.arange(m) % 5) + 1.0


def load(name):
    return sp.csr_matrix(scipy.io.mmread(f"../shared/data/matrices/{name}.mtx")).astype(np.float64)


print("// (name, spgemm, spgemm_nonzeros, spmv, ata, ata_nonzeros, add_reduce, row_max)")
for name in MATRICES:
    A = load(name)
    m, n = A.shape
    row = []
    if m == n:
        C = (A @ A).toarray()
        row += [float(np.sum(C * weights2(m, n))), int(np.count_nonzero(C))]
    else:
        row += [0.0, 0]
    x = (np.arange(n) % 7) - 3.0
    row.append(float(np.einsum("ij,j->i", A.toarray(), x) @ weights1(m)))
    AtA = np.einsum("ki,kj->ij", A.toarray(), A.toarray())
    row += [float(np.sum(AtA * weights2(n, n))), int(np.count_nonzero(AtA))]
    if m == n:
        T = A + A.T
        s = np.asarray(T.sum(axis=1)).ravel()
        row.append(float(s @ weights1(m)))
    else:
        row.append(0.0)
    row.append(float(A.toarray().max(axis=1) @ weights1(m)))
    print(f'    ("{name}", {row[0]!r}, {row[1]}, {row[2]!r}, {row[3]!r}, {row[4]}, {row[5]!r}, {row[6]!r}),')

# MTTKRP on a generated 3-d tensor: X[i, j, k] = (i + 2j + 3k) % 5 + 1 where
# (7i + 13j + 29k) % 17 == 0, shapes 30 x 40 x 50, rank 8.
I, J, K, R = 30, 40, 50, 8
i, j, k = np.meshgrid(np.arange(I), np.arange(J), np.arange(K), indexing="ij")
X = np.where((7 * i + 13 * j + 29 * k) % 17 == 0, (i + 2 * j + 3 * k) % 5 + 1.0, 0.0)
B = ((np.arange(J)[:, None] + 2 * np.arange(R)[None, :]) % 7) - 3.0
Cm = ((3 * np.arange(K)[:, None] + np.arange(R)[None, :]) % 5) - 2.0
M = np.einsum("ijk,jr,kr->ir", X, B, Cm)
print(f"const MTTKRP: f64 = {float(np.sum(M * weights2(I, R)))!r};")
print(f"const MTTKRP_STORED: usize = {int(np.count_nonzero(X))};")
