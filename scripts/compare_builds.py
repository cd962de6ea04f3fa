#!/usr/bin/env python3
"""Compare two `tessera` binaries in one run: SpMV kernel time on real matrices and compile
latency of the README and example kernels, alternating the binaries so both see the same machine
state. Standard library only.

    python3 scripts/compare_builds.py OLD_BINARY NEW_BINARY [--rounds 5] [--backend jit]

Prints a Markdown table: per case the median over rounds of each binary's `tessera bench --json`
median (kernel) or compile_ms (compile), and new/old.
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "matrices")
SPMV = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n"
MATRICES = ["bcsstk16", "delaunay_n17", "c-55"]


def write_npy_f64(path, values, shape=None):
    shape = shape or (len(values),)
    dims = "".join("%d, " % d for d in shape)
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }" % dims.rstrip(" ")
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%dd" % len(values), *values))


def mtx_cols(path):
    with open(path) as f:
        for line in f:
            if not line.startswith("%"):
                return int(line.split()[1])
    raise ValueError(path)


def bench(binary, args, backend):
    out = subprocess.run(
        [binary, "bench", *args, "--json", "--backend", backend, "--warmup", "3", "--repeat", "20"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backend", default="jit")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    cases = []
    for m in MATRICES:
        p = os.path.join(DATA, m + ".mtx")
        if not os.path.exists(p):
            print(f"skipping {m}: {p} not found", file=sys.stderr)
            continue
        x = os.path.join(tmp, m + "_x.npy")
        write_npy_f64(x, [1.0 + (k % 7) * 0.25 for k in range(mtx_cols(p))])
        cases.append((f"SpMV {m} (CSR)", "median_ms", [SPMV, "--in", f"A={p}", "--in", f"x={x}", "--out", "y"]))
    small = os.path.join(DATA, "494_bus.mtx")
    if os.path.exists(small):
        xs = os.path.join(tmp, "x494.npy")
        write_npy_f64(xs, [1.0] * 494)
        cases.append(("compile SpMV", "compile_ms", [SPMV, "--in", f"A={small}", "--in", f"x={xs}", "--out", "y"]))
        cases.append(("compile triu_sum", "compile_ms", ["examples/triu_sum.tess", "--in", f"A={small}", "--out", "s"]))
        cases.append(("compile diagonal", "compile_ms", ["examples/diagonal.tess", "--in", f"A={small}", "--out", "d"]))
        k = os.path.join(tmp, "k3.npy")
        write_npy_f64(k, [1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0], (3, 3))
        cases.append(("compile convolve2d", "compile_ms", ["examples/convolve2d.tess", "--in", f"A={small}", "--in", f"K={k}", "--out", "C", "--shape", "C=496x496"]))
    results = {c[0]: ([], []) for c in cases}
    for _ in range(a.rounds):
        for name, key, args in cases:
            for k, binary in enumerate((a.old, a.new)):
                results[name][k].append(bench(binary, args, a.backend)[key])
    print(f"| case ({a.backend}, median of {a.rounds} rounds) | old ms | new ms | new/old |")
    print("|---|---|---|---|")
    for name, (old, new) in results.items():
        o, n = statistics.median(old), statistics.median(new)
        print(f"| {name} | {o:.3f} | {n:.3f} | {n / o:.2f} |")


if __name__ == "__main__":
    main()
