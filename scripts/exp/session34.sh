#!/usr/bin/env bash
# Session 34's check of the small-batch default and the 128 x 16 stream stages (carry
# ["carry/variants/H"]: `scripts/exp/build-variant.sh H` plus its GPU test binary):
#   1. GPU tests: the 128 x 16 tile (its new default cases), the skinny kernels, `run gemm`'s
#      checks, the depth test, and the MLP's swapped, 64 x 96 and new 128 x 16 stages;
#   2. side by side at B = 1, 8 and 16, both GPT-3 MLP GeMMs: the default (the 128 x 16 tile on
#      the devices `choose_tile16` lists, else the skinny kernels), the skinny kernels forced,
#      and the 128 x 16 tile forced whole (GeMM2) or split in two (GeMM1) at the device's
#      default depth, ROUNDS rounds (default 1);
#   3. `run mlp` at B = 1, 8 and 16, RowSync: the default (skinny) stages against the 128 x 16
#      stages on the whole ring and at depth 6;
#   4. the rows as a table last.
# Usage: [ROUNDS=N] bash scripts/exp/session34.sh H
source "$(dirname "$0")/variants-lib.sh"
v=${1:?usage: session34.sh VAR}
t_start=$SECONDS
unpack_variants "$v"
variant_tests "$v" gemm::path2_tile16 gemm::skinny_kernels gemm::run_gemm_checks gemm::path2_every_pipeline_depth \
  mlp::path2_tile16 mlp::path2_swapped mlp::path2_tile96 | tee "$OUT/tests-summary.txt"
grep -E "^test |^gpu:" "$OUT/tests-$v.log" >> "$OUT/tests-summary.txt"
: > "$OUT/rows.txt"
g1="--n 6144 --k 12288 --gelu"
g2="--n 12288 --k 6144"
t16="--kernel wg128x16 --swap-ab on --skinny off"
for r in $(seq 1 "${ROUNDS:-1}"); do
  for m in 1 8 16; do
    timed_row "$v" "default r$r" --m $m $g2
    timed_row "$v" "skinny r$r" --m $m $g2 --skinny on
    timed_row "$v" "128x16 whole r$r" --m $m $g2 $t16 --split-k 1
    timed_row "$v" "default r$r" --m $m $g1
    timed_row "$v" "skinny r$r" --m $m $g1 --skinny on
    timed_row "$v" "128x16 split 2 r$r" --m $m $g1 $t16 --split-k 2
  done
done
: > "$OUT/rows-mlp.txt"
for b in 1 8 16; do
  mlp_row "$v" "$OUT/rows-mlp.txt" "default" --batch $b --policy rowsync
  mlp_row "$v" "$OUT/rows-mlp.txt" "128x16" --batch $b --policy rowsync --kernel wg128x16
  mlp_row "$v" "$OUT/rows-mlp.txt" "128x16 depth 6" --batch $b --policy rowsync --kernel wg128x16 --pipeline-depth 6
done
echo "== tests"; cat "$OUT/tests-summary.txt"
echo "== run mlp rows (batch tile grids waves ... StreamSync TileSync RowSync best cuBLAS cuBLAS+graph vs-SS vs-cuBLAS)"
cat "$OUT/rows-mlp.txt"
echo "== run gemm rows (ms, ours / cuBLAS | kernel) after $((SECONDS - t_start)) s"
sed 's/(swapped C^T = B^T A^T, /(/' "$OUT/rows.txt"
