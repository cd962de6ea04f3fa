#!/usr/bin/env python3
"""Tessera against the libraries users would pick instead, measured in one run.

    python3 bench/compare.py [--quick] [--studies spmv,spgemm,graphs,images,compile,sddmm]
                             [--backend jit,c]

Creates bench/.venv (if missing) and installs bench/requirements.txt into it, re-executes
itself there, builds `cargo build --release`, runs each study (bench/studies/<name>.py),
and writes bench/results/<study>.json, bench/results/<study>.png and BENCHMARKS.md. Every
peer runs single-threaded, since Tessera's kernels are. See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib
import json
import os
import platform
import shlex
import subprocess
import sys
import traceback
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
VENV = BENCH / ".venv"
RESULTS = BENCH / "results"
ALL_STUDIES = ["spmv", "spgemm", "graphs", "images", "compile", "sddmm"]

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def venv_python() -> Path:
    return VENV / "bin" / "python"


def in_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def requirements() -> list[str]:
    out = []
    for line in (BENCH / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def ensure_venv() -> None:
    """Create bench/.venv and install the requirements one by one, so one peer that fails to
    install (recorded in pip-failures.json and reported as n/a) does not stop the others."""
    reqs = requirements()
    stamp = VENV / "requirements.sha256"
    digest = hashlib.sha256("\n".join(reqs).encode()).hexdigest()
    if venv_python().exists() and stamp.exists() and stamp.read_text() == digest:
        return
    if not venv_python().exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    failures: dict[str, str] = {}
    subprocess.run([str(venv_python()), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=False)
    for req in reqs:
        print(f"pip install {req}", flush=True)
        p = subprocess.run(
            [str(venv_python()), "-m", "pip", "install", "-q", req],
            capture_output=True,
            text=True,
        )
        if p.returncode != 0:
            lines = [ln for ln in (p.stderr or p.stdout).strip().splitlines() if ln.strip()]
            failures[req] = lines[-1] if lines else f"exit code {p.returncode}"
            print(f"  failed: {failures[req]}", flush=True)
    (VENV / "pip-failures.json").write_text(json.dumps(failures, indent=1))
    stamp.write_text(digest)


def mkl_rt() -> str | None:
    """sparse_dot_mkl finds libmkl_rt through $MKL_RT when the mkl wheel put it in the venv."""
    for p in sorted((VENV / "lib").glob("libmkl_rt.so*")):
        return str(p)
    return None


def reexec_in_venv() -> None:
    ensure_venv()
    env = dict(os.environ)
    for v in THREAD_VARS:
        env[v] = "1"
    lib = mkl_rt()
    if lib and "MKL_RT" not in env:
        env["MKL_RT"] = lib
    os.execve(str(venv_python()), [str(venv_python()), str(Path(__file__).resolve()), *sys.argv[1:]], env)


def machine_line() -> str:
    model = cores = l3 = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            v = v.strip()
            if k.strip() == "Model name":
                model = v
            elif k.strip() == "CPU(s)":
                cores = v
            elif k.strip() == "L3 cache":
                l3 = v
    except OSError:
        pass
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return (
        f"{model or platform.processor()}, {cores} CPUs, L3 {l3 or '?'}; {platform.system()} "
        f"{platform.release()}; Python {platform.python_version()}; {rustc}"
    )


def run_study(name: str, ctx, command: str) -> dict:
    import harness

    result = {
        "study": name,
        "title": name,
        "peers": [],
        "cases": [],
        "command": command,
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": machine_line(),
        "quick": ctx.quick,
        "error": None,
        "peer_missing": {},
        "notes": [],
    }
    try:
        mod = importlib.import_module(f"studies.{name}")
    except ModuleNotFoundError as e:
        if e.name == f"studies.{name}":
            result["error"] = f"bench/studies/{name}.py is not present in this checkout"
            return result
        raise
    result["title"] = mod.TITLE
    result["peers"] = list(mod.PEERS)
    ctx.commands.clear()
    try:
        result["cases"] = mod.run(ctx)
    except harness.Mismatch as e:
        result["error"] = f"result mismatch: {e}"
    except Exception as e:  # one broken study must not hide the others' results
        result["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    for p in result["peers"]:
        why = ctx.peer_missing_reason(p)
        if why:
            result["peer_missing"][p] = why
    result["notes"] = ctx.take_notes()
    result["tessera_commands"] = list(ctx.commands)
    return result


def write_benchmarks_md() -> None:
    """BENCHMARKS.md from every results JSON present, so runs of separate studies compose.

    The file also holds sections written by hand (studies measured by scripts of their own,
    dated follow-up measurements): a section (`## ` title) of the present file that no results
    JSON and no `bench/sections/*.md` file renders is kept as it is, in its place. Rendered
    sections replace the sections of the same title; new ones are added at the end.
    """
    import harness

    order = {s: k for k, s in enumerate(ALL_STUDIES)}
    results = [json.loads(p.read_text()) for p in RESULTS.glob("*.json")]
    results.sort(key=lambda r: (order.get(r["study"], 99), r["study"]))
    machines = sorted({r["machine"] for r in results})
    lines = [
        "# Benchmarks",
        "",
        "Generated by `bench/compare.py` from `bench/results/*.json`, `bench/analysis/` and",
        "`bench/sections/`; sections it does not generate are kept as they are written.",
        "Every figure comes from a real run on the machine below; Tessera and each peer were",
        "measured alternately in the same run on the same data, after checking that their",
        "results agree. All peers single-threaded (Tessera's kernels are).",
        "",
        "Machine: " + "; ".join(machines),
        "",
        "Reproduce (from a clean clone next to `shared/`):",
        "",
        "```",
    ]
    for c in dict.fromkeys(r["command"] for r in results):
        lines.append(c)
    lines += ["```", ""]
    rendered: list[str] = []
    for r in results:
        block = [harness.render_markdown(r)]
        # Hand-written reading of the figures (profiles, why a target is missed) lives beside
        # the code, dated, and is shown under the study's generated table.
        analysis = ROOT / "bench" / "analysis" / f"{r['study']}.md"
        if analysis.exists():
            block.append(analysis.read_text().rstrip() + "\n")
        cmds = r.get("tessera_commands", [])
        if cmds:
            block.append("<details><summary>Exact tessera commands of this study (last round)</summary>")
            block.append("")
            block.append("```")
            block += list(dict.fromkeys(cmds))[-60:]
            block.append("```")
            block.append("</details>")
            block.append("")
        rendered.append("\n".join(block))
    # Studies measured by a script of their own (not through this harness) keep their
    # section in bench/sections/, written by hand from that script's output.
    for section in sorted((ROOT / "bench" / "sections").glob("*.md")):
        rendered.append(section.read_text().rstrip() + "\n")
    by_title = {}
    for text in rendered:
        by_title.setdefault(section_title(text), text)
    out, used = [], set()
    old = ROOT / "BENCHMARKS.md"
    for text in split_sections(old.read_text() if old.exists() else ""):
        title = section_title(text)
        if title in by_title:
            if title not in used:
                out.append(by_title[title])
                used.add(title)
        else:
            out.append(text)
    out += [t for t in rendered if section_title(t) not in used]
    body = "\n".join(x.rstrip("\n") + "\n" for x in out)
    old.write_text("\n".join(lines) + "\n" + body)


def split_sections(text: str) -> list[str]:
    """The `## ` sections of a Markdown file, each with everything up to the next (the part
    before the first, the header, is left out). A `## ` inside a fenced block is not a title."""
    sections: list[list[str]] = []
    fenced = False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        if line.startswith("## ") and not fenced:
            sections.append([])
        if sections:
            sections[-1].append(line)
    return ["\n".join(s) for s in sections]


def section_title(text: str) -> str:
    for line in text.split("\n"):
        if line.startswith("## "):
            return line[3:].strip()
    return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sets, fewer rounds (< 10 min)")
    ap.add_argument("--studies", default=",".join(ALL_STUDIES), help="comma-separated study names")
    ap.add_argument("--backend", default="jit", help="comma-separated Tessera backends (jit,c)")
    ap.add_argument("--no-venv", action="store_true", help="use the current Python as is")
    ap.add_argument("--no-build", action="store_true", help="skip cargo build --release")
    ap.add_argument(
        "--render-only", action="store_true",
        help="only redraw the charts and BENCHMARKS.md from bench/results/*.json",
    )
    args = ap.parse_args()
    if not args.no_venv and not in_venv():
        reexec_in_venv()
    for v in THREAD_VARS:
        os.environ[v] = "1"
    sys.path.insert(0, str(BENCH))
    import harness

    if args.render_only:
        for p in sorted(RESULTS.glob("*.json")):
            result = json.loads(p.read_text())
            if result["cases"]:
                harness.plot(result, RESULTS / f"{result['study']}.png")
        write_benchmarks_md()
        return 0
    command = "python3 bench/compare.py" + "".join(
        " " + shlex.quote(a) for a in sys.argv[1:] if a not in ("--no-venv", "--no-build")
    )
    if not args.no_build:
        print("cargo build --release", flush=True)
        subprocess.run(["cargo", "build", "--release"], cwd=ROOT, check=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    studies = [s.strip() for s in args.studies.split(",") if s.strip()]
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    ctx = harness.Context(ROOT, quick=args.quick, backends=backends, log_file=BENCH / ".scratch" / "log.txt")
    ctx.log(f"machine: {machine_line()}")
    ok = True
    for name in studies:
        ctx.log(f"== study {name}")
        result = run_study(name, ctx, command)
        if result["error"]:
            ok = False
            ctx.log(f"study {name} failed: {result['error']}")
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1))
        if result["cases"]:
            harness.plot(result, RESULTS / f"{name}.png")
        ctx.log(f"wrote bench/results/{name}.json ({len(result['cases'])} cases)")
    write_benchmarks_md()
    ctx.log("wrote BENCHMARKS.md")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
