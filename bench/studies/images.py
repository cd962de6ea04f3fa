"""Image morphology (Finch §6.5 / §7.4): two iterations of binary erosion by the 3 x 3 box on
dense bytes, bit-packed 64-bit words and run-length rows, and a masked 16-bin histogram,
against OpenCV (`cv2.erode` with `iterations=2`, `cv2.calcHist` with a mask), on two sets:

1. The PNG images of ../shared/data/images, plain and magnified 8x by pixel repetition (each
   pixel becomes an 8 x 8 block). Binary images are the grayscale image > 127; the histogram's
   mask is the same threshold (as examples/threshold.tess makes it) over the image itself.
   Tessera runs through the CLI: its two erosions are two `tessera bench` processes (kernel
   time only), the second on the first's output; the times add. OpenCV is timed per call from
   Python. The word image is packed before and unpacked after, outside the timing.

2. The paper's datasets: random images (numpy default_rng(0); 100 per dataset, 20 in --quick,
   the first 20 of the same 100) of MNIST (t10k-images-idx3-ubyte.gz, 28 x 28, binary =
   pixel > 2) and Omniglot (images_background_small1.zip, 105 x 105, binary = pixel == 0,
   the black strokes), "plain" (threshold the image) and "8x" (cv2.resize of the grayscale
   image to 8x its size with INTER_CUBIC, then threshold), as the paper does. The histogram
   counts a random uint8 image of the same shape (default_rng(1), one per image) under the
   thresholded mask. Both sides are timed in-process from Python, per call, so both pay the
   Python call overhead: Tessera through the Python package (`tessera.compile` once per
   variant and backend, then the `Kernel` is called once per image: both erosion iterations
   are one program, examples/erosion_twice.tess or erosion_words_twice.tess, the first
   iteration into the workspace `mid`; dense outputs and workspaces (dense bytes, words, the
   histogram's bins) are written into `out=` NumPy arrays made once per image outside the
   timing, run-length ones are made by each call), OpenCV per `cv2.erode(..., iterations=2)` /
   `cv2.calcHist` call. Building Tessera's input tensors (asarray, format conversion,
   packing words) and OpenCV's uint8 arrays is outside the timing. Per image: the median of
   N calls (5 in --quick, 20 otherwise), Tessera and OpenCV alternating over rounds (2 / 3),
   the median over rounds. The compile ms of these rows is the first `tessera.compile` of the
   variant on that backend (its Kernel then serves every dataset and scale). One row per
   dataset x scale x variant x backend: total ms over the images per side (sum of the
   per-image medians) and the geometric mean over the images of OpenCV time / Tessera time
   (column "per-image geomean"); a summary table per dataset x scale with the best backend
   follows the table.

Pixels outside the image count as set for erosion (OpenCV: BORDER_CONSTANT with borderValue
1). Every result is compared exactly with OpenCV's before timing (on every image of the
datasets).
"""

from __future__ import annotations

import gzip
import io
import time
import zipfile
from pathlib import Path

import numpy as np

import harness

TITLE = "Images: erosion (2 iterations) and masked histogram"
PEERS = ["OpenCV"]

IMAGES_QUICK = ["camera", "text", "page"]
IMAGES_FULL = ["camera", "cell", "coins", "horse", "microaneurysms", "page", "text"]
SCALES = [1, 8]
THRESHOLD = 127

EROSION = "examples/erosion.tess"
EROSION_WORDS = "examples/erosion_words.tess"
# Both iterations in one program (the dataset rows: one Kernel call per image).
EROSION_TWICE = "examples/erosion_twice.tess"
EROSION_WORDS_TWICE = "examples/erosion_words_twice.tess"
HISTOGRAM = "examples/masked_histogram.tess"

# name -> (image format, row workspace format), Finch's run-length configuration last.
EROSION_FORMATS = {
    "dense bytes": ("Dense(Dense(Element(false)))", "Dense(Element(false))"),
    "RunList": ("Dense(RunList(Element(false)))", "RunList(Element(false), merge=false)"),
    "SparseRunList": (
        "Dense(SparseRunList(Pattern()))",
        "SparseRunList(Pattern(), merge=false)",
    ),
}
WORD_FORMAT = "Dense(Dense(Element(0)))"
MASK_FORMATS = {
    "dense mask": "Dense(Dense(Element(false)))",
    "SparseRunList mask": "Dense(SparseRunList(Pattern()))",
}


