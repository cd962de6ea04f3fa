"""SubdivNet's mesh convolution, forward and forward + backward: Tessera
(examples/subdivnet.rs: the neighbours gathered by indirect indices, the gradient program from
`transforms::grad` with respect to x and w0..w3) against PyTorch and JAX on the CPU.

    python3 bench/subdivnet.py [A] [B] [F_IN] [F] [REPEATS]
    #   defaults 96 64 13 64 5: a torus grid of 2 x 96 x 64 = 12,288 faces, 13 -> 64 features

FreeTensor's mesh (SHREC11 `ants/test/1-0.obj`, 12,288 faces) is not in our data: the example
generates a closed triangle mesh with as many faces, a torus grid of A x B quads cut into two
triangles each, and this script rebuilds its adjacency by the same rule and checks it equals
the dumped one. Both sides see the same adjacency, features, weights and output cotangent
(f64, from the example's `--dump`). PyTorch computes the layer the way FreeTensor's PyTorch
baseline does: the neighbours gathered with `index_select` into a faces x 3 x F_IN tensor, the
rotation for the circular difference by `cat`, `abs` and `sum` over the neighbours, four
matrix products; backward by autograd from `(y * G).sum()`. JAX (if installed) computes the
same with `jnp.take` and `jnp.roll` under `jax.jit`, the gradient by `jax.grad`. Results must
agree (relative 1e-9 on y and the five gradients; the peers are checked against the last
Tessera run, C with the face loop tiled, `TILED` below: each tile of faces shares the rows of
w0..w3 and dw0..dw3 per input feature, and the gradient keeps the tiles; like `vectorize(o)`,
whose backward loop over `o` inherits the mark and runs its folds as reassociated `omp simd`
sums). Single thread everywhere; medians of REPEATS
calls, compile time excluded. Prints a Markdown table.

Needs `torch` and `numpy`; JAX optional (`pip install "jax[cpu]"`).
"""

import os
import sys
import tempfile

import numpy as np
import torch

from grad_workload import check, jax_ms, load_jax, median_ms, table, tessera


# The extra Tessera row: the face loop split into tiles of 8 inside the loop over the input
# features, then the output features vectorised (examples/subdivnet.rs `--schedule`).
TILED = "split(i, 8); reorder(f, i.1); vectorize(o)"
# And one with the gradient program scheduled (`--grad-schedule`): its backward loop over
# (i, f) cut between the row updates over `o` and the scatter over `j`, the cotangents
# ds1..ds3 that cross the cut expanded to per-(i, f) arrays.
FISSION = "fission(f#2, after for o#2); fission(i#2, after for f#2)"


def torus_adjacency(a, b):
    """examples/subdivnet.rs's rule: face 2 (p b + q) + t is triangle t of quad (p, q); the
    faces across each triangle's edges, in corner order."""
    face = lambda p, q, t: 2 * ((p % a) * b + q % b) + t
    adj = []
    for p in range(a):
        for q in range(b):
            adj.append([face(p, q - 1, 1), face(p + 1, q, 1), face(p, q, 1)])
            adj.append([face(p, q, 0), face(p, q + 1, 0), face(p - 1, q, 0)])
    return np.array(adj, dtype=np.int64)


def check_mesh(adj):
    """A closed 3-regular face adjacency: three distinct neighbours, none the face itself,
    and every neighbour relation symmetric."""
    n = len(adj)
    for i, row in enumerate(adj):
        assert len(set(row)) == 3 and i not in row, (i, row)
        for j in row:
            assert i in adj[j], (i, j)
    return n


def conv_torch(x, adj, w0, w1, w2, w3):
    n = x.shape[0]
    e = torch.index_select(x, 0, adj.flatten()).reshape(n, 3, -1)
    rot = torch.cat([e[:, 1:], e[:, :1]], 1)  # e[:, (j + 1) % 3]
    s1 = e.sum(1)
    s2 = (e - rot).abs().sum(1)
    s3 = (e - x[:, None, :]).abs().sum(1)
    return x @ w0 + s1 @ w1 + s2 @ w2 + s3 @ w3


def forward_backward_torch(x, adj, ws, g):
    x, *ws = (t.detach().clone().requires_grad_(True) for t in (x, *ws))
    y = conv_torch(x, adj, *ws)
    (y * g).sum().backward()
    return (y.detach(), x.grad, *(w.grad for w in ws))


def jax_functions(jax):
    jnp = jax.numpy

    def conv(x, adj, w0, w1, w2, w3):
        e = jnp.take(x, adj, axis=0)  # faces x 3 x F_IN
        s1 = e.sum(1)
        s2 = jnp.abs(e - jnp.roll(e, -1, axis=1)).sum(1)
        s3 = jnp.abs(e - x[:, None, :]).sum(1)
        return x @ w0 + s1 @ w1 + s2 @ w2 + s3 @ w3

    def both(x, adj, w0, w1, w2, w3, g):
        y, pullback = jax.vjp(lambda *p: conv(p[0], adj, *p[1:]), x, w0, w1, w2, w3)
        return (y, *pullback(g))

    return jax.jit(conv), jax.jit(both)


def main():
    nums = [int(a) for a in sys.argv[1:]]
    a, b, f_in, f, repeats = (nums + [96, 64, 13, 64, 5][len(nums):])[:5]
    torch.set_num_threads(1)
    jax = load_jax()
    with tempfile.TemporaryDirectory() as tmp:
        mine = tessera("subdivnet", [a, b, f_in, f, repeats], tmp, schedule="vectorize(o)",
                       extra=[("c", "vectorize(o)", FISSION), ("c", TILED)])
        load_np = lambda name: np.load(os.path.join(tmp, name + ".npy"))
        load = lambda name: torch.from_numpy(load_np(name))
        adj = torus_adjacency(a, b)
        if not np.array_equal(adj, load_np("adj")):
            sys.exit("the example's adjacency is not the torus rule's")
        n = check_mesh(adj.tolist())
        x, g = load("x"), load("G")
        ws = [load(f"w{k}") for k in range(4)]
        adj_t = torch.from_numpy(adj)
        want = [load(name) for name in ["y", "dx", "dw0", "dw1", "dw2", "dw3"]]
        theirs = {}
        with torch.no_grad():
            fwd, _ = median_ms(lambda: conv_torch(x, adj_t, *ws), repeats)
        both, got = median_ms(lambda: forward_backward_torch(x, adj_t, ws, g), repeats)
        check("PyTorch", list(zip(want, got)))
        theirs["PyTorch (index_select + cat)"] = (fwd, both)
        if jax is not None:
            conv, grad_fn = jax_functions(jax)
            xs = [jax.numpy.asarray(load_np(k)) for k in ["x", "w0", "w1", "w2", "w3"]]
            ja, jg = jax.numpy.asarray(adj), jax.numpy.asarray(load_np("G"))
            fwd, _ = jax_ms(conv, [xs[0], ja, *xs[1:]], repeats)
            both, got = jax_ms(grad_fn, [xs[0], ja, *xs[1:], jg], repeats)
            check("JAX", [(w, np.asarray(o)) for w, o in zip(want, got)])
            theirs["JAX (jit; take + roll)"] = (fwd, both)
    print(f"torus {a} x {b}: {n} faces, 3 neighbours each; F_IN = {f_in}, F = {f}; "
          f"f64, one thread; medians of {repeats}\n")
    table(theirs, mine)


if __name__ == "__main__":
    main()
