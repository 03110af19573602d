#!/usr/bin/env bash
# Session 30 run 4: the tile-aligned stream-K default (`tile_aligned_units`) on VARIANT against
# BASE's 132 ranges: VARIANT's path-2 GeMM tests (stream-K chosen and forced, split-K, swapped,
# the MLP shapes; its test binary and cubin), then the one-row-tile shapes it changes (the
# GPT-3 MLP's GeMMs at B = 80, 96 and 128 on 128 x 192 tiles), two rounds, a table last.
# Usage: [ROUNDS=2] bash scripts/exp/session30-aligned.sh BASE VARIANT
source "$(dirname "$0")/variants-lib.sh"
base=${1:?usage: session30-aligned.sh BASE VARIANT}; var=${2:?}
t_start=$SECONDS
: > "$OUT/rows.txt"
unpack_variants "$base" "$var"
variant_tests "$var" gemm::path2
for r in $(seq 1 "${ROUNDS:-2}"); do
  for m in 128 96 80; do
    for s in "--m $m --n 12288 --k 6144" "--m $m --n 6144 --k 12288 --gelu"; do
      timed_row "$base" "default r$r" $s
      timed_row "$var" "aligned r$r" $s
    done
  done
done
echo "== rows (variant, label, [args], ours ms, ours / cuBLAS speed | kernel) after $((SECONDS - t_start)) s"
cat "$OUT/rows.txt"
