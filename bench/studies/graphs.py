"""Graph algorithms (Finch §6.4 / §7): BFS with parents (push-only and direction-optimizing)
and Bellman-Ford with distances and predecessors, against SuiteSparse:GraphBLAS
(python-graphblas, LAGraph-style algorithms written here) and scipy.sparse.csgraph.

Every Tessera result is checked before timing: BFS parents must form a valid BFS tree whose
levels equal the peer's (the parents themselves may differ); Bellman-Ford distances must
equal the peer's and every predecessor edge must be tight. Bellman-Ford runs on generated
integer weights 1..64 (a hash of the edge's end points), so path sums are exact.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

import data
import harness

TITLE = "Graphs: BFS with parents and Bellman-Ford (whole algorithm)"
PEERS = ["GraphBLAS", "scipy.csgraph"]

# (name, directed) from ../shared/data/matrices; the quick run keeps the first two.
DATA_GRAPHS = [
    ("delaunay_n14", False),
    ("ca-HepPh", False),
    ("delaunay_n17", False),
    ("usroads", False),
    ("web-NotreDame", True),
]
RMAT_SCALES_QUICK = [14]
RMAT_SCALES_FULL = [14, 17]
# scipy's bellman_ford does not stop when nothing changes: it costs n * edges relaxations.
SCIPY_BF_LIMIT = 2e9


# ---- graphs ----------------------------------------------------------------------------------


def edge_weights(a: sp.csr_matrix) -> sp.csr_matrix:
    """The pattern of `a` with integer weights 1..64 from a hash of the unordered edge, so an
    undirected graph stays symmetric and every path sum is exact in float64."""
    coo = a.tocoo()
    lo = np.minimum(coo.row, coo.col).astype(np.uint64)
    hi = np.maximum(coo.row, coo.col).astype(np.uint64)
    h = (lo * np.uint64(2654435761) + hi * np.uint64(40503) + np.uint64(97)) % np.uint64(64)
    w = sp.csr_matrix((h.astype(np.float64) + 1.0, (coo.row, coo.col)), shape=a.shape)
    w.sort_indices()
    return w


def pattern(a: sp.csr_matrix) -> sp.csr_matrix:
    p = sp.csr_matrix((np.ones(a.nnz), a.indices, a.indptr), shape=a.shape)
    p.sort_indices()
    return p


def pick_source(a: sp.csr_matrix) -> int:
    """The vertex of largest out-degree (in the giant component of every graph here)."""
    return int(np.argmax(np.diff(a.indptr)))


# ---- checks ----------------------------------------------------------------------------------


def bfs_levels(a: sp.csr_matrix, src: int) -> np.ndarray:
    """Hop counts from `src` (-1 unreached), by scipy, as the reference."""
    d = csgraph.shortest_path(a, method="D", directed=True, unweighted=True, indices=src)
    return np.where(np.isfinite(d), d, -1).astype(np.int64)


def check_bfs_tree(who: str, a: sp.csr_matrix, src: int, parent: np.ndarray, want: np.ndarray):
    """`parent` is a BFS tree from `src` with the reference levels `want`."""
    n = a.shape[0]
    parent = np.asarray(parent, dtype=np.int64)
    if parent.shape != (n,):
        raise harness.Mismatch(f"{who}: {parent.shape} parents for {n} vertices")
    reached = want >= 0
    if parent[src] != src:
        raise harness.Mismatch(f"{who}: parent of the source {src} is {parent[src]}")
    if not np.array_equal(parent >= 0, reached):
        bad = np.nonzero((parent >= 0) != reached)[0][:5]
        raise harness.Mismatch(f"{who}: reached set differs from the peer's at {bad.tolist()}")
    v = np.nonzero(reached)[0]
    v = v[v != src]
    p = parent[v]
    if np.any(want[p] != want[v] - 1):
        k = np.nonzero(want[p] != want[v] - 1)[0][0]
        raise harness.Mismatch(f"{who}: parent {p[k]} of {v[k]} is not one level closer")
    has_edge = np.asarray(a[p, v]).ravel() != 0
    if not has_edge.all():
        k = np.nonzero(~has_edge)[0][0]
        raise harness.Mismatch(f"{who}: parent {p[k]} of {v[k]} is not an in-neighbour")


def check_paths(who: str, w: sp.csr_matrix, src: int, dist, pred, want: np.ndarray):
    """Distances equal the reference; every reached vertex's predecessor edge is tight."""
    dist = np.asarray(dist, dtype=np.float64)
    pred = np.asarray(pred, dtype=np.int64)
    if not np.array_equal(dist, want):
        k = np.nonzero(dist != want)[0][:5]
        raise harness.Mismatch(f"{who}: distances differ at {k.tolist()}: {dist[k]} vs {want[k]}")
    reached = np.isfinite(want)
    if not np.array_equal(pred >= 0, reached):
        bad = np.nonzero((pred >= 0) != reached)[0][:5]
        raise harness.Mismatch(f"{who}: predecessors missing or extra at {bad.tolist()}")
    v = np.nonzero(reached)[0]
    v = v[v != src]
    p = pred[v]
    wt = np.asarray(w[p, v]).ravel()
    if np.any(wt == 0) or np.any(want[p] + wt != want[v]):
        k = np.nonzero((wt == 0) | (want[p] + wt != want[v]))[0][0]
        raise harness.Mismatch(f"{who}: predecessor {p[k]} of {v[k]} is not on a shortest path")


