"""Genomic interval overlap and count: Tessera (examples/interval_overlap.rs) against
polars-bio, bioframe, superintervals, pyranges1 and bedtools on the same BED data.

    python3 bench/interval_overlap.py [N] [M] [MEAN_LEN] [REPEATS]   # one synthetic size
    python3 bench/interval_overlap.py files [REPEATS]                # the real file pairs
    python3 bench/interval_overlap.py all [REPEATS]                  # file pairs + 3 sizes

Synthetic defaults 100000 100000 1000 5 (the example writes the intervals to BED files for the
peers); the real pairs come from ../shared/data/intervals (skipped with a message when absent).
All files are half-open and 0-based; polars-bio runs with its zero-based coordinate system
(`POLARS_BIO_COORDINATE_SYSTEM_ZERO_BASED`), so touching intervals do not overlap, as in
bedtools; superintervals takes closed intervals, so `[s, e)` is passed as `[s, e - 1]`; a
zero-length record is widened to `[s - 1, e + 1)` for every in-process peer, as Tessera's BED
loader and bedtools do. Operations: `overlap` = the number of query (A) lines meeting any data
(B) line (`bedtools intersect -u`); `count` = the number of overlapping (A, B) pairs (the sum of
`bedtools intersect -c`). Every peer's result must agree with Tessera's, or the script exits.

What each time includes:
- Tessera: the kernel only (median of REPEATS); the index tensors over B are built once and
  their build time is printed separately; the queries are numbered by (chromosome, start)
  while `A` is built (the example's JSON `query_sort_ms`), outside the kernel time.
- polars-bio (one DataFusion partition), bioframe, pyranges1: one library call from in-memory
  frames, which builds the library's own index inside the call. polars-bio's and bioframe's
  `overlap` enumerate the pairs (their fastest way to the `-u` answer); pyranges1's returns A's
  rows at most once.
- superintervals: `count_batch` per chromosome on indexes built beforehand (build time printed
  separately; queries grouped by chromosome beforehand). It has no batched "any overlap" call,
  so its `overlap` time is the same counting pass.
- bedtools and `tessera intervals overlap|count --backend jit`: whole processes (reading and
  parsing the files, building, writing the BED lines to a pipe), timed from Python.

Needs `polars-bio`, `bioframe`, `superintervals`, `pyranges1`, `numpy`, `pandas` (a venv; a peer
that does not import is reported and left out) and `bedtools` on PATH (likewise).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

from harness import median_ms

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "intervals")
# (queries A, data B): same assembly and overlapping chromosomes in each pair.
PAIRS = [
    ("exons.bed", "cpg.bed"),
    ("chipseq.bed", "chipseq_background.bed"),
    ("aluY.chr1.bed", "refseq.chr1.exons.bed"),
    ("refseq.chr1.exons.bed", "aluY.chr1.bed"),
    ("gerp.chr1.bed", "simpleRepeats.chr1.bed"),
    ("simpleRepeats.chr1.bed", "refseq.chr1.exons.bed"),
]
SIZES = [(100_000, 100_000, 1000), (100_000, 100_000, 20_000), (1_000_000, 1_000_000, 1000)]
EXAMPLE = os.path.join(ROOT, "target", "release", "examples", "interval_overlap")
CLI = os.path.join(ROOT, "target", "release", "tessera")
PEERS = ["polars-bio", "bioframe", "superintervals", "pyranges1"]


def read_bed(path):
    """chrom, start, end of each record, as Tessera's loader reads them (`tessera::io::bed`:
    header and blank lines skipped, zero-length records widened as bedtools does)."""
    rows = []
    with open(path) as f:
        for line in f:
            t = line.rstrip("\n").rstrip("\r")
            w = t.lstrip()
            if not w or w.startswith("#") or w.split(None, 1)[0] in ("track", "browser"):
                continue
            c, s, e = t.split("\t")[:3]
            rows.append((c, int(s), int(e)))
    df = pd.DataFrame(rows, columns=["chrom", "start", "end"])
    zero = df["start"] == df["end"]
    df.loc[zero, "start"] -= 1
    df.loc[zero, "end"] += 1
    return df


def load_peers():
    """The importable peers: name -> (module, version); the others are reported."""
    peers = {}
    for name, module in [("polars-bio", "polars_bio"), ("bioframe", "bioframe"),
                         ("superintervals", "superintervals"), ("pyranges1", "pyranges1")]:
        try:
            mod = __import__(module)
        except Exception as e:  # an uninstallable peer is reported, not fatal
            print(f"SKIPPED {name}: cannot import {module} ({e})", file=sys.stderr)
            continue
        version = getattr(mod, "__version__", None)
        if version is None:
            from importlib.metadata import version as v
            version = v(name)
        peers[name] = (mod, version)
    if "polars-bio" in peers:
        pb = peers["polars-bio"][0]
        pb.set_option(pb.POLARS_BIO_COORDINATE_SYSTEM_ZERO_BASED, True)
        pb.set_option("datafusion.execution.target_partitions", "1")
    return peers


def peer_calls(peers, a, b):
    """name -> (overlap call, count call, build ms or None); each call returns its result:
    the number of A lines with an overlap, or the number of overlapping pairs."""
    calls = {}
    a = a.assign(i=np.arange(len(a)))
    if "polars-bio" in peers:
        import polars as pl
        pb = peers["polars-bio"][0]
        pa, pbb = pl.from_pandas(a), pl.from_pandas(b)
        calls["polars-bio"] = (
            lambda: pb.overlap(pa, pbb, output_type="polars.DataFrame")["i_1"].n_unique(),
            lambda: int(pb.count_overlaps(pa, pbb, output_type="polars.DataFrame",
                                          naive_query=False)["count"].sum()),
            None,
        )
    if "bioframe" in peers:
        bf = peers["bioframe"][0]
        calls["bioframe"] = (
            lambda: bf.overlap(a, b, how="inner", return_index=True)["index"].nunique(),
            lambda: int(bf.count_overlaps(a, b)["count"].sum()),
            None,
        )
    if "superintervals" in peers:
        si = peers["superintervals"][0]
        t = time.perf_counter()
        index = {c: si.IntervalMap.from_arrays(g["start"].to_numpy(np.int32),
                                               (g["end"] - 1).to_numpy(np.int32))
                 for c, g in b.groupby("chrom")}
        build_ms = (time.perf_counter() - t) * 1e3
        queries = [(index[c], g["start"].to_numpy(np.int32), (g["end"] - 1).to_numpy(np.int32))
                   for c, g in a.groupby("chrom") if c in index]

        def counts():
            return [np.asarray(m.count_batch(s, e)) for m, s, e in queries]

        calls["superintervals"] = (
            lambda: int(sum((k > 0).sum() for k in counts())),
            lambda: int(sum(k.sum() for k in counts())),
            build_ms,
        )
    if "pyranges1" in peers:
        pr = peers["pyranges1"][0]
        cols = {"chrom": "Chromosome", "start": "Start", "end": "End"}
        ra = pr.PyRanges(a[["chrom", "start", "end"]].rename(columns=cols))
        rb = pr.PyRanges(b.rename(columns=cols))
        calls["pyranges1"] = (
            lambda: len(ra.overlap(rb)),
            lambda: int(ra.count_overlaps(rb)["Count"].sum()),
            None,
        )
    return calls


def process_ms(cmd, repeats, op):
    """Median whole-process time of `cmd` (its BED lines to a pipe) and its result: the lines
    (`overlap`) or the sum of the last column (`count`)."""
    def call():
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        lines = out.splitlines()
        return len(lines) if op == "overlap" else sum(int(l.rsplit("\t", 1)[1]) for l in lines)
    return median_ms(call, repeats)


def measure(label, a_path, b_path, ours, peers, repeats):
    """One case: every peer against Tessera's JSON lines `ours`; exits on a disagreement."""
    a, b = read_bed(a_path), read_bed(b_path)
    calls = peer_calls(peers, a, b)
    bedtools = shutil.which("bedtools")
    if bedtools is None:
        print("SKIPPED bedtools: not on PATH", file=sys.stderr)
    rows = []
    for k, op in enumerate(["overlap", "count"]):
        want = ours[op]["result"]
        row = {"case": label, "op": op, "result": want, "tessera": ours[op]["median_ms"],
               "index_build_ms": ours[op]["index_build_ms"], "peers": {}, "process": {}}
        for name, fns in calls.items():
            t, got = median_ms(fns[k], repeats)
            if got != want:
                sys.exit(f"{label} {op}: {name} {got}, Tessera {want}")
            row["peers"][name] = t
        commands = [("tessera CLI", [CLI, "intervals", op, a_path, b_path, "--backend", "jit"])]
        if bedtools:
            flag = "-u" if op == "overlap" else "-c"
            commands.append(("bedtools", [bedtools, "intersect", "-a", a_path, "-b", b_path, flag]))
        for name, cmd in commands:
            t, got = process_ms(cmd, repeats, op)
            if got != want:
                sys.exit(f"{label} {op}: {name} {got}, Tessera {want}")
            row["process"][name] = t
        row["si_build_ms"] = calls.get("superintervals", (None, None, None))[2]
        rows.append(row)
    return rows


