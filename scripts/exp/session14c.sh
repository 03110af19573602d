#!/usr/bin/env bash
# Session 14, run 5: the cp.async skinny kernel with consecutive lanes copying consecutive
# bytes. The skinny and MLP GPU tests, ours against cuBLAS at B = 1 / 8 / 16 on both MLP GeMMs
# (128-column blocks at B = 1), and the MLP sweep at B = 1 / 8 / 16.
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
timeout 260 carry/bin/test-gpu-test --test-threads=1 mlp::skinny gemm::skinny gemm::run_gemm > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |worst|^gpu:|error|FAILED|panicked|test result" $OUT/tests.log | head -30
for shape in "1 6144 12288 --gelu" "1 12288 6144" "8 6144 12288 --gelu" "8 12288 6144" "16 6144 12288 --gelu" "16 12288 6144"; do
  set -- $shape
  cs="64"; [ $1 = 1 ] && cs="64 128"
  for c in $cs; do
    r=$(timeout 60 carry/bin/cusync run gemm --m $1 --n $2 --k $3 ${4:-} --skinny on --skinny-cols $c --iters 30 2>&1 | grep -E "cuBLAS|ours" | sed 's/(96 column.*//; s/(192 column.*//; s/(48 column.*//' | tr '\n' ' ')
    echo "B=$1 ${2}x$3 cols $c: $r"
  done
done
timeout 150 carry/bin/cusync sweep mlp --batches 1,8,16 --samples 10 > $OUT/sweep.txt 2>&1; echo "sweep rc=$?"
cat $OUT/sweep.txt
