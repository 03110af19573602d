#!/usr/bin/env bash
# Session 19: traced GPT-3 MLP runs of one carried variant (its binary and cubin), each with the
# traced StreamSync run `run mlp --trace` writes beside it, for the per-tile cost of the
# protocol (tile durations and gaps, stream mode against StreamSync). Each batch keeps one
# StreamSync trace (every run rewrites mlp-b<B>-streamsync.*).
# Usage: bash scripts/exp/session19-traces.sh VARIANT
source "$(dirname "$0")/variants-lib.sh"
v=$1
unpack_variants "$v"
mkdir -p "$OUT/traces"
for b in 1024 256; do
  for policy in rowsync tilesync; do
    for order in band8 col; do
      CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 60 /tmp/cusync-$v run mlp --batch $b --policy $policy \
        --order $order --trace "$OUT/traces" 2>&1 | tail -4 | sed "s/^/  B=$b $policy $order: /"
    done
  done
done
rm -f "$OUT"/traces/*.svg
mv "$OUT/traces" "$OUT/traces-$v" && tar czf "$OUT/traces-$v.tgz" -C "$OUT" "traces-$v" && rm -rf "$OUT/traces-$v"
