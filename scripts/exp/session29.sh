#!/usr/bin/env bash
# Session 29's whole device pass in one call (builds nothing; every binary is a carried
# variant, scripts/exp/build-variant.sh):
#   1. the strips experiment on BASE (scripts/exp/session29-strips.sh);
#   2. TILES (branch s29-tile16: the 128 x 96 and 128 x 16 tiles): their GPU tests, then the
#      GPT-3 MLP's B = 64 GeMMs on BASE's default and the 96 tile forced (whole tiles; GeMM1
#      also split in two), and its B = 1, 8 and 16 GeMMs on BASE's defaults (skinny, and path 2
#      swapped on 128 x 64) and the 16 tile forced (whole, split in two, stream-K), each beside
#      cuBLAS, two rounds, and one traced launch of each tile on GeMM2;
#   3. DK (branch s28-dynamic-k, dynamic K-chunks): its GPU test, then the same shapes with
#      8, 16 and 32 chunks a tile;
#   4. a table of every timed row last (ms and ours / cuBLAS), also in $OUT/rows.txt.
# Usage: [ROUNDS=2] [STRIPS=1] bash scripts/exp/session29.sh BASE TILES DK
# (a variant named "-" is skipped; STRIPS=0 skips part 1; the rows are a few seconds each and
# not yet timed on the device, so split the parts over two calls if one runs past its limit)
source "$(dirname "$0")/variants-lib.sh"
base=${1:?usage: session29.sh BASE TILES DK}; tiles=${2:--}; dk=${3:--}
t_start=$SECONDS
: > "$OUT/rows.txt"
gemm_tests() { # VARIANT FILTER: the variant's GPU tests whose names contain FILTER
  local var=$1 filter=$2 t0=$SECONDS
  gunzip -c "carry/variants/$var/test-gpu-test.gz" > /tmp/test-$var && chmod +x /tmp/test-$var
  CUSYNC_CUBIN_FILE=/tmp/c-$var.cubin CUSYNC_MULTIGPU=0 timeout 240 /tmp/test-$var --test-threads=1 "$filter" \
    > "$OUT/tests-$var-$filter.log" 2>&1
  echo "tests $var [$filter] rc=$? ($((SECONDS-t0)) s)"
  grep -E "FAILED|panicked|skipped|^gpu:|rror|128x96|chunks" "$OUT/tests-$var-$filter.log" | head -24
}
G2="--m 64 --n 12288 --k 6144"
G1="--m 64 --n 6144 --k 12288 --gelu"
unpack_variants "$base"
rounds=$(seq 1 "${ROUNDS:-2}")
if [ "${STRIPS:-1}" != 0 ]; then
  echo "== 1. strips on $base"
  bash scripts/exp/session29-strips.sh "$base"
fi
if [ "$tiles" != "-" ]; then
  echo "== 2. $tiles: the 128 x 96 and 128 x 16 tiles"
  unpack_variants "$tiles"
  gemm_tests "$tiles" path2_tile
  gemm_tests "$tiles" path2_every
  for r in $rounds; do
    timed_row "$base" "default r$r" $G2
    timed_row "$tiles" "128x96 r$r" $G2 --kernel wg128x96 --split-k 1 --stream-k off
    timed_row "$base" "default r$r" $G1
    timed_row "$tiles" "128x96-split2 r$r" $G1 --kernel wg128x96 --split-k 2
    timed_row "$tiles" "128x96-whole r$r" $G1 --kernel wg128x96 --split-k 1 --stream-k off
  done
  # B = 128 fills one row tile too: 128 tiles of GeMM2 on the 96 tile against the default.
  for s in "--m 128 --n 12288 --k 6144" "--m 128 --n 6144 --k 12288 --gelu"; do
    timed_row "$base" "default" $s
    timed_row "$tiles" "128x96" $s --kernel wg128x96
  done
  for r in $rounds; do
    for s in "--m 1 --n 12288 --k 6144" "--m 1 --n 6144 --k 12288 --gelu" "--m 8 --n 12288 --k 6144" \
      "--m 16 --n 6144 --k 12288 --gelu"; do
      timed_row "$base" "default r$r" $s
      timed_row "$base" "path2 r$r" $s --skinny off
      timed_row "$tiles" "128x16-whole r$r" $s --kernel wg128x16 --split-k 1 --stream-k off
      timed_row "$tiles" "128x16-split2 r$r" $s --kernel wg128x16 --split-k 2
      timed_row "$tiles" "128x16-streamk r$r" $s --kernel wg128x16 --stream-k on
    done
  done
  for s in "$G2 --kernel wg128x96" "--m 1 --n 12288 --k 6144 --kernel wg128x16 --split-k 1 --stream-k off"; do
    CUSYNC_CUBIN_FILE=/tmp/c-$tiles.cubin timeout 60 /tmp/cusync-$tiles run gemm $s --iters 5 \
      --trace "$OUT/tiletrace" 2>&1 | grep -E "traced|slow" | sed "s/^ */  $tiles [$s] /"
  done
fi
if [ "$dk" != "-" ]; then
  echo "== 3. $dk: dynamic K-chunks"
  unpack_variants "$dk"
  gemm_tests "$dk" dynamic_k
  for r in $rounds; do
    for s in "$G2" "$G1"; do
      timed_row "$base" "default r$r" $s
      for c in 8 16 32; do timed_row "$dk" "dyn$c r$r" $s --dynamic-k $c; done
    done
  done
fi
rm -rf "$OUT/tiletrace"/*.svg "$OUT/tiletrace"/*.json 2>/dev/null
echo "== rows (variant, label, [args], ours ms, ours / cuBLAS speed | kernel) after $((SECONDS - t_start)) s"
cat "$OUT/rows.txt"
