"""The benchmark context every study receives, and the rendering of results.

A study module (`bench/studies/<name>.py`) defines `TITLE: str`, `PEERS: list[str]` and
`run(ctx) -> list[dict]`, one dict per case:

    {"case": str, "variant": str, "tessera_ms": float, "peers": {peer: ms or None},
     "compile_ms": float (optional), "note": str (optional), "extra": {column: value} (optional)}

The harness renders ratio = peer_ms / tessera_ms per peer (> 1: Tessera is faster), the
geometric mean per peer, and a bar chart. A study raises `Mismatch` when a Tessera result
disagrees with a peer's; it may call `ctx.note(markdown)` to add text (e.g. a roofline table)
under its section of BENCHMARKS.md.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

# Tessera is single-threaded: every peer is held to one thread too. Set before numpy, MKL or
# GraphBLAS load their thread pools (compare.py also sets them before re-executing itself).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"
# sparse_dot_mkl finds the mkl wheel's libmkl_rt through $MKL_RT (it does not search the venv).
if "MKL_RT" not in os.environ:
    import sys as _sys

    _libs = sorted((Path(_sys.prefix) / "lib").glob("libmkl_rt.so*"))
    if _libs:
        os.environ["MKL_RT"] = str(_libs[0])


class Mismatch(Exception):
    """A Tessera result disagrees with a peer's result on the same input."""


class TesseraError(RuntimeError):
    """The tessera binary failed; the message holds its command and stderr."""


# Peer name (lower case) -> how to check it is usable. Names not listed are tried as a Python
# module import. Studies may use any spelling with the same lower-case form.
def _import(module: str) -> Callable[[], None]:
    def check() -> None:
        importlib.import_module(module)

    return check


def _mkl() -> None:
    import numpy as np
    import scipy.sparse as sp
    from sparse_dot_mkl import dot_product_mkl

    a = sp.identity(4, format="csr")
    y = dot_product_mkl(a, np.ones(4))
    if not np.allclose(y, 1.0):
        raise RuntimeError("sparse_dot_mkl returned a wrong product on the identity")


def _graphblas() -> None:
    import graphblas as gb

    gb.ss.config["nthreads"] = 1


def _finch() -> None:
    import finch  # noqa: F401  (imports juliacall and installs Julia packages on first use)


def _eigen() -> None:
    import shutil

    if not Path("/usr/include/eigen3").exists() and os.geteuid() != 0:
        raise RuntimeError("/usr/include/eigen3 missing (apt-get install libeigen3-dev)")
    if not shutil.which("g++"):
        raise RuntimeError("g++ not found")


_CHECKS: dict[str, Callable[[], None]] = {
    "eigen": _eigen,
    "scipy": _import("scipy.sparse"),
    "csgraph": _import("scipy.sparse.csgraph"),
    "scipy.csgraph": _import("scipy.sparse.csgraph"),
    "mkl": _mkl,
    "graphblas": _graphblas,
    "python-graphblas": _graphblas,
    "finch": _finch,
    "finch-tensor": _finch,
    "opencv": _import("cv2"),
    "cv2": _import("cv2"),
    "numpy dense": _import("numpy"),
    "numpy sampled": _import("numpy"),
}

# The pip package behind each peer, to report a failed install as the reason.
_PIP_NAME = {
    "mkl": "sparse_dot_mkl",
    "graphblas": "python-graphblas",
    "python-graphblas": "python-graphblas",
    "finch": "finch-tensor",
    "finch-tensor": "finch-tensor",
    "opencv": "opencv-python-headless",
    "cv2": "opencv-python-headless",
}


