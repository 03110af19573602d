#!/usr/bin/env bash
# Session 33's last device call, on main with the defaults its first two calls measured
# (carry ["carry/variants/F"]: `scripts/exp/build-variant.sh F` plus its GPU test binary):
#   1. the whole GPU suite (the 128 x 64 swapped-stage fix, the depth test's cluster case, the
#      64 x 96 stream stages, and on an H100 every B <= 64 path-2 test at depth 5);
#   2. `run mlp` at B = 64 and 32: the new default (64 x 96 stages) against the swapped 128 x 64
#      stages (the old default) and against itself at depths 5 and 6 (`--pipeline-depth`),
#      RowSync two rounds (SHORT=0: and TileSync one);
#   3. `run gemm` at B = 64: the default (depth 5 of 11 on an H100) against the whole ring
#      (GEMM_ROUNDS rounds, default 1);
#   4. B = 1 and 16 (SMALL_BATCHES): the skinny default against the 128 x 16 tile's whole tiles,
#      at the default depth and the whole ring;
#   5. the rows as a table last ($OUT/rows-*.txt).
# Usage: [NOSUITE=1] [SHORT=0] [SMALL_BATCHES="1 8 16"] bash scripts/exp/session33-final.sh F
source "$(dirname "$0")/variants-lib.sh"
v=${1:?usage: session33-final.sh VAR}
t_start=$SECONDS
unpack_variants "$v"
if [ "${NOSUITE:-0}" = 1 ]; then
  echo "suite: not run (NOSUITE=1: scripts/gpu-check ran it)" > "$OUT/suite-summary.txt"
else
  gunzip -c "carry/variants/$v/test-gpu-test.gz" > /tmp/test-$v && chmod +x /tmp/test-$v
  CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin CUSYNC_MULTIGPU=0 timeout 320 /tmp/test-$v --test-threads=1 > "$OUT/suite-$v.log" 2>&1
  echo "suite $v rc=$? ($((SECONDS - t_start)) s)" | tee "$OUT/suite-summary.txt"
  grep -E "FAILED|panicked|^gpu:" "$OUT/suite-$v.log" | head -20 | tee -a "$OUT/suite-summary.txt"
fi
: > "$OUT/rows-mlp.txt"
for r in 1 2; do
  for b in 64 32; do
    pols="rowsync"; [ $r = 1 ] && [ "${SHORT:-1}" = 0 ] && pols="rowsync tilesync"
    for p in $pols; do
      mlp_row "$v" "$OUT/rows-mlp.txt" "default r$r" --batch $b --policy $p
      mlp_row "$v" "$OUT/rows-mlp.txt" "swapped r$r" --batch $b --policy $p --kernel wg128x64
      # The stages on a shallower ring (`run mlp --pipeline-depth`, session 33).
      for d in 5 6; do
        mlp_row "$v" "$OUT/rows-mlp.txt" "default depth $d r$r" --batch $b --policy $p --pipeline-depth $d
      done
    done
  done
done
: > "$OUT/rows.txt"
g2="--n 12288 --k 6144"
g1="--n 6144 --k 12288 --gelu"
for r in $(seq 1 "${GEMM_ROUNDS:-1}"); do
  for s in "$g2" "$g1"; do
    timed_row "$v" "default r$r" --m 64 $s
    timed_row "$v" "whole ring r$r" --m 64 $s --pipeline-depth 11
  done
done
for m in ${SMALL_BATCHES:-1 16}; do
  for s in "$g2" "$g1"; do
    timed_row "$v" "default" --m $m $s
    t16="--kernel wg128x16 --swap-ab on --skinny off --split-k 1"
    timed_row "$v" "128x16 whole" --m $m $s $t16
    timed_row "$v" "128x16 whole, whole ring" --m $m $s $t16 --pipeline-depth 12
  done
done
mv "$OUT/rows.txt" "$OUT/rows-gemm.txt"
# Off the H100 the default keeps the whole ring: sweep B = 64's depths there instead.
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H100; then
  for s in "$g2" "$g1"; do
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 100 /tmp/cusync-$v run gemm --m 64 $s --iters 20 --depth-sweep 2>&1 \
      | grep -E "speed|^ *depth|^ *cuBLAS " | sed "s|^ *|[m64 $s] |" >> "$OUT/rows-gemm.txt"
  done
fi
echo "== suite"; cat "$OUT/suite-summary.txt"
echo "== run mlp rows (batch tile grids waves ... StreamSync TileSync RowSync best cuBLAS cuBLAS+graph vs-SS vs-cuBLAS)"
cat "$OUT/rows-mlp.txt"
echo "== run gemm rows (ms, ours / cuBLAS | kernel) after $((SECONDS - t_start)) s"
cat "$OUT/rows-gemm.txt"
