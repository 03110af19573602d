#!/usr/bin/env bash
# Session 14, run 3: the skinny GeMM with its weight through a per-lane cp.async ring. The
# skinny and MLP GPU tests, then ours against cuBLAS at B = 1 / 8 / 16 on both MLP GeMMs (and
# 128-column blocks), the read probe at B = 1, and the MLP sweep at B = 1 / 8 / 16.
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
timeout 260 carry/bin/test-gpu-test --test-threads=1 mlp:: gemm::skinny gemm::run_gemm > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |skinny|^gpu:|error|FAILED|panicked|test result" $OUT/tests.log | head -60
for shape in "1 6144 12288 --gelu" "1 12288 6144" "8 6144 12288 --gelu" "8 12288 6144" "16 6144 12288 --gelu" "16 12288 6144"; do
  set -- $shape
  for c in 64 128; do
    r=$(timeout 60 carry/bin/cusync run gemm --m $1 --n $2 --k $3 ${4:-} --skinny on --skinny-cols $c --iters 30 2>&1 | grep -E "cuBLAS|ours" | sed 's/(96 column.*//; s/(192 column.*//; s/(48 column.*//' | tr '\n' ' ')
    echo "B=$1 ${2}x$3 cols $c: $r"
  done
done
timeout 120 carry/bin/cusync run gemm --m 1 --n 6144 --k 12288 --gelu --iters 20 --read-probe 2>&1 | grep -A20 "read probe"
timeout 150 carry/bin/cusync sweep mlp --batches 1,8,16 --samples 10 > $OUT/sweep.txt 2>&1; echo "sweep rc=$?"
cat $OUT/sweep.txt
