"""Compile latency: the time Tessera takes to compile each kernel the graph and image studies
run (plus a CSR SpMV and a Gustavson SpGEMM), each in a fresh process so nothing is cached,
read from the `compile_ms` of the JSON lines; against finch-tensor's first call of the same
operation in a fresh Python process (its compilation plus one run), where finch-tensor has
that operation (SpMV and SpGEMM through `finch.matmul`; the other kernels have no
finch-tensor counterpart and show n/a). Target: median compile time <= 5 ms with Cranelift.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import subprocess
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import data
import harness

TITLE = "Compile latency (fresh process, no cache)"
PEERS = ["finch-tensor"]

SPMV = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n"
SPGEMM = "C .= 0\nfor i = _, k = _, j = _\n  C[i, j] += A[i, k] * B[k, j]\nend\n"

CSR = "Dense(SparseList(Element(0.0)))"
N = 1000

# finch-tensor's first call, in a fresh interpreter: inputs are built before the clock starts.
FINCH_SNIPPET = """
import sys, time, json
import numpy as np, scipy.sparse as sp
import finch
finch.set_default_scheduler(finch.COMPILE_NUMBA)
A = sp.random({n}, {n}, density=0.01, format="csr", random_state=0)
A.indices = A.indices.astype(np.int64)
A.indptr = A.indptr.astype(np.int64)
fa = finch.asarray(A)
op = sys.argv[1]
if op == "spmv":
    x = np.arange({n}, dtype=np.float64)
    fx = finch.asarray(x)
    t = time.perf_counter()
    y = np.asarray(finch.matmul(fa, fx))
    ms = (time.perf_counter() - t) * 1e3
    ok = bool(np.allclose(y, A @ x))
else:
    t = time.perf_counter()
    c = np.asarray(finch.matmul(fa, fa))
    ms = (time.perf_counter() - t) * 1e3
    ok = bool(np.allclose(c, (A @ A).toarray()))
