#!/usr/bin/env bash
# Session 15, run 4: where the landed skinny kernel's time goes beyond the probe's (issue 3).
# ncu's source counters (warp-stall samples per SASS instruction) for the ring kernel and the
# probe's cp.async pattern at B = 1, GeMM1; then the skinny stream stages' trace at B = 1 (per
# column block: dispatch, start after the wait, post).
source "$(dirname "$0")/env.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
GEMM1="run gemm --m 1 --n 6144 --k 12288 --skinny on --iters 3"
for p in "skinny gemm_skinny 2" "probe bench_read_async_g4 2"; do
  set -- $p
  extra=""; [ $1 = probe ] && extra="--read-probe"
  timeout 150 $NCU --clock-control none --set full --import-source no -k regex:$2 --launch-skip $3 --launch-count 1 \
    -o /tmp/$1 carry/bin/cusync $GEMM1 $extra > /tmp/$1.log 2>&1
  $NCU -i /tmp/$1.ncu-rep --page source --csv --print-source sass > "$OUT/$1.sass.csv" 2>&1
  $NCU -i /tmp/$1.ncu-rep --page details > "$OUT/$1.details.txt" 2>&1
  echo "=== $1: $(grep -c . "$OUT/$1.sass.csv") sass lines"
  grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Dynamic Shared" "$OUT/$1.details.txt" | head -8
done
echo "=== skinny stream stages, B = 1, traced"
timeout 120 carry/bin/cusync run mlp --batch 1 --trace /tmp/tr 2>&1 | grep -vE "^wrote" | head -80
