#!/usr/bin/env bash
# Session 18 (runs 1 and 2): the GPU suite on one carried variant (with its test binary), then
# `cusync bench` and `sweep mlp` for the carried variants in interleaved rounds
# (scripts/exp/variants.sh), then, for the variants after `--`, the plain kernels' `gemm-table`
# (scripts/exp/gemm-table-ab.sh).
# Usage: bash scripts/exp/session18.sh SUITE_VARIANT ROUNDS VARIANT... -- TABLE_VARIANT...
source "$(dirname "$0")/variants-lib.sh"
suite=$1; rounds=$2; shift 2
bench=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do bench+=("$1"); shift; done; shift
run_suite "$suite"
t0=$SECONDS
bash scripts/exp/variants.sh "$rounds" "${bench[@]}"
echo "variants ($((SECONDS-t0)) s)"
[ $# -gt 0 ] && bash scripts/exp/gemm-table-ab.sh 1 "$@"