class Context:
    """What a study needs: flags, paths, the tessera binary, timing helpers, peer checks."""

    def __init__(
        self,
        root: Path,
        quick: bool,
        backends: list[str],
        tmp: Path | None = None,
        log_file: Path | None = None,
    ):
        self.root = Path(root).resolve()
        self.quick = quick
        self.backends = list(backends)
        self.data = (self.root / ".." / "shared" / "data").resolve()
        self.tmp = Path(tmp) if tmp else self.root / "bench" / ".scratch"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.binary = self.root / "target" / "release" / "tessera"
        self.default_repeat = 5 if quick else 20
        self.default_warmup = 2 if quick else 3
        self.default_rounds = 2 if quick else 3
        self.timeout_s = 300.0
        self._peer_status: dict[str, str | None] = {}
        self._peer_overrides: dict[str, str] = {}
        self._log_file = log_file
        self._notes: list[str] = []
        self.commands: list[str] = []
        pip_failures = self.root / "bench" / ".venv" / "pip-failures.json"
        self._pip_failures: dict[str, str] = (
            json.loads(pip_failures.read_text()) if pip_failures.exists() else {}
        )

    # ---- logging and notes -------------------------------------------------------------
    def log(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        if self._log_file:
            with open(self._log_file, "a") as f:
                f.write(line + "\n")

    def note(self, markdown: str) -> None:
        """Markdown added under the current study's table in BENCHMARKS.md."""
        self._notes.append(markdown)

    def take_notes(self) -> list[str]:
        notes, self._notes = self._notes, []
        return notes

    # ---- running tessera ---------------------------------------------------------------
    def tessera(self, args: list[str], timeout: float | None = None) -> dict:
        """Run the release binary with `args + ["--json"]` and parse its JSON line."""
        cmd = [str(self.binary), *[str(a) for a in args], "--json"]
        # Logged relative to the repository root, so the commands work from any clone.
        prefix = str(self.root) + "/"
        self.commands.append(" ".join(_quote(c.replace(prefix, "")) for c in cmd))
        try:
            p = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=timeout or self.timeout_s,
                cwd=self.root,
            )
        except subprocess.TimeoutExpired as e:
            raise TesseraError(
                f"timed out after {e.timeout:.0f} s: {' '.join(cmd)}"
            ) from None
        if p.returncode != 0:
            raise TesseraError(f"{' '.join(cmd)}\n{p.stderr.strip()}")
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        if not lines:
            raise TesseraError(f"no JSON line from {' '.join(cmd)}:\n{p.stdout}")
        return json.loads(lines[-1])

    def bench(
        self,
        program: str | Path,
        ins: dict,
        outs: dict,
        scalars: dict | None = None,
        backend: str = "jit",
        repeat: int | None = None,
        warmup: int | None = None,
        shapes: dict | None = None,
        timeout: float | None = None,
        schedule: str | None = None,
    ) -> dict:
        """`tessera bench PROGRAM` with `--in NAME=PATH[@FORMAT]` for each of `ins` (a value is
        a path, `"path@FORMAT"`, or `(path, format)`), `--out NAME[=PATH][@FORMAT]` for each
        of `outs` (a path, `"path@FORMAT"`, `(path or None, format)` or None for a bare
        workspace), `--scalar NAME=VALUE`, `--shape NAME=D1xD2`, `--schedule SCHEDULE`."""
        prog = Path(program)
        if not prog.is_absolute() and (self.root / prog).exists():
            prog = self.root / prog
        args: list[str] = ["bench", str(prog)]
        for n, v in ins.items():
            args += ["--in", f"{n}={_spec(v)}"]
        for n, v in outs.items():
            args += ["--out", _out_spec(n, v)]
        for n, v in (scalars or {}).items():
            args += ["--scalar", f"{n}={v}"]
        for n, s in (shapes or {}).items():
            args += ["--shape", f"{n}={'x'.join(str(d) for d in s)}"]
        if schedule:
            args += ["--schedule", schedule]
        args += [
            "--backend",
            backend,
            "--repeat",
            str(repeat or self.default_repeat),
            "--warmup",
            str(self.default_warmup if warmup is None else warmup),
        ]
        return self.tessera(args, timeout=timeout)

    def backend_missing_reason(self, backend: str) -> str | None:
        """None when `tessera bench --backend BACKEND` works here, else its error."""
        cache = self.__dict__.setdefault("_backend_status", {})
        if backend not in cache:
            try:
                self.tessera(
                    ["bench", "y .= 0; for i = _; y[i] += 1; end", "--out", "y", "--shape", "y=4",
                     "--repeat", "1", "--warmup", "0", "--backend", backend]
                )
                cache[backend] = None
            except TesseraError as e:
                cache[backend] = str(e).strip().splitlines()[-1]
                self.log(f"backend {backend} n/a: {cache[backend]}")
            self.commands.pop()
        return cache[backend]

    def usable_backends(self) -> list[str]:
        """The requested backends that work in this build (the others are noted once)."""
        out = []
        for b in self.backends:
            why = self.backend_missing_reason(b)
            if why is None:
                out.append(b)
            elif b not in self.__dict__.setdefault("_backend_noted", set()):
                self._backend_noted.add(b)
                self.note(f"Backend `{b}` not measured: {why}")
        return out

    # ---- timing Python callables -------------------------------------------------------
    def time_py(self, fn: Callable[[], object], repeat: int | None = None, warmup: int = 1) -> float:
        """Median wall time of `fn()` in milliseconds."""
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeat or self.default_repeat):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    def alternate(
        self, measure: dict[str, Callable[[], float]], rounds: int | None = None
    ) -> dict[str, float]:
        """Call every measurement in turn, for several rounds, so Tessera and its peers share
        the machine's state (frequency, other load) alike; the median per name. A measurement
        that raises is reported once in the log and gives None."""
        got: dict[str, list[float]] = {k: [] for k in measure}
        failed: dict[str, str] = {}
        for _ in range(rounds or self.default_rounds):
            for name, fn in measure.items():
                if name in failed:
                    continue
                try:
                    got[name].append(float(fn()))
                except (Mismatch, TesseraError):
                    raise
                except Exception as e:  # a peer failing mid-run is n/a, not a crash
                    failed[name] = f"{type(e).__name__}: {e}"
                    self.log(f"  {name} failed: {failed[name]}")
        return {k: (statistics.median(v) if v and k not in failed else None) for k, v in got.items()}

    # ---- peers ---------------------------------------------------------------------------
    def peer_available(self, name: str) -> bool:
        return self.peer_missing_reason(name) is None

    def peer_missing_reason(self, name: str) -> str | None:
        """None when the peer works, else why not (failed install or import). A variant of a
        library's call ("MKL sorted": the same product with sorted rows) works when the
        library does."""
        key = name.lower().removesuffix(" sorted")
        if key in self._peer_overrides:
            return self._peer_overrides[key]
        if key not in self._peer_status:
            self._peer_status[key] = self._check(key)
            if self._peer_status[key]:
                self.log(f"peer {name} n/a: {self._peer_status[key]}")
        return self._peer_status[key]

    def set_peer_missing(self, name: str, reason: str) -> None:
        """Mark a peer n/a (e.g. a driver that failed to compile)."""
        self._peer_overrides[name.lower()] = reason

    def _check(self, key: str) -> str | None:
        pip_name = _PIP_NAME.get(key, key)
        if pip_name in self._pip_failures:
            return f"pip install {pip_name} failed: {self._pip_failures[pip_name]}"
        check = _CHECKS.get(key, _import(key))
        try:
            check()
        except BaseException as e:  # juliacall may raise SystemExit-like errors
            if isinstance(e, KeyboardInterrupt):
                raise
            msg = str(e).strip().splitlines()
            return f"{type(e).__name__}: {msg[-1] if msg else ''}"[:300]
        return None

    # ---- machine -------------------------------------------------------------------------
    def stream_bandwidth(self) -> dict:
        """Single-core STREAM triad bandwidth (GB/s) measured now by `bench/stream.c`
        (compiled with cc -O3 -march=native), cached for the run."""
        if not hasattr(self, "_stream"):
            src = self.root / "bench" / "stream.c"
            exe = self.tmp / "stream"
            subprocess.run(
                ["cc", "-O3", "-march=native", "-o", str(exe), str(src)],
                check=True,
                capture_output=True,
                text=True,
            )
            p = subprocess.run([str(exe)], check=True, capture_output=True, text=True)
            self._stream = json.loads(p.stdout.strip().splitlines()[-1])
        return self._stream


