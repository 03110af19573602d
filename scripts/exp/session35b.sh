#!/usr/bin/env bash
# Session 35's second device pass (carry ["carry/variants/V"]), by card:
#   H200: the GPT-3 MLP at B = 1, 8, 16 (RowSync, TileSync): the default (skinny) stages
#         against the 128 x 16 stages at the device's depth; the plain default at B = 1/8/16
#         (the 128 x 16 tile as a default launch, never run on an H200); depth sweeps at
#         B = 56 and 60 (the 49..63 gap of `H200_STREAMING_BATCHES`);
#   H100: depth sweeps at B = 40 and 48 (session 35 found the whole ring 4-7% ahead of
#         depth 5 at 56 and 60);
#   both: the TMA probe at B = 1 (weight alone) on the 128 x 16 cut, 4/5/6/8 stages.
# Usage: bash scripts/exp/session35b.sh V
source "$(dirname "$0")/variants-lib.sh"
v=${1:?usage: session35b.sh VAR}
t_start=$SECONDS
unpack_variants "$v"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
: > "$OUT/rows.txt"; : > "$OUT/rows-mlp.txt"; : > "$OUT/rows-depth.txt"; : > "$OUT/rows-probe.txt"
depth_sweep() {
  local m=$1 s
  for s in "--n 12288 --k 6144" "--n 6144 --k 12288 --gelu"; do
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 100 /tmp/cusync-$v run gemm --m $m $s --iters 20 --depth-sweep 2>&1 \
      | grep -E "speed|^ *depth" | sed "s|^ *|[m$m $s] |" >> "$OUT/rows-depth.txt"
  done
}
case "$card" in
  *H200*)
    for b in 1 8 16; do
      for p in rowsync tilesync; do
        mlp_row "$v" "$OUT/rows-mlp.txt" "default" --batch $b --policy $p
        mlp_row "$v" "$OUT/rows-mlp.txt" "128x16" --batch $b --policy $p --kernel wg128x16
      done
      timed_row "$v" "plain default GeMM2" --m $b --n 12288 --k 6144
      timed_row "$v" "plain default GeMM1" --m $b --n 6144 --k 12288 --gelu
    done
    for m in 56 60; do depth_sweep $m; done ;;
  *)
    for m in 40 48; do depth_sweep $m; done ;;
esac
for st in 4 5 6 8; do
  for w in "--k 6144 --n 12288 --division strips" "--k 12288 --n 6144 --division split:2"; do
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 60 /tmp/cusync-$v run tma-probe --batch 1 --batch-box-rows 0 \
      --strip-cols 128 --stages $st $w --iters 20 2>&1 | grep -v -E "configuration|median launch|streamed once" \
      | sed "s|^|[$st st] |" >> "$OUT/rows-probe.txt"
  done
done
echo "== $card, $((SECONDS - t_start)) s"
echo "== mlp rows (batch tile grids waves ... StreamSync TileSync RowSync best cuBLAS cuBLAS+graph vs-SS vs-cuBLAS)"
cat "$OUT/rows-mlp.txt"
echo "== plain rows (ms, ours/cuBLAS)"
cat "$OUT/rows.txt"
echo "== depth sweeps"
cat "$OUT/rows-depth.txt"
echo "== probe rows (blocks ms TB/s ...)"
cat "$OUT/rows-probe.txt"
