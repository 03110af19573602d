#!/usr/bin/env bash
# Session 12, run 2: the skinny kernels with loads running ahead across column blocks; their
# tests, then M = 1..64 for both GPT-3 MLP GeMMs timed skinny / path 2 / cuBLAS in one process
# each (`run gemm` times ours and cuBLAS side by side; the two kernels of ours alternate).
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
timeout 200 carry/bin/test-gpu-test --test-threads=1 gemm::skinny gemm::run_gemm > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |forced problems|passed|FAIL|fail|rror" $OUT/tests.log | head -30
for b in 1 8 16 24 32 48 64; do
  for shape in "6144 12288 --gelu" "12288 6144"; do
    set -- $shape
    for sk in on off; do
      r=$(timeout 60 carry/bin/cusync run gemm --m $b --n $1 --k $2 ${3:-} --skinny $sk --iters 20 2>&1 | grep -E "^  ours |ours / cuBLAS" | tr -s ' ' | tr '\n' ' ')
      echo "B=$b N=$1 K=$2 skinny=$sk: $r"
    done
  done
done
