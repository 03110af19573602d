#!/usr/bin/env bash
# Session 9: which part of the post-warp build slows the stream stage's tiles. Sides, run by
# this binary (scripts/exp/sides.sh): b2 = this build, a = session 8's cubin (carry/ab), b3 = b2
# without the look-ahead acquire, b4 = b2 with the post done by consumer thread 128 again (no
# post warp).
source "$(dirname "$0")/env.sh"
source scripts/exp/sides.sh
b2() { "$@"; }
SIDES="b2"
add_side a carry/ab; add_side b3 carry/b3; add_side b4 carry/b4
echo "sides: $SIDES"
for r in 1 2; do
  for side in $SIDES; do
    echo "== [$side] bench (${SECONDS}s)"
    $side carry/bin/cusync bench --samples 11 2>/dev/null | grep -E 'stream stage'
  done
done
for side in $SIDES; do trace_periods $side; done
echo "== done (${SECONDS}s)"
