#!/usr/bin/env bash
# Session 32's second device call (the first: `CUSYNC_MULTIGPU=0 bash scripts/gpu-check` on
# 29105d8, then session31.sh and session31-sku.sh). The TMA probe streamed the B = 64 weight's
# 96 strips 15% faster with 4 stages than with 9 (2.74 against 2.38 TB/s on the H100); this puts
# the pipeline depth (`--pipeline-depth`, HEAD 0cacd34) to work on the GeMMs:
#   1. VAR's GPU tests of what changed (device time was short): path2_every_pipeline_depth
#      (depths 2..=stages against the f64 reference), the 64 x 96 tile's (now the default at
#      B = 17..64) and 128 x 16 tile's, the swapped tile's, split-K's and stream-K's;
#   2. `run gemm` rows at the GPT-3 MLP's small batches (B = 64 in two rounds; B = 32, 1,
#      128 once): the default (64 x 96 from B = 17) and the swapped 128 x 64 tile (the default
#      before, `--swap-ab on`) at several depths, the 128 x 16 tile at B = 1;
#   3. the rows as a table last.
# Usage (carry ["carry/variants/VAR"]): [SHORT=1] bash scripts/exp/session32.sh VAR
source "$(dirname "$0")/variants-lib.sh"
v=${1:?usage: session32.sh VAR}
t_start=$SECONDS
: > "$OUT/rows.txt"
unpack_variants "$v"
if [ "${SHORT:-0}" = 1 ]; then
  # The least that answers both questions (is the new default right; does depth pay), for a
  # call with two minutes of device time: three tests, then two rounds of eleven rows.
  variant_tests "$v" gemm::path2_every_pipeline_depth gemm::path2_tile96 gemm::path2_swapped
  for r in 1 2; do
    for s in "--m 64 --n 12288 --k 6144" "--m 64 --n 6144 --k 12288 --gelu" "--m 32 --n 12288 --k 6144"; do
      timed_row "$v" "default r$r" $s
      timed_row "$v" "default depth 4 r$r" $s --pipeline-depth 4
      timed_row "$v" "swapped r$r" $s --swap-ab on
      case "$s" in *32*) continue ;; esac
      timed_row "$v" "swapped depth 4 r$r" $s --swap-ab on --pipeline-depth 4
    done
  done
  echo "== rows (variant, label, [args], ours ms, ours / cuBLAS speed | kernel) after $((SECONDS - t_start)) s"
  cat "$OUT/rows.txt"
  exit 0
fi
variant_tests "$v" gemm::path2_every_pipeline_depth gemm::path2_tile gemm::path2_swapped gemm::skinny_and \
  gemm::path2_split_k gemm::path2_stream_k
g2="--m 64 --n 12288 --k 6144"
g1="--m 64 --n 6144 --k 12288 --gelu"
t16="--kernel wg128x16 --swap-ab on --skinny off"
for r in 1 2; do
  timed_row "$v" "default r$r" $g2
  for d in 4 6 8; do timed_row "$v" "default depth $d r$r" $g2 --pipeline-depth $d; done
  timed_row "$v" "swapped r$r" $g2 --swap-ab on
  for d in 4 6; do timed_row "$v" "swapped depth $d r$r" $g2 --swap-ab on --pipeline-depth $d; done
  timed_row "$v" "default r$r" $g1
  for d in 4 6; do timed_row "$v" "default depth $d r$r" $g1 --pipeline-depth $d; done
  timed_row "$v" "swapped r$r" $g1 --swap-ab on
  timed_row "$v" "swapped depth 4 r$r" $g1 --swap-ab on --pipeline-depth 4
done
for s in "--m 32 --n 12288 --k 6144" "--m 32 --n 6144 --k 12288 --gelu"; do
  timed_row "$v" "default" $s
  timed_row "$v" "default depth 4" $s --pipeline-depth 4
  timed_row "$v" "swapped" $s --swap-ab on
done
for s in "--m 1 --n 12288 --k 6144" "--m 1 --n 6144 --k 12288 --gelu"; do
  timed_row "$v" "default" $s
  timed_row "$v" "128x16" $s $t16
  timed_row "$v" "128x16 depth 4" $s $t16 --pipeline-depth 4
done
for s in "--m 128 --n 12288 --k 6144" "--m 128 --n 6144 --k 12288 --gelu"; do
  timed_row "$v" "default" $s
  for d in 3 4; do timed_row "$v" "depth $d" $s --pipeline-depth $d; done
done
echo "== rows (variant, label, [args], ours ms, ours / cuBLAS speed | kernel) after $((SECONDS - t_start)) s"
cat "$OUT/rows.txt"
