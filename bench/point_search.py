"""Box and radius search: Tessera (examples/point_search.rs) against Shapely 2.x's STRtree.

    python3 bench/point_search.py [N] [QUERIES] [REPEATS]      # defaults 1000000 8 5

Runs the Tessera example with `--dump`, so both sides see the same N uniform points in
[0, 10^4]^2 and the same queries (closed boxes and closed discs of growing size around the
centre). Shapely: `STRtree(points)`, built once and timed separately like Tessera's tensor
build; a box is `tree.query(box, predicate="intersects")`, a disc `tree.query(centre,
predicate="dwithin", distance=R)` (distance <= R, GEOS >= 3.10). Each query's hit count must
agree. Single thread on both sides; times are medians of REPEATS calls; all of Tessera's
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


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    queries = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(
        ["cargo", "build", "--release", "--example", "point_search"], cwd=root, check=True
    )
    exe = os.path.join(root, "target", "release", "examples", "point_search")
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(
            [exe, str(n), str(queries), str(repeats), "--dump", d],
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
          f"N = {n}; STRtree build {build_ms:.0f} ms, Tessera tensor build "
          f"{ours[0]['build_ms']:.0f} ms (both excluded below)\n")
    print("| query | half-size | hits | Tessera ms | Shapely ms | Shapely / Tessera |")
    print("|---|---|---|---|---|---|")
    centre = shapely.Point(cx, cy)
    for q, mine in zip(spec["queries"], ours):
        h = q["half"]
        if q["kind"] == "box":
            shape = shapely.box(cx - h, cy - h, cx + h, cy + h)
            call = lambda: tree.query(shape, predicate="intersects")
        else:
            call = lambda: tree.query(centre, predicate="dwithin", distance=h)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            hits = call()
            times.append((time.perf_counter() - t) * 1e3)
        theirs = sorted(times)[len(times) // 2]
        if len(hits) != mine["hits"]:
            sys.exit(f"disagreement on {q}: Shapely {len(hits)} hits, Tessera {mine['hits']}")
        print(f"| {q['kind']} | {h:g} | {mine['hits']} | {mine['median_ms']:.4f} | "
              f"{theirs:.4f} | {theirs / mine['median_ms']:.2f}x |")


if __name__ == "__main__":
    main()
