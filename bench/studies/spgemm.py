"""SpGEMM C = A A: Tessera's inner-product, Gustavson (SparseByteMap workspace) and outer-product
(hash and dense workspace) programs and `tessera einsum`, against SciPy, MKL, GraphBLAS and Eigen;
then the Erdős–Rényi scaling study (N = 2^7 ... 2^14, 4 nonzeros per row) showing the asymptotic
ordering of the three algorithms (Finch §7.2, Fig. 23)."""

from __future__ import annotations

import math

import numpy as np
import scipy.io
import scipy.sparse as sp

import data
import harness
import peers as P

TITLE = "SpGEMM: C = A A"
# "sorted": the same library's product with each row's columns in order, as Tessera's output
# (`peers.spgemm_peer`); the unsorted figures stay the ones the goals are measured against.
PEERS = ["SciPy", "MKL", "GraphBLAS", "Eigen", "SciPy sorted", "MKL sorted"]

CSR = "Dense(SparseList(Element(0.0)))"
# 4-byte coordinates and row pointers, as SciPy's int32 `indices`/`indptr` (the default of a
# `.mtx` input given without a format): 12 bytes a stored entry of B read per multiply-add
# instead of 16, and the same for each entry of C written.
CSR32 = "Dense(SparseList(Element(0.0), coord=i32))"
GUSTAVSON = "examples/spgemm_gustavson.tess"
INNER = "examples/spgemm_inner.tess"
OUTER = "examples/spgemm_outer.tess"
HASH_WS = "SparseDict(SparseDict(Element(0.0)))"
DENSE_WS = "Dense(Dense(Element(0.0)))"
# Inner products visit all N² pairs and the dense workspace holds N² values: only below these.
INNER_MAX_N = 2500
DENSE_MAX_N = 4096


def matrices(ctx):
    names = ["bcsstk13", "bcsstk16", "delaunay_n14", "ca-HepPh"]
    if not ctx.quick:
        names += ["Fashion_MNIST_norm_10NN", "cryg10000", "bayer10", "dw4096", "usroads"]
    return [(n, (lambda n=n: data.load_mtx(n, ctx.data))) for n in names]


def canonical(c: sp.spmatrix) -> sp.csr_matrix:
    c = sp.csr_matrix(c, dtype=np.float64)
    c.sum_duplicates()
    c.eliminate_zeros()
    c.sort_indices()
    return c


def check(name: str, what: str, c: sp.spmatrix, ref: sp.csr_matrix, bound: sp.csr_matrix) -> None:
    """Same stored pattern (after dropping zeros) and |C - ref| <= 1e-9 (|A| |B|) entrywise."""
    c = canonical(c)
    if c.shape != ref.shape:
        raise harness.Mismatch(f"{name} {what}: shape {c.shape}, SciPy {ref.shape}")
    if c.nnz != ref.nnz or not (
        np.array_equal(c.indptr, ref.indptr) and np.array_equal(c.indices, ref.indices)
    ):
        diff = (abs(c) > 0).astype(np.int8) - (abs(ref) > 0).astype(np.int8)
        diff.eliminate_zeros()
        i, j = diff.nonzero()
        raise harness.Mismatch(
            f"{name} {what}: {c.nnz} stored entries, SciPy {ref.nnz}; first difference at "
            f"({i[0]}, {j[0]})"
        )
    b = bound[ref.nonzero()].A1 if ref.nnz else np.zeros(0)
    err = np.abs(c.data - ref.data)
    bad = np.nonzero(err > 1e-9 * b + 1e-300)[0]
    if len(bad):
        raise harness.Mismatch(f"{name} {what}: {len(bad)} values differ (first {c.data[bad[0]]} vs {ref.data[bad[0]]})")


def tessera_variants(n: int, d, a_path, at_path):
    """label -> how to run it: ("bench", program, ins, outs) or ("einsum", ins)."""
    v = {
        "Gustavson (SparseByteMap)": (
            "bench",
            GUSTAVSON,
            {"A": (a_path, CSR), "B": (a_path, CSR)},
            {"w": (None, "SparseByteMap(Element(0.0))")},
        ),
        "Gustavson i32 (SparseByteMap)": (
            "bench",
            GUSTAVSON,
            {"A": (a_path, CSR32), "B": (a_path, CSR32)},
            {"C": (None, CSR32), "w": (None, "SparseByteMap(Element(0.0))")},
        ),
        "einsum": ("einsum", {"A": a_path, "B": a_path}),
        "outer (SparseDict hash)": (
            "bench",
            OUTER,
            {"AT": (at_path, CSR), "B": (a_path, CSR)},
            {"w": (None, HASH_WS)},
        ),
    }
    if n <= INNER_MAX_N:
        v["inner"] = (
            "bench",
            INNER,
            {"A": (a_path, CSR), "BT": (at_path, CSR)},
            {"c": (None, "Scalar(0.0)")},
        )
    if n <= DENSE_MAX_N:
        v["outer (dense)"] = (
            "bench",
            OUTER,
            {"AT": (at_path, CSR), "B": (a_path, CSR)},
            {"w": (None, DENSE_WS)},
        )
    return v


