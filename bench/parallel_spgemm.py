"""Parallel SpGEMM (issue 17): Gustavson's C = A A (`examples/spgemm_gustavson.tess` with the
schedule `parallelize(i)`, so each chunk of rows has its own workspace row and appends its rows
of C into fragments joined in chunk order) with 1 and 2 threads, against SuiteSparse:GraphBLAS
(python-graphblas `mxm`, `gb.ss.config["nthreads"]`) and MKL (`sparse_dot_mkl`,
`mkl_set_num_threads`) with 1 and 2 threads, and SciPy (one thread).

    cargo build --release
    MKL_RT=bench/.venv/lib/libmkl_rt.so.3 bench/.venv/bin/python bench/parallel_spgemm.py \
        [--backend c|jit|tiered] [matrix ...]

Matrices come from ../shared/data/matrices (default: the SpGEMM study's four quick ones and
three larger ones). Before anything is timed, Tessera's C on 1 and 2 threads are compared byte
for byte (the written .mtx files) and with SciPy's product (same pattern, values within 1e-9
relative). Each configuration runs `ROUNDS` times in alternation (thread counts interleaved, so
a change in the machine's load hits all of them), each the median of `REPEAT` runs after
`WARMUP`; the table shows the best of those medians and the load average before and after.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "studies"))

import data  # noqa: E402
from harness import median_ms  # noqa: E402

ROUNDS, WARMUP, REPEAT = (int(v) for v in os.environ.get("TESSERA_BENCH_RWR", "3,2,7").split(","))
EXE = HERE.parent / "target" / "release" / "tessera"
SCRATCH = Path("/tmp/tessera-parallel-spgemm")
CSR = "Dense(SparseList(Element(0.0)))"
DEFAULT = ["bcsstk16", "delaunay_n14", "ca-HepPh", "Fashion_MNIST_norm_10NN", "cryg10000",
           "bayer10", "usroads"]


def tessera(path: Path, threads: int, backend: str, out: Path | None = None) -> dict:
    c = f"C={out}@{CSR}" if out else f"C@{CSR}"
    cmd = [EXE, "bench", HERE.parent / "examples" / "spgemm_gustavson.tess",
           "--schedule", "parallelize(i)", "--in", f"A={path}@{CSR}", "--in", f"B={path}@{CSR}",
           "--out", c, "--out", "w@SparseByteMap(Element(0.0))", "--backend", backend,
           "--threads", str(threads), "--warmup", str(WARMUP), "--repeat", str(REPEAT), "--json"]
    p = subprocess.run([str(x) for x in cmd], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"tessera failed on {path.name}: {p.stderr.strip()}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def check(name: str, path: Path, a: sp.csr_matrix, backend: str) -> None:
    files = {t: SCRATCH / f"C_{name}_{t}.mtx" for t in [1, 2]}
    for t, f in files.items():
        tessera(path, t, backend, f)
    if not filecmp.cmp(files[1], files[2], shallow=False):
        raise SystemExit(f"{name}: C differs between 1 and 2 threads")
    got = sp.csr_matrix(scipy.io.mmread(str(files[2])))
    ref = (a @ a).tocsr()
    ref.sort_indices()
    got.sort_indices()
    diff = abs(got - ref)
    bound = (abs(a) @ abs(a)).tocsr()
    if diff.nnz and (diff > bound * 1e-9).nnz:
        raise SystemExit(f"{name}: Tessera's C differs from SciPy's beyond 1e-9 relative")


def peers(a: sp.csr_matrix) -> dict:
    """name -> (set_threads(t) or None, run())."""
    out = {"SciPy": (None, lambda: a @ a)}
    try:
        import graphblas as gb

        ga = gb.io.from_scipy_sparse(a)
        out["GraphBLAS"] = (lambda t: gb.ss.config.__setitem__("nthreads", t),
                            lambda: ga.mxm(ga, gb.semiring.plus_times).new())
    except ImportError as e:
        print(f"GraphBLAS skipped: {e}")
    try:
        import sparse_dot_mkl as mkl

        out["MKL"] = (mkl.mkl_set_num_threads, lambda: mkl.dot_product_mkl(a, a))
    except (ImportError, OSError) as e:
        print(f"MKL skipped: {str(e).splitlines()[-1]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="c")
    ap.add_argument("matrices", nargs="*", default=DEFAULT)
    args = ap.parse_args()
    SCRATCH.mkdir(parents=True, exist_ok=True)
    shared = HERE.parent.parent / "shared" / "data"
    load0 = os.getloadavg()
    rows = []
    for name in args.matrices:
        a = sp.csr_matrix(data.load_mtx(name, shared), dtype=np.float64)
        path = data.write_mtx(a, SCRATCH / f"A_{name}.mtx")
        check(name, path, a, args.backend)
        ps = peers(a)
        best: dict[str, float] = {}

        def keep(key: str, ms: float) -> None:
            best[key] = min(best.get(key, ms), ms)

        for _ in range(ROUNDS):
            for t in [1, 2]:
                keep(f"Tessera {t}", tessera(path, t, args.backend)["median_ms"])
                for peer, (set_threads, run) in ps.items():
                    if set_threads is None and t == 2:
                        continue
                    if set_threads:
                        set_threads(t)
                    for _ in range(WARMUP):
                        run()
                    keep(f"{peer} {t}", median_ms(run, REPEAT)[0])
        nnz_c = (a @ a).nnz
        rows.append((name, a.shape[0], a.nnz, nnz_c, best))
        print(f"{name}: " + ", ".join(f"{k} {v:.2f}" for k, v in best.items()), flush=True)
    load1 = os.getloadavg()
    commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    now = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    print(f"\nload average before {load0[0]:.2f}, after {load1[0]:.2f} ({now} UTC); "
          f"{os.cpu_count()} cores; commit {commit}; backend {args.backend}; rounds {ROUNDS}, "
          f"warmup {WARMUP}, repeat {REPEAT}; ms")
    print("| matrix | n | nnz(A) | nnz(C) | Tessera 1 | Tessera 2 | 1 / 2 threads | "
          "GraphBLAS 1 | GraphBLAS 2 | MKL 1 | MKL 2 | SciPy | GraphBLAS 2 / Tessera 2 | "
          "MKL 2 / Tessera 2 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    fmt = lambda x: "n/a" if x is None else f"{x:.2f}"  # noqa: E731
    for name, n, nnz, nnz_c, b in rows:
        t1, t2 = b["Tessera 1"], b["Tessera 2"]
        g2, m2 = b.get("GraphBLAS 2"), b.get("MKL 2")
        print(f"| {name} | {n} | {nnz} | {nnz_c} | {t1:.2f} | {t2:.2f} | {t1 / t2:.2f}x | "
              f"{fmt(b.get('GraphBLAS 1'))} | {fmt(g2)} | {fmt(b.get('MKL 1'))} | {fmt(m2)} | "
              f"{fmt(b.get('SciPy 1'))} | {fmt(g2 and g2 / t2)}x | {fmt(m2 and m2 / t2)}x |")


if __name__ == "__main__":
    main()
