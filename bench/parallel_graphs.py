"""Parallel graph drivers (issue 17): `tessera graph bfs-do` and `tessera graph bellman-ford`
with 1 and 2 threads against SuiteSparse:GraphBLAS (python-graphblas, the LAGraph-style BFS and
Bellman-Ford of bench/studies/graphs.py) with `gb.ss.config["nthreads"]` 1 and 2.

    cargo build --release
    bench/.venv/bin/python bench/parallel_graphs.py [graph ...]   # default: delaunay_n17 ca-HepPh

Graphs come from ../shared/data/matrices as patterns; Bellman-Ford runs on the study's integer
weights 1..64 (bench/studies/graphs.py `edge_weights`), from the vertex of largest degree. Each
configuration runs `rounds` times in alternation (thread counts interleaved, so a change in the
machine's load hits all of them), each time the median of `--repeat` runs after `--warmup`;
the table shows the best of those medians and the load average before and after. Tessera's
results on 2 threads are compared with 1 thread's (files of parents and distances, byte for
byte) before anything is timed. A second table gives each Tessera run's steps by kind (`push`
on one thread, `push_split` between the threads, `pull`), the commit and the machine's cores:
everything needed to compare a re-run on an idle machine.
"""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "studies"))

import data  # noqa: E402
import graphs  # noqa: E402
from harness import median_ms  # noqa: E402

ROUNDS, WARMUP, REPEAT = 3, 2, 7
EXE = HERE.parent / "target" / "release" / "tessera"
SCRATCH = Path("/tmp/tessera-parallel-graphs")


def tessera(alg: str, path: Path, src: int, threads: int, outs=None) -> dict:
    cmd = [EXE, "graph", alg, "--in", f"A={path}", "--source", str(src), "--threads",
           str(threads), "--warmup", str(WARMUP), "--repeat", str(REPEAT), "--json"]
    for k, v in (outs or {}).items():
        cmd += ["--out", f"{k}={v}"]
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def same_results(alg: str, path: Path, src: int) -> None:
    files = {}
    for t in [1, 2]:
        files[t] = {k: SCRATCH / f"{alg}_{path.stem}_{k}_{t}.npy" for k in ["parents", "dist"]}
        tessera(alg, path, src, t, files[t])
    for k in ["parents", "dist"]:
        if not filecmp.cmp(files[1][k], files[2][k], shallow=False):
            raise SystemExit(f"{alg} on {path.stem}: {k} differ between 1 and 2 threads")


def main() -> None:
    names = sys.argv[1:] or ["delaunay_n17", "ca-HepPh"]
    SCRATCH.mkdir(parents=True, exist_ok=True)
    try:
        import graphblas as gb
    except ImportError as e:
        gb = None
        print(f"GraphBLAS skipped: {e}")
    rows = []
    steps: dict[tuple[str, str, int], dict] = {}
    load0 = os.getloadavg()
    for name in names:
        a = graphs.pattern(data.load_mtx(name, HERE.parent.parent / "shared" / "data").tocsr())
        w = graphs.edge_weights(a)
        src = graphs.pick_source(a)
        gpath = data.write_mtx(a, SCRATCH / f"graph_{name}.mtx")
        wpath = data.write_mtx(w, SCRATCH / f"weights_{name}.mtx")
        peer = graphs.GraphBLAS(a, w) if gb else None
        cases = {
            "BFS (direction-optimizing)": ("bfs-do", gpath, lambda: peer.bfs(src, True)),
            "Bellman-Ford": ("bellman-ford", wpath, lambda: peer.bellman_ford(src)),
        }
        for label, (alg, path, gb_run) in cases.items():
            same_results(alg, path, src)
            best: dict[str, float] = {}
            for _ in range(ROUNDS):
                for t in [1, 2]:
                    run = tessera(alg, path, src, t)
                    ms = run["median_ms"]
                    best[f"tessera {t}"] = min(best.get(f"tessera {t}", ms), ms)
                    steps[(name, label, t)] = run.get("steps", {})
                    if peer:
                        gb.ss.config["nthreads"] = t
                        for _ in range(WARMUP):
                            gb_run()
                        ms = median_ms(gb_run, REPEAT)[0]
                        best[f"GraphBLAS {t}"] = min(best.get(f"GraphBLAS {t}", ms), ms)
            rows.append((name, a.shape[0], a.nnz, label, best))
    load1 = os.getloadavg()
    commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    now = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    print(f"load average before {load0[0]:.2f}, after {load1[0]:.2f} ({now} UTC); "
          f"{os.cpu_count()} cores; commit {commit}; rounds {ROUNDS}, warmup {WARMUP}, "
          f"repeat {REPEAT}")
    print("| graph | algorithm | Tessera 1 thread | Tessera 2 threads | speed-up | "
          "GraphBLAS 1 thread | GraphBLAS 2 threads |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, n, nnz, label, b in rows:
        t1, t2 = b["tessera 1"], b["tessera 2"]
        g1, g2 = b.get("GraphBLAS 1"), b.get("GraphBLAS 2")
        fmt = lambda x: "n/a" if x is None else f"{x:.1f} ms"  # noqa: E731
        print(f"| {name} ({n} vertices, {nnz} edges) | {label} | {t1:.1f} ms | {t2:.1f} ms | "
              f"{t1 / t2:.2f}x | {fmt(g1)} | {fmt(g2)} |")
    print()
    print("| graph | algorithm | threads | steps pushed on one thread | pushes split | pulls |")
    print("|---|---|---:|---:|---:|---:|")
    for (name, label, t), s in steps.items():
        print(f"| {name} | {label} | {t} | {s.get('push', '?')} | {s.get('push_split', '?')} | "
              f"{s.get('pull', '?')} |")


if __name__ == "__main__":
    main()
