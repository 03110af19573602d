#!/usr/bin/env bash
# Session 35's third pass (carry ["carry/variants/V", "carry/variants/W"]; W = V's cubin with
# the H100's depth 6 at 32..63 rows): on an H200, session35b.sh's H200 part; on an H100, the
# plain default of V (depth 5) and W (depth 6) side by side at B = 40, 48, 56, 60, two rounds.
# Usage: bash scripts/exp/session35c.sh
source "$(dirname "$0")/variants-lib.sh"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$card" in
  *H200*) exec bash scripts/exp/session35b.sh W ;;
esac
unpack_variants V W
: > "$OUT/rows.txt"
for r in 1 2; do
  for b in 40 48 56 60; do
    for v in V W; do
      timed_row $v "r$r GeMM2" --m $b --n 12288 --k 6144 > /dev/null
      timed_row $v "r$r GeMM1" --m $b --n 6144 --k 12288 --gelu > /dev/null
    done
  done
done
echo "== $card"
cat "$OUT/rows.txt"
