#!/usr/bin/env bash
# Session 12: the skinny kernels (M <= 64, weight streamed through registers) on the H200:
# their GPU tests and the path-2 ones that moved, then each MLP small-batch GeMM timed three
# ways side by side (skinny, path 2 as before, cuBLAS) by `cusync gemm-table`.
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
timeout 240 carry/bin/test-gpu-test --test-threads=1 gemm::skinny gemm::path2_swapped gemm::run_gemm \
  gemm::path2_stream_k gemm::timing > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |skinny|chosen|passed|FAIL|fail" $OUT/tests.log | head -60
for b in 1 64; do
  timeout 60 carry/bin/cusync run gemm --m $b --n 6144 --k 12288 --gelu --iters 20 2>&1 | grep -E "ours|cuBLAS"
  timeout 60 carry/bin/cusync run gemm --m $b --n 12288 --k 6144 --iters 20 2>&1 | grep -E "ours|cuBLAS"
done
timeout 240 carry/bin/cusync gemm-table --iters 10 > $OUT/gemm-table.txt 2>&1; echo "table rc=$?"
head -18 $OUT/gemm-table.txt
