"""Diderot's examples (issue 15): Tessera programs (examples/*.tess, driven by
examples/diderot.rs) against NumPy/SciPy implementations of the same algorithms on the same data.

    python3 bench/diderot.py [REPEATS] [--quick] [--image PNG] [--backend jit|c] [--only iso2d|curvature|vr|lic|probe]

For each example the script runs the Tessera driver with `--dump`, reads its inputs and outputs,
runs the NumPy/SciPy route (vectorised over seeds, rays or pixels; values of the bspln3 field
by `scipy.ndimage.map_coordinates(order=3, prefilter=False)`, derivatives by the window gather
contracted with the derivative-kernel weights, as bench/probe_field.py does), checks that both
agree, and times it (median of REPEATS). Single thread on both sides. Examples:

- iso2d: Newton–Raphson isocontour points from a grid of seeds (synthetic 512² image, and
  `--image`, e.g. ../shared/data/images/coins.png, when given and present);
- curvature: κ1, κ2 at 10^5 points on a torus of a 96³ distance volume, also against the
  torus's analytic curvatures;
- vr: 128² rays through a 128³ volume, front-to-back compositing with Blinn–Phong shading;
- lic: LIC of a 256² vector field, 20 RK2 steps each way;
- probe: 10^6 bspln3 probes of a 256³ volume from a program (values; value + gradient + Hessian).

`--quick` uses small sizes. Needs numpy and scipy.
"""

import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
from scipy import ndimage

from harness import median_ms
from probe_field import bspln3_weights

CHUNK = 100_000


def kernel_weights(kernel, f, order):
    """Tap weights h^(order)(f - i) for i in taps, shape (N, 2s)."""
    if kernel == "tent":
        if order != 0:
            raise ValueError("tent has no derivative")
        return np.stack([1.0 - f, f], axis=1)
    return bspln3_weights(f, order)


def support(kernel):
    return 1 if kernel == "tent" else 2


def inside(img, pts, kernel):
    """Diderot's inside: s - 1 <= x < size - s on every axis (False on NaN)."""
    s = support(kernel)
    ok = np.ones(len(pts), dtype=bool)
    for a in range(img.ndim):
        ok &= (pts[:, a] >= s - 1) & (pts[:, a] < img.shape[a] - s)
    return ok


def probe(img, pts, kernel="bspln3", orders_list=((0,) * 3,)):
    """Probes of img ⊛ kernel at pts (N x d) for each per-axis derivative orders tuple, by a
    window gather and weight contractions; NaN outside. Returns a list of (N,) arrays."""
    d = img.ndim
    s = support(kernel)
    n = len(pts)
    ok = inside(img, pts, kernel)
    outs = [np.full(n, np.nan) for _ in orders_list]
    idx_ok = np.nonzero(ok)[0]
    off = np.arange(1 - s, s + 1)
    strides = [int(np.prod(img.shape[a + 1 :])) for a in range(d)]
    flat = img.ravel()
    letters = "ijk"[:d]
    for c0 in range(0, len(idx_ok), CHUNK):
        sel = idx_ok[c0 : c0 + CHUNK]
        p = pts[sel]
        base = np.floor(p).astype(np.int64)
        f = p - base
        idx = 0
        for a in range(d):
            shape = [len(sel)] + [1] * d
            shape[1 + a] = 2 * s
            idx = idx + ((base[:, a, None] + off) * strides[a]).reshape(shape)
        win = flat[idx]
        cache = {}
        for k, orders in enumerate(orders_list):
            ws = []
            for a in range(d):
                key = (a, orders[a])
                if key not in cache:
                    cache[key] = kernel_weights(kernel, f[:, a], orders[a])
                ws.append(cache[key])
            spec = "n" + letters + "," + ",".join("n" + l for l in letters) + "->n"
            outs[k][sel] = np.einsum(spec, win, *ws, optimize=True)
    return outs


def value_mc(img, pts):
    """Values of img ⊛ bspln3 by map_coordinates, NaN outside the kernel's domain."""
    v = ndimage.map_coordinates(img, np.ascontiguousarray(pts.T), order=3, prefilter=False)
    return np.where(inside(img, pts, "bspln3"), v, np.nan)


