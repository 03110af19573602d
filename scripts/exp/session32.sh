#!/usr/bin/env bash
# Session 32's second device call (the first: `CUSYNC_MULTIGPU=0 bash scripts/gpu-check` on
# 29105d8, then session31.sh and session31-sku.sh). The TMA probe streamed the B = 64 weight's
# 96 strips 15% faster with 4 stages than with 9 (2.74 against 2.38 TB/s on the H100); this puts
# the pipeline depth (`--pipeline-depth`, HEAD 0cacd34) to work on the GeMMs:
#   1. VAR's pipeline-depth test (depths 2..=stages against the f64 reference on five tile
#      families) and the 64 x 96 and 128 x 16 tiles' tests (the whole suite runs in the call
#      after, with the defaults these rows choose);
#   2. `run gemm` rows at the GPT-3 MLP's small batches (B = 64 in two rounds; B = 32, 16, 1,
#      128 once): the default at several depths, the 64 x 96 tile (B <= 64) and the 128 x 16
#      tile (B <= 16) at their own and shallower depths;
#   3. the rows as a table last.
# Usage (carry ["carry/variants/VAR"]): bash scripts/exp/session32.sh VAR
source "$(dirname "$0")/variants-lib.sh"
v=${1:?usage: session32.sh VAR}
t_start=$SECONDS
: > "$OUT/rows.txt"
unpack_variants "$v"
variant_tests "$v" gemm::path2_every_pipeline_depth gemm::path2_tile
g2="--m 64 --n 12288 --k 6144"
g1="--m 64 --n 6144 --k 12288 --gelu"
w96="--kernel wg64x96 --l2-promotion 128"
t16="--kernel wg128x16 --swap-ab on --skinny off"
for r in 1 2; do
  timed_row "$v" "default r$r" $g2
  for d in 4 6; do timed_row "$v" "depth $d r$r" $g2 --pipeline-depth $d; done
  timed_row "$v" "64x96 r$r" $g2 $w96 --split-k 1
  for d in 4 6; do timed_row "$v" "64x96 depth $d r$r" $g2 $w96 --split-k 1 --pipeline-depth $d; done
  timed_row "$v" "default r$r" $g1
  timed_row "$v" "depth 4 r$r" $g1 --pipeline-depth 4
  timed_row "$v" "64x96 r$r" $g1 $w96 --split-k 2
  for d in 4 6; do timed_row "$v" "64x96 depth $d r$r" $g1 $w96 --split-k 2 --pipeline-depth $d; done
done
for s in "--m 32 --n 12288 --k 6144" "--m 32 --n 6144 --k 12288 --gelu"; do
  split=1; case "$s" in *gelu*) split=2 ;; esac
  timed_row "$v" "default" $s
  timed_row "$v" "64x96" $s $w96 --split-k $split
  timed_row "$v" "64x96 depth 4" $s $w96 --split-k $split --pipeline-depth 4
done
for m in 16 1; do
  for s in "--m $m --n 12288 --k 6144" "--m $m --n 6144 --k 12288 --gelu"; do
    timed_row "$v" "default" $s
    timed_row "$v" "128x16" $s $t16
    for d in 4 6; do timed_row "$v" "128x16 depth $d" $s $t16 --pipeline-depth $d; done
  done
done
for s in "--m 128 --n 12288 --k 6144" "--m 128 --n 6144 --k 12288 --gelu"; do
  timed_row "$v" "default" $s
  for d in 3 4; do timed_row "$v" "depth $d" $s --pipeline-depth $d; done
done
echo "== rows (variant, label, [args], ours ms, ours / cuBLAS speed | kernel) after $((SECONDS - t_start)) s"
cat "$OUT/rows.txt"
