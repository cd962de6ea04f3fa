"""Parallel SpMV (issue 17): `for i = parallel(_), j = _; y[i] += A[i, j] * x[j]` on a random
n x n CSR matrix larger than the last-level cache, with 1 and 2 threads on the JIT and the C
backend, against SciPy's (single-threaded) `A @ x` and the threaded peers with 1 and 2
threads: MKL (`sparse_dot_mkl`, `mkl_set_num_threads`) and SuiteSparse:GraphBLAS
(`python-graphblas`, `gb.ss.config["nthreads"]`), each skipped with a message when absent.

    MKL_RT=bench/.venv/lib/libmkl_rt.so.3 bench/.venv/bin/python bench/parallel_spmv.py [n] [nnz]

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
from harness import median_ms

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


def timed(f, repeat=20, warmup=3):
    for _ in range(warmup):
        f()
    return median_ms(f, repeat)[0]


y_ref = A @ x
try:
    import sparse_dot_mkl as mkl

    assert np.allclose(mkl.dot_product_mkl(A, x), y_ref, rtol=1e-12)
    for threads in [1, 2]:
        mkl.mkl_set_num_threads(threads)
        print(f"MKL threads={threads}: median {timed(lambda: mkl.dot_product_mkl(A, x)):.1f} ms")
except (ImportError, OSError) as e:
    print(f"MKL skipped: {str(e).splitlines()[-1]}")
try:
    import graphblas as gb

    ga, gx = gb.io.from_scipy_sparse(A), gb.Vector.from_dense(x)
    got = ga.mxv(gx, gb.semiring.plus_times).new().to_dense(fill_value=0.0)
    assert np.allclose(got, y_ref, rtol=1e-12)
    for threads in [1, 2]:
        gb.ss.config["nthreads"] = threads
        med = timed(lambda: ga.mxv(gx, gb.semiring.plus_times).new())
        print(f"GraphBLAS threads={threads}: median {med:.1f} ms")
except ImportError as e:
    print(f"GraphBLAS skipped: {e}")

prog = "y .= 0\nfor i = parallel(_), j = _\n  y[i] += A[i, j] * x[j]\nend"
# Each row's sum in lanes as well (`vectorize(j)`: reassociated, as MKL's).
lanes = "y .= 0\nfor i = parallel(_), j = vectorize(_)\n  y[i] += A[i, j] * x[j]\nend"
exe = os.path.join(os.path.dirname(__file__), "..", "target", "release", "tessera")
CSR = "Dense(SparseList(Element(0.0)))"
CSR32 = "Dense(SparseList(Element(0.0), coord=i32))"
for backend, fmt, text, label in [
    ("jit", CSR, prog, ""),
    ("c", CSR, prog, ""),
    ("c", CSR32, prog, " i32"),
    ("c", CSR32, lanes, " i32 vectorize(j)"),
]:
    for threads in [1, 2]:
        out = subprocess.run(
            [exe, "bench", text, "--in", f"A={mtx}@{fmt}",
             "--in", f"x={vec}@Dense(Element(0.0))", "--out", f"y={d}/y.npy", "--backend", backend,
             "--threads", str(threads), "--warmup", "3", "--repeat", "20", "--json"],
            check=True, capture_output=True, text=True,
        ).stdout
        r = json.loads(out)
        y = np.load(f"{d}/y.npy")
        assert np.allclose(y, y_ref, rtol=1e-12), f"{backend}{label}: wrong y"
        print(f"tessera {backend}{label} threads={threads}: median {r['median_ms']:.1f} ms, "
              f"min {r['min_ms']:.1f} ms")
