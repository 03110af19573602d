#!/usr/bin/env bash
# Experiment: where a launch's time goes (traced launch vs events) on skinny and large GeMMs.
source "$(dirname "$0")/env.sh"
B=carry/bin/cusync
while read -r args; do
  echo "== $args"
  $B run gemm $args --iters 20 2>&1 | grep -E "ours|cuBLAS |traced|rror" | head -3
done <<'LIST'
--m 64 --n 12288 --k 6144
--m 64 --n 12288 --k 6144 --kernel wg128x192 --stream-k off --split-k 1
--m 64 --n 12288 --k 768
--m 64 --n 12288 --k 24576
--m 64 --n 6144 --k 12288 --gelu
--m 1 --n 12288 --k 6144
--m 256 --n 12288 --k 6144
--m 2048 --n 12288 --k 6144
--m 8192 --n 8192 --k 8192
LIST