# ---- GraphBLAS peers (LAGraph-style) ---------------------------------------------------------


class GraphBLAS:
    """The graph as LAGraph keeps it: A, its transpose and the out-degrees, built once."""

    def __init__(self, a: sp.csr_matrix, weights: sp.csr_matrix):
        import graphblas as gb

        gb.ss.config["nthreads"] = 1
        self.gb = gb
        n = a.shape[0]
        self.n = n
        self.A = gb.Matrix.from_csr(a.indptr, a.indices, True, nrows=n, ncols=n)
        self.AT = self.A.T.new()
        self.degree = gb.Vector.from_dense(np.diff(a.indptr).astype(np.int64))
        self.W = gb.Matrix.from_csr(w_indptr(weights), weights.indices, weights.data, nrows=n, ncols=n)

    def bfs(self, src: int, push_pull: bool) -> np.ndarray:
        """LAGraph_BreadthFirstSearch_SSGrB with parents: q{!pi} = q'A (push) or A'q (pull)
        over ANY_SECONDI (the parent's index), Beamer's switch with alpha = 8, beta1 = 8,
        beta2 = 512 as in LAGraph."""
        gb = self.gb
        from graphblas import semiring, monoid

        n, A, AT = self.n, self.A, self.AT
        pi = gb.Vector(gb.dtypes.INT64, n)
        if push_pull:
            pi.ss.config["sparsity_control"] = ["bitmap"]
        pi[src] << src
        q = gb.Vector(gb.dtypes.INT64, n)
        q[src] << src
        alpha, beta1, beta2 = 8.0, 8.0, 512.0
        nq, last_nq = 1, 0
        edges_unexplored = A.nvals
        any_pull, do_push = False, True
        sr = semiring.ss.any_secondi[gb.dtypes.INT64]
        while True:
            if push_pull:
                if do_push:
                    growing = nq > last_nq
                    switch = False
                    if edges_unexplored < n:
                        push_pull = False
                    elif any_pull:
                        switch = growing and nq > n / beta1
                    else:
                        w = gb.Vector(gb.dtypes.INT64, n)
                        w(q.S) << self.degree
                        edges_in_frontier = w.reduce(monoid.plus).value or 0
                        edges_unexplored -= edges_in_frontier
                        switch = growing and edges_in_frontier > edges_unexplored / alpha
                    if switch:
                        do_push = False
                else:
                    if nq < last_nq and nq <= n / beta2:
                        do_push = True
                any_pull = any_pull or not do_push
            # As LAGraph: a sparse frontier for push (saxpy), a bitmap one for pull, so that
            # each unvisited vertex's dot product probes the frontier in O(1) and stops at its
            # first hit (the ANY monoid).
            if do_push:
                q.ss.config["sparsity_control"] = ["sparse"]
                q(~pi.S, replace=True) << q.vxm(A, sr)
            else:
                q.ss.config["sparsity_control"] = ["bitmap"]
                q(~pi.S, replace=True) << AT.mxv(q, sr)
            last_nq, nq = nq, q.nvals
            if nq == 0:
                break
            pi(q.S) << q
        return pi

    def bellman_ford(self, src: int):
        """Frontier Bellman-Ford over MIN_PLUS (only vertices improved in the last round relax
        their edges), then one pass over the tight edges for predecessors (ANY_SECONDI)."""
        gb = self.gb
        from graphblas import binary, semiring

        n, W = self.n, self.W
        d = gb.Vector.from_dense(np.full(n, np.inf))
        d[src] << 0.0
        front = gb.Vector(gb.dtypes.FP64, n)
        front[src] << 0.0
        rounds = 0
        while front.nvals:
            rounds += 1
            if rounds > n:
                raise RuntimeError("negative cycle")
            t = front.vxm(W, semiring.min_plus).new()
            better = t.ewise_mult(d, binary.lt).new()
            front = t.dup(mask=better.V)
            d(front.S) << front
        reached = d.select("<", np.inf).new()
        c = reached.diag().mxm(W, semiring.min_plus).new()  # c[j, i] = d[j] + w(j, i)
        di = c.mxm(d.diag(), semiring.any_second).new()  # di[j, i] = d[i]
        tight = c.ewise_mult(di, binary.eq).new().select("==", True).new()
        pred = reached.vxm(tight, semiring.ss.any_secondi[gb.dtypes.INT64]).new()
        pred[src] << src
        return d, pred


