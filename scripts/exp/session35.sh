#!/usr/bin/env bash
# The checks session 34 left for an H200 (carry ["carry/variants/V"], made by
# `scripts/build-gpu-carry && bash scripts/exp/carry-variant.sh V`):
#   1. the GPT-3 MLP at B = 1, 8 and 16, RowSync and TileSync: the default stages (skinny on
#      the H200) against the 128 x 16 stages (`--kernel wg128x16`) at the device's depth (6),
#      depth 5 and the whole ring (12), ROUNDS rounds (default 2). If the 128 x 16 stages win
#      at all three, add "H200" to `MlpKernel::TILE16_STAGE_DEVICES`;
#   2. plain launches at B = 56 and 60 (the 64 x 96 tile), depth sweeps of both GeMMs, to
#      close the 49..63 gap in `gemm_sm90::H200_STREAMING_BATCHES`;
#   3. the TMA probe at B = 1 (no batch box: the weight alone) on the 128 x 16 tile's cut, at 4,
#      5, 6 and 8 stages, GeMM2's weight whole and GeMM1's split in two: how close a pure
#      read through the path-2 producer comes to the 4.3 TB/s floor (issue 3);
#   4. the rows as a table last.
# Usage: [ROUNDS=N] bash scripts/exp/session35.sh V
source "$(dirname "$0")/variants-lib.sh"
v=${1:?usage: session35.sh VAR}
t_start=$SECONDS
unpack_variants "$v"
nvidia-smi --query-gpu=name --format=csv,noheader
: > "$OUT/rows-mlp.txt"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for b in 1 8 16; do
    for p in rowsync tilesync; do
      mlp_row "$v" "$OUT/rows-mlp.txt" "default r$r" --batch $b --policy $p
      mlp_row "$v" "$OUT/rows-mlp.txt" "128x16 r$r" --batch $b --policy $p --kernel wg128x16
      for d in 5 12; do
        mlp_row "$v" "$OUT/rows-mlp.txt" "128x16 depth $d r$r" --batch $b --policy $p --kernel wg128x16 --pipeline-depth $d
      done
    done
  done
done
: > "$OUT/rows-depth.txt"
for m in 56 60; do
  for s in "--n 12288 --k 6144" "--n 6144 --k 12288 --gelu"; do
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 100 /tmp/cusync-$v run gemm --m $m $s --iters 20 --depth-sweep 2>&1 \
      | grep -E "speed|^ *depth" | sed "s|^ *|[m$m $s] |" >> "$OUT/rows-depth.txt"
  done
done
t_probe=$SECONDS
: > "$OUT/rows-probe.txt"
for st in 4 5 6 8; do
  for w in "--k 6144 --n 12288 --division strips" "--k 12288 --n 6144 --division split:2"; do
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 60 /tmp/cusync-$v run tma-probe --batch 1 --batch-box-rows 0 \
      --strip-cols 128 --stages $st $w --iters 20 2>&1 | grep -E "TB/s|rror" | sed "s|^ *|[$st st $w] |" >> "$OUT/rows-probe.txt"
  done
done
echo "== run mlp rows (batch tile grids waves ... StreamSync TileSync RowSync best cuBLAS cuBLAS+graph vs-SS vs-cuBLAS)"
cat "$OUT/rows-mlp.txt"
echo "== depth sweeps after $((SECONDS - t_start)) s"
cat "$OUT/rows-depth.txt"
echo "== probe rows ($((SECONDS - t_probe)) s)"
cat "$OUT/rows-probe.txt"
