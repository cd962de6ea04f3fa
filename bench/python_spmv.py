#!/usr/bin/env python3
"""Issue 19's performance figures for the Python package (BENCHMARKS.md, "Python package").

Run from the repository root with the package installed (scripts/test-python.sh makes the
venv) and the CLI built (`cargo build --release`):

    target/pyenv/bin/python bench/python_spmv.py [--matrices bcsstk16,c-55,delaunay_n17]

Measures, in one process:
1. call overhead: a tiny SpMV (8 x 8, 16 entries) through `tessera.run`,
   `tessera.einsum` and a `tessera.compile` kernel, against the CLI's `bench` kernel time for the same program and formats
   (the Rust `Runner::execute` call alone);
2. `tessera.asarray` of a 10^7-entry CSR matrix (int32 indices), against copying its three
   arrays with NumPy (the package shares them: the time is the structure check);
3. SpMV on matrices of ../shared/data/matrices: `tessera.run` and a `tessera.compile`
   kernel (C backend, compiled once, one thread), `tessera.einsum` and Tessera's `A @ x`
   (tiered, warmed up; their outer loop runs on every core above the work threshold),
   against the CLI's `bench --backend c` kernel time and SciPy's `A @ x` (one thread).
4. `out=`: the compiled kernel writing into one reused NumPy array (`k(A=A, x=x, out=y)`,
   and the same call kept by `k.bind(A=A, x=x, out=y)`)
   against the same kernel allocating its output, a fresh `np.empty` as `out=` each call,
   and the CLI (which reuses its output between repeats). The four are measured in
   alternation, ROUNDS rounds of a batch of calls each; a round's figure is the batch's
   median and the figure reported the best round's (the machine is shared: best of N).
   SciPy's `A @ x` runs in the same rounds.
Times are medians of repeated calls, in ms.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.io
import scipy.sparse as sp

import tessera as ts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MATRICES = os.path.join(ROOT, "..", "shared", "data", "matrices")
CLI = os.path.join(ROOT, "target", "release", "tessera")
SPMV = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n"


def median_ms(f, repeat, warmup=3):
    for _ in range(warmup):
        f()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def cli_kernel_ms(mtx_path, x, backend, repeat):
    with tempfile.TemporaryDirectory() as d:
        xp = os.path.join(d, "x.npy")
        np.save(xp, x)
        out = subprocess.run(
            [CLI, "bench", SPMV, "--in", f"A={mtx_path}", "--in", f"x={xp}", "--out", "y",
             "--warmup", "5", "--repeat", str(repeat), "--backend", backend, "--json"],
            check=True, capture_output=True, text=True,
        ).stdout
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


def numeric_path(path, a, tmp):
    """`path`, or for a pattern matrix a real-valued copy of it in `tmp`: SciPy reads a
    pattern file as explicit 1.0 values, which the Python side then multiplies, while the CLI
    would read it as a `Pattern` level with no values at all (8 bytes less per entry). The CLI
    gets the same numbers as SciPy's."""
    with open(path) as f:
        if "pattern" not in f.readline().lower():
            return path
    out = os.path.join(tmp, os.path.basename(path))
    scipy.io.mmwrite(out, sp.coo_matrix(a), field="real")
    return out


def tiny(rows):
    a = sp.random_array((8, 8), density=0.25, random_state=1, format="csr")
    x = np.ones(8)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "tiny.mtx")
        scipy.io.mmwrite(path, a)
        cli = cli_kernel_ms(path, x, "jit", 2000)
    ta, tx = ts.asarray(a), ts.asarray(x)
    run = median_ms(lambda: ts.run(SPMV, out="y", backend="jit", A=ta, x=tx), 2000, 50)
    ein = median_ms(lambda: ts.einsum("y[i] += A[i, j] * x[j]", A=ta, x=tx), 2000, 50)
    k = ts.compile(SPMV, out="y", backend="jit", A=ta, x=tx)
    ker = median_ms(lambda: k(A=ta, x=tx), 2000, 50)
    rows.append(("tiny SpMV 8x8, 16 entries: CLI kernel (Runner::execute)", f"{cli * 1e3:.1f} µs"))
    rows.append(("tiny SpMV: tessera.run from Python (jit, cached)", f"{run * 1e3:.1f} µs (+{(run - cli) * 1e3:.1f} µs)"))
    rows.append(("tiny SpMV: tessera.einsum from Python (cached)", f"{ein * 1e3:.1f} µs (+{(ein - cli) * 1e3:.1f} µs)"))
    rows.append(("tiny SpMV: a tessera.compile kernel called from Python", f"{ker * 1e3:.1f} µs (+{(ker - cli) * 1e3:.1f} µs)"))


