"""Box and radius search: Tessera (examples/point_search.rs) against Shapely 2.x's STRtree.

    python3 bench/point_search.py [N] [QUERIES] [REPEATS] [--backend jit|c]
    #   defaults 1000000 8 5 jit; the issue's size is N = 10000000

Runs the Tessera example with `--dump`, so both sides see the same N uniform points in
[0, 10^4]^2 and the same queries (closed boxes and closed discs of growing size around the
centre). Shapely: `STRtree(points)`, built once and timed separately like Tessera's tensor
build; a box is `tree.query(box, predicate="intersects")`, a disc `tree.query(centre,
predicate="dwithin", distance=R)` (distance <= R, GEOS >= 3.10). A disc is also timed the way
the continuous tensor paper's baseline ran it (its 9.2x is against this one): the STRtree query
of the disc's bounding box, then the distance test on the candidates' coordinates with NumPy
("bbox + filter"). Each query's hit count must agree, every variant's. Single thread on both sides; times are medians of REPEATS calls; all of Tessera's
queries run first (in the example), then Shapely's. Prints a Markdown table; its reading lives in
bench/sections/point_search.md, which bench/compare.py copies into BENCHMARKS.md.

Needs `shapely` and `numpy` (e.g. `python3 -m venv v && v/bin/pip install shapely numpy`).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import shapely

from harness import pop_backend


def main():
    args = sys.argv[1:]
    backend = pop_backend(args)
    n = int(args[0]) if len(args) > 0 else 1_000_000
    queries = int(args[1]) if len(args) > 1 else 8
    repeats = int(args[2]) if len(args) > 2 else 5
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(
        ["cargo", "build", "--release", "--example", "point_search"], cwd=root, check=True
    )
    exe = os.path.join(root, "target", "release", "examples", "point_search")
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(
            [exe, str(n), str(queries), str(repeats), "--dump", d, "--backend", backend],
            check=True,
            capture_output=True,
            text=True,
        )
        ours = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        pts = np.load(os.path.join(d, "points.npy"))
        spec = json.load(open(os.path.join(d, "queries.json")))
    cx, cy = spec["center"]
    t0 = time.perf_counter()
    geoms = shapely.points(pts)
    tree = shapely.STRtree(geoms)
    build_ms = (time.perf_counter() - t0) * 1e3
    print(f"Shapely {shapely.__version__} (GEOS {shapely.geos_version_string}); "
          f"N = {n}; Tessera backend {backend}; STRtree build {build_ms:.0f} ms, Tessera tensor "
          f"build {ours[0]['build_ms']:.0f} ms (both excluded below)\n")
    print("| query | half-size | hits | Tessera ms | Shapely ms | Shapely / Tessera "
          "| Shapely bbox + filter ms | bbox + filter / Tessera |")
    print("|---|---|---|---|---|---|---|---|")
    centre = shapely.Point(cx, cy)

    def bbox_filter(h):
        cand = tree.query(shapely.box(cx - h, cy - h, cx + h, cy + h))
        xy = pts[cand]
        return cand[(xy[:, 0] - cx) ** 2 + (xy[:, 1] - cy) ** 2 <= h * h]

    def timed(call):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            hits = call()
            times.append((time.perf_counter() - t) * 1e3)
        return sorted(times)[len(times) // 2], len(hits)

    for q, mine in zip(spec["queries"], ours):
        h = q["half"]
        variants = []
        if q["kind"] == "box":
            shape = shapely.box(cx - h, cy - h, cx + h, cy + h)
            variants.append(lambda: tree.query(shape, predicate="intersects"))
        else:
            variants.append(lambda: tree.query(centre, predicate="dwithin", distance=h))
            variants.append(lambda: bbox_filter(h))
        cells = []
        for call in variants:
            theirs, hits = timed(call)
            if hits != mine["hits"]:
                sys.exit(f"disagreement on {q}: Shapely {hits} hits, Tessera {mine['hits']}")
            cells += [f"{theirs:.4f}", f"{theirs / mine['median_ms']:.2f}x"]
        cells += ["", ""] * (2 - len(variants))
        print(f"| {q['kind']} | {h:g} | {mine['hits']} | {mine['median_ms']:.4f} | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
