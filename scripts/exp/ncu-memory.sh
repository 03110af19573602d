#!/usr/bin/env bash
# Session 20: where the stream stage's extra L2 reads come from. ncu's memory workload tables
# (L1/TEX, L2 and their sources) for one plain 128x192 launch and one stream-mode launch in the
# plain kernel's own walk (band8), both from `run mlp --batch 1024`'s GeMM1-alone line of a
# carried variant, clocks untouched.
# Usage: bash scripts/exp/ncu-memory.sh VARIANT
source "$(dirname "$0")/variants-lib.sh"
v=$1
unpack_variants "$v"
# The last 11 plain launches and the last 11 stream launches are that line's (plain; band8).
for spec in "gemm_sm90_bf16_128x192 11" "gemm_sm90_bf16_128x192_stream 77"; do
  set -- $spec
  CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 200 ncu --clock-control none --kernel-name "regex:^$1\$" \
    --launch-skip "$2" --launch-count 1 --section MemoryWorkloadAnalysis_Tables --section MemoryWorkloadAnalysis \
    --print-details all /tmp/cusync-$v run mlp --batch 1024 --policy rowsync --order col > "$OUT/mem-$1.txt" 2>&1
  echo "== $1 rc=$?"
  sed -n '/MemoryWorkloadAnalysis\|Memory Workload/,$p' "$OUT/mem-$1.txt" | grep -vE "^==PROF==|^ *-+ *$" | head -120
done
