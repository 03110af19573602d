#!/usr/bin/env bash
# Session 27: the GPU suite on SUITE ("-": none), then `gemm-table` for the GEMM variants in
# ROUNDS interleaved rounds (scripts/exp/gemm-table-ab.sh), then `cusync bench` and `sweep mlp`
# (scripts/exp/variants.sh) for the variants after "--".
# Usage: bash scripts/exp/session27.sh SUITE ROUNDS GEMM_VARIANT... [-- MLP_ROUNDS MLP_VARIANT...]
source "$(dirname "$0")/variants-lib.sh"
suite=$1; rounds=$2; shift 2
gemm=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do gemm+=("$1"); shift; done
[ $# -gt 0 ] && shift
[ "$suite" != "-" ] && run_suite "$suite"
t0=$SECONDS
[ ${#gemm[@]} -gt 0 ] && bash scripts/exp/gemm-table-ab.sh "$rounds" "${gemm[@]}"
echo "gemm tables ($((SECONDS-t0)) s)"
[ $# -gt 1 ] && bash scripts/exp/variants.sh "$@"
