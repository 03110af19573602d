#!/usr/bin/env bash
# Session 23: the poll warp (variant P: warp 2 of a path-2 stream stage's producer warpgroup
# polls each unit's semaphores ahead of the producer thread) against the landed build (R).
# The GPU suite on SUITE (skipped when SUITE is "-"), then `cusync bench` and `sweep mlp` in
# interleaved rounds (scripts/exp/variants.sh).
# Usage: bash scripts/exp/session23.sh SUITE ROUNDS VARIANT...
source "$(dirname "$0")/variants-lib.sh"
if [ "$1" = "-" ]; then
  bash scripts/exp/variants.sh "$2" "${@:3}"
else
  suite_then_variants "$1" "$2" "${@:3}" --
fi
