#!/usr/bin/env python3
"""SpMV, an elementwise chain and a reduction on a sparse matrix larger than any one worker's
memory budget, with Tessera tensors as the blocks of a Dask array on a LocalCluster.

The matrix is generated block by block from a seed where a task needs the block (it never
exists in one process), y = A @ x is summed along each row of blocks, and each worker's
memory is capped below the matrix's size:

    python python/examples/dask_spmv.py                 # 4e6 x 4e6, 2e8 entries (2.4 GB)
    python python/examples/dask_spmv.py --rows 200000 --per-row 20 --memory 300MB

It prints the matrix's bytes, the memory budget, the times, and checks y against SciPy
block by block (regenerating each block on the client, one at a time).
"""

import argparse
import time

import numpy as np
import scipy.sparse as sp

import tessera as ts
import tessera.dask as tsd


def block_maker(n_rows, n_cols, per_row, seed):
    """`make(idx, slices)` for `tessera.dask.from_blocks`: the block's entries from a seed of
    its own, so any process makes the same block."""

    def make(idx, index):
        (r0, r1), (c0, c1) = [(s.start, s.stop) for s in index]
        rng = np.random.default_rng([seed, idx[0], idx[1]])
        rows, cols = r1 - r0, c1 - c0
        # About per_row entries a row over the whole width, this block's share of them: one
        # column drawn in each of k equal strata of the block's width, so every row's
        # columns come sorted and distinct without a sort (little memory beyond the CSR).
        k = max(1, min(cols, round(per_row * cols / n_cols)))
        starts = (np.arange(k, dtype=np.int64) * cols) // k
        widths = np.diff(np.append(starts, cols))
        c = (starts + (rng.random((rows, k)) * widths).astype(np.int64)).astype(np.int32).ravel()
        v = rng.standard_normal(rows * k)
        ptr = np.arange(rows + 1, dtype=np.int32) * k
        return sp.csr_array((v, c, ptr), shape=(rows, cols))

    return make


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--per-row", type=int, default=50)
    ap.add_argument("--row-block", type=int, default=50_000)
    ap.add_argument("--col-blocks", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory", default="600MB", help="memory limit of each worker")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()

    from dask.distributed import Client, LocalCluster
    from dask.utils import parse_bytes

    n = args.rows
    col_chunk = -(-n // args.col_blocks)
    make = block_maker(n, n, args.per_row, args.seed)
    A = tsd.from_blocks(make, (n, n), chunks=(args.row_block, col_chunk), format="csr")
    x = np.random.default_rng(args.seed).standard_normal(n)
    matrix_bytes = n * args.per_row * 12 + (n + 1) * 8 * args.col_blocks
    budget = parse_bytes(args.memory)
    print(f"matrix: {n} x {n}, about {n * args.per_row:,} entries, {matrix_bytes / 1e9:.2f} GB as CSR; "
          f"{args.workers} workers of {budget / 1e9:.2f} GB each; blocks {A.chunksize}")

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, memory_limit=args.memory,
                      processes=True, dashboard_address=":0") as cluster, Client(cluster) as client:
        t0 = time.perf_counter()
        y = tsd.spmv(A, x).compute()
        t1 = time.perf_counter()
        total = tsd.reduce(tsd.map_blocks(lambda b: abs(b) * 2.0, A), "sum").compute()
        t2 = time.perf_counter()
        print(f"spmv: {t1 - t0:.2f} s; sum(|A| * 2): {float(total):.6g} in {t2 - t1:.2f} s")

    if not args.no_check:
        want = np.zeros(n)
        want_total = 0.0
        for bi, (r0, r1) in enumerate(zip(range(0, n, args.row_block), list(range(args.row_block, n, args.row_block)) + [n])):
            for bj in range(args.col_blocks):
                c0, c1 = bj * col_chunk, min(n, (bj + 1) * col_chunk)
                m = make((bi, bj), (slice(r0, r1), slice(c0, c1)))
                want[r0:r1] += m @ x[c0:c1]
                want_total += 2.0 * np.abs(m.data).sum()
        assert np.allclose(y, want, rtol=1e-10, atol=1e-10), "spmv differs from SciPy"
        assert np.isclose(float(total), want_total, rtol=1e-10), "sum differs from SciPy"
        print("checked against SciPy, block by block")
    return y


if __name__ == "__main__":
    main()
