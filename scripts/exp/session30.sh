#!/usr/bin/env bash
# Session 30's device pass (builds nothing; the variants are carry/variants builds,
# scripts/exp/build-variant.sh):
#   1. stream-K over a forced number of ranges (`run gemm --stream-k-ranges R`) on the GPT-3
#      MLP's B = 32 and 64 GeMMs (swapped 128 x 64 tiles: GeMM2 96 tiles of 96 K-steps, GeMM1
#      48 of 192) and B = 128 (128 x 192, one row tile), beside BASE's default and cuBLAS, two
#      rounds; the session 29 strips run showed 128 or 132 whole-K strips of the same weight
#      streaming evenly (no slow SMs) where 96 do not;
#   2. one traced launch each of GeMM2 B = 64 with 96, 128 and 132 ranges;
#   3. the GPU suite on SUITE (main with GemmConfig::stream_k_ranges; device code as main);
#   4. a table of every timed row last (ms and ours / cuBLAS), also in $OUT/rows.txt.
# Usage: [ROUNDS=2] bash scripts/exp/session30.sh SUITE BASE VARIANT   ("-" as SUITE: no suite)
source "$(dirname "$0")/variants-lib.sh"
suite=${1:?usage: session30.sh SUITE BASE VARIANT}; base=${2:?}; var=${3:?}
t_start=$SECONDS
: > "$OUT/rows.txt"
unpack_variants "$base" "$var"
echo "== stream-K ranges"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for m in 64 32; do
    for s in "--m $m --n 12288 --k 6144" "--m $m --n 6144 --k 12288 --gelu"; do
      timed_row "$base" "default r$r" $s
      timed_row "$var" "default r$r" $s
      for g in 96 120 128 132; do timed_row "$var" "ranges$g r$r" $s --stream-k-ranges $g; done
    done
  done
done
for s in "--m 128 --n 12288 --k 6144" "--m 128 --n 6144 --k 12288 --gelu"; do
  timed_row "$base" "default" $s
  for g in 64 96 128; do timed_row "$var" "ranges$g" $s --stream-k-ranges $g; done
done
echo "== traced launches, GeMM2 B = 64"
for g in 96 128 132; do
  CUSYNC_CUBIN_FILE=/tmp/c-$var.cubin timeout 60 /tmp/cusync-$var run gemm --m 64 --n 12288 --k 6144 \
    --stream-k-ranges $g --iters 5 --trace "$OUT/trace$g" 2>&1 | grep -E "traced|slow" | sed "s/^ */  ranges$g /"
done
rm -f "$OUT"/trace*/*.svg "$OUT"/trace*/*.json
[ "$suite" != "-" ] && run_suite "$suite"
echo "== rows (variant, label, [args], ours ms, ours / cuBLAS speed | kernel) after $((SECONDS - t_start)) s"
cat "$OUT/rows.txt"
