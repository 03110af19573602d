#!/usr/bin/env bash
# Session 21: the GPU suite on one carried variant (with its test binary), `cusync bench` and
# `sweep mlp` for the carried variants in interleaved rounds (scripts/exp/variants.sh), each
# variant's GeMM1-alone line (`run mlp --batch 1024`: the stream stage in every order against
# the plain kernel, one launch apart), and ncu's L2 / DRAM per launch for the ncu variants
# (scripts/exp/ncu-l2.sh, its last 12 rows).
# Usage: bash scripts/exp/session21.sh SUITE_VARIANT ROUNDS VARIANT... -- NCU_VARIANT...
source "$(dirname "$0")/variants-lib.sh"
suite_then_variants "$@"
for r in $(seq 1 "$rounds"); do
  for v in "${bench[@]}"; do
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 60 /tmp/cusync-$v run mlp --batch 1024 --policy rowsync --order col 2>&1 \
      | grep -A6 "GeMM1 alone" | sed "s/^/  $v r$r: /"
  done
done
for v in "${rest[@]}"; do
  t0=$SECONDS
  bash scripts/exp/ncu-l2.sh "$v" | tail -14
  echo "ncu-l2 $v ($((SECONDS-t0)) s)"
done
