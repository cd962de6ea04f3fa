"""Kernel-only A/B of the masked histogram on magnified Omniglot masks (the images study's
data: 8x INTER_CUBIC, mask = pixel == 0, a random uint8 image of default_rng(1)): two
`tessera` binaries' `tessera bench` (C and JIT, `SparseRunList` mask) alternating, best of two
medians each, and OpenCV's calcHist (one thread) in the same run.

    bench/.venv/bin/python bench/histogram_ab.py BASE_BINARY NEW_BINARY [IMAGES]
"""
import json, subprocess, sys, tempfile, time, statistics
from pathlib import Path
import numpy as np
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from studies import images as im
import cv2
cv2.setNumThreads(1)
BIN = {"base": sys.argv[1], "new": sys.argv[2]}
N = int(sys.argv[3]) if len(sys.argv) > 3 else 10
imgs = im.load_omniglot(ROOT.parent / "shared/data/images/images_background_small1.zip", N)
rng = np.random.default_rng(1)
d = Path(tempfile.mkdtemp())
rows = []
for i, g in enumerate(imgs):
    big = im.magnify_cubic(g, 8)
    mask = big == 0
    gray = rng.integers(0, 256, big.shape, dtype=np.uint8)
    np.save(d / f"m{i}.npy", mask); np.save(d / f"g{i}.npy", gray)
    np.save(d / "bins0.npy", np.zeros(16, np.int64))
    m8 = mask.astype(np.uint8)
    ts = []
    for _ in range(20):
        t0 = time.perf_counter(); cv2.calcHist([gray], [0], m8, [16], [0, 256]); ts.append(time.perf_counter() - t0)
    cv = statistics.median(ts) * 1e3
    r = {"img": i, "pixels": int(mask.sum()), "opencv": cv}
    for rnd in range(2):
        for be in ["c", "jit"]:
            for b in ["base", "new"]:
                out = subprocess.run([BIN[b], "bench", str(ROOT / "examples/masked_histogram.tess"),
                    "--in", f"img={d}/g{i}.npy@Dense(Dense(Element(0x00)))",
                    "--in", f"mask={d}/m{i}.npy@Dense(SparseRunList(Pattern()))",
                    "--in", f"bins={d}/bins0.npy@Dense(Element(0))",
                    "--backend", be, "--repeat", "20", "--warmup", "3", "--json"], capture_output=True, text=True, check=True)
                ms = json.loads(out.stdout.strip().splitlines()[-1])["median_ms"]
                k = f"{be}_{b}"
                r[k] = min(r.get(k, 1e9), ms)
    rows.append(r)
    print(json.dumps(r), flush=True)
def gm(xs): return float(np.exp(np.mean(np.log(xs))))
for be in ["c", "jit"]:
    for b in ["base", "new"]:
        k = f"{be}_{b}"
        print(k, "median ms", statistics.median(r[k] for r in rows),
              "ns/px", statistics.median(r[k] * 1e6 / r["pixels"] for r in rows),
              "geomean OpenCV/Tessera", round(gm([r["opencv"] / r[k] for r in rows]), 2))
print("opencv median ms", statistics.median(r["opencv"] for r in rows), "pixels median", statistics.median(r["pixels"] for r in rows))
