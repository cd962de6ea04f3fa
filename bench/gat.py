"""One graph-attention (GAT) layer, one head, forward and forward + backward: Tessera
(examples/gat.rs: the graph as CSR, the gradient program from `transforms::grad` with respect
to X, W, a1, a2) against PyTorch on the CPU.

    python3 bench/gat.py [GRAPH.mtx] [F_IN] [F] [REPEATS]
    #   defaults ../shared/data/matrices/ca-HepPh.mtx 32 32 5

The Tessera example runs with `--dump`, so both sides see the same graph (its pattern plus
self-loops), features, weights and output cotangent (f64). PyTorch computes the layer the way
PyTorch Geometric's GATConv does with scatter operations: per-edge scores
`leaky_relu(s[src] + t[dst], 0.2)` gathered by `index_select`, the softmax denominators and the
weighted sum by `index_add_` over edges; backward by autograd from `(O * G).sum()`. Results must
agree (relative 1e-9 on O and the four gradients). Single thread on both sides; medians of
REPEATS calls, compile time excluded. Prints a Markdown table.

Needs `torch` and `numpy` (e.g. `python3 -m venv v && v/bin/pip install torch numpy`).
"""

import os
import sys
import tempfile

import numpy as np
import torch

from grad_workload import ROOT, check, median_ms, table, tessera


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


def main():
    args = sys.argv[1:]
    graph = args[0] if args else os.path.join(ROOT, "..", "shared", "data", "matrices", "ca-HepPh.mtx")
    if not os.path.exists(graph):
        sys.exit(f"{graph}: not found (the shared data folder is needed)")
    nums = [int(a) for a in args[1:]]
    f_in, f, repeats = (nums + [32, 32, 5][len(nums):])[:3]
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        mine = tessera("gat", [os.path.abspath(graph), f_in, f, repeats], tmp)
        load = lambda name: torch.from_numpy(np.load(os.path.join(tmp, name + ".npy")))
        x, w, a1, a2, g = load("X"), load("W"), load("a1"), load("a2"), load("G")
        src, dst = load("src").long(), load("dst").long()
        with torch.no_grad():
            fwd, _ = median_ms(lambda: gat(x, w, a1, a2, src, dst), repeats)
        both, (o, dx, dw, da1, da2) = median_ms(
            lambda: forward_backward(x, w, a1, a2, src, dst, g), repeats)
        check("PyTorch", [(load("O"), o), (load("dX"), dx), (load("dW"), dw),
                          (load("da1"), da1), (load("da2"), da2)])
    n = x.shape[0]
    print(f"{os.path.basename(graph)}: {n} vertices, {len(src)} edges with self-loops; "
          f"F_IN = {f_in}, F = {f}; f64, one thread; medians of {repeats}\n")
    table({"PyTorch (index_select + index_add_)": (fwd, both)}, mine)


if __name__ == "__main__":
    main()
