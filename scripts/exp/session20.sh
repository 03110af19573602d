#!/usr/bin/env bash
# Session 20: the GPU suite on one carried variant (with its test binary), `cusync bench` and
# `sweep mlp` for the carried variants in interleaved rounds (scripts/exp/variants.sh), then
# traced MLP runs of each traced variant (scripts/exp/session19-traces.sh).
# Usage: bash scripts/exp/session20.sh SUITE_VARIANT ROUNDS VARIANT... -- TRACED_VARIANT...
source "$(dirname "$0")/variants-lib.sh"
suite_then_variants "$@"
for v in "${rest[@]}"; do
  t0=$SECONDS
  bash scripts/exp/session19-traces.sh "$v" | grep -E "B=1024 rowsync|B=256 rowsync" | head -8
  echo "traces $v ($((SECONDS-t0)) s)"
done
