#!/usr/bin/env bash
# Session 14: the weight-streaming ceiling (`run gemm --read-probe`: registers and cp.async,
# run widths, depths) beside the skinny GeMM and cuBLAS at B = 1 (both MLP GeMMs).
source "$(dirname "$0")/env.sh"
for shape in "--m 1 --n 6144 --k 12288 --gelu" "--m 1 --n 12288 --k 6144"; do
  echo "=== run gemm $shape --read-probe"
  timeout 200 carry/bin/cusync run gemm $shape --iters 20 --read-probe 2>&1 | grep -v "^  wrote\|traced launch\|verified"
done