def run_variant(ctx, spec, c_path, repeat=None, warmup=None, backend="jit") -> dict:
    if spec[0] == "einsum":
        ins = spec[1]
        args = ["einsum", "C[i, j] += A[i, k] * B[k, j]"]
        for k, p in ins.items():
            args += ["--in", f"{k}={p}"]
        args += [
            "--out", f"C={c_path}",
            "--repeat", str(repeat or ctx.default_repeat),
            "--warmup", str(ctx.default_warmup if warmup is None else warmup),
        ]
        return ctx.tessera(args)
    _, prog, ins, outs = spec
    if prog == INNER and repeat is None:
        # Θ(N²) dot products: seconds per run on the real matrices, so fewer runs.
        repeat, warmup = 3, 1
    # The output's format is the variant's if it names one (its path is this run's).
    c_format = outs.get("C", (None, CSR))[1]
    return ctx.bench(prog, ins, {**outs, "C": (c_path, c_format)}, repeat=repeat, warmup=warmup,
                     backend=backend)


def run(ctx) -> list[dict]:
    eigen = P.eigen_binary(ctx, "eigen_spgemm")
    cases = []
    for name, make in matrices(ctx):
        a = make()
        n = a.shape[0]
        d = ctx.tmp / "spgemm" / name
        d.mkdir(parents=True, exist_ok=True)
        a_path = data.write_mtx(a, d / "A.mtx")
        data.write_mtx(a, d / "B.mtx")
        at_path = data.write_mtx(a.T.tocsr(), d / "AT.mtx")
        ref = canonical(a @ a)
        bound = canonical(abs(a) @ abs(a))
        ctx.log(f"{name}: {n}x{n}, nnz {a.nnz}, nnz(A²) {ref.nnz}")
        backends = ctx.usable_backends()
        variants = {
            (v if b == "jit" else f"{v} [{b}]"): (spec, b)
            for v, spec in tessera_variants(n, d, a_path, at_path).items()
            for b in backends
            if spec[0] == "bench" or b == "jit"  # einsum runs on the JIT only
        }
        compile_ms = {}
        # Variants that take seconds per run get fewer runs in --quick.
        slow = ctx.quick and ref.nnz > 1_000_000

        def tessera(label):
            spec, backend = variants[label]
            c_path = d / f"C_{sorted(variants).index(label)}.mtx"
            few = slow and label.startswith("outer (SparseDict")
            r = run_variant(ctx, spec, c_path, repeat=2 if few else None, warmup=0 if few else None,
                            backend=backend)
            check(name, f"Tessera {label}", scipy.io.mmread(str(c_path)), ref, bound)
            compile_ms[label] = r["compile_ms"]
            return r["median_ms"]

        measure = {f"tessera:{v}": (lambda v=v: tessera(v)) for v in variants}
        for peer in PEERS:
            fn = P.spgemm_peer(ctx, peer, a, a, d, eigen)
            if fn is None:
                continue
            check(name, peer, fn(check_only=True), ref, bound)
            measure[peer] = (lambda fn=fn: fn())
        got = ctx.alternate(measure)
        times = {v: got[f"tessera:{v}"] for v in variants if got[f"tessera:{v}"] is not None}
        best = min(times, key=times.get)
        skipped = []
        if n > INNER_MAX_N:
            skipped.append(f"inner (N > {INNER_MAX_N}: Θ(N²) pairs)")
        if n > DENSE_MAX_N:
            skipped.append(f"outer dense (N > {DENSE_MAX_N}: N² workspace)")
        note = ", ".join(f"{v} {t:.4g}" for v, t in sorted(times.items(), key=lambda kv: kv[1]))
        if skipped:
            note += "; not run: " + ", ".join(skipped)
        peers_ms = {p: got.get(p) for p in PEERS}
        cases.append(
            {
                "case": name,
                "variant": best,
                "tessera_ms": times[best],
                "compile_ms": compile_ms.get(best),
                "peers": peers_ms,
                "note": note,
                "variants": times,
                "extra": {"nnz(A)": a.nnz, "nnz(C)": ref.nnz, "einsum ms": (
                    f"{times['einsum']:.4g}" if "einsum" in times else "not run (JIT only)"
                )},
            }
        )
        ctx.log(
            f"  best {best} {times[best]:.4g} ms; "
            + ", ".join(f"{p} {v:.4g}" for p, v in peers_ms.items() if v is not None)
        )
    scaling(ctx)
    return cases