def iso2d_numpy(t):
    img = t["img"]
    x = np.stack([t["px"], t["py"]], axis=1).copy()
    iso, tol, steps = float(t["iso"]), float(t["tol"]), int(t["steps"])
    for _ in range(steps):
        ok = inside(img, x, "bspln3")
        gx, gy = probe(img, x[ok], "bspln3", ((1, 0), (0, 1)))
        gg = gx * gx + gy * gy
        v = value_mc(img, x[ok])
        move = gg > 0
        s = np.where(move, (v - iso) / np.where(move, gg, 1.0), 0.0)
        xo = x[ok]
        xo[:, 0] -= s * gx
        xo[:, 1] -= s * gy
        x[ok] = xo
    v = value_mc(img, x)
    okm = np.where(np.abs(v - iso) < tol, 1.0, 0.0)
    return {"qx": x[:, 0], "qy": x[:, 1], "ok": okm}


def curvature_numpy(t):
    vol = t["vol"]
    p = np.stack([t["px"], t["py"], t["pz"]], axis=1)
    orders = [(1, 0, 0), (0, 1, 0), (0, 0, 1)]
    hord = [(a, b) for a in range(3) for b in range(3)]
    hes = []
    for a, b in hord:
        o = [0, 0, 0]
        o[a] += 1
        o[b] += 1
        hes.append(tuple(o))
    res = probe(vol, p, "bspln3", orders + hes)
    g = np.stack(res[:3], axis=1)
    H = np.stack(res[3:], axis=1).reshape(-1, 3, 3)
    gl = np.linalg.norm(g, axis=1)
    nrm = g / gl[:, None]
    P = np.eye(3)[None] - nrm[:, :, None] * nrm[:, None, :]
    G = -np.einsum("nac,ncd,ndb->nab", P, H, P) / gl[:, None, None]
    tr = np.trace(G, axis1=1, axis2=2)
    fro = np.sum(G * G, axis=(1, 2))
    disc = np.sqrt(np.maximum(2 * fro - tr * tr, 0))
    return {"k1": (tr + disc) / 2, "k2": (tr - disc) / 2}


def torus_analytic(t):
    """κ1 ≥ κ2 of the torus's isosurface through each point (volume centred, axis 0)."""
    size = t["vol"].shape[0]
    c = (size - 1) / 2
    big = size / 4
    x, y, z = t["px"] - c, t["py"] - c, t["pz"] - c
    rho = np.sqrt(y * y + z * z)
    d = np.sqrt((rho - big) ** 2 + x * x)
    ka, kb = 1 / d, (rho - big) / (d * rho)
    return np.maximum(ka, kb), np.minimum(ka, kb)


def vr_numpy(t):
    vol = t["vol"]
    H, W, steps = int(t["height"]), int(t["width"]), int(t["steps"])
    f = {k: float(t[k]) for k in ["x0", "h", "ylo", "dy", "zlo", "dz", "lo", "hi", "amax",
                                 "lx", "ly", "lz", "ka", "kd", "ks"]}
    j, k = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
    y = (f["ylo"] + j * f["dy"]).ravel()
    z = (f["zlo"] + k * f["dz"]).ravel()
    T = np.ones(H * W)
    C = np.zeros(H * W)
    hx = f["lx"] - 1.0
    hn = np.sqrt(hx * hx + f["ly"] ** 2 + f["lz"] ** 2)
    for s in range(steps + 1):
        x = np.full(H * W, f["x0"] + s * f["h"])
        p = np.stack([x, y, z], axis=1)
        ok = inside(vol, p, "bspln3")
        v = np.full(H * W, np.nan)
        v[ok] = value_mc(vol, p[ok])
        a = np.where(ok, f["amax"] * np.clip((v - f["lo"]) / (f["hi"] - f["lo"]), 0, 1), 0.0)
        on = a > 0
        if not on.any():
            continue
        g0, g1, g2 = probe(vol, p[on], "bspln3", ((1, 0, 0), (0, 1, 0), (0, 0, 1)))
        gn = np.maximum(np.sqrt(g0 * g0 + g1 * g1 + g2 * g2), 1e-12)
        ndl = -(g0 * f["lx"] + g1 * f["ly"] + g2 * f["lz"]) / gn
        ndh = np.maximum(-(g0 * hx + g1 * f["ly"] + g2 * f["lz"]) / (gn * hn), 0.0)
        shade = f["ka"] + f["kd"] * np.maximum(ndl, 0.0) + f["ks"] * ndh**8
        ao = a[on]
        C[on] += T[on] * ao * shade
        T[on] *= 1.0 - ao
    return {"rgb": C.reshape(H, W), "alpha": (1.0 - T).reshape(H, W)}


