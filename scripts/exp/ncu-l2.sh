#!/usr/bin/env bash
# Session 20: the plain 128x192 kernel and its stream-mode twin in every tile order, per launch:
# duration, L2 hit rate, DRAM bytes and L2 sectors read, from `run mlp --batch 1024` of a carried
# variant (its GeMM1-alone line launches the plain kernel 11 times, then the stream kernel 11
# times per order: row, col, band2, band4, band8), clocks untouched. CSV, one row per launch.
# Usage: bash scripts/exp/ncu-l2.sh VARIANT
source "$(dirname "$0")/variants-lib.sh"
v=$1
unpack_variants "$v"
CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 400 ncu --clock-control none --csv --print-units base \
  --kernel-name regex:'^gemm_sm90_bf16_128x192(_stream)?$' \
  --metrics gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,lts__t_sectors_op_read.sum,smsp__inst_executed.sum \
  /tmp/cusync-$v run mlp --batch 1024 --policy rowsync --order col > "$OUT/ncu-l2-$v.csv" 2> "$OUT/ncu-l2-$v.err"
echo "ncu rc=$? $(grep -c gpu__time_duration "$OUT/ncu-l2-$v.csv") launches"
grep -A7 "GeMM1 alone" "$OUT/ncu-l2-$v.csv" | head -8
python3 - "$OUT/ncu-l2-$v.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h, rows = rows[0], rows[1:]
c = {n: i for i, n in enumerate(h)}
launch = collections.OrderedDict()
for r in rows:
    key = (int(r[c["ID"]]), r[c["Kernel Name"]])
    launch.setdefault(key, {})[r[c["Metric Name"]]] = float(r[c["Metric Value"]].replace(",", ""))
ks = list(launch.items())
print(len(ks), "launches; last 70:")
for (i, name), m in ks[-70:]:
    print(f"{i:4d} {name[-7:]:>8} {m.get('gpu__time_duration.sum',0)/1e3:8.1f} us  L2 hit {m.get('lts__t_sector_hit_rate.pct',0):5.1f}%  DRAM {m.get('dram__bytes_read.sum',0)/1e6:7.1f} MB  L2 rd sectors {m.get('lts__t_sectors_op_read.sum',0)/1e6:6.2f} M  inst {m.get('smsp__inst_executed.sum',0)/1e6:5.1f} M")
PY
