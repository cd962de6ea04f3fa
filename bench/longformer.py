"""Longformer sliding-window attention (one head), forward and forward + backward: Tessera
(examples/longformer.rs: the window as a SparseBand level, the gradient program from
`transforms::grad`) against PyTorch on the CPU.

    python3 bench/longformer.py [N] [D] [W] [REPEATS]
    #   defaults 4096 64 32 5

The Tessera example runs with `--dump`, so both sides see the same Q, K, V and output
cotangent G (f64). PyTorch computes the window the way Longformer's reference code does on the
CPU: K and V padded by W rows on both sides and unfolded into N × D × (2W+1) windows (a view),
scores by `einsum`, a masked softmax (padding gets -inf), the weighted sum by `einsum`;
backward by autograd from `(O * G).sum()`. A second PyTorch baseline is the dense route: the
full N × N score matrix with the band masked, as a model without a banded kernel does.
JAX (if installed) runs the windowed route under `jax.jit` (windows gathered by an index
array), backward by `jax.vjp`. Results must agree (relative 1e-9 on O and the three
gradients; the peers are checked against the last Tessera run, `VECTORIZED` below, whose sums
over features are reassociated within rounding). Single thread everywhere; times are medians of REPEATS calls, compile time
excluded. Prints a Markdown table.

Needs `torch` and `numpy` (e.g. `python3 -m venv v && v/bin/pip install torch numpy`); JAX
optional (`pip install "jax[cpu]"`).
"""

import os
import sys
import tempfile

import numpy as np
import torch

from grad_workload import check, jax_ms, load_jax, median_ms, table, tessera

# The extra Tessera rows: the two loops over features (the scores' dot products, O's weighted
# sum) vectorised; the gradient program inherits the marks.
VECTORIZED = "vectorize(f#1); vectorize(f#2)"


def windowed(q, k, v, w):
    """Longformer-style: pad, unfold into windows, masked softmax."""
    n, d = q.shape
    kp = torch.nn.functional.pad(k, (0, 0, w, w))
    vp = torch.nn.functional.pad(v, (0, 0, w, w))
    kw = kp.unfold(0, 2 * w + 1, 1)  # n x d x (2w+1)
    vw = vp.unfold(0, 2 * w + 1, 1)
    s = torch.einsum("nd,ndw->nw", q, kw) * 0.125
    pos = torch.arange(n)[:, None] + torch.arange(-w, w + 1)[None, :]
    s = s.masked_fill((pos < 0) | (pos >= n), float("-inf"))
    p = torch.softmax(s, dim=1)
    return torch.einsum("nw,ndw->nd", p, vw)


def dense_band(q, k, v, w):
    """The full score matrix with everything outside the band masked."""
    n = q.shape[0]
    s = (q @ k.T) * 0.125
    i = torch.arange(n)
    band = (i[:, None] - i[None, :]).abs() <= w
    s = s.masked_fill(~band, float("-inf"))
    return torch.softmax(s, dim=1) @ v


def jax_functions(jax, w):
    """The windowed route in JAX: K and V padded, the windows gathered by an index array
    (N x (2W+1)), the masked softmax, `einsum`; under `jax.jit`, backward by `jax.vjp`."""
    jnp = jax.numpy

    def windowed_jax(q, k, v):
        n = q.shape[0]
        pos = jnp.arange(n)[:, None] + jnp.arange(-w, w + 1)[None, :]
        kw = jnp.pad(k, ((w, w), (0, 0)))[pos + w]  # n x (2w+1) x d
        vw = jnp.pad(v, ((w, w), (0, 0)))[pos + w]
        s = jnp.einsum("nd,nwd->nw", q, kw) * 0.125
        s = jnp.where((pos < 0) | (pos >= n), -jnp.inf, s)
        return jnp.einsum("nw,nwd->nd", jax.nn.softmax(s, axis=1), vw)

    def both(q, k, v, g):
        o, pullback = jax.vjp(windowed_jax, q, k, v)
        return (o, *pullback(g))

    return jax.jit(windowed_jax), jax.jit(both)


def forward_backward(f, q, k, v, g, w):
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    o = f(q, k, v, w)
    (o * g).sum().backward()
    return o.detach(), q.grad, k.grad, v.grad


def main():
    args = [int(a) for a in sys.argv[1:]]
    n, d, w, repeats = (args + [4096, 64, 32, 5][len(args):])[:4]
    torch.set_num_threads(1)
    jax = load_jax()
    with tempfile.TemporaryDirectory() as tmp:
        mine = tessera("longformer", [n, d, w, repeats], tmp, schedule=VECTORIZED)
        load = lambda name: torch.from_numpy(np.load(os.path.join(tmp, name + ".npy")))
        q, k, v, g = load("Q"), load("K"), load("V"), load("G")
        theirs = {}
        peers = [("PyTorch windows", windowed)]
        if n <= 8192:
            peers.append(("PyTorch dense + mask", dense_band))
        for name, f in peers:
            with torch.no_grad():
                fwd, _ = median_ms(lambda: f(q, k, v, w), repeats)
            both, (o, dq, dk, dv) = median_ms(lambda: forward_backward(f, q, k, v, g, w), repeats)
            check(name, [(load("O"), o), (load("dQ"), dq), (load("dK"), dk), (load("dV"), dv)])
            theirs[name] = (fwd, both)
        if jax is not None:
            forward, grad_fn = jax_functions(jax, w)
            args = [jax.numpy.asarray(t.numpy()) for t in (q, k, v)]
            fwd, _ = jax_ms(forward, args, repeats)
            both, got = jax_ms(grad_fn, [*args, jax.numpy.asarray(g.numpy())], repeats)
            want = [load(name) for name in ["O", "dQ", "dK", "dV"]]
            check("JAX", [(a, np.asarray(b)) for a, b in zip(want, got)])
            theirs["JAX windows (jit)"] = (fwd, both)
    print(f"N = {n}, D = {d}, window {2 * w + 1}; f64, one thread; medians of {repeats}\n")
    table(theirs, mine)


if __name__ == "__main__":
    main()
