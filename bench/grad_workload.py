"""What the gradient workloads' scripts (bench/longformer.py, bench/gat.py, bench/subdivnet.py,
bench/softras.py; issue 16) share: running a Tessera example with `--dump` on each backend,
timing PyTorch and JAX, checking that every side agrees, and printing the table."""

import json
import os
import subprocess
import sys
import time

import numpy as np

from harness import median_ms  # noqa: F401 (the workload scripts import it from here)

# One thread for XLA too (harness sets OMP/MKL); must be set before jax is imported.
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")


def load_jax():
    """JAX with 64-bit floats, or None (with a message) when it is not installed: the scripts
    run without it (`pip install "jax[cpu]"` adds the JAX rows)."""
    try:
        import jax
    except ImportError:
        print("# JAX not installed: its rows are skipped (pip install \"jax[cpu]\")")
        return None
    jax.config.update("jax_enable_x64", True)
    return jax


def jax_ms(f, args, repeats):
    """Median ms of `repeats` calls of the jitted `f(*args)` after one call that compiles it
    (compile time excluded, as for Tessera), waiting for the results; and the last result."""
    import jax

    ready = lambda out: jax.tree_util.tree_map(lambda a: a.block_until_ready(), out)
    ready(f(*args))
    return median_ms(lambda: ready(f(*args)), repeats)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tessera(example, args, dump, schedule=None, extra=()):
    """Run `cargo run --release --example EXAMPLE -- ARGS --dump DUMP` on the JIT and C
    backends, and with `schedule` (schedule commands for the forward program, which the
    gradient program inherits) on both again, then the `(backend, schedule)` runs of `extra`
    (or `(backend, schedule, grad_schedule)`: `--grad-schedule`, commands for the gradient
    program itself), so the peers are checked against the dump of the last run; returns the
    JSON reports by row name (a failing run is reported, skipped)."""
    mine = {}
    runs = [("jit", None), ("c", None)] + ([("jit", schedule), ("c", schedule)] if schedule else [])
    runs += list(extra)
    for backend, sched, *rest in runs:
        gsched = rest[0] if rest else None
        cmd = ["cargo", "run", "--release", "-q", "--example", example, "--", *map(str, args),
               "--backend", backend, "--dump", dump] + (["--schedule", sched] if sched else [])
        cmd += ["--grad-schedule", gsched] if gsched else []
        name = f"{backend}, {sched}" if sched else backend
        name += f"; gradient: {gsched}" if gsched else ""
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if out.returncode != 0:
            print(f"# tessera ({name}) failed: {out.stderr.strip()[-300:]}")
            continue
        mine[name] = json.loads(out.stdout.strip().splitlines()[-1])
    return mine


def check(name, pairs, rtol=1e-9):
    """Exit unless every (Tessera, peer) pair agrees to `rtol` relative to the largest value."""
    errs = []
    for a, b in pairs:
        a, b = np.asarray(a), np.asarray(b)
        errs.append(float(np.max(np.abs(a - b)) / max(1e-300, float(np.max(np.abs(b))))))
    if max(errs) > rtol:
        sys.exit(f"{name} and Tessera disagree: relative errors {errs}")


def table(theirs, mine):
    """Markdown rows: each peer's and each Tessera backend's forward and forward + backward
    medians, with the ratio of the best peer's time to each."""
    best_fwd = min(t[0] for t in theirs.values())
    best_both = min(t[1] for t in theirs.values())
    print("| code | forward ms | forward + backward ms | best peer / this (fwd, fwd+bwd) |")
    print("|---|---|---|---|")
    for name, (fwd, both) in theirs.items():
        print(f"| {name} | {fwd:.1f} | {both:.1f} | {best_fwd / fwd:.2f}×, {best_both / both:.2f}× |")
    for backend, m in mine.items():
        print(f"| Tessera ({backend}) | {m['forward_ms']:.1f} | {m['grad_ms']:.1f} | "
              f"{best_fwd / m['forward_ms']:.2f}×, {best_both / m['grad_ms']:.2f}× |")
    print()
    for backend, m in mine.items():
        print(f"Tessera ({backend}) compile: forward {m['forward_compile_ms']:.0f} ms, "
              f"gradient program {m['grad_compile_ms']:.0f} ms.")
