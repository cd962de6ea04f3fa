"""Trilinear interpolation along rays (Plenoxels' sampling phase): Tessera (examples/trilinear.rs)
against dense PyTorch on the CPU, `grid_sample` and the hand-written lerp.

    python3 bench/trilinear.py [N] [W] [SAMPLES] [REPEATS] [OCCUPANCIES...] [--backend jit|c]
    #   defaults 128 96 128 5 1 5 20

For each occupancy (percent of voxels holding features) the Tessera example runs with
`--dump`, so both sides see the same grid (N³ voxels, 28 features each, f64), the same W × W
rays and SAMPLES steps per ray. PyTorch stores the grid densely, as the paper's baseline did:
`grid_sample(grid[1, 28, N, N, N], points, mode="bilinear", padding_mode="zeros",
align_corners=True)` and the lerp of svox2's pure-PyTorch path (eight corner gathers, weights,
a sum). The grid is built once per side and not timed. Results must agree: the first rays
element by element (1e-9) and the sums (relative 1e-9). Single thread on both sides; times are
medians of REPEATS calls. Prints a Markdown table; its reading lives in
bench/sections/trilinear.md, which bench/compare.py copies into BENCHMARKS.md.

Needs `torch` and `numpy` (e.g. `python3 -m venv v && v/bin/pip install torch numpy`).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

from harness import median_ms, pop_backend


def lerp(grid, pts):
    """svox2-style trilinear interpolation: grid [N, N, N, F] (z, y, x), pts [P, 3] (x, y, z)."""
    n = grid.shape[0]
    base = torch.floor(pts)
    frac = pts - base
    base = base.long()
    out = torch.zeros(pts.shape[0], grid.shape[3], dtype=grid.dtype)
    for corner in range(8):
        pick = [(corner >> a) & 1 for a in range(3)]
        at = base + torch.tensor(pick)
        w = torch.ones(pts.shape[0], dtype=grid.dtype)
        for a in range(3):
            w = w * (frac[:, a] if pick[a] else 1 - frac[:, a])
        ok = ((at >= 0) & (at < n)).all(dim=1)
        at = at.clamp(0, n - 1)
        vals = grid[at[:, 2], at[:, 1], at[:, 0]]
        out += (w * ok)[:, None] * vals
    return out


def main():
    args = sys.argv[1:]
    backend = pop_backend(args)
    n = int(args[0]) if len(args) > 0 else 128
    w = int(args[1]) if len(args) > 1 else 96
    samples = int(args[2]) if len(args) > 2 else 128
    repeats = int(args[3]) if len(args) > 3 else 5
    occupancies = [float(a) for a in args[4:]] or [1.0, 5.0, 20.0]
    torch.set_num_threads(1)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(["cargo", "build", "--release", "--example", "trilinear"], cwd=root, check=True)
    exe = os.path.join(root, "target", "release", "examples", "trilinear")
    print(f"PyTorch {torch.__version__}, 1 thread; Tessera backend {backend}; "
          f"grid {n}³ × 28 features (f64), "
          f"{w}×{w} rays × {samples} samples; grid builds excluded\n")
    print("| occupancy | Tessera ms | grid_sample ms | lerp ms | grid_sample / Tessera | "
          "lerp / Tessera |")
    print("|---|---|---|---|---|---|")
    for occ in occupancies:
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run(
                [exe, str(n), str(occ), str(w), str(samples), str(repeats), "--dump", d,
                 "--backend", backend],
                check=True, capture_output=True, text=True,
            )
            ours = json.loads(out.stdout.strip().splitlines()[-1])
            load = lambda name: torch.from_numpy(np.load(os.path.join(d, name)))
            voxels, features = load("voxels.npy"), load("features.npy")
            origins, steps, head = load("origins.npy"), load("steps.npy"), load("head.npy")
        dense = torch.zeros(n, n, n, 28, dtype=torch.float64)
        dense[voxels[:, 0], voxels[:, 1], voxels[:, 2]] = features
        t = torch.arange(samples, dtype=torch.float64)
        pts = origins[:, None, :] + t[None, :, None] * steps[:, None, :]  # [R, S, 3] (x, y, z)
        flat = pts.reshape(-1, 3)
        grid5 = dense.permute(3, 0, 1, 2).unsqueeze(0).contiguous()  # [1, 28, z, y, x]
        norm = (pts / (n - 1) * 2 - 1).reshape(1, -1, 1, 1, 3)

        def sample():
            return torch.nn.functional.grid_sample(
                grid5, norm, mode="bilinear", padding_mode="zeros", align_corners=True
            )

        gs_ms, gs = median_ms(sample, repeats)
        gs = gs.reshape(28, -1).T.reshape(pts.shape[0], samples, 28)
        lp_ms, lp = median_ms(lambda: lerp(dense, flat), repeats)
        lp = lp.reshape(pts.shape[0], samples, 28)
        k = head.shape[0]
        for name, got in (("grid_sample", gs), ("lerp", lp)):
            err = (got[:k] - head).abs().max().item()
            total = got.sum().item()
            if err > 1e-9 or abs(total - ours["sum"]) > 1e-9 * max(1.0, abs(total)):
                sys.exit(f"{name} disagrees at occupancy {occ}%: max error {err}, "
                         f"sum {total} vs Tessera {ours['sum']}")
        mine = ours["median_ms"]
        print(f"| {100 * ours['occupancy']:.1f}% | {mine:.1f} | {gs_ms:.1f} | {lp_ms:.1f} | "
              f"{gs_ms / mine:.2f}x | {lp_ms / mine:.2f}x |")


if __name__ == "__main__":
    main()
