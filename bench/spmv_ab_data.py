"""Raw CSR arrays for bench/spmv_ab.c: DIR/4 (int32 indices) and DIR/8 (int64), x from a .npy.

    bench/.venv/bin/python bench/spmv_ab_data.py MATRIX(.mtx|.npz) DIR X.npy
"""
import sys, numpy as np, scipy.io, scipy.sparse as sp
src, out, xn = sys.argv[1], sys.argv[2], sys.argv[3]
import os; os.makedirs(out + '/4', exist_ok=True); os.makedirs(out + '/8', exist_ok=True)
A = sp.load_npz(src) if src.endswith('.npz') else scipy.io.mmread(src).tocsr()
A.sort_indices()
x = np.load(xn)
for w, t in [(4, np.int32), (8, np.int64)]:
    A.indptr.astype(t).tofile(f'{out}/{w}/ptr.bin'); A.indices.astype(t).tofile(f'{out}/{w}/idx.bin')
    A.data.astype(np.float64).tofile(f'{out}/{w}/val.bin'); x.astype(np.float64).tofile(f'{out}/{w}/x.bin')
print(out, A.shape, A.nnz)
