#!/usr/bin/env bash
# Session 14, run 1: the weight-streaming ceiling (`run gemm --read-probe`) beside the skinny
# GeMM and cuBLAS at B = 1 (both MLP GeMMs) and B = 16 (GeMM1).
source "$(dirname "$0")/env.sh"
for shape in "--m 1 --n 6144 --k 12288 --gelu" "--m 1 --n 12288 --k 6144" "--m 16 --n 6144 --k 12288 --gelu"; do
  echo "=== run gemm $shape --read-probe"
  timeout 200 carry/bin/cusync run gemm $shape --iters 20 --read-probe 2>&1 | grep -v "^  wrote"
done