def lic_numpy(t):
    u, v, noise = t["u"], t["v"], t["noise"]
    steps, h = int(t["steps"]), float(t["h"])
    n0, n1 = noise.shape
    j, k = np.meshgrid(np.arange(n0), np.arange(n1), indexing="ij")
    s = noise.ravel().copy()
    c = np.ones(n0 * n1)
    for sign in (1.0, -1.0):
        x = np.stack([j.ravel(), k.ravel()], axis=1).astype(float)
        e = h * sign
        for _ in range(steps):
            ok = inside(u, x, "bspln3")
            xo = x[ok]
            u0 = value_mc(u, xo)
            v0 = value_mc(v, xo)
            nn = np.maximum(np.sqrt(u0 * u0 + v0 * v0), 1e-12)
            m = xo + 0.5 * e * np.stack([u0, v0], axis=1) / nn[:, None]
            okm = inside(u, m, "bspln3")
            u1 = value_mc(u, m[okm])
            v1 = value_mc(v, m[okm])
            n1_ = np.maximum(np.sqrt(u1 * u1 + v1 * v1), 1e-12)
            new = xo[okm] + e * np.stack([u1, v1], axis=1) / n1_[:, None]
            idx = np.nonzero(ok)[0][okm]
            x[idx] = new
            inn = inside(noise, new, "tent")
            val = ndimage.map_coordinates(noise, np.ascontiguousarray(new[inn].T), order=1)
            np.add.at(s, idx[inn], val)
            np.add.at(c, idx[inn], 1.0)
    return {"out": (s / c).reshape(n0, n1)}


def probe_numpy(t, all_):
    vol = t["vol"]
    p = np.stack([t["px"], t["py"], t["pz"]], axis=1)
    if not all_:
        return {"v": value_mc(vol, p)}
    orders = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
    pairs = [(a, b) for a in range(3) for b in range(a, 3)]
    for a, b in pairs:
        o = [0, 0, 0]
        o[a] += 1
        o[b] += 1
        orders.append(tuple(o))
    r = probe(vol, p, "bspln3", orders)
    H = np.empty((len(p), 3, 3))
    for (a, b), h in zip(pairs, r[4:]):
        H[:, a, b] = h
        H[:, b, a] = h
    return {"v": r[0], "g": np.stack(r[1:4], axis=1), "H": H}


def load(d):
    return {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".npy")}


def agree(name, ours, theirs, tol):
    for k, want in theirs.items():
        got = ours[k]
        both_nan = np.isnan(got) & np.isnan(want)
        diff = np.where(both_nan, 0.0, np.abs(got - want))
        scale = 1.0 + np.abs(np.nan_to_num(want))
        bad = ~(diff <= tol * scale)
        frac = bad.mean() if bad.size else 0.0
        # Newton and streamlines are chaotic near critical points: a few seeds may round
        # apart; report the fraction that does not agree.
        yield k, float(np.nanmax(diff / scale)) if diff.size else 0.0, float(frac)


