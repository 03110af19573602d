#!/usr/bin/env bash
# Session 22: the path-2 tile records through shared-memory stores and loads (variant R)
# against the landed build (S4). The GPU suite on SUITE; `cusync bench` and `sweep mlp` in
# interleaved rounds (scripts/exp/variants.sh); `run gemm` on the small-batch path-2 shapes
# (scripts/exp/session22b.sh's first part: time, setup and first loads, ratio to cuBLAS);
# then scripts/exp/session22d.sh (the GeMM table and the megakernel) for the same variants.
# Usage: bash scripts/exp/session22c.sh SUITE ROUNDS VARIANT...
source "$(dirname "$0")/variants-lib.sh"
suite_then_variants "$1" "$2" "${@:3}" --
shapes=("--m 64 --n 12288 --k 6144" "--m 64 --n 6144 --k 12288 --gelu" "--m 1 --n 12288 --k 6144 --skinny off")
for s in "${shapes[@]}"; do
  gemm_rows "r1" "$s" "${bench[@]}"
done
