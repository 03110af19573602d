#!/usr/bin/env bash
# Session 26: what the path-2 epilogue costs and whether 16-byte stores buy it back. The GPU
# suite on SUITE ("-": none), then the carried variants (scripts/exp/build-variant.sh) side by
# side in interleaved rounds on the GPT-3 MLP GeMMs and 8192^3 (`run gemm`: median time and
# ratio to cuBLAS; the rows also in $OUT/gemm-rows.txt), then `cusync bench` and `sweep mlp`
# (scripts/exp/variants.sh) for the variants named after "--".
# Usage: bash scripts/exp/session26.sh SUITE ROUNDS GEMM_VARIANT... [-- MLP_ROUNDS MLP_VARIANT...]
source "$(dirname "$0")/variants-lib.sh"
suite=$1; rounds=$2; shift 2
gemm=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do gemm+=("$1"); shift; done
[ $# -gt 0 ] && shift
[ "$suite" != "-" ] && run_suite "$suite"
unpack_variants "${gemm[@]}"
shapes=("--m 1024 --n 6144 --k 12288 --gelu" "--m 1024 --n 12288 --k 6144" "--m 2048 --n 6144 --k 12288 --gelu"
        "--m 2048 --n 12288 --k 6144" "--m 256 --n 12288 --k 6144" "--m 8192 --n 8192 --k 8192")
t0=$SECONDS
for r in $(seq 1 "$rounds"); do
  for s in "${shapes[@]}"; do
    gemm_rows "r$r" "$s" "${gemm[@]}"
  done
done | grep -v "traced launch" | tee "$OUT/gemm-rows.txt"
echo "gemm rows ($((SECONDS-t0)) s)"
[ $# -gt 1 ] && bash scripts/exp/variants.sh "$@"
