"""Genomic interval overlap and count: Tessera (examples/interval_overlap.rs) against
polars-bio and bioframe on the same synthetic BED data.

    python3 bench/interval_overlap.py [N] [M] [MEAN_LEN] [REPEATS]   # defaults 100000 100000 1000 5

Both BED files are half-open and 0-based; polars-bio runs with its zero-based coordinate
system (`POLARS_BIO_COORDINATE_SYSTEM_ZERO_BASED`), so touching intervals do not overlap, as in
bedtools. Operations: `overlap` = the number of query (A) intervals meeting any data (B)
interval (`bedtools intersect -u`); `count` = the number of overlapping (A, B) pairs (the sum of
`bedtools intersect -c`). Results must agree. Tessera's time is its kernel's (the index tensor
over B is built once and timed separately, as the paper does); the peers' times are one call
each, which builds their own index (polars-bio: COITrees; bioframe: pandas) inside the call.
polars-bio is limited to one thread (`datafusion.execution.target_partitions = 1`).

Needs `polars-bio`, `bioframe`, `numpy` (a venv).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import bioframe
import pandas as pd
import polars as pl
import polars_bio as pb

from harness import median_ms


def main():
    args = [int(float(a)) for a in sys.argv[1:4]] + [None] * 3
    n, m, mean = args[0] or 100_000, args[1] or 100_000, args[2] or 1000
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(
        ["cargo", "build", "--release", "--example", "interval_overlap"], cwd=root, check=True
    )
    exe = os.path.join(root, "target", "release", "examples", "interval_overlap")
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(
            [exe, str(n), str(m), str(mean), str(repeats), "--dump", d],
            check=True, capture_output=True, text=True,
        )
        ours = {r["op"]: r for r in map(json.loads, out.stdout.splitlines())}
        names = ["chrom", "start", "end"]
        a = pd.read_csv(os.path.join(d, "a.bed"), sep="\t", names=names)
        b = pd.read_csv(os.path.join(d, "b.bed"), sep="\t", names=names)
    pb.set_option(pb.POLARS_BIO_COORDINATE_SYSTEM_ZERO_BASED, True)
    pb.set_option("datafusion.execution.target_partitions", "1")
    pa, pbb = pl.from_pandas(a), pl.from_pandas(b)

    def pb_pairs():
        return pb.overlap(pa, pbb, output_type="polars.DataFrame")

    def pb_count():
        return pb.count_overlaps(pa, pbb, output_type="polars.DataFrame", naive_query=False)

    def bf_pairs():
        return bioframe.overlap(a, b, how="inner", return_index=True)

    def bf_count():
        return bioframe.count_overlaps(a, b)

    rows = []
    t_pb, pairs = median_ms(pb_pairs, repeats)
    t_bf, bf = median_ms(bf_pairs, repeats)
    want_overlap = bf["index"].nunique()
    want_pairs = len(bf)
    if len(pairs) != want_pairs:
        sys.exit(f"polars-bio {len(pairs)} pairs, bioframe {want_pairs}")
    if ours["overlap"]["result"] != want_overlap:
        sys.exit(f"overlap: Tessera {ours['overlap']['result']}, bioframe {want_overlap}")
    rows.append(("overlap", want_overlap, ours["overlap"]["median_ms"], t_pb, t_bf))
    t_pbc, counts = median_ms(pb_count, repeats)
    t_bfc, bfc = median_ms(bf_count, repeats)
    total = int(bfc["count"].sum())
    if int(counts["count"].sum()) != total:
        sys.exit(f"count: polars-bio {int(counts['count'].sum())}, bioframe {total}")
    if ours["count"]["result"] != total:
        sys.exit(f"count: Tessera {ours['count']['result']}, bioframe {total}")
    rows.append(("count", total, ours["count"]["median_ms"], t_pbc, t_bfc))
    print(f"N = {n} queries, M = {m} data intervals, mean length {mean}, 4 chromosomes; "
          f"Tessera index build {ours['overlap']['index_build_ms']:.0f} ms (excluded); "
          f"polars-bio {pb.__version__}, bioframe {bioframe.__version__}\n")
    print("| op | result | Tessera ms | polars-bio ms | bioframe ms | polars-bio / Tessera | bioframe / Tessera |")
    print("|---|---|---|---|---|---|---|")
    for op, res, t, tp, tb in rows:
        print(f"| {op} | {res} | {t:.2f} | {tp:.2f} | {tb:.2f} | {tp / t:.2f}x | {tb / t:.2f}x |")


if __name__ == "__main__":
    main()
