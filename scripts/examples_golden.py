"""Print the reference values of the example programs (examples/*.tess) used by tests/examples.rs.

Run: /work/venv/bin/python scripts/examples_golden.py > tests/common/examples_golden.rs && cargo fmt
(needs numpy, scipy and Pillow; the tests themselves need no Python).

Vectors are compared through weighted checksums, so a wrong value at any position changes them;
the weights and the test inputs are defined the same way in tests/examples.rs:
- f64 vectors: sum_k v[k] * (k % 5 + 1); matrices flattened row-major;
- binary images: the number of true pixels and the sum of their row-major positions y * W + x;
- BFS levels: reached count, depth, sum_v level[v] * (v % 13 + 1) over reached vertices;
- distances: finite count, sum_v d[v] * (v % 7 + 1) over finite ones.
"""
import numpy as np
import scipy.io
import scipy.ndimage as ndi
import scipy.signal as signal
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
from PIL import Image

DATA = "../shared/data"


def matrix(name):
    return sp.csr_matrix(scipy.io.mmread(f"{DATA}/matrices/{name}.mtx")).astype(np.float64)


def image(name):
    # Pillow's "L" conversion is what src/io/png.rs reproduces.
    return np.array(Image.open(f"{DATA}/images/{name}.png").convert("L"))


def checksum(v):
    v = np.asarray(v, dtype=np.float64).ravel()
    return float(np.dot(v, (np.arange(v.size) % 5) + 1.0))


def spmv_x(n):
    return (np.arange(n) % 7) - 3.0


def f(x):
    return repr(float(x))


def image_sum(b):
    ys, xs = np.nonzero(b)
    return int(b.sum()), int(np.sum(ys.astype(np.int64) * b.shape[1] + xs))


print("//! Reference values printed by scripts/examples_golden.py (numpy, scipy, Pillow).")
print("//! Regenerate: /work/venv/bin/python scripts/examples_golden.py > tests/common/examples_golden.rs && cargo fmt")
print()

print("/// (matrix, checksum of A @ x) with x[k] = k % 7 - 3, for symmetric matrices.")
print("pub const SYMMETRIC_SPMV: &[(&str, f64)] = &[")
for name in ["494_bus", "1138_bus", "bcsstk10", "bcsstk13"]:
    A = matrix(name)
    assert abs(A - A.T).sum() == 0
    print(f'    ("{name}", {f(checksum(A @ spmv_x(A.shape[0])))}),')
print("];")
print()

print("/// (matrix, scipy.sparse.triu(A).sum()).")
print("pub const TRIU_SUM: &[(&str, f64)] = &[")
for name in ["494_bus", "west0067", "lp_afiro", "bcsstk10", "Groebner_id2003_aug"]:
    print(f'    ("{name}", {f(sp.triu(matrix(name)).sum())}),')
print("];")
print()

print("/// (matrix, checksum of A.diagonal()).")
print("pub const DIAGONAL: &[(&str, f64)] = &[")
for name in ["494_bus", "west0067", "bcsstk10", "impcol_a"]:
    print(f'    ("{name}", {f(checksum(matrix(name).diagonal()))}),')
print("];")
print()

print("/// The kernel of the 1-d convolution.")
V1 = [1.0, -2.0, 0.5, 3.0, -1.0]
print(f"pub const CONV1_KERNEL: [f64; {len(V1)}] = {V1!r};")
print("/// (matrix flattened row-major as the signal, checksum of numpy.convolve(a, CONV1_KERNEL)).")
print("pub const CONVOLVE1D: &[(&str, f64)] = &[")
for name in ["west0067", "impcol_a"]:
    a = matrix(name).toarray().ravel()
    print(f'    ("{name}", {f(checksum(np.convolve(a, V1)))}),')
print("];")
print()

