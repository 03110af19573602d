#!/usr/bin/env bash
# Session 22: is the swapped 128 x 64 kernel's fixed cost its code size? The carried variants
# (scripts/exp/build-variant.sh) side by side in interleaved rounds on the B = 64 and B = 1
# GPT-3 MLP GeMMs (`run gemm`, path 2 swapped; B = 1 with the skinny kernels off): median
# time, the traced launch's timeline (setup, first loads, tile spread) and the ratio to cuBLAS.
# Usage: bash scripts/exp/session22b.sh ROUNDS VARIANT...
source "$(dirname "$0")/variants-lib.sh"
rounds=$1; shift
unpack_variants "$@"
shapes=("--m 64 --n 12288 --k 6144" "--m 64 --n 6144 --k 12288 --gelu" "--m 1 --n 12288 --k 6144 --skinny off" "--m 1 --n 6144 --k 12288 --gelu --skinny off")
for r in $(seq 1 "$rounds"); do
  for s in "${shapes[@]}"; do
    gemm_rows "r$r" "$s" "$@"
  done
done
for r in $(seq 1 "$rounds"); do
  for v in "$@"; do
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 120 /tmp/cusync-$v sweep mlp --batches 64 --samples 10 2>&1 \
      | grep -E "^ +64 " | awk -v r=$r -v v=$v '{print "  " v " r" r " B=" $1, "SS=" $10, "TS=" $11, "RS=" $12, "cuBLAS=" $14, "vsSS=" $(NF-1), "vsCuBLAS=" $NF}'
  done
done
