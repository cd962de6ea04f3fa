"""One graph-attention (GAT) layer, one head, forward and forward + backward: Tessera
(examples/gat.rs: the graph as CSR, the gradient program from `transforms::grad` with respect
to X, W, a1, a2) against PyTorch on the CPU.

    python3 bench/gat.py [GRAPH.mtx] [F_IN] [F] [REPEATS]
    #   defaults ../shared/data/matrices/ca-HepPh.mtx 32 32 5

The Tessera example runs with `--dump`, so both sides see the same graph (its pattern plus
self-loops), features, weights and output cotangent (f64). PyTorch computes the layer the way
PyTorch Geometric's GATConv does with scatter operations: per-edge scores
`leaky_relu(s[src] + t[dst], 0.2)` gathered by `index_select`, the softmax denominators and the
weighted sum by `index_add_` over edges; backward by autograd from `(O * G).sum()`. JAX (if
installed) computes the same under `jax.jit` with indexing and `jax.ops.segment_sum`, backward
by `jax.vjp`. Results must agree (relative 1e-9 on O and the four gradients; the peers are
checked against the last Tessera run, `VECTORIZED` below, whose sums over features are
reassociated within rounding). Single thread everywhere; medians of REPEATS calls, compile time excluded. Prints a Markdown table.

Needs `torch` and `numpy` (e.g. `python3 -m venv v && v/bin/pip install torch numpy`); JAX
optional (`pip install "jax[cpu]"`).
"""

import os
import sys
import tempfile

import numpy as np
import torch

from grad_workload import ROOT, check, jax_ms, load_jax, median_ms, table, tessera

# The extra Tessera rows: the three loops over features (H's, the scores', O's) vectorised;
# the gradient program inherits the marks, so its folds over features run as `omp simd` sums.
VECTORIZED = "vectorize(f#1); vectorize(f#2); vectorize(f#3)"


def gat(x, w, a1, a2, src, dst):
    h = x @ w
    s, t = h @ a1, h @ a2
    e = torch.nn.functional.leaky_relu(s[src] + t[dst], 0.2)
    ex = torch.exp(e)
    z = torch.zeros(x.shape[0], dtype=x.dtype).index_add_(0, src, ex)
    alpha = ex / z[src]
    return torch.zeros(x.shape[0], w.shape[1], dtype=x.dtype).index_add_(
        0, src, alpha[:, None] * h[dst])


def forward_backward(x, w, a1, a2, src, dst, g):
    x, w, a1, a2 = (t.detach().clone().requires_grad_(True) for t in (x, w, a1, a2))
    o = gat(x, w, a1, a2, src, dst)
    (o * g).sum().backward()
    return o.detach(), x.grad, w.grad, a1.grad, a2.grad


def jax_functions(jax, n):
    """The same layer in JAX: gathers by indexing, `segment_sum` for the scatters."""
    jnp = jax.numpy

    def gat_jax(x, w, a1, a2, src, dst):
        h = x @ w
        s, t = h @ a1, h @ a2
        ex = jnp.exp(jax.nn.leaky_relu(s[src] + t[dst], 0.2))
        z = jax.ops.segment_sum(ex, src, num_segments=n)
        alpha = ex / z[src]
        return jax.ops.segment_sum(alpha[:, None] * h[dst], src, num_segments=n)

    def both(x, w, a1, a2, src, dst, g):
        o, pullback = jax.vjp(lambda *p: gat_jax(*p, src, dst), x, w, a1, a2)
        return (o, *pullback(g))

    return jax.jit(gat_jax), jax.jit(both)


def main():
    args = sys.argv[1:]
    graph = args[0] if args else os.path.join(ROOT, "..", "shared", "data", "matrices", "ca-HepPh.mtx")
    if not os.path.exists(graph):
        sys.exit(f"{graph}: not found (the shared data folder is needed)")
    nums = [int(a) for a in args[1:]]
    f_in, f, repeats = (nums + [32, 32, 5][len(nums):])[:3]
    torch.set_num_threads(1)
    jax = load_jax()
    with tempfile.TemporaryDirectory() as tmp:
        mine = tessera("gat", [os.path.abspath(graph), f_in, f, repeats], tmp, schedule=VECTORIZED)
        load = lambda name: torch.from_numpy(np.load(os.path.join(tmp, name + ".npy")))
        x, w, a1, a2, g = load("X"), load("W"), load("a1"), load("a2"), load("G")
        src, dst = load("src").long(), load("dst").long()
        with torch.no_grad():
            fwd, _ = median_ms(lambda: gat(x, w, a1, a2, src, dst), repeats)
        both, (o, dx, dw, da1, da2) = median_ms(
            lambda: forward_backward(x, w, a1, a2, src, dst, g), repeats)
        want = [load(name) for name in ["O", "dX", "dW", "da1", "da2"]]
        check("PyTorch", list(zip(want, [o, dx, dw, da1, da2])))
        theirs = {"PyTorch (index_select + index_add_)": (fwd, both)}
        if jax is not None:
            forward, grad_fn = jax_functions(jax, x.shape[0])
            args = [jax.numpy.asarray(t.numpy()) for t in (x, w, a1, a2, src, dst)]
            fwd, _ = jax_ms(forward, args, repeats)
            both, got = jax_ms(grad_fn, [*args, jax.numpy.asarray(g.numpy())], repeats)
            check("JAX", [(a, np.asarray(b)) for a, b in zip(want, got)])
            theirs["JAX (jit; indexing + segment_sum)"] = (fwd, both)
    n = x.shape[0]
    print(f"{os.path.basename(graph)}: {n} vertices, {len(src)} edges with self-loops; "
          f"F_IN = {f_in}, F = {f}; f64, one thread; medians of {repeats}\n")
    table(theirs, mine)


if __name__ == "__main__":
    main()
