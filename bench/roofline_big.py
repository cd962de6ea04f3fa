#!/usr/bin/env python3
"""Issue 18's bandwidth line: SpMV on a matrix larger than the last-level cache, against the
single-core STREAM triad measured in the same run (BENCHMARKS.md, "SpMV above the last-level
cache").

Run from the repository root with the package installed (scripts/test-python.sh makes the
venv):

    target/pyenv/bin/python bench/roofline_big.py [--rows 300000] [--half-band 50] [--rounds 5]

The matrix is banded (2 * half-band + 1 diagonals, random values), so every byte of it is
read once in order and `x` is reused from cache: the traffic an SpMV cannot avoid is then
the matrix itself, and the kernel can only be limited by memory bandwidth. Its size is
chosen above the last-level cache that sysfs reports (this VM says 260 MiB, shared with other
guests). Bytes moved are counted as the SpMV study's roofline counts them: values (8 bytes)
and coordinates (4) once, row pointers (4) once, x and y once.

Measured in one process, alternating in rounds (the machine is shared: each figure is the
best round's median): Tessera's compiled kernel (C backend, one thread, `out=` a reused
array) on the matrix as CSR with 4-byte indices (`asarray(copy=True)`: arrays Tessera owns,
coordinates checked once) and as `SparseBand`; the CSR kernel with its rows split between
every core (`for i = parallel(_)`, issue 17); SciPy's `A @ x` (one thread); the triad of
`bench/stream.c` compiled with `cc -O3 -march=native` and run between the rounds, and its
read-only sweep (one array summed: the ceiling of a kernel that only reads, which SpMV
nearly is; STREAM's triad also writes, and on this VM one core's mixed traffic is faster
than its reads alone).
"""

import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np
import scipy.sparse as sp

import tessera as ts
from python_spmv import median_ms

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPMV = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n"
# The rows split between the runner's threads (every core: 2 on the study's VM), by entries.
SPMV_PAR = "y .= 0\nfor i = parallel(_), j = _\n  y[i] += A[i, j] * x[j]\nend\n"
CSR32 = "Dense(SparseList(Element(0.0), coord=i32))"
BAND = "Dense(SparseBand(Element(0.0)))"


def llc_bytes() -> int:
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    for d in os.listdir(base) if os.path.isdir(base) else []:
        try:
            s = open(os.path.join(base, d, "size")).read().strip()
        except OSError:
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1], 1)
        best = max(best, int(s.rstrip("KMG")) * mult)
    return best


def banded(n: int, h: int, seed: int = 1) -> sp.csr_array:
    """n x n with the diagonals -h..h (rows near the edges shorter), values in [-1, 1)."""
    rng = np.random.default_rng(seed)
    lo = np.maximum(np.arange(n) - h, 0)
    hi = np.minimum(np.arange(n) + h, n - 1)
    counts = hi - lo + 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    nnz = int(indptr[-1])
    # Each entry's column: its row's first column plus its rank within the row.
    rank = np.arange(nnz, dtype=np.int64) - np.repeat(indptr[:-1], counts)
    indices = (np.repeat(lo, counts) + rank).astype(np.int32)
    data = rng.uniform(-1.0, 1.0, nnz)
    return sp.csr_array((data, indices, indptr.astype(np.int32)), shape=(n, n))


def stream(tmp: str) -> dict:
    exe = os.path.join(tmp, "stream")
    subprocess.run(["cc", "-O3", "-march=native", "-o", exe, os.path.join(ROOT, "bench", "stream.c")],
                   check=True, capture_output=True, text=True)
    p = subprocess.run([exe], check=True, capture_output=True, text=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--half-band", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    for v in ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"]:
        os.environ[v] = "1"

    a = banded(args.rows, args.half_band)
    n = a.shape[0]
    x = np.random.default_rng(2).uniform(-1.0, 1.0, n)
    moved = a.nnz * (8 + 4) + (n + 1) * 4 + 8 * n + 8 * n
    llc = llc_bytes()
    print(f"banded {n} x {n}, {2 * args.half_band + 1} diagonals, nnz {a.nnz}; "
          f"{moved / 1e6:.0f} MB moved per SpMV, last-level cache {llc / 2**20:.0f} MiB "
          f"({'above' if moved > llc else 'NOT above'} it)", flush=True)

    tx = ts.asarray(x)
    y = np.empty(n)
    kernels = {}
    for label, fmt in [("CSR i32", CSR32), ("SparseBand", BAND)]:
        t0 = time.perf_counter()
        ta = ts.asarray(a, format=fmt, copy=True)
        k = ts.compile(SPMV, out="y", backend="c", A=ta, x=tx)
        k(A=ta, x=tx, out=y)
        ref = a @ x
        bound = abs(a) @ np.abs(x)
        bad = np.nonzero(np.abs(y - ref) > 1e-9 * bound + 1e-300)[0]
        if len(bad):
            raise SystemExit(f"{label}: y[{bad[0]}] = {y[bad[0]]!r}, SciPy {ref[bad[0]]!r}")
        kernels[label] = k.bind(A=ta, x=tx, out=y)
        print(f"  {label}: converted and compiled in {time.perf_counter() - t0:.1f} s, checked",
              flush=True)
    ta = ts.asarray(a, format=CSR32, copy=True)
    k = ts.compile(SPMV_PAR, out="y", backend="c", A=ta, x=tx)
    k(A=ta, x=tx, out=y)
    assert np.allclose(y, a @ x, rtol=1e-9, atol=1e-12)
    kernels[f"CSR i32, parallel rows ({os.cpu_count()} cores)"] = k.bind(A=ta, x=tx, out=y)
    kernels["SciPy"] = lambda: a @ x

    best = {v: float("inf") for v in kernels}
    triad = copy = read = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            s = stream(tmp)
            triad, copy = max(triad, s["triad_gbs"]), max(copy, s["copy_gbs"])
            read = max(read, s["read_gbs"])
            for v, f in kernels.items():
                best[v] = min(best[v], median_ms(f, args.repeat))
            print(f"  round {r + 1}: triad {s['triad_gbs']:.2f} GB/s, "
                  + ", ".join(f"{v} {best[v]:.2f} ms" for v in kernels), flush=True)

    print()
    print(f"STREAM triad (best of {args.rounds} runs of bench/stream.c, one core): "
          f"**{triad:.2f} GB/s** (copy {copy:.2f} GB/s); read-only sweep {read:.2f} GB/s")
    print()
    print("| kernel | ms | GB/s | % of STREAM triad | % of the read-only sweep |")
    print("|---|---:|---:|---:|---:|")
    for v, ms in best.items():
        gbs = moved / (ms * 1e-3) / 1e9
        print(f"| {v} | {ms:.2f} | {gbs:.2f} | {100 * gbs / triad:.0f}% | {100 * gbs / read:.0f}% |")


if __name__ == "__main__":
    main()
