"""How much work the serial push steps of the parallel graph drivers hold (issue 17): per step
of direction-optimizing BFS (Beamer's switch as in src/algorithms/bfs.rs, ALPHA 14, BETA 24)
and per round of frontier Bellman-Ford (examples/bellman_ford.tess on the study's weights
1..64), from the vertex of largest degree, the out-edges a push walks: the work a parallel
push step could split, to compare with the threshold below which a parallel range runs on one
thread (`backend::parallel::MIN_PARALLEL_WORK`, 40 000) and with the `n` elements a private
copy of the parents or distances costs per chunk and step. Counts only; nothing is timed.

    bench/.venv/bin/python bench/graph_push_work.py [graph ...]   # default: delaunay_n17 ca-HepPh
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "studies"))

import data  # noqa: E402
import graphs  # noqa: E402

ALPHA, BETA = 14.0, 24.0
MIN_PARALLEL_WORK = 40_000


def bfs_push_edges(a) -> tuple[list[int], int]:
    """The out-edges of each push step's frontier, and the number of pull steps."""
    n = a.shape[0]
    deg = np.diff(a.indptr)
    src = int(np.argmax(deg))
    visited = np.zeros(n, bool)
    visited[src] = True
    frontier = np.array([src])
    frontier_edges, unexplored = int(deg[src]), int(a.nnz - deg[src])
    previous, last = "push", 0
    push, pulls = [], 0
    while len(frontier):
        f = len(frontier)
        if previous == "pull":
            step = "push" if (f < last and f < n / BETA) else "pull"
        else:
            step = "pull" if frontier_edges > unexplored / ALPHA else "push"
        previous, last = step, f
        if step == "push":
            push.append(frontier_edges)
        else:
            pulls += 1
        nbrs = np.unique(a[frontier].indices)
        frontier = nbrs[~visited[nbrs]]
        visited[frontier] = True
        frontier_edges = int(deg[frontier].sum())
        unexplored -= frontier_edges
    return push, pulls


def bellman_ford_push_edges(w) -> list[int]:
    """The out-edges of each round's improved vertices."""
    n = w.shape[0]
    deg = np.diff(w.indptr)
    d = np.full(n, np.inf)
    d[int(np.argmax(deg))] = 0
    frontier = np.array([int(np.argmax(deg))])
    work = []
    while len(frontier):
        work.append(int(deg[frontier].sum()))
        sub = w[frontier].tocoo()
        nxt = d.copy()
        np.minimum.at(nxt, sub.col, d[frontier][sub.row] + sub.data)
        frontier = np.nonzero(nxt < d)[0]
        d = nxt
    return work


def main() -> None:
    names = sys.argv[1:] or ["delaunay_n17", "ca-HepPh"]
    print("| graph | vertices | edges | algorithm | push steps | pull steps | edges pushed | "
          "median per push step | largest | push steps over 40 000 |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for name in names:
        a = graphs.pattern(data.load_mtx(name, HERE.parent.parent / "shared" / "data").tocsr())
        n, m = a.shape[0], a.nnz
        push, pulls = bfs_push_edges(a)
        rounds = bellman_ford_push_edges(graphs.edge_weights(a))
        for alg, steps, pull in [("BFS (direction-optimizing)", push, pulls),
                                 ("Bellman-Ford (every round pushing)", rounds, 0)]:
            s = np.array(steps)
            print(f"| {name} | {n:,} | {m:,} | {alg} | {len(s)} | {pull} | {int(s.sum()):,} | "
                  f"{int(np.median(s)):,} | {int(s.max()):,} | {int((s > MIN_PARALLEL_WORK).sum())} |")


if __name__ == "__main__":
    main()