print(json.dumps({{"ms": ms, "ok": ok}}))
"""


def inputs(ctx, tmp: Path) -> dict:
    """Small input files for every kernel (compile time does not depend on their size)."""
    rng = np.random.default_rng(0)
    a = sp.random(N, N, density=0.01, format="csr", random_state=0)
    g = data.rmat(10, 8, seed=1)
    w = g.copy()
    w.data = rng.integers(1, 64, size=w.nnz).astype(np.float64)
    gray = (rng.random((64, 96)) * 255).astype(np.uint8)
    files = {
        "A": data.write_mtx(a, tmp / "A.mtx"),
        "graph": data.write_mtx(g, tmp / "graph.mtx"),
        "weights": data.write_mtx(w, tmp / "weights.mtx"),
        "x": tmp / "x.npy",
        "gray": tmp / "gray.npy",
        "binary": tmp / "binary.npy",
        "words": tmp / "words.npy",
        "pad": tmp / "pad.npy",
        "bins": tmp / "bins.npy",
        "spmv": tmp / "spmv.tess",
        "spgemm": tmp / "spgemm.tess",
    }
    np.save(files["x"], np.arange(N, dtype=np.float64))
    np.save(files["gray"], gray)
    np.save(files["binary"], gray > 127)
    np.save(files["words"], rng.integers(-(2**62), 2**62, size=(64, 2)))
    np.save(files["pad"], np.zeros(2, dtype=np.int64))
    np.save(files["bins"], np.zeros(16, dtype=np.int64))
    files["spmv"].write_text(SPMV)
    files["spgemm"].write_text(SPGEMM)
    return {k: str(v) for k, v in files.items()}


def kernels(f: dict) -> list[tuple]:
    """(case, program, ins, outs, scalars, finch operation or None)."""
    out = [
        ("SpMV CSR", f["spmv"], {"A": (f["A"], CSR), "x": f["x"]}, {"y": (None, "Dense(Element(0.0))")}, {}, "spmv"),
        (
            "SpGEMM CSR x CSR (dense output)",
            f["spgemm"],
            {"A": (f["A"], CSR), "B": (f["A"], CSR)},
            {"C": (None, "Dense(Dense(Element(0.0)))")},
            {},
            "spgemm",
        ),
        (
            "threshold",
            "examples/threshold.tess",
            {"img": (f["gray"], "Dense(Dense(Element(0x00)))")},
            {"mask": (None, "Dense(SparseRunList(Pattern()))")},
            {"T": 127},
            None,
        ),
    ]
    for name, (fmt, work) in {
        "dense bytes": ("Dense(Dense(Element(false)))", "Dense(Element(false))"),
        "RunList": ("Dense(RunList(Element(false)))", "RunList(Element(false), merge=false)"),
        "SparseRunList": ("Dense(SparseRunList(Pattern()))", "SparseRunList(Pattern(), merge=false)"),
    }.items():
        out.append(
            (
                f"erosion {name}",
                "examples/erosion.tess",
                {"input": (f["binary"], fmt)},
                {"output": (None, fmt), "tmp": (None, work)},
                {},
                None,
            )
        )
    out.append(
        (
            "erosion bit-packed words",
            "examples/erosion_words.tess",
            {"input": (f["words"], "Dense(Dense(Element(0)))"), "pad": f["pad"]},
            {"output": (None, "Dense(Dense(Element(0)))"), "tmp": (None, "Dense(Element(0))")},
            {},
            None,
        )
    )
    for name, mfmt in {
        "dense mask": "Dense(Dense(Element(false)))",
        "SparseRunList mask": "Dense(SparseRunList(Pattern()))",
    }.items():
        out.append(
            (
                f"masked histogram, {name}",
                "examples/masked_histogram.tess",
                {"img": (f["gray"], "Dense(Dense(Element(0x00)))"), "mask": (f["binary"], mfmt), "bins": f["bins"]},
                {"bins": (None, "Dense(Element(0))")},
                {},
                None,
            )
        )
    return out


def finch_first_call(ctx, op: str) -> float | None:
    """Milliseconds of finch-tensor's first `op` call in a fresh interpreter."""
    p = subprocess.run(
        [sys.executable, "-c", FINCH_SNIPPET.format(n=N), op],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if p.returncode != 0:
        ctx.log(f"compile: finch-tensor {op} failed: {p.stderr.strip().splitlines()[-1:]}")
        return None
    got = json.loads(p.stdout.strip().splitlines()[-1])
    if not got["ok"]:
        raise harness.Mismatch(f"finch-tensor {op} disagrees with scipy")
    return got["ms"]


def fresh_compile(ctx, tmp: Path, prog, ins, outs, scalars, backend: str) -> float:
    """compile_ms of one `tessera bench` in a new process; the C backend gets an empty disk
    cache, so its figure is a real `cc` run, not a cache hit."""
    saved = os.environ.get("TESSERA_CACHE_DIR")
    os.environ["TESSERA_CACHE_DIR"] = tempfile.mkdtemp(prefix="cache-", dir=tmp)
    try:
        return ctx.bench(prog, ins, outs, scalars, backend=backend, repeat=1)["compile_ms"]
    finally:
        if saved is None:
            del os.environ["TESSERA_CACHE_DIR"]
        else:
            os.environ["TESSERA_CACHE_DIR"] = saved


def run(ctx) -> list[dict]:
    tmp = Path(ctx.tmp) / "compile"
    tmp.mkdir(parents=True, exist_ok=True)
    f = inputs(ctx, tmp)
    runs = 2 if ctx.quick else 5
    finch_ok = ctx.peer_available("finch-tensor")
    if not finch_ok:
        ctx.log(f"compile: finch-tensor n/a: {ctx.peer_missing_reason('finch-tensor')}")
    cases = []
    for backend in ctx.backends:
        for case, prog, ins, outs, scalars, finch_op in kernels(f):
            try:
                ms = [fresh_compile(ctx, tmp, prog, ins, outs, scalars, backend) for _ in range(runs)]
            except harness.TesseraError as e:
                if "unknown backend" in str(e):
                    ctx.log(f"compile: backend {backend} is not available")
                    break
                raise
            peer = None
            if finch_ok and finch_op and backend == ctx.backends[0]:
                peer = finch_first_call(ctx, finch_op)
            cases.append(
                {
                    "case": case,
                    "variant": backend,
                    "tessera_ms": statistics.median(ms),
                    "peers": {"finch-tensor": peer},
                    "compile_ms": statistics.median(ms),
                    "note": "" if finch_op else "no finch-tensor counterpart",
                }
            )
        # The graph kernels compile inside `tessera graph`; its JSON names each kernel.
        if backend != "jit":
            continue
        for alg, path in [("bfs-do", f["graph"]), ("bellman-ford", f["weights"])]:
            per: dict[str, list[float]] = {}
            for _ in range(runs):
                got = ctx.tessera(["graph", alg, "--in", f"A={path}", "--warmup", "0", "--repeat", "1"])
                for k, v in got["kernels_compile_ms"].items():
                    per.setdefault(k, []).append(v)
            for k, v in per.items():
                cases.append(
                    {
                        "case": k,
                        "variant": "jit",
                        "tessera_ms": statistics.median(v),
                        "peers": {"finch-tensor": None},
                        "compile_ms": statistics.median(v),
                        "note": f"compiled by tessera graph {alg}; no finch-tensor counterpart",
                    }
                )
    jit = [c["tessera_ms"] for c in cases if c["variant"] == "jit"]
    if jit:
        med = statistics.median(jit)
        ctx.note(
            f"Median Cranelift compile time over {len(jit)} kernels: **{med:.2f} ms** "
            f"(target <= 5 ms; max {max(jit):.2f} ms). finch-tensor's times are its first call "
            "(compilation through its Numba backend plus one run) in a fresh interpreter."
        )
    return cases
