#!/usr/bin/env bash
# Session 27: the B = 64 GeMM2 (64x12288x6144, swapped onto 128x64) traced with split-K 1 to 4
# forced, to see where a split costs (per-unit times and ends by SM); CSVs to $OUT/split-traces.tgz.
# Usage: bash scripts/exp/session27-split-traces.sh VARIANT
source "$(dirname "$0")/variants-lib.sh"
v=$1
unpack_variants "$v"
for s in 1 2 3 4; do
  echo "== split-K $s"
  CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 60 /tmp/cusync-$v run gemm --m 64 --n 12288 --k 6144 --split-k $s \
    --iters 20 --trace "$OUT/st/$s" 2>&1 | grep -v '^  wrote'
done
rm -f "$OUT"/st/*/*.svg "$OUT"/st/*/*.json
tar czf "$OUT/split-traces.tgz" -C "$OUT" st && rm -rf "$OUT/st"
