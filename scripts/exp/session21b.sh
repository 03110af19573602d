#!/usr/bin/env bash
# Session 21: carried variants side by side without the sweep (an experiment that is not safe
# under every schedule, e.g. S2's static lanes): `cusync bench` in interleaved rounds, each
# variant's GeMM1-alone line (`run mlp --batch 1024`), then ncu's L2 / DRAM per launch
# (scripts/exp/ncu-l2.sh) for the ncu variants, summarised per order.
# Usage: bash scripts/exp/session21b.sh ROUNDS VARIANT... -- NCU_VARIANT...
source "$(dirname "$0")/variants-lib.sh"
rounds=$1; shift
bench=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do bench+=("$1"); shift; done; shift
unpack_variants "${bench[@]}"
for r in $(seq 1 "$rounds"); do
  for v in "${bench[@]}"; do
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 120 /tmp/cusync-$v bench --samples 11 > "$OUT/bench-$v-$r.txt" 2>&1 || echo "bench $v round $r rc=$?"
    grep -E "^stream stage B=1024|^MLP B=1024.*paired" "$OUT/bench-$v-$r.txt" | sed "s/^/  $v r$r /"
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 60 /tmp/cusync-$v run mlp --batch 1024 --policy rowsync --order col 2>&1 \
      | grep -A6 "GeMM1 alone" | sed "s/^/  $v r$r: /"
  done
done
for v in "$@"; do
  bash scripts/exp/ncu-l2.sh "$v" > "$OUT/ncu-l2-$v.txt"
  python3 - "$OUT/ncu-l2-$v.csv" "$v" <<'PY'
import csv, sys, collections, statistics
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h, rows = rows[0], rows[1:]
c = {n: i for i, n in enumerate(h)}
launch = collections.OrderedDict()
for r in rows:
    launch.setdefault((int(r[c["ID"]]), r[c["Kernel Name"]]), {})[r[c["Metric Name"]]] = float(r[c["Metric Value"]].replace(",", ""))
ks = list(launch.values())[-66:]
for i, name in enumerate(["plain", "row", "col", "band2", "band4", "band8"]):
    g = ks[11 * i:11 * i + 11]
    med = lambda k, s: statistics.median(m[k] / s for m in g)
    print(f"  ncu {sys.argv[2]} {name:6} {med('gpu__time_duration.sum', 1e3):6.1f} us  L2 read {med('lts__t_sectors_op_read.sum', 1e6):5.1f} M sectors  DRAM {med('dram__bytes_read.sum', 1e6):4.0f} MB")
PY
done
