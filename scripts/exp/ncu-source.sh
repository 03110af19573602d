#!/usr/bin/env bash
# Session 20: where the path-2 stream stage spends its warps' cycles against the plain kernel,
# instruction by instruction: one ncu profile (source counters and warp states, clocks
# untouched) of each kernel from `run mlp --batch 1024` of a carried variant, exported as the
# per-SASS-instruction source page (CSV, gzipped) for offline comparison.
# Usage: bash scripts/exp/ncu-source.sh VARIANT
source "$(dirname "$0")/variants-lib.sh"
v=$1
unpack_variants "$v"
for k in gemm_sm90_bf16_128x192_stream gemm_sm90_bf16_128x192; do
  CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 150 ncu --clock-control none --kernel-name "regex:^$k\$" \
    --launch-skip 2 --launch-count 1 --section SourceCounters --section WarpStateStats --import-source no \
    -o "/tmp/src-$k" /tmp/cusync-$v run mlp --batch 1024 --policy rowsync --order col > "$OUT/ncu-src-$k.log" 2>&1
  echo "profile $k rc=$?"
  ncu -i "/tmp/src-$k.ncu-rep" --page source --csv --print-source sass > "/tmp/src-$k.csv" 2> "$OUT/ncu-src-$k.err"
  echo "export $k rc=$? $(wc -l < /tmp/src-$k.csv) lines"
  head -2 "/tmp/src-$k.csv" | cut -c1-600
  gzip -c "/tmp/src-$k.csv" > "$OUT/src-$k.csv.gz"
  ncu -i "/tmp/src-$k.ncu-rep" --page details > "$OUT/details-$k.txt" 2>&1
  grep -E "Duration|Warp Cycles Per Issued|Issued Warp" "$OUT/details-$k.txt" | head -5
done