def big_asarray(rows):
    n, per = 10**6, 10
    r = np.arange(n, dtype=np.int32)
    indices = ((np.arange(per, dtype=np.int32)[None, :] * 100000) + (r % 100000)[:, None]).ravel()
    indptr = np.arange(0, n * per + 1, per, dtype=np.int32)
    data = np.random.default_rng(0).random(n * per)
    m = sp.csr_array((data, indices, indptr), shape=(n, n))
    m.has_canonical_format = True  # sorted and distinct by construction
    t = ts.asarray(m)
    took = median_ms(lambda: ts.asarray(m), 5, 0)
    _, (ptr, idx), (val,) = t.level_buffers()
    shared = all(np.shares_memory(a, b) for a, b in ((ptr, m.indptr), (idx, m.indices), (val, m.data)))
    copy = median_ms(lambda: (data.copy(), indices.copy(), indptr.copy()), 5, 1)
    rows.append((f"asarray(csr) of {t.nnz:.0e} entries ({t.format})",
                 f"{took:.1f} ms ({'no copy: the three arrays are shared' if shared else 'copied'}; "
                 f"NumPy copying the three arrays: {copy:.1f} ms)"))


def spmv(names, rows, table):
    for name in names:
        path = os.path.join(MATRICES, f"{name}.mtx")
        if not os.path.exists(path):
            print(f"skipping {name}: no {path}", file=sys.stderr)
            continue
        a = sp.csr_array(scipy.io.mmread(path))
        x = np.random.default_rng(1).random(a.shape[1])
        ta, tx = ts.asarray(a), ts.asarray(x)
        with tempfile.TemporaryDirectory() as tmp:
            cli = cli_kernel_ms(numeric_path(path, a, tmp), x, "c", 50)
        run = median_ms(lambda: ts.run(SPMV, out="y", backend="c", A=ta, x=tx), 50)
        # Tiered: enough warm-up calls for the C tier to take over. On several cores the
        # einsum and `@` run their outer loop in parallel (the serial columns are `run` and the
        # compiled kernel).
        ein_f = lambda: ts.einsum("y[i] += A[i, j] * x[j]", A=ta, x=tx)
        mm_f = lambda: ta @ tx
        for f in (ein_f, mm_f):
            for _ in range(300):
                f()
        time.sleep(1.0)  # the C tier compiles in the background
        ein = median_ms(ein_f, 200, 50)
        mm = median_ms(mm_f, 200, 50)
        k = ts.compile(SPMV, out="y", backend="c", A=ta, x=tx)
        ker = median_ms(lambda: k(A=ta, x=tx), 50)
        sci = median_ms(lambda: a @ x, 50)
        y = ts.run(SPMV, out="y", backend="c", A=ta, x=tx).to_numpy()
        assert np.allclose(y, a @ x)
        assert np.allclose(ein_f().to_numpy(), a @ x)
        assert np.allclose(np.asarray(mm_f()), a @ x)
        table.append((name, a.nnz, cli, run, ker, ein, mm, sci))


ROUNDS = 7
# The real matrices of the SpMV study (bench/studies/spmv.py).
STUDY = ("bcsstk16,bayer10,c-55,Fashion_MNIST_norm_10NN,dwt_2680,delaunay_n17,web-NotreDame,"
         "bcsstk13,cryg10000,ca-HepPh,dw4096,rajat01,usroads,Groebner_id2003_aug")


