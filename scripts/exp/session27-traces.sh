#!/usr/bin/env bash
# Session 27: traced `run gemm` launches of the bandwidth-bound and split shapes (B = 64 and
# 256), each with its timeline line; the traces (CSV) archived to $OUT/traces.tgz.
# Usage: bash scripts/exp/session27-traces.sh VARIANT
source "$(dirname "$0")/variants-lib.sh"
v=$1
unpack_variants "$v"
i=0
for s in "--m 64 --n 12288 --k 6144" "--m 64 --n 6144 --k 12288 --gelu" "--m 256 --n 6144 --k 12288 --gelu" \
         "--m 64 --n 12288 --k 6144 --stream-k on" "--m 256 --n 12288 --k 6144"; do
  i=$((i+1)); echo "== $i: $s"
  CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 60 /tmp/cusync-$v run gemm $s --iters 20 --trace "$OUT/tr/$i" 2>&1 | grep -v '^  wrote'
done
rm -f "$OUT"/tr/*/*.svg "$OUT"/tr/*/*.json
tar czf "$OUT/traces.tgz" -C "$OUT" tr && rm -rf "$OUT/tr"