K2 = np.array([[1.0, 2.0, 0.0], [-1.0, 0.5, 3.0], [0.25, 0.0, -2.0]])
print("/// The kernel of the 2-d convolution (3 x 3, row-major).")
print(f"pub const CONV2_KERNEL: [f64; 9] = {K2.ravel().tolist()!r};")
print("/// (matrix, checksum of scipy.signal.convolve2d(A, CONV2_KERNEL), full mode).")
print("pub const CONVOLVE2D: &[(&str, f64)] = &[")
for name in ["west0479", "lp_afiro", "1138_bus"]:
    C = signal.convolve2d(matrix(name).toarray(), K2)
    print(f'    ("{name}", {f(checksum(C))}),')
print("];")
print()

print("/// (image, threshold, [(true pixels, sum of their positions) of img > threshold, after one")
print("/// erosion, after two]) with the 3 x 3 box and border value 1.")
print("pub type ImageSums = [(i64, i64); 3];")
print("pub const EROSION: &[(&str, u8, ImageSums)] = &[")
box = np.ones((3, 3), dtype=bool)
for name, t in [("camera", 128), ("horse", 128), ("text", 100), ("microaneurysms", 120)]:
    b0 = image(name) > t
    b1 = ndi.binary_erosion(b0, box, border_value=1)
    b2 = ndi.binary_erosion(b1, box, border_value=1)
    # iterations=2 is the same as eroding twice.
    assert (b2 == ndi.binary_erosion(b0, box, border_value=1, iterations=2)).all()
    sums = ", ".join(f"({c}, {s})" for c, s in map(image_sum, [b0, b1, b2]))
    print(f'    ("{name}", {t}, [{sums}]),')
print("];")
print()

print("/// (image, threshold, numpy.bincount(img[img > threshold] // 16, minlength=16)).")
print("pub const MASKED_HISTOGRAM: &[(&str, u8, [i64; 16])] = &[")
for name, t in [("coins", 100), ("camera", 128), ("page", 150)]:
    img = image(name)
    bins = np.bincount(img[img > t] // 16, minlength=16)
    print(f'    ("{name}", {t}, {bins.tolist()!r}),')
print("];")
print()

print("/// (graph, source, reached, depth, sum of level * (v % 13 + 1)): unweighted shortest paths.")
print("pub const BFS: &[(&str, usize, i64, i64, i64)] = &[")
for name, sources in [
    ("karate", [0, 33]),
    ("Erdos971", [0, 100, 200]),
    ("1138_bus", [0, 500]),
    ("delaunay_n14", [0]),
]:
    A = matrix(name)
    A.data[:] = 1.0
    for s in sources:
        lv = csgraph.shortest_path(A, unweighted=True, indices=s)
        reached = np.isfinite(lv)
        order = csgraph.breadth_first_order(A, s, return_predecessors=False)
        assert set(order) == set(np.nonzero(reached)[0])
        lv = np.where(reached, lv, 0).astype(np.int64)
        ws = int(np.sum(lv * ((np.arange(lv.size) % 13) + 1)))
        print(f'    ("{name}", {s}, {int(reached.sum())}, {int(lv.max())}, {ws}),')
print("];")
print()

print("/// (graph, source, finite distances, sum of d * (v % 7 + 1)): Bellman-Ford on |weights|.")
print("pub const BELLMAN_FORD: &[(&str, usize, i64, f64)] = &[")
for name, sources in [
    ("1138_bus", [0, 700]),
    ("netscience", [0, "hub"]),
    ("bcsstk10", [5]),
    ("Fashion_MNIST_norm_10NN", [0]),
]:
    A = matrix(name)
    # "hub": the vertex of largest degree, so that a large component is searched.
    sources = [int(np.argmax(np.diff(A.indptr))) if s == "hub" else s for s in sources]
    A.data = np.abs(A.data)
    for s in sources:
        d = csgraph.bellman_ford(A, directed=True, indices=s)
        fin = np.isfinite(d)
        ws = float(np.sum(np.where(fin, d, 0.0) * ((np.arange(d.size) % 7) + 1)))
        print(f'    ("{name}", {s}, {int(fin.sum())}, {f(ws)}),')
print("];")
