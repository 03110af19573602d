#!/usr/bin/env bash
# The 64 x 96 tile as the MLP's stream-mode stages (branch s32-stream96, built by
# `bash scripts/exp/build-variant.sh S96` plus its GPU test binary), for issue 4 at B = 32 and 64:
#   1. S96's tests: the new stages' (`mlp::path2_tile96…`: batches 1, 17, 64 and the GPT-3 MLP
#      at B = 32 and 64, TileSync and RowSync, every order, consumers first, delayed posts,
#      bitwise equal to StreamSync and the f64 reference), the swapped stages' (their test's
#      body is now shared) and the plain 64 x 96 tile's;
#   2. `run mlp` at B = 32 and 64: the default stages (swapped 128 x 64) and the 64 x 96 stages,
#      RowSync and TileSync, ROUNDS rounds, each row's StreamSync, best and cuBLAS side by side;
#   3. the rows as a table last.
# Usage (carry ["carry/variants/S96"]): [ROUNDS=2] bash scripts/exp/session33-s96.sh S96
source "$(dirname "$0")/variants-lib.sh"
v=${1:?usage: session33-s96.sh VAR}
t_start=$SECONDS
: > "$OUT/rows.txt"
unpack_variants "$v"
variant_tests "$v" mlp::path2_tile96 mlp::path2_swapped gemm::path2_tile96
for r in $(seq 1 "${ROUNDS:-2}"); do
  for b in 64 32; do
    for p in rowsync tilesync; do
      mlp_row "$v" "$OUT/rows.txt" "default r$r" --batch $b --policy $p
      mlp_row "$v" "$OUT/rows.txt" "64x96 r$r" --batch $b --policy $p --kernel wg64x96
    done
  done
done
echo "== rows (variant, label, [args], the run's table row: batch tile grids waves ... StreamSync TileSync RowSync best cuBLAS cuBLAS+graph vs-SS vs-cuBLAS) after $((SECONDS - t_start)) s"
cat "$OUT/rows.txt"
