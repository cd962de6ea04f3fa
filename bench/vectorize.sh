#!/bin/sh
# Vectorised loops (issues 17, 18): y[i] = a[i]*b[i] + c[i] and s[] += a[i]*b[i] over 10^6
# f64, on the JIT scalar and with `vectorize(i)` (F64X2 lanes), and on C with and without the
# mark (`#pragma GCC ivdep`). One process at a time; 50 runs each, median and minimum.
# Usage: bench/vectorize.sh [path/to/tessera]   (the inputs go to $TMPDIR/tessera-vectorize)
set -e
T=${1:-target/release/tessera}
D=${TMPDIR:-/tmp}/tessera-vectorize
mkdir -p "$D"
python3 - "$D" <<'PY'
import random, struct, sys, os
n = 10**6
random.seed(1)
for name in "abc":
    path = os.path.join(sys.argv[1], "big_%s.npy" % name)
    if os.path.exists(path):
        continue
    hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d,), }" % n
    hdr += " " * (64 - (10 + len(hdr) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%dd" % n, *[random.random() for _ in range(n)]))
PY
EW='for i = _
  y[i] = a[i] * b[i] + c[i]
end'
DOT='for i = _
  s[] += a[i] * b[i]
end'
uptime
for prog in EW DOT; do
  for be in jit c; do
    for s in "" "vectorize(i)"; do
      if [ $prog = EW ]; then P=$EW; extra="--in c=$D/big_c.npy --out y"; else P=$DOT; extra="--out s"; fi
      out=$("$T" run "$P" --in a=$D/big_a.npy --in b=$D/big_b.npy $extra --backend $be \
        ${s:+--schedule "$s"} --repeat 50 --time 2>&1 | grep "time:")
      echo "$prog $be ${s:-scalar}: $out"
    done
  done
done
uptime
