#!/usr/bin/env bash
# Experiment: the swapped 128x64 kernel on the B <= 64 MLP GeMMs: tests, then decompositions.
source "$(dirname "$0")/env.sh"
timeout 240 carry/bin/test-gpu-test --test-threads=1 gemm::path2 gemm::run_gemm > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |swapped|problems|result|FAIL|rror" $OUT/tests.log | head -60
B=carry/bin/cusync
for m in 64 1; do
 for g in "6144 12288 --gelu" "12288 6144"; do
  set -- $g; n=$1; k=$2; ge=${3:-}
  for cfg in "" "--kernel wg128x64 --swap-ab on --stream-k off --split-k 1" "--kernel wg128x64 --swap-ab on --stream-k off --split-k 2" "--kernel wg128x64 --swap-ab on --stream-k off --split-k 3" "--kernel wg128x64 --swap-ab on --stream-k on"; do
    echo "== m=$m n=$n k=$k $ge $cfg"
    $B run gemm --m $m --n $n --k $k $ge $cfg --iters 30 2>&1 | grep -E "ours|cuBLAS|rror|verified" | head -4
  done
 done
done
