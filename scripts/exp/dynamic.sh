#!/usr/bin/env bash
# Split-K units from a launch-wide counter (session 7 run 9; that build was reverted, see perf-notes):
# the GeMM suite, then the swapped split-K factors.
source "$(dirname "$0")/env.sh"
timeout 300 carry/bin/test-gpu-test --test-threads=1 gemm:: > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |result" $OUT/tests.log
B=carry/bin/cusync
while read -r args; do
  echo "== $args"
  $B run gemm $args --iters 30 2>&1 | grep -E "ours |cuBLAS |traced|rror" | head -3
done <<'LIST'
--m 64 --n 12288 --k 6144 --kernel wg128x64 --swap-ab on --split-k 1
--m 64 --n 12288 --k 6144 --kernel wg128x64 --swap-ab on --split-k 2
--m 64 --n 12288 --k 6144 --kernel wg128x64 --swap-ab on --split-k 4
--m 64 --n 12288 --k 6144 --kernel wg128x64 --swap-ab on --split-k 6
--m 64 --n 6144 --k 12288 --gelu --kernel wg128x64 --swap-ab on --split-k 2
--m 64 --n 6144 --k 12288 --gelu --kernel wg128x64 --swap-ab on --split-k 4
--m 64 --n 6144 --k 12288 --gelu --kernel wg128x64 --swap-ab on --split-k 8
--m 1 --n 12288 --k 6144 --kernel wg128x64 --swap-ab on --split-k 4
--m 1 --n 12288 --k 6144
--m 1 --n 6144 --k 12288 --gelu --kernel wg128x64 --swap-ab on --split-k 8
--m 1 --n 6144 --k 12288 --gelu
--m 256 --n 6144 --k 12288 --gelu
LIST
