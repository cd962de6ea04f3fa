"""SpMV y = A x: Tessera's row-major, column-major and symmetric programs in every format that
suits the matrix, against SciPy, MKL, GraphBLAS, Eigen and finch-tensor, plus the roofline
(bytes moved per nonzero against the STREAM triad bandwidth measured in the same run)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import data
import harness
import peers as P

TITLE = "SpMV: y = A x"
PEERS = ["SciPy", "MKL", "GraphBLAS", "Eigen", "finch-tensor"]

ROW = "examples/spmv_row.tess"
COL = "examples/spmv_col.tess"
SYM = "examples/symmetric_spmv.tess"
CSR = "Dense(SparseList(Element(0.0)))"
CSR32 = "Dense(SparseList(Element(0.0), coord=i32))"
ROW_FORMATS = {
    "SparseList": CSR,
    # 4-byte coordinates and row pointers, as SciPy's CSR (issue 18).
    "SparseList i32": CSR32,
    "Pattern": "Dense(SparseList(Pattern()))",
    "Pattern i32": "Dense(SparseList(Pattern(), coord=i32))",
    "SparseBlockList": "Dense(SparseBlockList(Element(0.0)))",
    "SparseBand": "Dense(SparseBand(Element(0.0)))",
    "SparsePoint": "Dense(SparsePoint(Element(0.0)))",
    # Sliced ELLPACK: a slice's 8 rows run as the lanes of one loop (`ir::lanes`).
    "SparseSliceList i32": "Dense(SparseSliceList(Element(0.0), coord=i32))",
    "Pattern SparseSliceList i32": "Dense(SparseSliceList(Pattern(), coord=i32))",
}
# Sliced formats store each slice padded to its longest row: past this many slots per
# entry, the padding costs more than the lanes save.
MAX_SLICE_PADDING = 2.0
# Row formats also run with each row's sum in lanes (`vectorize(j)`: reassociated, as MKL's
# and Eigen's vectorised kernels sum; within the study's rounding check): the band's dense
# ranges and CSR's gathers. Short rows do not repay the lanes, so a matrix keeps the
# faster of the two.
VECTORIZED = {"SparseList i32", "SparseBand"}
ROW_SCHEDULE = "vectorize(j)"


def matrices(ctx) -> list[tuple[str, callable]]:
    real = ["bcsstk16", "bayer10", "c-55", "Fashion_MNIST_norm_10NN", "dwt_2680", "delaunay_n17",
            "web-NotreDame"]
    if not ctx.quick:
        real += ["bcsstk13", "cryg10000", "ca-HepPh", "dw4096", "rajat01", "usroads", "Groebner_id2003_aug"]
    out = [(m, (lambda m=m: data.load_mtx(m, ctx.data))) for m in real]
    out += [
        ("banded_5", lambda: data.banded(10_000, 5, seed=5)),
        ("banded_30", lambda: data.banded(10_000, 30, seed=30)),
        ("banded_100", lambda: data.banded(10_000, 100, seed=100)),
        ("triu_1024", lambda: data.triu_dense(1024)),
        ("reverse_perm_1e6", lambda: data.reverse_perm(1_000_000)),
    ]
    # Clearly larger than a 32 MiB last-level cache: 4.2M (quick) or 8.4M nonzeros.
    k = 19 if ctx.quick else 20
    out.append((f"erdos_renyi_2^{k}_x8", lambda: data.erdos_renyi(1 << k, 8, seed=k)))
    return out


def llc_bytes() -> int:
    """Size of the last-level cache from sysfs (0 when unknown)."""
    best = 0
    for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            s = (d / "size").read_text().strip()
        except OSError:
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1], 1)
        best = max(best, int(s.rstrip("KMG")) * mult)
    return best


def csr_bytes(a: sp.csr_matrix, index_bytes: int) -> int:
    """Compulsory traffic of CSR SpMV: values and column indices once, row pointers once, x read
    once (its best case: every reuse hits cache), y written once."""
    m, n = a.shape
    return a.nnz * (8 + index_bytes) + (m + 1) * index_bytes + 8 * n + 8 * m


def band_storage(a: sp.csr_matrix) -> int:
    """Entries SparseBand stores: from the first to the last stored column of every row."""
    counts = np.diff(a.indptr)
    nz = counts > 0
    first = a.indices[a.indptr[:-1][nz]]
    last = a.indices[a.indptr[1:][nz] - 1]
    return int((last - first + 1).sum())


def check(name: str, what: str, y: np.ndarray, ref: np.ndarray, bound: np.ndarray) -> None:
    """|y - ref| <= 1e-9 * (|A| |x|) entrywise: summation order may differ, nothing else."""
    if y.shape != ref.shape:
        raise harness.Mismatch(f"{name} {what}: shape {y.shape}, SciPy {ref.shape}")
    err = np.abs(y - ref)
    bad = np.nonzero(err > 1e-9 * bound + 1e-300)[0]
    if len(bad):
        k = bad[0]
        raise harness.Mismatch(
            f"{name} {what}: y[{k}] = {y[k]!r}, SciPy {ref[k]!r} ({len(bad)} entries differ)"
        )


def slice_slots(row_nnz) -> int:
    """Slots of a sliced format (slices of 8 rows, each padded to its longest row)."""
    n = len(row_nnz)
    padded = np.zeros(-(-n // 8) * 8, dtype=np.int64)
    padded[:n] = row_nnz
    return int(8 * padded.reshape(-1, 8).max(axis=1).sum())


def run(ctx) -> list[dict]:
    stream = ctx.stream_bandwidth()
    ctx.log(f"STREAM triad (1 core): {stream['triad_gbs']:.2f} GB/s, copy {stream['copy_gbs']:.2f} GB/s")
    llc = llc_bytes()
    eigen = P.eigen_binary(ctx, "eigen_spmv")
    cases = []
    roof = []
    rng = np.random.default_rng(1)
    for name, make in matrices(ctx):
        a = make()
        m, n = a.shape
        d = ctx.tmp / "spmv" / name
        d.mkdir(parents=True, exist_ok=True)
        ctx.log(f"{name}: {m}x{n}, nnz {a.nnz}")
        a_path = data.write_mtx(a, d / "A.mtx")
        x = rng.uniform(-1.0, 1.0, n)
        np.save(d / "x.npy", x)
        x.tofile(d / "x.bin")
        ref = a @ x
        bound = abs(a) @ np.abs(x)

        # Tessera variants that suit this matrix.
        variants: dict[str, tuple] = {}
        skipped: list[str] = []
        row_nnz = np.diff(a.indptr)
        for label, fmt in ROW_FORMATS.items():
            if label.startswith("Pattern") and not data.is_pattern(a):
                continue
            if label == "SparsePoint" and row_nnz.max(initial=0) > 1:
                continue
            if "SparseSliceList" in label and slice_slots(row_nnz) > MAX_SLICE_PADDING * a.nnz:
                skipped.append(
                    f"{label} (would store {slice_slots(row_nnz) / max(a.nnz, 1):.1f}x nnz)"
                )
                continue
            if label == "SparseBand" and band_storage(a) > 4 * a.nnz:
                skipped.append(f"SparseBand (would store {band_storage(a) / a.nnz:.1f}x nnz)")
                continue
            variants[f"row {label}"] = (ROW, {"A": (a_path, fmt), "x": d / "x.npy"}, {}, None)
            if label in VECTORIZED:
                variants[f"row {label} {ROW_SCHEDULE}"] = (
                    ROW, {"A": (a_path, fmt), "x": d / "x.npy"}, {}, ROW_SCHEDULE)
        at_path = data.write_mtx(a.T.tocsr(), d / "AT.mtx")
        variants["col SparseList"] = (COL, {"AT": (at_path, CSR), "x": d / "x.npy"}, {}, None)
        if m == n and (a != a.T).nnz == 0:
            u_path = data.write_mtx(sp.triu(a, k=1).tocsr(), d / "U.mtx")
            np.save(d / "D.npy", a.diagonal())
            variants["symmetric SparseList"] = (
                SYM,
                {"U": (u_path, CSR), "D": d / "D.npy", "x": d / "x.npy"},
                {"y_i": (None, "Scalar(0.0)")},
                None,
            )

        backends = ctx.usable_backends()
        variants = {
            (v if b == "jit" else f"{v} [{b}]"): (*spec, b)
            for v, spec in variants.items()
            for b in backends
        }
        compile_ms: dict[str, float] = {}

        def tessera(label):
            prog, ins, extra_outs, schedule, backend = variants[label]
            stem = label.replace(' ', '_')
            for c in "[]()":
                stem = stem.replace(c, '')
            y_path = d / f"y_{stem}.npy"
            r = ctx.bench(prog, ins, {"y": y_path, **extra_outs}, backend=backend,
                          schedule=schedule)
            # The output of the timed runs is checked before the time is accepted.
            check(name, f"Tessera {label}", np.load(y_path), ref, bound)
            compile_ms[label] = r["compile_ms"]
            return r["median_ms"]

        measure = {f"tessera:{v}": (lambda v=v: tessera(v)) for v in variants}
        for peer in PEERS:
            fn = P.spmv_peer(ctx, peer, a, x, d, eigen)
            if fn is None:
                continue
            y = fn(check_only=True)
            check(name, peer, np.asarray(y, dtype=np.float64).ravel(), ref, bound)
            measure[peer] = (lambda fn=fn: fn())
        got = ctx.alternate(measure)
        times = {v: got[f"tessera:{v}"] for v in variants if got[f"tessera:{v}"] is not None}
        best = min(times, key=times.get)
        peers_ms = {p: got.get(p) for p in PEERS}
        note = ", ".join(f"{v} {t:.4g}" for v, t in sorted(times.items(), key=lambda kv: kv[1]))
        if skipped:
            note += "; not run: " + ", ".join(skipped)
        # The roofline uses the fastest backend's CSR kernel.
        csr = {v: t for v, t in times.items() if v.startswith("row SparseList")}
        csr_best = min(csr, key=csr.get)
        csr_ms = csr[csr_best]
        bytes_t = csr_bytes(a, 4 if "i32" in csr_best else 8)
        gbs = bytes_t / (csr_ms * 1e-3) / 1e9
        scipy_ms = peers_ms.get("SciPy")
        bytes_s = csr_bytes(a, 4)
        scipy_gbs = bytes_s / (scipy_ms * 1e-3) / 1e9 if scipy_ms else None
        roof.append(
            (name, a.nnz, bytes_t, bytes_t > llc, csr_ms, gbs, gbs / stream["triad_gbs"], scipy_gbs)
        )
        cases.append(
            {
                "case": name,
                "variant": best,
                "tessera_ms": times[best],
                "compile_ms": compile_ms.get(best),
                "peers": peers_ms,
                "note": note,
                "variants": times,
                "extra": {
                    "nnz": a.nnz,
                    "CSR GB/s": f"{gbs:.2f}",
                    "% STREAM": f"{100 * gbs / stream['triad_gbs']:.0f}",
                },
            }
        )
        ctx.log(
            f"  best {best} {times[best]:.4g} ms; "
            + ", ".join(f"{p} {v:.4g}" for p, v in peers_ms.items() if v is not None)
        )
    lines = [
        "### Roofline (row-major SparseList = CSR)",
        "",
        f"STREAM triad on one core, measured in this run by `bench/stream.c`: "
        f"**{stream['triad_gbs']:.2f} GB/s** (copy {stream['copy_gbs']:.2f} GB/s); "
        f"last-level cache {llc / 2**20:.0f} MiB. Bytes per SpMV = nnz·(8 value + 8 index) + "
        "8·(rows+1) row pointers + 8·cols (x, read once) + 8·rows (y); SciPy's indices are "
        "4 bytes, so its count uses 12 bytes per nonzero.",
        "",
        "| matrix | nnz | MB moved | > LLC | Tessera CSR ms | Tessera GB/s | % of STREAM | SciPy GB/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, nnz, b, big, ms, gbs, frac, sg in roof:
        lines.append(
            f"| {name} | {nnz} | {b / 1e6:.1f} | {'yes' if big else 'no'} | {ms:.4g} | {gbs:.2f} | "
            f"{100 * frac:.0f}% | {'n/a' if sg is None else f'{sg:.2f}'} |"
        )
    big = [r for r in roof if r[3]]
    if big:
        lines += [
            "",
            f"Matrices larger than the LLC reach {min(r[6] for r in big) * 100:.0f}–"
            f"{max(r[6] for r in big) * 100:.0f}% of the measured bandwidth (target ≥ 80%).",
        ]
    ctx.note("\n".join(lines))
    (ctx.tmp / "spmv" / "stream.json").write_text(json.dumps(stream))
    return cases
