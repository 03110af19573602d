#!/usr/bin/env bash
# Experiment: decompositions of the B <= 64 MLP GeMMs (DRAM row locality of split-K vs stream-K).
source "$(dirname "$0")/env.sh"
B=carry/bin/cusync
for m in 64 1; do
 for g in "6144 12288 --gelu" "12288 6144"; do
  set -- $g; n=$1; k=$2; ge=${3:-}
  for cfg in "" "--kernel wg128x192 --stream-k off --split-k 1" "--kernel wg128x192 --stream-k off --split-k 2" "--kernel wg128x192 --stream-k off --split-k 4" \
             "--kernel wg128x256 --stream-k off --split-k 2" "--kernel wg128x256 --stream-k off --split-k 5" "--kernel wg128x128 --stream-k off --split-k 2" "--kernel wg128x128 --stream-k off --split-k 3"; do
    echo "== m=$m n=$n k=$k $ge $cfg"
    $B run gemm --m $m --n $n --k $k $ge $cfg --iters 30 2>&1 | grep -iE "ms|TB|cublas|error|split|stream" | head -6
  done
 done
done