def main():
    argv = sys.argv[1:]
    quick = "--quick" in argv
    image = argv[argv.index("--image") + 1] if "--image" in argv else None
    backend = argv[argv.index("--backend") + 1] if "--backend" in argv else "jit"
    plain = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or not argv[i - 1] in ("--image", "--backend", "--only"))]
    repeats = int(plain[0]) if plain else 5
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(["cargo", "build", "--release", "--example", "diderot"], cwd=root, check=True)
    exe = os.path.join(root, "target", "release", "examples", "diderot")
    sizes = (
        {"iso2d": 128, "curvature": 32, "vr": 32, "lic": 64, "probe": 32}
        if quick
        else {"iso2d": 512, "curvature": 96, "vr": 128, "lic": 256, "probe": 256}
    )
    runs = [("iso2d", None), ("curvature", None), ("vr", None), ("lic", None), ("probe", None)]
    if "--only" in argv:
        # One example alone (e.g. `--only probe`), the others skipped.
        only = argv[argv.index("--only") + 1]
        runs = [r for r in runs if r[0] == only]
    if image:
        if os.path.exists(image):
            runs.insert(1, ("iso2d", image))
        else:
            print(f"SKIPPED iso2d on {image}: file absent")
    rows = []
    for ex, img in runs:
        with tempfile.TemporaryDirectory() as d:
            cmd = [exe, ex, "0" if img else str(sizes[ex]), str(repeats), "--backend", backend]
            if img:
                cmd += ["--image", img]
            out = subprocess.run(cmd + ["--dump", d], check=True, capture_output=True, text=True)
            lines = [json.loads(l) for l in out.stdout.splitlines()]
            t = load(d)
            if ex == "probe":
                # The dump holds the last program's tensors (value + gradient + Hessian).
                cases = [("probe value", lambda: probe_numpy(t, False), "map_coordinates(order=3, prefilter=False)"),
                         ("probe value+gradient+hessian", lambda: probe_numpy(t, True), "NumPy window gather + einsum")]
            else:
                f = {"iso2d": iso2d_numpy, "curvature": curvature_numpy, "vr": vr_numpy, "lic": lic_numpy}[ex]
                cases = [(ex, lambda f=f: f(t), "NumPy/SciPy")]
            for (name, fn, peer), line in zip(cases, lines):
                ms, ref = median_ms(fn, repeats)
                if ex == "iso2d":
                    # Seeds near a critical point are thrown far by a tiny gradient, where
                    # rounding decides where they land: compare the points both converged.
                    both = (ref["ok"] == 1) & (t["ok"] == 1)
                    ref = {"qx": ref["qx"][both], "qy": ref["qy"][both], "ok": ref["ok"]}
                    t = dict(t, qx=t["qx"][both], qy=t["qy"][both])
                tol = 1e-6 if ex in ("iso2d", "lic") else 1e-9
                checks = list(agree(name, t, ref, tol))
                note = "; ".join(f"{k}: max rel {e:.1e}" + (f", {fr:.2%} differ" if fr else "") for k, e, fr in checks)
                if ex == "curvature":
                    a1, a2 = torus_analytic(t)
                    err = max(np.abs(t["k1"] - a1).max(), np.abs(t["k2"] - a2).max())
                    note += f"; vs the torus's analytic curvature: max abs {err:.2e} (κ1 max {a1.max():.3f})"
                if ex == "iso2d":
                    note += f"; {int(t['ok'].sum())} of {len(t['ok'])} seeds converged"
                label = name + (f" ({os.path.basename(img)} {t['img'].shape[0]}x{t['img'].shape[1]})" if img else "")
                rows.append((label, line["median_ms"], line["compile_ms"], peer, ms, note))
                if any(fr > 0.01 for _, _, fr in checks):
                    sys.exit(f"disagreement in {label}: {note}")
    print(f"NumPy {np.__version__}, SciPy {__import__('scipy').__version__}; Tessera backend {backend}; "
          f"median of {repeats}; single thread; compile time excluded\n")
    print("| example | Tessera ms | compile ms | peer | peer ms | peer / Tessera | check |")
    print("|---|---|---|---|---|---|---|")
    for label, tm, cm, peer, pm, note in rows:
        print(f"| {label} | {tm:.1f} | {cm:.0f} | {peer} | {pm:.1f} | {pm / tm:.2f}x | {note} |")


if __name__ == "__main__":
    main()