def _quote(s: str) -> str:
    if s and all(c.isalnum() or c in "-_./=:@,+" for c in s):
        return s
    return "'" + s.replace("'", "'\\''") + "'"


def _spec(v) -> str:
    if isinstance(v, tuple):
        path, fmt = v
        return f"{path}@{fmt}" if fmt else str(path)
    return str(v)


def _out_spec(name: str, v) -> str:
    if v is None:
        return name
    if isinstance(v, tuple):
        path, fmt = v
        s = name if path is None else f"{name}={path}"
        return f"{s}@{fmt}" if fmt else s
    return f"{name}={v}"


# ---- rendering ---------------------------------------------------------------------------


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def ratios(case: dict, peers: list[str]) -> dict[str, float | None]:
    t = case.get("tessera_ms")
    out = {}
    for p in peers:
        ms = case.get("peers", {}).get(p)
        out[p] = (ms / t) if (ms is not None and t) else None
    return out


def fastest_peer_ratio(case: dict) -> float | None:
    vals = [v for v in case.get("peers", {}).values() if v is not None]
    t = case.get("tessera_ms")
    return (min(vals) / t) if vals and t else None


def _fmt_ms(x) -> str:
    if x is None:
        return "n/a"
    return f"{x:.4g}"


def _fmt_ratio(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def render_markdown(result: dict) -> str:
    """One study's section of BENCHMARKS.md from its results JSON."""
    peers = result["peers"]
    cases = result["cases"]
    lines = [f"## {result['title']}", ""]
    lines.append(f"Run: `{result['command']}` on {result['date']}.")
    if result.get("error"):
        lines += ["", f"**The study failed:** {result['error']}"]
    if result.get("peer_missing"):
        lines.append("")
        for p, why in result["peer_missing"].items():
            lines.append(f"- {p}: n/a — {why}")
    if cases:
        extra_cols: list[str] = []
        for c in cases:
            for k in c.get("extra", {}):
                if k not in extra_cols:
                    extra_cols.append(k)
        lines.append("")
        lines.append(
            "Times are medians in ms; a ratio is peer time / Tessera time (> 1: Tessera is "
            "faster). *vs fastest* divides the fastest peer's time by Tessera's."
        )
        lines.append("")
        head = ["case", "Tessera variant", "Tessera ms", "compile ms"]
        head += [f"{p} ms" for p in peers] + [f"{p} ratio" for p in peers]
        head += ["vs fastest"] + extra_cols + ["note"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for c in cases:
            r = ratios(c, peers)
            row = [
                c["case"],
                f"`{c.get('variant', '')}`",
                _fmt_ms(c.get("tessera_ms")),
                _fmt_ms(c.get("compile_ms")),
            ]
            row += [_fmt_ms(c.get("peers", {}).get(p)) for p in peers]
            row += [_fmt_ratio(r[p]) for p in peers]
            row.append(_fmt_ratio(fastest_peer_ratio(c)))
            row += [str(c.get("extra", {}).get(k, "")) for k in extra_cols]
            row.append(c.get("note", "").replace("|", "\\|").replace("\n", " "))
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        gm = ["**geomean ratio**", "", "", ""] + [""] * len(peers)
        gm += [_fmt_ratio(geomean([ratios(c, peers)[p] for c in cases])) for p in peers]
        gm.append(_fmt_ratio(geomean([fastest_peer_ratio(c) for c in cases])))
        gm += [""] * len(extra_cols) + [""]
        lines.insert(len(lines) - 1, "| " + " | ".join(gm) + " |")
        lines.append(f"![{result['title']}](bench/results/{result['study']}.png)")
    for n in result.get("notes", []):
        lines += ["", n]
    lines.append("")
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    """Bar chart of peer/Tessera ratios per case (log scale, 1 = parity)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cases = result["cases"]
    # Peers with no figure at all (n/a everywhere) would only add empty legend entries.
    peers = [p for p in result["peers"] if any(ratios(c, result["peers"])[p] for c in cases)]
    fig, ax = plt.subplots(figsize=(min(14, 3 + 0.25 * len(cases) * max(1, len(peers))), 4.8))
    width = 0.8 / max(1, len(peers))
    xs = np.arange(len(cases))
    for k, p in enumerate(peers):
        vals = [ratios(c, result["peers"])[p] for c in cases]
        ax.bar(
            xs + (k - (len(peers) - 1) / 2) * width,
            [v if v is not None else np.nan for v in vals],
            width,
            label=p,
        )
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([c["case"] for c in cases], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("peer time / Tessera time (> 1: Tessera faster)")
    ax.set_title(result["title"])
    if peers:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def median_ms(call, repeats):
    """Median wall time in ms of `repeats` calls of `call`, and the last call's result (the
    studies that time a peer in Python share it)."""
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = call()
        times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[len(times) // 2], out


def pop_backend(args: list[str], default: str = "jit") -> str:
    """Remove `--backend NAME` from a study's arguments and return NAME (else `default`)."""
    if "--backend" not in args:
        return default
    k = args.index("--backend")
    if k + 1 == len(args):
        sys.exit("--backend needs a value: jit or c")
    backend = args[k + 1]
    del args[k : k + 2]
    return backend