def scaling(ctx) -> None:
    """Erdős–Rényi N x N, 4 nonzeros per row: time of each algorithm against N."""
    top = 11 if ctx.quick else 14
    algos = ["inner", "Gustavson (SparseByteMap)", "outer (SparseDict hash)", "outer (dense)"]
    rows = []
    series = {a: [] for a in algos + ["SciPy"]}
    for k in range(7, top + 1):
        n = 1 << k
        a = data.erdos_renyi(n, 4, seed=k)
        d = ctx.tmp / "spgemm" / f"er_{k}"
        d.mkdir(parents=True, exist_ok=True)
        a_path = data.write_mtx(a, d / "A.mtx")
        at_path = data.write_mtx(a.T.tocsr(), d / "AT.mtx")
        ref = canonical(a @ a)
        bound = canonical(abs(a) @ abs(a))
        v = tessera_variants(n, d, a_path, at_path)
        # The scaling study runs every algorithm at every size, within memory.
        if "inner" not in v:
            v["inner"] = ("bench", INNER, {"A": (a_path, CSR), "BT": (at_path, CSR)}, {"c": (None, "Scalar(0.0)")})
        if "outer (dense)" not in v and n <= 8192:
            v["outer (dense)"] = ("bench", OUTER, {"AT": (at_path, CSR), "B": (a_path, CSR)}, {"w": (None, DENSE_WS)})
        row = {"N": n, "nnz(C)": ref.nnz}
        for alg in algos:
            if alg not in v:
                row[alg] = None
                continue
            c_path = d / f"C_{algos.index(alg)}.mtx"
            reps = 3 if n >= 4096 else 5
            r = run_variant(ctx, v[alg], c_path, repeat=reps, warmup=1)
            check(f"ER 2^{k}", f"Tessera {alg}", scipy.io.mmread(str(c_path)), ref, bound)
            row[alg] = r["median_ms"]
        row["SciPy"] = ctx.time_py(lambda: a @ a)
        for s in series:
            series[s].append((n, row[s]))
        rows.append(row)
        ctx.log(f"  ER N=2^{k}: " + ", ".join(f"{alg} {row[alg]:.4g}" for alg in algos + ["SciPy"] if row[alg] is not None))
    cols = algos + ["SciPy"]
    lines = [
        "### Erdős–Rényi scaling (4 nonzeros per row, C = A A), median ms",
        "",
        "| N | nnz(C) | " + " | ".join(cols) + " |",
        "|---|---|" + "---|" * len(cols),
    ]
    for r in rows:
        lines.append(
            f"| 2^{int(math.log2(r['N']))} | {r['nnz(C)']} | "
            + " | ".join("n/a" if r[c] is None else f"{r[c]:.4g}" for c in cols)
            + " |"
        )
    lines += ["", "Growth exponent (slope of log time against log N over the largest four sizes; "
              "the paper's model: inner 2, dense-workspace outer 2, hash outer and Gustavson 1):", ""]
    for c in cols:
        pts = [(n, t) for n, t in series[c] if t is not None][-4:]
        if len(pts) >= 2:
            x = np.log([p[0] for p in pts])
            y = np.log([p[1] for p in pts])
            slope = float(np.polyfit(x, y, 1)[0])
            lines.append(f"- {c}: {slope:.2f}")
    last = rows[-1]
    order = sorted((c for c in algos if last[c] is not None), key=lambda c: last[c])
    lines += ["", f"Ordering at N = {last['N']} (fastest first): " + " < ".join(order) + "."]
    ctx.note("\n".join(lines))
    try:
        _plot_scaling(ctx, series)
    except Exception as e:  # the table above already holds the numbers
        ctx.log(f"scaling plot failed: {e}")


def _plot_scaling(ctx, series) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    for name, pts in series.items():
        pts = [(n, t) for n, t in pts if t is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N (Erdős–Rényi, 4 nonzeros per row)")
    ax.set_ylabel("median ms")
    ax.set_title("SpGEMM scaling")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = ctx.root / "bench" / "results" / "spgemm_scaling.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    ctx.note("![SpGEMM scaling](bench/results/spgemm_scaling.png)")
