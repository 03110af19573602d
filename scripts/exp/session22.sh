#!/usr/bin/env bash
# Session 22: where B = 64 lost 5 µs. For each carried variant: `sweep mlp --batches 64,256`
# in interleaved rounds, then a traced B = 64 run per policy (col order) summarized per stage
# (scripts/exp/trace-summary.sh: first and last dispatch, ready, end).
# Usage: bash scripts/exp/session22.sh ROUNDS VARIANT...
source "$(dirname "$0")/variants-lib.sh"
rounds=$1; shift
unpack_variants "$@"
for r in $(seq 1 "$rounds"); do
  for v in "$@"; do
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 120 /tmp/cusync-$v sweep mlp --batches 64,256 --samples 10 2>&1 \
      | grep -E "^ +(64|256) " | awk -v r=$r -v v=$v '{print "  " v " r" r " B=" $1, "SS=" $10, "TS=" $11, "RS=" $12, "cuBLAS=" $14, "vsSS=" $(NF-1), "vsCuBLAS=" $NF}'
  done
done
for v in "$@"; do
  for p in rowsync tilesync; do
    d=$OUT/tr-$v; mkdir -p "$d"
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 60 /tmp/cusync-$v run mlp --batch 64 --policy $p --order col --trace "$d" 2>&1 | tail -3 | sed "s/^/  $v $p: /"
    bash scripts/exp/trace-summary.sh "$d"/mlp-b64-$p-col.csv "$d"/mlp-b64-streamsync.csv | sed "s/^/  $v /"
  done
done
rm -f "$OUT"/tr-*/*.svg "$OUT"/tr-*/*.json
tar czf "$OUT/traces.tgz" -C "$OUT" $(cd "$OUT" && ls -d tr-*) && rm -rf "$OUT"/tr-*
