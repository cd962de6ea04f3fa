"""Probing a bspln3 field of a 256^3 volume at 10^6 points: Tessera (examples/probe_field.rs)
against SciPy/NumPy.

    python3 bench/probe_field.py [SIZE] [N] [REPEATS] [BACKEND]     # defaults 256 1000000 5 jit

Runs the Tessera example with `--dump`, so both sides probe the same volume (uniform values)
at the same points (uniform in [1, SIZE-3)^3: every 4^3 window inside the volume). Then:

- values: `scipy.ndimage.map_coordinates(vol, pts.T, order=3, prefilter=False)` (the cubic
  B-spline applied to the samples as they are, which is Diderot's `bspln3 ⊛ img`);
- value + gradient + Hessian: SciPy has no derivative kernels, so the NumPy route gathers each
  point's 4x4x4 window with one fancy-index and contracts it with the per-axis weight vectors
  of the kernel and its derivatives (`einsum`, the derivative-kernel products of the seed's
  probe expansion), in chunks of 10^5 points; its values are checked against map_coordinates
  first.

Tessera's results must agree with SciPy's (values, gradients and Hessians to 1e-9 relative to
the data's scale). Single thread on both sides; each time is a median of REPEATS calls, the
two sides one after the other. Prints a Markdown table; its reading is in
bench/sections/probe_field.md.

Needs numpy and scipy (`python3 -m venv /tmp/v && /tmp/v/bin/pip install numpy scipy`).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
from scipy import ndimage

from harness import median_ms

CHUNK = 100_000


def bspln3_weights(f, order):
    """Weights of taps n-1, n, n+1, n+2 at fractions f (shape (N,)): h^(order)(f - i)."""
    t = [f + 1.0, f, f - 1.0, f - 2.0]
    out = []
    for x in t:
        a = np.abs(x)
        s = np.sign(x)
        if order == 0:
            w = np.where(a < 1, 2 / 3 - a**2 + a**3 / 2, np.where(a < 2, (2 - a) ** 3 / 6, 0.0))
        elif order == 1:
            w = s * np.where(a < 1, -2 * a + 1.5 * a**2, np.where(a < 2, -((2 - a) ** 2) / 2, 0.0))
        else:
            w = np.where(a < 1, -2 + 3 * a, np.where(a < 2, 2 - a, 0.0))
        out.append(w)
    return np.stack(out, axis=1)  # (N, 4)


def numpy_all(vol, pts):
    """Value, gradient and Hessian by window gather and weight contractions."""
    n = len(pts)
    size = vol.shape
    flat = vol.ravel()
    off = np.arange(-1, 3)
    value = np.empty(n)
    grad = np.empty((n, 3))
    hess = np.empty((n, 3, 3))
    for s in range(0, n, CHUNK):
        p = pts[s : s + CHUNK]
        base = np.floor(p).astype(np.int64)
        f = p - base
        idx = (
            ((base[:, 0, None] + off) * size[1] * size[2])[:, :, None, None]
            + ((base[:, 1, None] + off) * size[2])[:, None, :, None]
            + (base[:, 2, None] + off)[:, None, None, :]
        )
        win = flat[idx]  # (m, 4, 4, 4)
        w = [[bspln3_weights(f[:, a], o) for o in range(3)] for a in range(3)]
        e = lambda ox, oy, oz: np.einsum(
            "nijk,ni,nj,nk->n", win, w[0][ox], w[1][oy], w[2][oz], optimize=True
        )
        value[s : s + CHUNK] = e(0, 0, 0)
        for a in range(3):
            o = [0, 0, 0]
            o[a] = 1
            grad[s : s + CHUNK, a] = e(*o)
            for c in range(a, 3):
                o = [0, 0, 0]
                o[a] += 1
                o[c] += 1
                h = e(*o)
                hess[s : s + CHUNK, a, c] = h
                hess[s : s + CHUNK, c, a] = h
    return value, grad, hess


def main():
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    backend = sys.argv[4] if len(sys.argv) > 4 else "jit"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(
        ["cargo", "build", "--release", "--example", "probe_field"], cwd=root, check=True
    )
    exe = os.path.join(root, "target", "release", "examples", "probe_field")
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(
            [exe, str(size), str(n), str(repeats), backend, "--dump", d],
            check=True,
            capture_output=True,
            text=True,
        )
        ours = {j["what"]: j for j in map(json.loads, out.stdout.splitlines())}
        vol = np.load(os.path.join(d, "volume.npy"))
        pts = np.load(os.path.join(d, "points.npy"))
        t_val = np.load(os.path.join(d, "value.npy"))
        t_grad = np.load(os.path.join(d, "gradient.npy"))
        t_hess = np.load(os.path.join(d, "hessian.npy"))
    coords = np.ascontiguousarray(pts.T)
    mc = lambda: ndimage.map_coordinates(vol, coords, order=3, prefilter=False)
    sp_val_ms, sp_val = median_ms(mc, repeats)
    np_all_ms, (v, g, h) = median_ms(lambda: numpy_all(vol, pts), max(1, repeats // 2))
    scale = np.abs(vol).max()
    for name, a, b in [
        ("map_coordinates vs numpy values", sp_val, v),
        ("Tessera values", t_val, sp_val),
        ("Tessera gradients", t_grad, g),
        ("Tessera Hessians", t_hess, h),
    ]:
        err = np.abs(a - b).max()
        if not err <= 1e-9 * scale:
            sys.exit(f"disagreement: {name}: max error {err}")
    print(f"SciPy {__import__('scipy').__version__}, NumPy {np.__version__}; {size}^3 f64 volume, "
          f"N = {n} points, Tessera backend {backend} (compile "
          f"{ours['value']['compile_ms']:.0f} / {ours['value+gradient+hessian']['compile_ms']:.0f} ms, excluded); "
          f"results agree to 1e-9\n")
    print("| probe | Tessera ms | peer | peer ms | peer / Tessera |")
    print("|---|---|---|---|---|")
    tv = ours["value"]["median_ms"]
    ta = ours["value+gradient+hessian"]["median_ms"]
    print(f"| value | {tv:.1f} | map_coordinates(order=3, prefilter=False) | {sp_val_ms:.1f} | {sp_val_ms / tv:.2f}x |")
    print(f"| value + gradient + Hessian | {ta:.1f} | NumPy window gather + einsum | {np_all_ms:.1f} | {np_all_ms / ta:.2f}x |")


if __name__ == "__main__":
    main()
