#!/usr/bin/env python3
"""α-β communication model of the distributed commands (`tessera dist`, crates/tessera-mpi)
at 64-1,024 ranks, from the exact per-rank volumes of the partitions the commands use.

    python3 bench/mpi_model.py [--data ../shared/data/matrices] [--ranks 64,128,256,512,1024]
                               [MATRIX.mtx ...]

Pure Python (no NumPy). For each matrix and rank count P it builds the partitions exactly as
crates/tessera-mpi does and prints one Markdown row:

* SpMV (1-D rows balanced by stored entries, x split as the rows): per rank the stored entries
  nnz_r, the ghost values g_r (distinct columns outside its range) and the messages m_r (ranks
  owning them). Time of one product: T_P = max_r (16 nnz_r / B + α m_r + 8 β g_r) (CSR streams
  16 bytes per entry; no credit for the overlap, so an upper bound); speedup T_1 / T_P.
* SpGEMM C = A·A by 2-D Sparse SUMMA on a √P x √P grid (P a square; 64, 256, 1024): per rank
  the entries of the A and B blocks it receives over the √P stages (24 bytes each as sent:
  row, column, value), the exact multiply-adds of its C block, and
  T_P = max_r (flops_r · t_f + 2 √P ⌈log2 √P⌉ α + β bytes_r); speedup T_1 / T_P with
  T_1 = flops · t_f. Beside it, the volume the 1-D row algorithm would receive (the rows of B
  a rank's A references but does not own).

Parameters (defaults: a 2020s cluster node, one rank per core): B = 10 GB/s of memory
bandwidth per rank, α = 2 µs per message, 1/β = 5 GB/s per rank, t_f = 5 ns per SpGEMM
multiply-add (one rank of `tessera dist spgemm` took 17 ns per multiply-add on ca-HepPh here,
30.8e6 of them in 534 ms on a loaded machine; the smaller value is the conservative choice, as
a faster kernel makes the communication weigh more).
"""

import argparse
import bisect
import math
import sys
from collections import defaultdict
from pathlib import Path


def read_mtx(path):
    """(m, n, rows, cols), 0-based, symmetric files expanded as Tessera's reader does."""
    with open(path) as f:
        header = f.readline().lower().split()
        symmetric = len(header) > 4 and header[4] in ("symmetric", "skew-symmetric", "hermitian")
        line = f.readline()
        while line.startswith("%"):
            line = f.readline()
        m, n, _ = (int(t) for t in line.split()[:3])
        rows, cols = [], []
        for line in f:
            t = line.split()
            if len(t) < 2:
                continue
            i, j = int(t[0]) - 1, int(t[1]) - 1
            rows.append(i)
            cols.append(j)
            if symmetric and i != j:
                rows.append(j)
                cols.append(i)
    # Repeated positions are one entry.
    pairs = sorted(set(zip(rows, cols)))
    return m, n, [p[0] for p in pairs], [p[1] for p in pairs]