def example(args):
    out = subprocess.run([EXAMPLE] + [str(x) for x in args], check=True,
                         capture_output=True, text=True)
    return {r["op"]: r for r in map(json.loads, out.stdout.splitlines())}


def synthetic(n, m, mean, peers, repeats):
    with tempfile.TemporaryDirectory() as d:
        ours = example([n, m, mean, repeats, "--dump", d])
        label = f"synthetic {n} x {m}, mean {mean}"
        return measure(label, os.path.join(d, "a.bed"), os.path.join(d, "b.bed"), ours,
                       peers, repeats)


def files(peers, repeats):
    if not os.path.exists(os.path.join(DATA, "cpg.bed")):
        print(f"SKIPPED the real pairs: {os.path.normpath(DATA)} is absent", file=sys.stderr)
        return []
    rows = []
    for fa, fb in PAIRS:
        pa, pbb = os.path.join(DATA, fa), os.path.join(DATA, fb)
        rows += measure(f"{fa} x {fb}", pa, pbb, example(["--a", pa, "--b", pbb, repeats]),
                        peers, repeats)
    return rows


def table(rows, peers):
    names = [p for p in PEERS if p in peers]
    print("| case | op | result | Tessera ms | " + " | ".join(f"{p} ms" for p in names)
          + " | " + " | ".join(f"{p} / Tessera" for p in names) + " |")
    print("|---" * (4 + 2 * len(names)) + "|")
    for r in rows:
        t = r["tessera"]
        ts = [r["peers"].get(p) for p in names]
        print(f"| {r['case']} | {r['op']} | {r['result']} | {t:.2f} | "
              + " | ".join(f"{x:.2f}" for x in ts) + " | "
              + " | ".join(f"{x / t:.2f}x" for x in ts) + " |")
    print("\nWhole processes (BED lines to a pipe):\n")
    print("| case | op | tessera CLI ms | bedtools ms | bedtools / CLI |")
    print("|---|---|---|---|---|")
    for r in rows:
        c, bt = r["process"]["tessera CLI"], r["process"].get("bedtools")
        print(f"| {r['case']} | {r['op']} | {c:.1f} | "
              + (f"{bt:.1f} | {bt / c:.2f}x |" if bt else "n/a | |"))
    print("\nIndex builds (excluded above):\n")
    print("| case | Tessera G ms | Tessera S, C ms | superintervals ms |")
    print("|---|---|---|---|")
    for r0, r1 in zip(rows[::2], rows[1::2]):
        si = r0["si_build_ms"]
        print(f"| {r0['case']} | {r0['index_build_ms']:.1f} | {r1['index_build_ms']:.1f} | "
              + (f"{si:.1f} |" if si is not None else "n/a |"))


def main():
    argv = sys.argv[1:]
    subprocess.run(["cargo", "build", "--release", "--example", "interval_overlap", "--bin",
                    "tessera"], cwd=ROOT, check=True)
    peers = load_peers()
    mode = argv[0] if argv and argv[0] in ("files", "all") else None
    if mode:
        repeats = int(argv[1]) if len(argv) > 1 else 5
        rows = files(peers, repeats)
        if mode == "all":
            for n, m, mean in SIZES:
                rows += synthetic(n, m, mean, peers, repeats)
    else:
        args = [int(float(a)) for a in argv[:3]] + [None] * 3
        n, m, mean = args[0] or 100_000, args[1] or 100_000, args[2] or 1000
        repeats = int(argv[3]) if len(argv) > 3 else 5
        rows = synthetic(n, m, mean, peers, repeats)
    print("peers: " + ", ".join(f"{p} {v}" for p, (_, v) in peers.items()) + "; load "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()) + "\n")
    table(rows, peers)


if __name__ == "__main__":
    main()
