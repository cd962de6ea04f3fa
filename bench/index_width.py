"""4-byte against 8-byte indices in SpMV (issue 18): the SpMV study's CSR program on a random
300,000 x 300,000 matrix with 3e6 entries and on matrices of ../shared/data/matrices, with
`Dense(SparseList(Element(0.0)))` (8-byte `ptr` and `idx`) and with `coord=i32` (4-byte, as
SciPy's CSR), on the JIT and the C backend, against SciPy's CSR SpMV timed in the same run.
Every Tessera output is checked against SciPy's before its time is kept.

    bench/.venv/bin/python bench/index_width.py [--matrices bcsstk16,c-55,...] [--repeat N]

Times are medians of `tessera bench` (kernel only, after warm-up) and of SciPy's `A @ x`."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).parent))
import data  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TESSERA = ROOT / "target" / "release" / "tessera"
PROGRAM = ROOT / "examples" / "spmv_row.tess"
FORMATS = {
    "i64": "Dense(SparseList(Element(0.0)))",
    "i32": "Dense(SparseList(Element(0.0), coord=i32))",
}


def tessera(a_path: Path, fmt: str, x_path: Path, y_path: Path, backend: str, repeat: int) -> dict:
    cmd = [str(TESSERA), "bench", str(PROGRAM), "--in", f"A={a_path}@{fmt}", "--in", f"x={x_path}",
           "--out", f"y={y_path}", "--backend", backend, "--repeat", str(repeat), "--warmup", "3",
           "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def scipy_ms(a: sp.csr_matrix, x: np.ndarray, repeat: int) -> float:
    for _ in range(3):
        a @ x
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        a @ x
        ts.append((time.perf_counter() - t) * 1e3)
    return float(np.median(ts))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--matrices", default="bcsstk16,c-55,delaunay_n17,web-NotreDame")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--backends", default="jit,c")
    args = ap.parse_args()
    cases = [("random_300k_3M", lambda: data.erdos_renyi(300_000, 10, seed=18))]
    cases += [(m, (lambda m=m: data.load_mtx(m))) for m in args.matrices.split(",") if m]
    rng = np.random.default_rng(18)
    tmp = Path(tempfile.mkdtemp(prefix="index_width_"))
    print("| matrix | nnz | backend | i64 ms | i32 ms | i64/i32 | SciPy ms | SciPy/i64 | SciPy/i32 |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for name, make in cases:
        a = sp.csr_matrix(make())
        a.indices = a.indices.astype(np.int32)
        a.indptr = a.indptr.astype(np.int32)
        m, n = a.shape
        a_path = data.write_mtx(a, tmp / f"{name}.mtx")
        x = rng.uniform(-1.0, 1.0, n)
        x_path = tmp / f"{name}_x.npy"
        np.save(x_path, x)
        ref = a @ x
        bound = abs(a) @ np.abs(x) * 1e-9 + 1e-300
        for backend in args.backends.split(","):
            got = {}
            # Alternate the variants and SciPy so that drift hits them alike.
            sc = []
            for _ in range(2):
                for w, fmt in FORMATS.items():
                    y_path = tmp / f"{name}_{w}_{backend}.npy"
                    r = tessera(a_path, fmt, x_path, y_path, backend, args.repeat)
                    y = np.load(y_path)
                    if np.any(np.abs(y - ref) > bound):
                        raise SystemExit(f"{name} {w} {backend}: output differs from SciPy")
                    got[w] = min(got.get(w, float("inf")), r["median_ms"])
                sc.append(scipy_ms(a, x, args.repeat))
            s = min(sc)
            print(f"| {name} | {a.nnz} | {backend} | {got['i64']:.3f} | {got['i32']:.3f} | "
                  f"{got['i64'] / got['i32']:.2f} | {s:.3f} | {s / got['i64']:.2f} | {s / got['i32']:.2f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
