#!/usr/bin/env bash
# Session 31's third device call (optional): branch s31-sk-u32 (SKU: the stream-K plan's
# divisions in 32 bits where the values fit; only the plain path-2 kernels' SASS changes) beside
# main (BASE): SKU's path-2 GeMM tests on its test binary and cubin, then `run gemm` rows where
# stream-K runs by default (the MLP's B = 80, 96, 128; path 2 swapped at B = 1 and 8) or forced
# (B = 64), and two shapes without it (B = 256 GeMM1, split-K 2; 8192^3) to see that nothing else
# moved; ROUNDS rounds, BASE and SKU alternating, a table last.
# Usage (carry ["carry/variants/BASE", "carry/variants/SKU"]): [ROUNDS=2] bash scripts/exp/session31-sku.sh BASE SKU
source "$(dirname "$0")/variants-lib.sh"
base=${1:?usage: session31-sku.sh BASE SKU}; var=${2:?}
t_start=$SECONDS
: > "$OUT/rows.txt"
unpack_variants "$base" "$var"
variant_tests "$var" gemm::path2
shapes=(
  "--m 128 --n 12288 --k 6144"
  "--m 128 --n 6144 --k 12288 --gelu"
  "--m 96 --n 12288 --k 6144"
  "--m 80 --n 6144 --k 12288 --gelu"
  "--m 64 --n 12288 --k 6144 --stream-k on"
  "--m 1 --n 12288 --k 6144 --skinny off"
  "--m 8 --n 6144 --k 12288 --gelu --skinny off"
  "--m 256 --n 6144 --k 12288 --gelu"
  "--m 8192 --n 8192 --k 8192"
)
for r in $(seq 1 "${ROUNDS:-2}"); do
  for s in "${shapes[@]}"; do
    timed_row "$base" "main r$r" $s
    timed_row "$var" "sk-u32 r$r" $s
  done
done
echo "== rows (variant, label, [args], ours ms, ours / cuBLAS speed | kernel) after $((SECONDS - t_start)) s"
cat "$OUT/rows.txt"
