"""The peer libraries of the SpMV and SpGEMM studies, each behind one function that either
returns the product (`check_only=True`, to compare with Tessera's before any timing) or the
median time of the product in ms. A peer that cannot run here returns None from its factory
and is reported n/a with the reason (`ctx.peer_missing_reason`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import scipy.sparse as sp

EIGEN_INCLUDE = Path("/usr/include/eigen3")


def eigen_binary(ctx, name: str) -> Path | None:
    """Compile bench/<name>.cpp against Eigen (g++ -O3 -march=native), once per run. Installs
    libeigen3-dev with apt-get when running as root and the headers are missing."""
    cache = getattr(ctx, "_eigen_bins", None)
    if cache is None:
        cache = ctx._eigen_bins = {}
    if name in cache:
        return cache[name]
    exe = None
    if not EIGEN_INCLUDE.exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        ctx.log("installing libeigen3-dev")
        subprocess.run(["apt-get", "install", "-y", "-q", "libeigen3-dev"], capture_output=True)
    if not EIGEN_INCLUDE.exists():
        ctx.set_peer_missing("Eigen", f"{EIGEN_INCLUDE} missing (apt-get install libeigen3-dev)")
    elif not shutil.which("g++"):
        ctx.set_peer_missing("Eigen", "g++ not found")
    else:
        out = ctx.tmp / name
        p = subprocess.run(
            ["g++", "-O3", "-march=native", "-DNDEBUG", f"-I{EIGEN_INCLUDE}", "-o", str(out),
             str(ctx.root / "bench" / f"{name}.cpp")],
            capture_output=True,
            text=True,
        )
        if p.returncode != 0:
            ctx.set_peer_missing("Eigen", f"g++ failed: {p.stderr.strip().splitlines()[-1:]}")
        else:
            exe = out
    cache[name] = exe
    return exe


def _run_json(cmd: list[str]) -> dict:
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))}: {p.stderr.strip()}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _graphblas():
    import graphblas as gb

    gb.ss.config["nthreads"] = 1
    return gb


def spmv_peer(ctx, peer: str, a: sp.csr_matrix, x: np.ndarray, d: Path, eigen: Path | None):
    """A callable(check_only=False) for `peer`'s y = A x, or None when the peer is n/a."""
    if not ctx.peer_available(peer) or (peer == "Eigen" and eigen is None):
        return None
    if peer == "SciPy":
        def f(check_only=False):
            return a @ x if check_only else ctx.time_py(lambda: a @ x)
        return f
    if peer == "MKL":
        from sparse_dot_mkl import dot_product_mkl

        def f(check_only=False):
            if check_only:
                return dot_product_mkl(a, x)
            return ctx.time_py(lambda: dot_product_mkl(a, x))
        return f
    if peer == "GraphBLAS":
        gb = _graphblas()
        ga = gb.io.from_scipy_sparse(a)
        gx = gb.Vector.from_dense(x)
        sr = gb.semiring.plus_times

        def f(check_only=False):
            if check_only:
                return ga.mxv(gx, sr).new().to_dense(fill_value=0.0)
            return ctx.time_py(lambda: ga.mxv(gx, sr).new())
        return f
    if peer == "Eigen":
        y_path = d / "y_eigen.bin"

        def f(check_only=False):
            r = _run_json([eigen, d / "A.mtx", d / "x.bin", y_path, ctx.default_repeat, ctx.default_warmup])
            return np.fromfile(y_path) if check_only else r["median_ms"]
        return f
    if peer == "finch-tensor":
        import finch

        try:
            fa = finch.asarray(a)
            fx = finch.asarray(x)
            y = np.asarray(finch.matmul(fa, fx), dtype=np.float64)
        except Exception as e:  # the installed finch-tensor cannot run this product
            msg = str(e).strip().splitlines()
            from importlib.metadata import version

            ctx.set_peer_missing(
                peer,
                f"finch-tensor {version('finch-tensor')}: finch.matmul(CSR, dense vector) "
                f"raised {type(e).__name__}: {msg[-1] if msg else ''}",
            )
            return None

        def f(check_only=False):
            if check_only:
                return y
            return ctx.time_py(lambda: finch.matmul(fa, fx))
        return f
    raise ValueError(f"unknown SpMV peer {peer}")


def spgemm_peer(ctx, peer: str, a: sp.csr_matrix, b: sp.csr_matrix, d: Path, eigen: Path | None):
    """A callable(check_only=False) for `peer`'s C = A B (CSR result when checking).

    SciPy's `a @ b` and MKL's `mkl_sparse_spmm` (through sparse_dot_mkl) leave each row's
    column indices in the order the row was accumulated; Tessera's `SparseList` output and
    Eigen's product are sorted (SuiteSparse:GraphBLAS may keep a product's rows unsorted,
    "jumbled", until they are read). "SciPy sorted" (`sort_indices()` after the product) and
    "MKL sorted" (`reorder_output=True`, MKL's `mkl_sparse_order`) time the same product
    with the sorted rows Tessera produces."""
    if not ctx.peer_available(peer) or (peer == "Eigen" and eigen is None):
        return None
    if peer == "SciPy sorted":
        def f(check_only=False):
            def run():
                c = a @ b
                c.sort_indices()
                return c
            return run() if check_only else ctx.time_py(run)
        return f
    if peer == "MKL sorted":
        from sparse_dot_mkl import dot_product_mkl

        def f(check_only=False):
            def run():
                return dot_product_mkl(a, b, reorder_output=True)
            return run() if check_only else ctx.time_py(run)
        return f
    if peer == "SciPy":
        def f(check_only=False):
            return a @ b if check_only else ctx.time_py(lambda: a @ b)
        return f
    if peer == "MKL":
        from sparse_dot_mkl import dot_product_mkl

        def f(check_only=False):
            if check_only:
                return dot_product_mkl(a, b)
            return ctx.time_py(lambda: dot_product_mkl(a, b))
        return f
    if peer == "GraphBLAS":
        gb = _graphblas()
        ga = gb.io.from_scipy_sparse(a)
        gbm = gb.io.from_scipy_sparse(b)
        sr = gb.semiring.plus_times

        def f(check_only=False):
            if check_only:
                return gb.io.to_scipy_sparse(ga.mxm(gbm, sr).new(), format="csr")
            return ctx.time_py(lambda: ga.mxm(gbm, sr).new())
        return f
    if peer == "Eigen":
        prefix = d / "C_eigen"

        def f(check_only=False):
            r = _run_json([eigen, d / "A.mtx", d / "B.mtx", prefix, ctx.default_repeat, ctx.default_warmup])
            if not check_only:
                return r["median_ms"]
            ptr = np.fromfile(f"{prefix}.ptr", dtype=np.int64)
            idx = np.fromfile(f"{prefix}.idx", dtype=np.int64)
            val = np.fromfile(f"{prefix}.val", dtype=np.float64)
            return sp.csr_matrix((val, idx, ptr), shape=(a.shape[0], b.shape[1]))
        return f
    raise ValueError(f"unknown SpGEMM peer {peer}")
