#!/usr/bin/env bash
# Session 31's second device call (the first: `CUSYNC_MULTIGPU=0 bash scripts/gpu-check` with
# carry ["carry/bin", "carry/ptx"] from scripts/build-gpu-carry, which runs the suite, the TMA probe's sweeps and
# the issue 3/4/5/7 tables on main). This one puts the probe's answer to work on the GeMM:
#   1. TILE's tests (branch s29-tile16's 64 x 96 tile: A's 64 rows a stage, 11 stages), the
#      L2-promotion test and the probe's tests, on TILE's test binary and cubin;
#   2. `run gemm` rows at the GPT-3 MLP's B = 64 (and GeMM2 at B = 32): BASE's default, BASE
#      with each L2 promotion forced, and TILE's 64 x 96 tile whole (GeMM2: 128 tiles) or split
#      in two (GeMM1: 128 units) under each promotion; ROUNDS rounds, then one traced row each
#      of the default and the 64 x 96 tile (slow tiles, span);
#   3. the rows as a table last.
# Usage (carry ["carry/variants/BASE", "carry/variants/TILE"]):
#   [ROUNDS=2] bash scripts/exp/session31.sh BASE TILE
source "$(dirname "$0")/variants-lib.sh"
base=${1:?usage: session31.sh BASE TILE}; tile=${2:?}
t_start=$SECONDS
: > "$OUT/rows.txt"
unpack_variants "$base" "$tile"
variant_tests "$tile" gemm::path2_tile96 gemm::path2_every_l2_promotion probe::
gemm2="--m 64 --n 12288 --k 6144"
gemm1="--m 64 --n 6144 --k 12288 --gelu"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for s in "$gemm2" "$gemm1"; do
    timed_row "$base" "default r$r" $s
    for p in none 128; do
      timed_row "$base" "L2 $p r$r" $s --l2-promotion $p
    done
    split=1; [ "$s" = "$gemm1" ] && split=2
    for p in 256 128 none; do
      timed_row "$tile" "64x96 L2 $p r$r" $s --kernel wg64x96 --split-k $split --l2-promotion $p
    done
  done
  timed_row "$base" "default r$r" --m 32 --n 12288 --k 6144
  timed_row "$tile" "64x96 r$r" --m 32 --n 12288 --k 6144 --kernel wg64x96 --split-k 1
done
echo "== traced launches (slow tiles: 1.10x the median)"
mkdir -p "$OUT/traces"
CUSYNC_CUBIN_FILE=/tmp/c-$base.cubin timeout 60 /tmp/cusync-$base run gemm $gemm2 --iters 10 \
  --trace "$OUT/traces/default" 2>&1 | grep -E "traced launch" | sed "s/^ */$base default [$gemm2] /"
CUSYNC_CUBIN_FILE=/tmp/c-$tile.cubin timeout 60 /tmp/cusync-$tile run gemm $gemm2 --iters 10 --kernel wg64x96 \
  --split-k 1 --trace "$OUT/traces/w96" 2>&1 | grep -E "traced launch" | sed "s/^ */$tile 64x96 [$gemm2] /"
tar czf "$OUT/traces.tgz" -C "$OUT" traces 2>/dev/null && rm -rf "$OUT/traces"
echo "== rows (variant, label, [args], ours ms, ours / cuBLAS speed | kernel) after $((SECONDS - t_start)) s"
cat "$OUT/rows.txt"
