"""Batched cross product: Tessera's `c[n, i] += eps[i, j, k] * a[n, j] * b[n, k]`
(examples/cross.rs) against `numpy.cross`, in one run.

    python3 bench/cross.py [N] [REPEATS]      # defaults 10000000 5

Runs the Tessera example with `--dump`, so both sides see the same N × 3 vectors a and b
(uniform in [-1, 1)); Tessera's result must equal `numpy.cross(a, b)` within 1e-12 before a
time is accepted. Tessera: median kernel time of REPEATS runs (the kernel includes `c .= 0`),
per backend (JIT, and C when a compiler is present), compile time excluded. NumPy: median of
REPEATS calls of `numpy.cross(a, b)` (which allocates its output). Single thread on both
sides. Prints a Markdown table; its reading lives in bench/sections/cross.md.

Needs `numpy` (e.g. `python3 -m venv v && v/bin/pip install numpy`).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(["cargo", "build", "--release", "--example", "cross"], cwd=root, check=True)
    exe = os.path.join(root, "target", "release", "examples", "cross")
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(
            [exe, str(n), str(repeats), "--dump", d], check=True, capture_output=True, text=True
        )
        ours = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        a = np.load(os.path.join(d, "a.npy"))
        b = np.load(os.path.join(d, "b.npy"))
        c = np.load(os.path.join(d, "c.npy"))
    want = np.cross(a, b)
    if not np.allclose(c, want, rtol=0, atol=1e-12):
        sys.exit("disagreement: Tessera's c is not numpy.cross(a, b)")
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        np.cross(a, b)
        times.append((time.perf_counter() - t) * 1e3)
    theirs = sorted(times)[len(times) // 2]
    print(f"NumPy {np.__version__}; N = {n} vector pairs; medians of {repeats} runs\n")
    print("| backend | Tessera ms | numpy.cross ms | numpy / Tessera |")
    print("|---|---|---|---|")
    for mine in ours:
        print(f"| {mine['backend']} | {mine['median_ms']:.2f} | {theirs:.2f} | "
              f"{theirs / mine['median_ms']:.2f}x |")


if __name__ == "__main__":
    main()