def out_table(names, table):
    for name in names:
        path = os.path.join(MATRICES, f"{name}.mtx")
        if not os.path.exists(path):
            continue
        a = sp.csr_array(scipy.io.mmread(path))
        x = np.random.default_rng(1).random(a.shape[1])
        ta, tx = ts.asarray(a), ts.asarray(x)
        tmp = tempfile.mkdtemp()
        path = numeric_path(path, a, tmp)
        k = ts.compile(SPMV, out="y", backend="c", A=ta, x=tx)
        y = np.empty(a.shape[0])
        # What the CLI runs: the same coord=i32 CSR, but arrays Tessera owns, their
        # coordinates checked once (`Store::below`: gathers without bounds checks), made by
        # `asarray(copy=True)`. SciPy's arrays shared zero-copy (`ta`) keep their checks
        # (their owner may rewrite them).
        tc = ts.asarray(a, copy=True)
        assert tc.format == ta.format
        kc = ts.compile(SPMV, out="y", backend="c", A=tc, x=tx)
        variants = {
            "cli": None,
            "conv_kernel": lambda: kc(A=tc, x=tx),
            "conv_out": lambda: kc(A=tc, x=tx, out=y),
            "kernel": lambda: k(A=ta, x=tx),
            "out": lambda: k(A=ta, x=tx, out=y),
            "fresh": lambda: k(A=ta, x=tx, out=np.empty(a.shape[0])),
            "matmul_out": lambda: ts.matmul(ta, tx, out=y),
            # The same calls kept with their arguments (`Kernel.bind`): timed as they are
            # called, no lambda around them.
            "conv_bound": kc.bind(A=tc, x=tx, out=y),
            "bound": k.bind(A=ta, x=tx, out=y),
            # SciPy's own one-thread `A @ x` on the same arrays, in the same rounds.
            "scipy": lambda: a @ x,
        }
        best = {v: float("inf") for v in variants}
        for _ in range(ROUNDS):
            for v, f in variants.items():
                t = cli_kernel_ms(path, x, "c", 50) if f is None else median_ms(f, 50)
                best[v] = min(best[v], t)
        k(A=ta, x=tx, out=y)
        assert np.allclose(y, a @ x)
        shutil.rmtree(tmp)
        table.append((name, a.nnz, best))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--matrices", default="bcsstk16,c-55,delaunay_n17",
                    help="comma-separated names in ../shared/data/matrices, or `study` for the SpMV study's 14")
    ap.add_argument("--only-out", action="store_true", help="only the out= table (4.)")
    args = ap.parse_args()
    if args.matrices == "study":
        args.matrices = STUDY
    outs = []
    out_table(args.matrices.split(","), outs)
    print("| matrix | nnz | CLI kernel ms (c) | `copy=True` kernel ms | / CLI | `copy=True` `out=y` ms | **/ CLI** | SciPy-shared kernel ms | kernel / CLI | SciPy-shared `out=y` ms | `out=y` / CLI | `out=np.empty(n)` ms | fresh / CLI | `ts.matmul(A, x, out=y)` ms (tiered, parallel) | SciPy `A @ x` ms | **SciPy / SciPy-shared `out=y`** | **SciPy / `copy=True` `out=y`** | `copy=True` bound ms | **/ CLI** | SciPy-shared bound / CLI | SciPy / `copy=True` bound |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, nnz, b in outs:
        cli = b["cli"]
        print(f"| {name} | {nnz} | {cli:.4g} | {b['conv_kernel']:.4g} | {b['conv_kernel'] / cli:.2f} | {b['conv_out']:.4g} | "
              f"**{b['conv_out'] / cli:.2f}** | {b['kernel']:.4g} | {b['kernel'] / cli:.2f} | {b['out']:.4g} | "
              f"{b['out'] / cli:.2f} | {b['fresh']:.4g} | {b['fresh'] / cli:.2f} | {b['matmul_out']:.4g} | "
              f"{b['scipy']:.4g} | **{b['scipy'] / b['out']:.2f}** | **{b['scipy'] / b['conv_out']:.2f}** | "
              f"{b['conv_bound']:.4g} | **{b['conv_bound'] / cli:.2f}** | {b['bound'] / cli:.2f} | {b['scipy'] / b['conv_bound']:.2f} |")
    print()
    if args.only_out:
        return
    rows, table = [], []
    tiny(rows)
    big_asarray(rows)
    spmv(args.matrices.split(","), rows, table)
    for what, value in rows:
        print(f"| {what} | {value} |")
    print()
    print(f"{os.cpu_count()} cores")
    print("| matrix | nnz | CLI kernel ms (c) | tessera.run ms (c) | run / CLI | compiled kernel ms (c) | kernel / CLI | tessera.einsum ms | Tessera A @ x ms | SciPy A @ x ms | SciPy / kernel | SciPy / einsum | SciPy / Tessera @ |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, nnz, cli, run, ker, ein, mm, sci in table:
        print(f"| {name} | {nnz} | {cli:.4g} | {run:.4g} | {run / cli:.2f} | {ker:.4g} | {ker / cli:.2f} | {ein:.4g} | {mm:.4g} | {sci:.4g} | {sci / ker:.2f} | {sci / ein:.2f} | {sci / mm:.2f} |")


if __name__ == "__main__":
    main()
