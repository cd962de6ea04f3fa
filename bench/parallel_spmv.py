"""Parallel SpMV (issue 17): `for i = parallel(_), j = _; y[i] += A[i, j] * x[j]` on a random
n x n CSR matrix larger than the last-level cache, with 1 and 2 threads on the JIT and the C
backend, and SciPy's (single-threaded) `A @ x` for reference.

    python3 bench/parallel_spmv.py [n] [nnz]      # needs numpy and scipy (a venv)

Writes the matrix and vector under /tmp/tessera-parallel-spmv/ once, then runs
`tessera bench` (built with `cargo build --release`) for each backend and thread count.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse as sp

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
nnz = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000
d = "/tmp/tessera-parallel-spmv"
os.makedirs(d, exist_ok=True)
mtx, vec = f"{d}/A_{n}_{nnz}.mtx", f"{d}/x_{n}.tns"
rng = np.random.default_rng(7)
if not os.path.exists(mtx):
    A = sp.coo_matrix(
        (rng.random(nnz), (rng.integers(0, n, nnz), rng.integers(0, n, nnz))), shape=(n, n)
    ).tocsr()
    scipy.io.mmwrite(mtx, A)
    x = rng.random(n)
    with open(vec, "w") as f:
        f.writelines(f"{k + 1} {float(v)!r}\n" for k, v in enumerate(x))
A = scipy.io.mmread(mtx).tocsr()
x = np.loadtxt(vec, usecols=1)
for _ in range(3):
    A @ x
ts = []
for _ in range(20):
    t = time.perf_counter()
    A @ x
    ts.append((time.perf_counter() - t) * 1e3)
print(f"scipy A @ x: median {np.median(ts):.1f} ms, min {min(ts):.1f} ms (nnz {A.nnz})")

prog = "y .= 0\nfor i = parallel(_), j = _\n  y[i] += A[i, j] * x[j]\nend"
exe = os.path.join(os.path.dirname(__file__), "..", "target", "release", "tessera")
for backend in ["jit", "c"]:
    for threads in [1, 2]:
        out = subprocess.run(
            [exe, "bench", prog, "--in", f"A={mtx}@Dense(SparseList(Element(0.0)))",
             "--in", f"x={vec}@Dense(Element(0.0))", "--out", "y", "--backend", backend,
             "--threads", str(threads), "--warmup", "3", "--repeat", "20", "--json"],
            check=True, capture_output=True, text=True,
        ).stdout
        r = json.loads(out)
        print(f"tessera {backend} threads={threads}: median {r['median_ms']:.1f} ms, "
              f"min {r['min_ms']:.1f} ms")
