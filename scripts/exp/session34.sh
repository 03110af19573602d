#!/usr/bin/env bash
# Session 34's check of the small-batch default (carry ["carry/variants/G"], built with
# `cargo build --release -p cusync --bins` and the GPU test binary; the cubin is F's, the same
# PTX fingerprint):
#   1. the GPU suite's GeMM tests (`gemm::`), the 128 x 16 default's test among them;
#   2. side by side at B = 1, 8 and 16, both GPT-3 MLP GeMMs: the default (the 128 x 16 tile on
#      the devices `choose_tile16` lists, else the skinny kernels), the skinny kernels forced,
#      and the 128 x 16 tile forced whole (GeMM2) or split in two (GeMM1) at the device's
#      default depth, ROUNDS rounds (default 2);
#   3. the rows as a table last.
# Usage: [ROUNDS=N] bash scripts/exp/session34.sh G
source "$(dirname "$0")/variants-lib.sh"
v=${1:?usage: session34.sh VAR}
t_start=$SECONDS
unpack_variants "$v"
variant_tests "$v" gemm:: | tee "$OUT/tests-summary.txt"
: > "$OUT/rows.txt"
g1="--n 6144 --k 12288 --gelu"
g2="--n 12288 --k 6144"
t16="--kernel wg128x16 --swap-ab on --skinny off"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for m in 1 8 16; do
    timed_row "$v" "default r$r" --m $m $g2
    timed_row "$v" "skinny r$r" --m $m $g2 --skinny on
    timed_row "$v" "128x16 whole r$r" --m $m $g2 $t16 --split-k 1
    timed_row "$v" "default r$r" --m $m $g1
    timed_row "$v" "skinny r$r" --m $m $g1 --skinny on
    timed_row "$v" "128x16 split 2 r$r" --m $m $g1 $t16 --split-k 2
  done
done
echo "== tests"; cat "$OUT/tests-summary.txt"
echo "== run gemm rows (ms, ours / cuBLAS | kernel) after $((SECONDS - t_start)) s"
sed 's/(swapped C^T = B^T A^T, /(/' "$OUT/rows.txt"
