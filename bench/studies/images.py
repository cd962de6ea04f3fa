"""Image morphology (Finch §6.5 / §7): two iterations of binary erosion by the 3 x 3 box on
dense bytes, bit-packed 64-bit words and run-length rows, and a masked 16-bin histogram, on the
images of ../shared/data/images, plain and magnified 8x (each pixel becomes an 8 x 8 block),
against OpenCV (`cv2.erode` with `iterations=2`, `cv2.calcHist` with a mask).

Binary images are the grayscale image > 127; the histogram's mask is the same threshold (as
examples/threshold.tess makes it). Pixels outside the image count as set for erosion (OpenCV:
BORDER_CONSTANT with borderValue 1). Tessera's two erosions are two timed kernel runs, the
second on the first's output; the times add. Every result is compared exactly with OpenCV's
before timing; the word image is packed before and unpacked after, outside the timing.
"""

from __future__ import annotations

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
    import cv2

    return cv2.erode(
        b8,
        np.ones((3, 3), np.uint8),
        iterations=2,
        borderType=cv2.BORDER_CONSTANT,
        borderValue=1,
    )


def opencv_hist(gray: np.ndarray, mask8: np.ndarray) -> np.ndarray:
    import cv2

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
