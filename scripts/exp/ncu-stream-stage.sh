#!/usr/bin/env bash
# Experiment: the plain 128x192 kernel against its stream-mode twin on GeMM1 B = 1024 (the
# protocol table's stream-stage rows: two NoHooks launches, then the hooked one-stage graph),
# one ncu profile each, clocks untouched.
source "$(dirname "$0")/env.sh"
mkdir -p "$OUT"
ncu --clock-control none --kernel-name regex:gemm_sm90_bf16_128x192 --launch-count 4 \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_op_read_hit_rate.pct,smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__cycles_active.avg \
  carry/bin/cusync bench --samples 1 > "$OUT/ncu.txt" 2>&1
grep -E '^  [a-z_]+.*\(|gemm_sm90|gpu__time|dram__bytes|lts__t|smsp__inst|sm__throughput|smsp__cycles' "$OUT/ncu.txt" | head -60