def balanced(row_counts, parts):
    """crates/tessera-mpi/src/partition.rs: range r starts at the first row i with
    entries(rows < i) * parts >= r * nnz."""
    n, nnz = len(row_counts), sum(row_counts)
    if nnz == 0 or parts <= 1:
        return [r * n // max(parts, 1) for r in range(parts + 1)]
    bounds, row, before = [0], 0, 0
    for r in range(1, parts):
        while row < n and before * parts < r * nnz:
            before += row_counts[row]
            row += 1
        bounds.append(row)
    bounds.append(n)
    return bounds


def even(n, parts):
    return [r * n // parts for r in range(parts + 1)]


def owner(bounds, i):
    """The range holding i (crates/tessera-mpi: the last range starting at or before i)."""
    return bisect.bisect_right(bounds, i, 1, len(bounds) - 1) - 1


def spmv(m, n, rows, cols, p, a):
    counts = [0] * m
    for i in rows:
        counts[i] += 1
    rb = balanced(counts, p)
    cb = rb if m == n else even(n, p)
    ghosts = [set() for _ in range(p)]
    nnz_r = [0] * p
    for i, j in zip(rows, cols):
        r = owner(rb, i)
        nnz_r[r] += 1
        if not (cb[r] <= j < cb[r + 1]):
            ghosts[r].add(j)
    msgs = [len({owner(cb, j) for j in g}) for g in ghosts]
    g = [len(s) for s in ghosts]
    t = [16 * nnz_r[r] / a.bw + a.alpha * msgs[r] + 8 * g[r] / a.beta_bw for r in range(p)]
    t1 = 16 * len(rows) / a.bw
    return {"max_ghosts": max(g), "sum_ghosts": sum(g), "max_msgs": max(msgs),
            "imbalance": max(nnz_r) * p / max(len(rows), 1), "speedup": t1 / max(t)}


def spgemm(m, n, rows, cols, p, a):
    """C = A A by SUMMA on a √p x √p grid; None when p is not a square."""
    s = math.isqrt(p)
    if s * s != p:
        return None
    counts = [0] * m
    for i in rows:
        counts[i] += 1
    rb = balanced(counts, s)
    kb = even(n, s)
    cb = even(n, s)
    # Entries of A's block (I, K) and B's block (K, J) (B = A, blocked differently).
    a_blk = defaultdict(int)
    b_blk = defaultdict(int)
    col_groups = defaultdict(lambda: defaultdict(int))  # k -> grid row I -> entries A[I-rows, k]
    row_groups = defaultdict(lambda: defaultdict(int))  # k -> grid col J -> entries B[k, J-cols]
    for i, j in zip(rows, cols):
        a_blk[(owner(rb, i), owner(kb, j))] += 1
        b_blk[(owner(kb, i), owner(cb, j))] += 1
        col_groups[j][owner(rb, i)] += 1
        row_groups[i][owner(cb, j)] += 1
    flops = defaultdict(int)
    for k, ga in col_groups.items():
        gb = row_groups.get(k)
        if not gb:
            continue
        for bi, x in ga.items():
            for bj, y in gb.items():
                flops[(bi, bj)] += x * y
    total = sum(flops.values())
    worst = 0.0
    max_bytes = 0
    for bi in range(s):
        for bj in range(s):
            recv = sum(a_blk[(bi, k)] for k in range(s) if k != bj)
            recv += sum(b_blk[(k, bj)] for k in range(s) if k != bi)
            by = 24 * recv
            max_bytes = max(max_bytes, by)
            lat = 2 * s * max(1, math.ceil(math.log2(s))) * a.alpha if s > 1 else 0
            worst = max(worst, flops[(bi, bj)] * a.tf + lat + by / a.beta_bw)
    # The 1-D row algorithm: rows of B referenced by a rank's A rows and owned elsewhere.
    rb1 = balanced(counts, p)
    need = [set() for _ in range(p)]
    for i, j in zip(rows, cols):
        r = owner(rb1, i)
        if not (rb1[r] <= j < rb1[r + 1]):
            need[r].add(j)
    recv1 = max(sum(counts[k] for k in ks) for ks in need)
    return {"flops": total, "max_bytes": max_bytes, "rows_max_bytes": 24 * recv1,
            "speedup": total * a.tf / worst if worst else float("nan")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("matrices", nargs="*")
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/matrices"))
    ap.add_argument("--ranks", default="64,128,256,512,1024")
    ap.add_argument("--bw", type=float, default=10e9, help="memory bandwidth per rank, bytes/s")
    ap.add_argument("--alpha", type=float, default=2e-6, help="latency per message, s")
    ap.add_argument("--beta-bw", type=float, default=5e9, help="network bandwidth per rank, bytes/s")
    ap.add_argument("--tf", type=float, default=5e-9, help="seconds per SpGEMM multiply-add")
    a = ap.parse_args()
    names = a.matrices or [str(Path(a.data) / f"{m}.mtx") for m in
                           ("web-NotreDame", "c-55", "delaunay_n17", "bcsstk16", "ca-HepPh")]
    ranks = [int(x) for x in a.ranks.split(",")]
    print("| matrix | nnz | P | SpMV max ghosts | SpMV max msgs | nnz imbalance | SpMV speedup | "
          "SUMMA max MB recv | 1-D rows max MB recv | SUMMA speedup |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in names:
        if not Path(path).is_file():
            print(f"skipping {path}: absent", file=sys.stderr)
            continue
        m, n, rows, cols = read_mtx(path)
        for p in ranks:
            v = spmv(m, n, rows, cols, p, a)
            g = spgemm(m, n, rows, cols, p, a) if m == n else None
            sg = (f"{g['max_bytes'] / 1e6:.2f} | {g['rows_max_bytes'] / 1e6:.2f} | {g['speedup']:.0f}"
                  if g else "– | – | –")
            print(f"| {Path(path).stem} | {len(rows)} | {p} | {v['max_ghosts']} | {v['max_msgs']} | "
                  f"{v['imbalance']:.2f} | {v['speedup']:.1f} | {sg} |", flush=True)


if __name__ == "__main__":
    main()
