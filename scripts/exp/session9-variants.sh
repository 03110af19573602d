#!/usr/bin/env bash
# Session 9: why the post-warp build's MLP is slower than session 8's at B = 128 and 256. Sides,
# run by this binary (scripts/exp/sides.sh): b = this build (post warp; post-ring and pipeline
# waits suspended), a = session 8's cubin, y = b with the post ring's waits spinning again,
# w = b without the post warp (consumer thread 128 posts, as in a; pipeline waits suspended).
source "$(dirname "$0")/env.sh"
source scripts/exp/sides.sh
b() { "$@"; }
SIDES="b"
add_side a carry/ab; add_side y carry/y; add_side w carry/w
echo "sides: $SIDES"
for r in 1 2; do
  for side in $SIDES; do
    echo "== [$side] sweep mlp --batches 128,256,1024 (round $r, ${SECONDS}s)"
    $side carry/bin/cusync sweep mlp --batches 128,256,1024 --samples 10 2>/dev/null | grep -E '^ +[0-9]+ wg' | cut -c1-200
  done
done
for side in $SIDES; do
  echo "== [$side] bench (${SECONDS}s)"
  $side carry/bin/cusync bench --samples 11 2>/dev/null | grep -E 'stream stage:'
done
echo "== done (${SECONDS}s)"
