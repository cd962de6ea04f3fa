"""SoftRas's soft rasteriser, forward and forward + backward: Tessera (examples/softras.rs: a
loop over faces and pixels, the face's vertices gathered through the face index tensor, the
gradient program from `transforms::grad` with respect to the vertices) against PyTorch and JAX
on the CPU.

    python3 bench/softras.py [K] [M] [SIZE] [REPEATS]
    #   defaults 32 17 64 5: a projected UV sphere of 1,024 faces, a 64 x 64 image

The example generates the mesh; this script rebuilds it by the same rule and checks it equals
the dumped one. Per face and pixel centre: the squared distance to the face's triangle (the
nearest edge segment), signed + inside (the three edge functions agree), the probability
sigmoid(sign d / sigma), sigma = 1e-4, the argument clamped to [-50, 50] as in the program.
PyTorch vectorises over faces and pixels at once (faces x pixels tensors, as SoftRas's
reference implementation does on the CPU); JAX (if installed) writes one face and `vmap`s it
over the faces under `jax.jit`. Backward by autograd / `jax.vjp` from `(P * G).sum()`. Results
must agree (relative 1e-9 on P and dV). Single thread everywhere; medians of REPEATS calls,
compile time excluded. Prints a Markdown table.

Needs `torch` and `numpy`; JAX optional (`pip install "jax[cpu]"`).
"""

import math
import os
import sys
import tempfile

import numpy as np
import torch

from grad_workload import check, jax_ms, load_jax, median_ms, table, tessera

SIGMA = 1e-4


def sphere(k, m):
    """examples/softras.rs's mesh: a UV sphere turned by 0.6 rad about x, projected, scaled."""
    ring = lambda r, s: 1 + (r - 1) * k + s % k
    south = 1 + (m - 1) * k
    sa, ca = math.sin(0.6), math.cos(0.6)
    pts = [(0.0, 0.0, 1.0)]
    for r in range(1, m):
        th = math.pi * r / m
        for s in range(k):
            ph = 2.0 * math.pi * s / k
            pts.append((math.sin(th) * math.cos(ph), math.sin(th) * math.sin(ph), math.cos(th)))
    pts.append((0.0, 0.0, -1.0))
    v = np.array([[0.8 * x, 0.8 * (y * ca - z * sa)] for x, y, z in pts])
    f = [[0, ring(1, s), ring(1, s + 1)] for s in range(k)]
    for r in range(1, m - 1):
        for s in range(k):
            f.append([ring(r, s), ring(r + 1, s), ring(r + 1, s + 1)])
            f.append([ring(r, s), ring(r + 1, s + 1), ring(r, s + 1)])
    f += [[ring(m - 1, s), south, ring(m - 1, s + 1)] for s in range(k)]
    return v, np.array(f, dtype=np.int64)


def raster(lib, a, b, c, px, py):
    """The probabilities for triangles (a, b, c) (each x, y arrays broadcast against the
    pixel centres px, py), with `lib` torch or jax.numpy."""
    clip = lib.clamp if lib is torch else lib.clip
    ds, cs = [], []
    for (sx, sy), (ex_, ey_) in [(a, b), (b, c), (c, a)]:
        ex, ey = ex_ - sx, ey_ - sy
        qx, qy = px - sx, py - sy
        t = clip((qx * ex + qy * ey) * (1.0 / (ex * ex + ey * ey)), 0.0, 1.0)
        ux, uy = qx - t * ex, qy - t * ey
        ds.append(ux * ux + uy * uy)
        cs.append(ex * qy - ey * qx)
    d = lib.minimum(ds[0], lib.minimum(ds[1], ds[2]))
    inside = ((cs[0] > 0) & (cs[1] > 0) & (cs[2] > 0)) | ((cs[0] < 0) & (cs[1] < 0) & (cs[2] < 0))
    z = clip(lib.where(inside, d, -d) / SIGMA, -50.0, 50.0)
    return 1.0 / (1.0 + lib.exp(-z))


def centres(size, lib):
    x = (lib.arange(size, dtype=lib.float64) + 0.5) * 2.0 / size - 1.0
    return x[None, :], x[:, None]  # px[h, w] = x[w], py[h, w] = x[h]


def softras_torch(v, f, size):
    tri = v[f]  # faces x 3 x 2
    px, py = centres(size, torch)
    corner = lambda k: (tri[:, k, 0, None, None], tri[:, k, 1, None, None])
    return raster(torch, corner(0), corner(1), corner(2), px, py)


def forward_backward_torch(v, f, g, size):
    v = v.detach().clone().requires_grad_(True)
    p = softras_torch(v, f, size)
    (p * g).sum().backward()
    return p.detach(), v.grad


def jax_functions(jax, size):
    jnp = jax.numpy
    px, py = centres(size, jnp)

    def one_face(tri):
        return raster(jnp, (tri[0, 0], tri[0, 1]), (tri[1, 0], tri[1, 1]),
                      (tri[2, 0], tri[2, 1]), px, py)

    def forward(v, f):
        return jax.vmap(one_face)(v[f])

    def both(v, f, g):
        p, pullback = jax.vjp(lambda v: forward(v, f), v)
        return p, pullback(g)[0]

    return jax.jit(forward), jax.jit(both)


def main():
    nums = [int(a) for a in sys.argv[1:]]
    k, m, size, repeats = (nums + [32, 17, 64, 5][len(nums):])[:4]
    torch.set_num_threads(1)
    jax = load_jax()
    with tempfile.TemporaryDirectory() as tmp:
        mine = tessera("softras", [k, m, size, repeats], tmp)
        load_np = lambda name: np.load(os.path.join(tmp, name + ".npy"))
        v_np, f_np = sphere(k, m)
        if not (np.array_equal(f_np, load_np("F")) and np.allclose(v_np, load_np("V"), 0, 1e-15)):
            sys.exit("the example's mesh is not the sphere rule's")
        v, f, g = (torch.from_numpy(load_np(n)) for n in ["V", "F", "G"])
        want = [torch.from_numpy(load_np(n)) for n in ["P", "dV"]]
        theirs = {}
        with torch.no_grad():
            fwd, _ = median_ms(lambda: softras_torch(v, f, size), repeats)
        both, got = median_ms(lambda: forward_backward_torch(v, f, g, size), repeats)
        check("PyTorch", list(zip(want, got)))
        theirs["PyTorch (faces x pixels tensors)"] = (fwd, both)
        if jax is not None:
            forward, grad_fn = jax_functions(jax, size)
            jv, jf, jg = (jax.numpy.asarray(load_np(n)) for n in ["V", "F", "G"])
            fwd, _ = jax_ms(forward, [jv, jf], repeats)
            both, got = jax_ms(grad_fn, [jv, jf, jg], repeats)
            check("JAX", [(w, np.asarray(o)) for w, o in zip(want, got)])
            theirs["JAX (jit + vmap over faces)"] = (fwd, both)
    print(f"UV sphere {k} x {m}: {len(f_np)} faces, {len(v_np)} vertices; {size} x {size} image, "
          f"sigma {SIGMA}; f64, one thread; medians of {repeats}\n")
    table(theirs, mine)


if __name__ == "__main__":
    main()
