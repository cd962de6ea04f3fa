#!/usr/bin/env python3
"""The fixed cost of a kernel call (issues 18 and 19; BENCHMARKS.md "Images" and "Python
package", subsections by helper `callcost`).

Run from the repository root with the package installed in the venv and OpenCV importable:

    target/pyenv/bin/python bench/call_cost.py [--datasets MNIST,Omniglot] [--scales 1,8]

Measures, in one process:
1. a tiny SpMV (8 x 8, 16 entries): `Runner::execute` alone (the CLI's `bench --json`
   median, JIT and C), a `tessera.compile` kernel called on Tensors (allocating its output,
   and writing into one reused array: `out=y`), `tessera.run`, `ts.matmul(A, x, out=y)` and
   the `out=y` call kept by `k.bind(A=A, x=x, out=y)`, each the best of 7 rounds of 20,000
   calls' mean (so the figures are per call);
2. the images study's paper datasets (MNIST, Omniglot; 100 random images each), through
   `bench/studies/images.py`'s own variants and `_measure` (per image: two Kernel calls for
   an erosion, one for a histogram, against one OpenCV call, alternating), so the figures are
   those `bench/compare.py --studies images` reports in its dataset rows, without its other
   cases (which take most of its time and do not depend on the call's cost).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import harness  # noqa: E402
from studies import images  # noqa: E402

import tessera as ts  # noqa: E402

SPMV = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n"


# The clock of the Python columns: wall time (`perf_counter`), or this thread's CPU time
# (`--clock cpu`: on a shared machine it leaves out the time the process waits for a core,
# which moves wall-clock figures by 30% between runs; the CLI column stays wall time).
CLOCK = time.perf_counter


ROUNDS = 7


def per_call_us(f, calls=20000, rounds=None):
    for _ in range(1000):
        f()
    best = float("inf")
    for _ in range(rounds or ROUNDS):
        t0 = CLOCK()
        for _ in range(calls):
            f()
        best = min(best, (CLOCK() - t0) / calls * 1e6)
    return best


CLI = ROOT / "target" / "release" / "tessera"


def cli_us(mtx, xp, backend):
    out = subprocess.run(
        [str(CLI), "bench", SPMV, "--in", f"A={mtx}",
         "--in", f"x={xp}", "--out", "y", "--warmup", "100", "--repeat", "100000",
         "--backend", backend, "--json"],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])["median_ms"] * 1e3


def tiny():
    a = sp.random_array((8, 8), density=0.25, random_state=1, format="csr")
    x = np.ones(8)
    ta, tx = ts.asarray(a), ts.asarray(x)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        mtx, xp = os.path.join(d, "tiny.mtx"), os.path.join(d, "x.npy")
        scipy.io.mmwrite(mtx, a)
        np.save(xp, x)
        for backend in ("jit", "c"):
            k = ts.compile(SPMV, out="y", backend=backend, A=ta, x=tx)
            np.testing.assert_allclose(k(A=ta, x=tx).to_numpy(), a @ x)
            y = np.empty(8)
            np.testing.assert_allclose(k(A=ta, x=tx, out=y), a @ x)
            cli = cli_us(mtx, xp, backend)
            kern = per_call_us(lambda: k(A=ta, x=tx))
            kout = per_call_us(lambda: k(A=ta, x=tx, out=y))
            run = per_call_us(lambda: ts.run(SPMV, out="y", backend=backend, A=ta, x=tx))
            # The same call kept by `Kernel.bind` (called directly: no lambda around it).
            bound = k.bind(A=ta, x=tx, out=y)
            np.testing.assert_allclose(bound(), a @ x)
            bnd = per_call_us(bound)
            rows.append((backend, cli, kern, kout, run, bnd))
    # The einsum behind `ts.matmul` (tiered, its own plan; the same 8x8 matrix and vector).
    y = np.empty(8)
    np.testing.assert_allclose(ts.matmul(ta, tx, out=y), a @ x)
    mm = per_call_us(lambda: ts.matmul(ta, tx, out=y))
    print("| backend | `Runner::execute` (CLI) µs | `Kernel` on Tensors µs | above Rust | `Kernel(out=y)` µs | above Rust | `tessera.run` µs | above Rust | `k.bind(..., out=y)()` µs | above Rust |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for b, cli, kern, kout, run, bnd in rows:
        print(f"| {b} | {cli:.2f} | {kern:.2f} | +{kern - cli:.2f} | {kout:.2f} | +{kout - cli:.2f} | "
              f"{run:.2f} | +{run - cli:.2f} | {bnd:.2f} | +{bnd - cli:.2f} |")
    print(f"\n`ts.matmul(A, x, out=y)` (tiered): {mm:.2f} µs")
    sys.stdout.flush()


def datasets(names, scales, backends):
    ctx = harness.Context(ROOT, quick=False, backends=backends)
    variants = images._variants(ts, ROOT)
    print()
    print("| dataset | variant | backend | Tessera µs/image (median) | OpenCV µs/image | per-image geomean OpenCV/Tessera |")
    print("|---|---|---|---|---|---|")
    for dname in names:
        fname, loader, threshold = images.DATASETS[dname]
        grays = getattr(images, loader)(ctx.data / "images" / fname, images.DATASET_IMAGES_FULL)
        for scale in scales:
            scaled = [g if scale == 1 else images.magnify_cubic(g, scale) for g in grays]
            binaries = [threshold(g) for g in scaled]
            rng = np.random.default_rng(images.HIST_SEED)
            randoms = [rng.integers(0, 256, size=b.shape, dtype=np.uint8) for b in binaries]
            h, w = binaries[0].shape
            label = f"{dname} {'plain' if scale == 1 else f'{scale}x'} ({w}x{h}, {len(binaries)} images)"
            for backend in backends:
                for v in variants:
                    kern = ts.compile(v.program, out=v.out, backend=backend,
                                      shapes={"bins": [16]} if v.kind == "histogram" else None,
                                      **v.build(binaries[0], randoms[0]))
                    row = images._measure(ctx, v, kern, binaries, randoms, label, backend)
                    note = row["note"]
                    tess = note.split("per-image Tessera median ")[1].split(" µs")[0]
                    cv = note.split(", OpenCV ")[1].split(" µs")[0]
                    print(f"| {label} | {v.kind} {v.name} | {backend} | {tess} | {cv} | "
                          f"{row['extra']['per-image geomean']} |")
                    sys.stdout.flush()


def main():
    global CLI, CLOCK, ROUNDS
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="MNIST,Omniglot", help="`none`: the tiny SpMV table only")
    ap.add_argument("--scales", default="1")
    ap.add_argument("--backends", default="jit,c")
    ap.add_argument("--skip-tiny", action="store_true")
    ap.add_argument("--cli", default=str(CLI), help="the tessera binary (another build's, for a before/after)")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="`cpu`: the Python columns in this thread's CPU time (steadier on a loaded machine)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds per figure (the best is reported)")
    args = ap.parse_args()
    CLI = Path(args.cli)
    CLOCK = time.thread_time if args.clock == "cpu" else time.perf_counter
    ROUNDS = args.rounds
    print(f"tessera from {ts.__file__}, CLI {CLI}; load average {os.getloadavg()}")
    if not args.skip_tiny:
        tiny()
    if args.datasets != "none":
        datasets(args.datasets.split(","), [int(s) for s in args.scales.split(",")],
                 args.backends.split(","))
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