def w_indptr(w: sp.csr_matrix):
    return w.indptr


def to_numpy_int(v, n: int) -> np.ndarray:
    idx, vals = v.to_coo()
    out = np.full(n, -1, dtype=np.int64)
    out[idx] = vals
    return out


# ---- the study -------------------------------------------------------------------------------


def graphs(ctx):
    names = DATA_GRAPHS[:2] if ctx.quick else DATA_GRAPHS
    for name, directed in names:
        path = ctx.data / "matrices" / f"{name}.mtx"
        if not path.exists():
            ctx.log(f"graphs: {path} is absent, skipped")
            continue
        yield name, data.load_mtx(name, ctx.data)
    for scale in RMAT_SCALES_QUICK if ctx.quick else RMAT_SCALES_FULL:
        yield f"rmat{scale}", data.rmat(scale, 16, seed=scale)


def run(ctx) -> list[dict]:
    cases = []
    gb_ok = ctx.peer_available("GraphBLAS")
    for name, a in graphs(ctx):
        a = pattern(a.tocsr())
        n = a.shape[0]
        src = pick_source(a)
        w = edge_weights(a)
        gpath = data.write_mtx(a, Path(ctx.tmp) / f"graph_{name}.mtx")
        wpath = data.write_mtx(w, Path(ctx.tmp) / f"weights_{name}.mtx")
        ctx.log(f"graphs: {name}, {n} vertices, {a.nnz} edges, source {src}")
        peer = GraphBLAS(a, w) if gb_ok else None
        levels = bfs_levels(a, src)
        cases += bfs_cases(ctx, name, a, src, gpath, levels, peer)
        cases.append(bellman_ford_case(ctx, name, w, src, wpath, peer))
    return cases


def tessera_graph(ctx, alg: str, path: Path, src: int, outs: dict, repeat=None) -> dict:
    args = ["graph", alg, "--in", f"A={path}", "--source", str(src)]
    for k, v in outs.items():
        args += ["--out", f"{k}={v}"]
    args += ["--warmup", "2", "--repeat", str(repeat or ctx.default_repeat)]
    return ctx.tessera(args)


