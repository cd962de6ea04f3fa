"""Inputs of bench/shortrows.c: the matrices where MKL leads Tessera's SpMV (issue 18) and the
study's other short-row matrices, as raw CSR (.bin: rows, cols, nnz as i64; ptr, idx as i64; val, x as f64), and the same
matrices as .mtx with x as .npy for `tessera bench`. Usage: shortrows_data.py OUT_DIR"""

import pathlib
import sys

import numpy as np
import scipy.io as sio
import scipy.sparse as sp

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import data  # noqa: E402

MATRICES = pathlib.Path(__file__).parent.parent.parent / "shared" / "data" / "matrices"


def main(out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cases = [
        ("delaunay_n17", sio.mmread(MATRICES / "delaunay_n17.mtx")),
        ("reverse_perm_1e6", data.reverse_perm(1_000_000)),
        # The study's erdos_renyi_2^19_x8 (bench/studies/spmv.py: seed = k = 19).
        ("erdos_renyi_2^19_x8", data.erdos_renyi(1 << 19, 8, seed=19)),
        # The other short-row matrices of the SpMV study (3-7 entries a row).
        *((m, sio.mmread(MATRICES / f"{m}.mtx")) for m in ("usroads", "bayer10", "cryg10000", "dw4096")),
    ]
    rng = np.random.default_rng(1)
    for name, a in cases:
        a = sp.csr_matrix(a).astype(np.float64)
        a.sum_duplicates()
        a.sort_indices()
        x = rng.uniform(0.0, 1.0, a.shape[1])
        with open(out / f"{name}.bin", "wb") as f:
            np.array([a.shape[0], a.shape[1], a.nnz], dtype=np.int64).tofile(f)
            a.indptr.astype(np.int64).tofile(f)
            a.indices.astype(np.int64).tofile(f)
            a.data.tofile(f)
            x.tofile(f)
        sio.mmwrite(str(out / f"{name}.mtx"), a)
        np.save(out / f"{name}_x.npy", x)
        print(name, a.shape, a.nnz)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
