#!/usr/bin/env bash
# Session 13, run 1: the skinny stream-mode stages (MlpKernel::Skinny, the MLP's default for
# B <= 16). The MLP suite and the skinny GeMM test, then the MLP sweep at B = 1 / 8 / 16 on the
# skinny stages against the swapped path-2 stages (the previous default), and the GeMM table.
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
timeout 240 carry/bin/test-gpu-test --test-threads=1 mlp:: gemm::skinny > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |skinny|^gpu:|error|FAILED|panicked" $OUT/tests.log | head -60
timeout 120 carry/bin/cusync sweep mlp --batches 1,8,16 --samples 10 > $OUT/sweep-skinny.txt 2>&1; echo "sweep skinny rc=$?"
cat $OUT/sweep-skinny.txt
timeout 120 carry/bin/cusync sweep mlp --batches 1,8,16 --samples 10 --kernel wg128x64 > $OUT/sweep-wg.txt 2>&1; echo "sweep wg128x64 rc=$?"
cat $OUT/sweep-wg.txt
timeout 120 carry/bin/cusync run mlp --batch 1 --policy auto > $OUT/auto.txt 2>&1; echo "auto rc=$?"
tail -15 $OUT/auto.txt
timeout 120 carry/bin/cusync gemm-table --iters 10 > $OUT/gemm-table.txt 2>&1; echo "table rc=$?"
head -8 $OUT/gemm-table.txt
# 64- against 128-column skinny blocks, side by side per shape (two rounds, order swapped).
for round in 1 2; do
  for shape in "1 6144 12288 --gelu" "1 12288 6144" "8 6144 12288 --gelu" "8 12288 6144" "16 6144 12288 --gelu" "16 12288 6144"; do
    set -- $shape
    cols="64 128"; [ $round = 2 ] && cols="128 64"
    for c in $cols; do
      r=$(timeout 60 carry/bin/cusync run gemm --m $1 --n $2 --k $3 ${4:-} --skinny on --skinny-cols $c --iters 20 2>&1 | grep -E "cuBLAS|ours" | tr '\n' ' ')
      echo "round $round B=$1 ${2}x$3 cols $c: $r"
    done
  done
done