def bfs_cases(ctx, name, a, src, gpath, levels, peer) -> list[dict]:
    out = []
    n = a.shape[0]
    for alg, label, push_pull in [("bfs", "push", False), ("bfs-do", "push/pull", True)]:
        ppath = Path(ctx.tmp) / f"parents_{name}_{alg}.npy"
        first = tessera_graph(ctx, alg, gpath, src, {"parents": ppath}, repeat=1)
        check_bfs_tree(f"Tessera {alg} on {name}", a, src, np.load(ppath), levels)
        measure = {"Tessera": lambda: tessera_graph(ctx, alg, gpath, src, {})["median_ms"]}
        if peer is not None:
            pi = to_numpy_int(peer.bfs(src, push_pull), n)
            check_bfs_tree(f"GraphBLAS BFS ({label}) on {name}", a, src, pi, levels)
            measure["GraphBLAS"] = lambda: ctx.time_py(lambda: peer.bfs(src, push_pull))
        # scipy has one BFS; it stands against both variants.
        order, pred = csgraph.breadth_first_order(a, src, directed=True, return_predecessors=True)
        pred = np.where(pred < 0, -1, pred)
        pred[src] = src
        check_bfs_tree(f"scipy BFS on {name}", a, src, pred, levels)
        measure["scipy.csgraph"] = lambda: ctx.time_py(
            lambda: csgraph.breadth_first_order(a, src, directed=True, return_predecessors=True)
        )
        got = ctx.alternate(measure)
        out.append(
            {
                "case": f"BFS {label} {name}",
                "variant": "Dense(SparseList(Pattern())), SparseByteMap frontier",
                "tessera_ms": got["Tessera"],
                "peers": {
                    "GraphBLAS": got.get("GraphBLAS"),
                    "scipy.csgraph": got.get("scipy.csgraph"),
                },
                "compile_ms": first["compile_ms"],
                "note": f"{n} vertices, {a.nnz} edges, {first['iterations']} levels",
            }
        )
    return out


def bellman_ford_case(ctx, name, w, src, wpath, peer) -> dict:
    n = w.shape[0]
    dpath = Path(ctx.tmp) / f"dist_{name}.npy"
    ppath = Path(ctx.tmp) / f"pred_{name}.npy"
    first = tessera_graph(ctx, "bellman-ford", wpath, src, {"dist": dpath, "parents": ppath}, repeat=1)
    want = csgraph.dijkstra(w, directed=True, indices=src)
    check_paths(f"Tessera Bellman-Ford on {name}", w, src, np.load(dpath), np.load(ppath), want)
    measure = {"Tessera": lambda: tessera_graph(ctx, "bellman-ford", wpath, src, {})["median_ms"]}
    if peer is not None:
        d, pred = peer.bellman_ford(src)
        check_paths(
            f"GraphBLAS Bellman-Ford on {name}", w, src, d.to_dense(), to_numpy_int(pred, n), want
        )
        measure["GraphBLAS"] = lambda: ctx.time_py(lambda: peer.bellman_ford(src))
    note = ""
    if n * w.nnz <= SCIPY_BF_LIMIT:
        t0 = time.perf_counter()
        sd, sp_pred = csgraph.bellman_ford(w, directed=True, indices=src, return_predecessors=True)
        once_ms = (time.perf_counter() - t0) * 1e3
        sp_pred = np.where(sp_pred < 0, -1, sp_pred)
        sp_pred[src] = src
        check_paths(f"scipy Bellman-Ford on {name}", w, src, sd, sp_pred, want)
        if once_ms > 1000:
            # Seconds per call: the checked call is its measurement.
            measure["scipy.csgraph"] = lambda: once_ms
            note = "; scipy timed once"
        else:
            measure["scipy.csgraph"] = lambda: ctx.time_py(
                lambda: csgraph.bellman_ford(w, directed=True, indices=src, return_predecessors=True)
            )
    else:
        note = "; scipy n/a: its bellman_ford relaxes every edge n - 1 times (minutes here)"
    got = ctx.alternate(measure)
    return {
        "case": f"Bellman-Ford {name}",
        "variant": "Dense(SparseList(Element(Inf))), SparseByteMap flags",
        "tessera_ms": got["Tessera"],
        "peers": {"GraphBLAS": got.get("GraphBLAS"), "scipy.csgraph": got.get("scipy.csgraph")},
        "compile_ms": first["compile_ms"],
        "note": f"{n} vertices, {w.nnz} edges, {first['iterations']} rounds{note}",
    }