def _cv2():
    """OpenCV held to one thread, like every peer (Tessera's kernels are single-threaded):
    by default its erode and calcHist split large images over all cores."""
    import cv2

    if cv2.getNumThreads() != 1:
        cv2.setNumThreads(1)
    return cv2


def load_gray(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("L"), dtype=np.uint8)


def magnify(a: np.ndarray, s: int) -> np.ndarray:
    return np.ascontiguousarray(np.repeat(np.repeat(a, s, axis=0), s, axis=1))


def pack_words(img: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of 64-pixel int64 words (pixel x = bit x % 64 of word x // 64) and the padding
    word vector (ones past the width), as examples/erosion_words.tess reads them."""
    h, w = img.shape
    nw = (w + 63) // 64
    padded = np.ones((h, nw * 64), dtype=bool)
    padded[:, :w] = img
    weights = np.uint64(1) << np.arange(64, dtype=np.uint64)
    words = (padded.reshape(h, nw, 64).astype(np.uint64) * weights).sum(axis=2, dtype=np.uint64)
    pad = np.zeros(nw * 64, dtype=bool)
    pad[w:] = True
    pad_words = (pad.reshape(nw, 64).astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
    return words.view(np.int64), pad_words.view(np.int64)


def unpack_words(words: np.ndarray, width: int) -> np.ndarray:
    u = np.asarray(words).astype(np.int64).view(np.uint64)
    bits = (u[:, :, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    return bits.astype(bool).reshape(u.shape[0], -1)[:, :width]


def opencv_erode(b8: np.ndarray) -> np.ndarray:
    cv2 = _cv2()

    return cv2.erode(
        b8,
        np.ones((3, 3), np.uint8),
        iterations=2,
        borderType=cv2.BORDER_CONSTANT,
        borderValue=1,
    )


def opencv_hist(gray: np.ndarray, mask8: np.ndarray) -> np.ndarray:
    cv2 = _cv2()

    return cv2.calcHist([gray], [0], mask8, [16], [0, 256])


def same(who: str, got: np.ndarray, want: np.ndarray):
    if got.shape != want.shape:
        raise harness.Mismatch(f"{who}: shape {got.shape}, OpenCV {want.shape}")
    if not np.array_equal(got, want):
        k = np.argwhere(got != want)[:3].tolist()
        raise harness.Mismatch(f"{who}: differs from OpenCV at {k}")


def run(ctx) -> list[dict]:
    names = IMAGES_QUICK if ctx.quick else IMAGES_FULL
    tmp = Path(ctx.tmp) / "images"
    tmp.mkdir(parents=True, exist_ok=True)
    cv_ok = ctx.peer_available("OpenCV")
    cases = []
    for name in names:
        path = ctx.data / "images" / f"{name}.png"
        if not path.exists():
            ctx.log(f"images: {path} is absent, skipped")
            continue
        gray0 = load_gray(path)
        for s in SCALES:
            gray = magnify(gray0, s)
            label = f"{name} {gray.shape[1]}x{gray.shape[0]}" + (f" ({s}x)" if s > 1 else "")
            ctx.log(f"images: {label}")
            stem = tmp / f"{name}_x{s}"
            for backend in ctx.backends:
                try:
                    cases += erosion_cases(ctx, label, stem, gray, backend, cv_ok)
                    cases += histogram_cases(ctx, label, stem, gray, backend, cv_ok)
                except harness.TesseraError as e:
                    if "unknown backend" not in str(e):
                        raise
                    ctx.log(f"images: backend {backend} is not available: {e}")
    cases += dataset_cases(ctx, cv_ok)
    return cases


def erosion_cases(ctx, label, stem, gray, backend, cv_ok) -> list[dict]:
    binary = gray > THRESHOLD
    b8 = binary.astype(np.uint8)
    want = opencv_erode(b8).astype(bool) if cv_ok else None
    src = Path(f"{stem}_binary.npy")
    np.save(src, binary)
    out = []

    def twice(program, ins: dict, fmt, work: dict, first_in: str, repeat=None) -> tuple[float, float, Path]:
        """Two runs, the second on the first's output: total median ms, compile ms, output."""
        mid, end = Path(f"{stem}_{backend}_e1.npy"), Path(f"{stem}_{backend}_e2.npy")
        r1 = ctx.bench(program, {**ins, "input": (first_in, fmt)}, {"output": (str(mid), fmt), **work},
                       backend=backend, repeat=repeat)
        r2 = ctx.bench(program, {**ins, "input": (str(mid), fmt)}, {"output": (str(end), fmt), **work},
                       backend=backend, repeat=repeat)
        return r1["median_ms"] + r2["median_ms"], r1["compile_ms"], end

    variants = []
    for vname, (fmt, work_fmt) in EROSION_FORMATS.items():
        variants.append((vname, EROSION, {}, fmt, {"tmp": (None, work_fmt)}, str(src), None))
    words, pad = pack_words(binary)
    wpath, ppath = Path(f"{stem}_words.npy"), Path(f"{stem}_pad.npy")
    np.save(wpath, words)
    np.save(ppath, pad)
    variants.append(
        ("bit-packed words", EROSION_WORDS, {"pad": str(ppath)}, WORD_FORMAT,
         {"tmp": (None, "Dense(Element(0))")}, str(wpath), binary.shape[1])
    )
    for vname, prog, ins, fmt, work, first_in, width in variants:
        _, compile_ms, end = twice(prog, ins, fmt, work, first_in, repeat=1)
        got = np.load(end)
        got = unpack_words(got, width) if width is not None else got.astype(bool)
        if want is not None:
            same(f"Tessera erosion ({vname}) on {label}", got, want)
        measure = {"Tessera": lambda: twice(prog, ins, fmt, work, first_in)[0]}
        if cv_ok:
            measure["OpenCV"] = lambda: ctx.time_py(lambda: opencv_erode(b8))
        got_ms = ctx.alternate(measure)
        out.append(
            {
                "case": f"erosion {label}",
                "variant": f"{vname} ({backend})",
                "tessera_ms": got_ms["Tessera"],
                "peers": {"OpenCV": got_ms.get("OpenCV")},
                "compile_ms": compile_ms,
                "note": f"{fmt}, workspace {work['tmp'][1]}",
            }
        )
    return out


def histogram_cases(ctx, label, stem, gray, backend, cv_ok) -> list[dict]:
    mask = gray > THRESHOLD
    mask8 = mask.astype(np.uint8)
    gpath, mpath = Path(f"{stem}_gray.npy"), Path(f"{stem}_mask.npy")
    zeros = Path(f"{stem}_bins0.npy")
    np.save(gpath, gray)
    np.save(mpath, mask)
    # bins's shape comes from this input (the program declares it, so its values are unused).
    np.save(zeros, np.zeros(16, dtype=np.int64))
    want = opencv_hist(gray, mask8).ravel().astype(np.int64) if cv_ok else None
    out = []
    for vname, mfmt in MASK_FORMATS.items():
        bins = Path(f"{stem}_{backend}_bins.npy")
        ins = {
            "img": (str(gpath), "Dense(Dense(Element(0x00)))"),
            "mask": (str(mpath), mfmt),
            "bins": (str(zeros), "Dense(Element(0))"),
        }

        def bench(repeat=None):
            return ctx.bench(HISTOGRAM, ins, {"bins": (str(bins), "Dense(Element(0))")},
                             backend=backend, repeat=repeat)

        first = bench(repeat=1)
        if want is not None:
            same(f"Tessera histogram ({vname}) on {label}", np.load(bins).astype(np.int64), want)
        measure = {"Tessera": lambda: bench()["median_ms"]}
        if cv_ok:
            measure["OpenCV"] = lambda: ctx.time_py(lambda: opencv_hist(gray, mask8))
        got_ms = ctx.alternate(measure)
        out.append(
            {
                "case": f"histogram {label}",
                "variant": f"{vname} ({backend})",
                "tessera_ms": got_ms["Tessera"],
                "peers": {"OpenCV": got_ms.get("OpenCV")},
                "compile_ms": first["compile_ms"],
                "note": f"mask {mfmt}, {int(mask.sum())} of {mask.size} pixels",
            }
        )
    return out


# ---- the paper's datasets (Finch §7.4): MNIST and Omniglot, in-process through Python ----------

DATASET_IMAGES_FULL = 100
DATASET_IMAGES_QUICK = 20
DATASET_SEED = 0  # which images
HIST_SEED = 1  # the random uint8 images counted under the masks
MAGNIFY = 8
# name -> (file in ../shared/data/images, loader, threshold of the grayscale image)
DATASETS = {
    "MNIST": ("t10k-images-idx3-ubyte.gz", "load_mnist", lambda g: g > 2),
    "Omniglot": ("images_background_small1.zip", "load_omniglot", lambda g: g == 0),
}
PAPER_GOALS = (
    "Paper's goals (Finch §7.4): erosion ≥ 20× OpenCV on the magnified MNIST and Omniglot "
    "images and ≥ 1× on the plain ones; masked histogram ≥ 20× on the Omniglot masks."
)


def _pick(n: int, count: int) -> np.ndarray:
    """The first `count` of DATASET_IMAGES_FULL random distinct indices below n (seeded), so
    --quick measures a subset of the full run's images."""
    rng = np.random.default_rng(DATASET_SEED)
    return rng.choice(n, size=min(n, DATASET_IMAGES_FULL), replace=False)[:count]


def load_mnist(path: Path, count: int) -> list[np.ndarray]:
    """Images of an IDX3 file (gzip): magic 2051, count, rows, columns (big-endian int32),
    then the uint8 pixels."""
    raw = gzip.decompress(path.read_bytes())
    magic, n, h, w = (int(v) for v in np.frombuffer(raw[:16], dtype=">i4"))
    if magic != 2051 or len(raw) != 16 + n * h * w:
        raise ValueError(f"{path}: not an IDX3 uint8 image file (magic {magic})")
    images = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, h, w)
    return [np.ascontiguousarray(images[i]) for i in _pick(n, count)]


def load_omniglot(path: Path, count: int) -> list[np.ndarray]:
    """The PNGs of the zip (images_background_small1/<alphabet>/<character>/<id>.png, 1-bit),
    in sorted name order, as uint8 grayscale (0 or 255)."""
    from PIL import Image

    with zipfile.ZipFile(path) as z:
        names = sorted(n for n in z.namelist() if n.lower().endswith(".png"))
        return [
            np.asarray(Image.open(io.BytesIO(z.read(names[i]))).convert("L"), dtype=np.uint8)
            for i in _pick(len(names), count)
        ]


def magnify_cubic(gray: np.ndarray, s: int) -> np.ndarray:
    cv2 = _cv2()

    h, w = gray.shape
    return cv2.resize(gray, (w * s, h * s), interpolation=cv2.INTER_CUBIC)


class _Variant:
    """One Tessera erosion or histogram variant: how to build its tensors from an image, its
    compiled Kernel (per backend), how to read its result back as a NumPy array, and (for
    dense outputs) the `out=` arrays a call writes into (`arrays(binary)`: name -> array,
    made outside the timing and reused by every call on that image; None: outputs made by
    each call)."""

    def __init__(self, kind, name, program, out, build, result, note, arrays=None):
        self.kind, self.name, self.program, self.out = kind, name, program, out
        self.build, self.result, self.note = build, result, note
        self.arrays = arrays


def _values(t) -> np.ndarray:
    """A result as a NumPy array: an `out=` array as it is, a Tensor converted."""
    return t if isinstance(t, np.ndarray) else np.asarray(t.to_numpy())


def _variants(ts, root: Path) -> list[_Variant]:
    """The dataset rows' variants: both erosion iterations in one program (one call per
    image, the first iteration into the workspace `mid`), dense outputs written into `out=`
    arrays; run-length outputs are made by each call."""
    erosion = (root / EROSION_TWICE).read_text()
    words = (root / EROSION_WORDS_TWICE).read_text()
    hist = (root / HISTOGRAM).read_text()
    out = []
    for vname, (fmt, work_fmt) in EROSION_FORMATS.items():
        dense = fmt == "Dense(Dense(Element(false)))"
        out.append(_Variant(
            "erosion", vname, erosion, {"output": fmt, "mid": fmt, "tmp": work_fmt},
            lambda b, _g, fmt=fmt: {"input": ts.asarray(b, format=fmt)},
            lambda t, b: _values(t).astype(bool),
            f"{fmt}, workspaces {fmt} and {work_fmt}" + (" (out= arrays)" if dense else ""),
            (lambda b: {"output": np.empty(b.shape, bool), "mid": np.empty(b.shape, bool),
                        "tmp": np.empty(b.shape[1], bool)}) if dense else None,
        ))

    def build_words(b, _g):
        w, pad = pack_words(b)
        return {"input": ts.asarray(w, format=WORD_FORMAT), "pad": ts.asarray(pad)}

    def word_arrays(b):
        h, nw = b.shape[0], (b.shape[1] + 63) // 64
        return {"output": np.empty((h, nw), np.int64), "mid": np.empty((h, nw), np.int64),
                "tmp": np.empty(nw, np.int64)}

    out.append(_Variant(
        "erosion", "bit-packed words", words,
        {"output": WORD_FORMAT, "mid": WORD_FORMAT, "tmp": "Dense(Element(0))"},
        build_words,
        lambda t, b: unpack_words(_values(t), b.shape[1]),
        f"{WORD_FORMAT}, workspaces {WORD_FORMAT} and Dense(Element(0)) (out= arrays)",
        word_arrays,
    ))
    for vname, mfmt in MASK_FORMATS.items():
        out.append(_Variant(
            "histogram", vname, hist, {"bins": "Dense(Element(0))"},
            lambda b, g, mfmt=mfmt: {
                "img": ts.asarray(g, format="Dense(Dense(Element(0x00)))"),
                "mask": ts.asarray(b, format=mfmt),
            },
            lambda t, b: _values(t).astype(np.int64),
            f"mask {mfmt} (out= array)",
            lambda b: {"bins": np.empty(16, np.int64)},
        ))
    return out


def dataset_cases(ctx, cv_ok: bool) -> list[dict]:
    count = DATASET_IMAGES_QUICK if ctx.quick else DATASET_IMAGES_FULL
    if not cv_ok:
        msg = "images: the MNIST/Omniglot cases need OpenCV (cubic magnification and the peer): skipped"
        ctx.log(msg)
        ctx.note(msg)
        return []
    try:
        import tessera as ts
    except ImportError as e:
        msg = (f"images: the MNIST/Omniglot cases need the Python package in this venv "
               f"(`pip install ./python`): skipped ({e})")
        ctx.log(msg)
        ctx.note(msg)
        return []
    variants = _variants(ts, ctx.root)
    kernels: dict[tuple[str, str], tuple[object, float]] = {}
    cases: list[dict] = []
    summary: dict[tuple[str, str], dict[str, tuple[float, str]]] = {}
    for dname, (fname, loader, threshold) in DATASETS.items():
        path = ctx.data / "images" / fname
        if not path.exists():
            msg = f"images: dataset {dname} skipped: {path} is absent"
            ctx.log(msg)
            ctx.note(msg)
            continue
        grays = globals()[loader](path, count)
        for scale in (1, MAGNIFY):
            sname = "plain" if scale == 1 else f"{scale}x"
            scaled = [g if scale == 1 else magnify_cubic(g, scale) for g in grays]
            binaries = [threshold(g) for g in scaled]
            rng = np.random.default_rng(HIST_SEED)
            randoms = [rng.integers(0, 256, size=b.shape, dtype=np.uint8) for b in binaries]
            h, w = binaries[0].shape
            label = f"{dname} {sname} ({w}x{h}, {len(binaries)} images)"
            fill = float(np.mean([b.mean() for b in binaries]))
            ctx.log(f"images: {label}, {100 * fill:.1f}% of the pixels set")
            for backend in ctx.backends:
                for v in variants:
                    key = (v.name, backend)
                    if key not in kernels:
                        t0 = time.perf_counter()
                        kern = ts.compile(v.program, out=v.out, backend=backend,
                                          shapes={"bins": [16]} if v.kind == "histogram" else None,
                                          **v.build(binaries[0], randoms[0]))
                        kernels[key] = (kern, (time.perf_counter() - t0) * 1e3)
                    kern, compile_ms = kernels[key]
                    row = _measure(ctx, v, kern, binaries, randoms, label, backend)
                    row["compile_ms"] = compile_ms
                    cases.append(row)
                    ratio = row["extra"]["per-image geomean"]
                    best = summary.setdefault((dname, sname), {}).get(v.name)
                    if best is None or float(ratio) > best[0]:
                        summary[(dname, sname)][v.name] = (float(ratio), backend)
    if summary:
        ctx.note(_summary_table(summary, variants, count))
    return cases


def _measure(ctx, v: _Variant, kern, binaries, randoms, label, backend) -> dict:
    """Check every image exactly against OpenCV, then time both sides per image."""
    cv2 = _cv2()

    kernel = np.ones((3, 3), np.uint8)
    tess_ms, cv_ms, ratios = [], [], []
    for k, (b, g) in enumerate(zip(binaries, randoms)):
        ins = v.build(b, g)
        arrays = v.arrays(b) if v.arrays else None
        b8 = b.astype(np.uint8)
        if v.kind == "erosion":
            if arrays is None:

                def tessera():
                    return kern(**ins)["output"]
            else:

                def tessera():
                    kern(**ins, out=arrays)
                    return arrays["output"]

            def opencv():
                return cv2.erode(b8, kernel, iterations=2,
                                 borderType=cv2.BORDER_CONSTANT, borderValue=1)

            want = opencv().astype(bool)
        elif arrays is None:

            def tessera():
                return kern(**ins)["bins"]
        else:

            def tessera():
                kern(**ins, out=arrays)
                return arrays["bins"]

            def opencv():
                return cv2.calcHist([g], [0], b8, [16], [0, 256])

            want = opencv().ravel().astype(np.int64)
        same(f"Tessera {v.kind} ({v.name}, {backend}) on {label}, image {k}",
             v.result(tessera(), b), want)
        got = ctx.alternate({
            "Tessera": lambda: ctx.time_py(tessera),
            "OpenCV": lambda: ctx.time_py(opencv),
        })
        if got["Tessera"] is None or got["OpenCV"] is None:
            raise RuntimeError(f"{v.kind} ({v.name}, {backend}) on {label}, image {k}: no time")
        tess_ms.append(got["Tessera"])
        cv_ms.append(got["OpenCV"])
        ratios.append(got["OpenCV"] / got["Tessera"])
    gm = harness.geomean(ratios)
    n = len(binaries)
    timed = ("1 Kernel call (both iterations)" if v.kind == "erosion" else "1 Kernel call")
    return {
        "case": f"{v.kind} {label}",
        "variant": f"{v.name} ({backend})",
        "tessera_ms": sum(tess_ms),
        "peers": {"OpenCV": sum(cv_ms)},
        "extra": {"per-image geomean": f"{gm:.2f}"},
        "note": (f"{v.note}; in-process Python, totals over {n} images; per image {timed} vs 1 "
                 f"OpenCV call; per-image Tessera median {1e3 * float(np.median(tess_ms)):.1f} µs, "
                 f"OpenCV {1e3 * float(np.median(cv_ms)):.1f} µs; per-image ratio "
                 f"min {min(ratios):.2f} max {max(ratios):.2f}"),
    }


def _summary_table(summary, variants, count) -> str:
    names = list(dict.fromkeys(v.name for v in variants))
    lines = [
        f"**Paper datasets** ({count} random images per dataset): geometric mean over the images "
        "of OpenCV time / Tessera time, best backend per variant (in parentheses). " + PAPER_GOALS,
        "",
        "| dataset | " + " | ".join(f"erosion {n}" if n in EROSION_FORMATS or n == "bit-packed words"
                                       else f"histogram {n}" for n in names) + " |",
        "|" + "---|" * (len(names) + 1),
    ]
    for (dname, sname), per in summary.items():
        cells = [f"{per[n][0]:.2f} ({per[n][1]})" if n in per else "n/a" for n in names]
        lines.append(f"| {dname} {sname} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
