#!/usr/bin/env bash
# Session 8's pass: the whole check-and-measure pass (scripts/gpu-check, multi-GPU off), then
# the traced `run gemm` timelines with the blocks' setup (path 2 stamps block entry now).
cd "$(dirname "$0")/../.."
CUSYNC_MULTIGPU=0 bash scripts/gpu-check; rc=$?
source scripts/exp/env.sh
echo
echo "== run gemm timelines"
while read -r args; do
  echo "-- $args"
  carry/bin/cusync run gemm $args --iters 20 2>&1 | grep -E "ours|cuBLAS |traced|rror" | head -3
done <<'LIST'
--m 64 --n 12288 --k 6144
--m 64 --n 12288 --k 768
--m 1 --n 12288 --k 6144
--m 256 --n 12288 --k 6144
--m 8192 --n 8192 --k 8192
LIST
exit $rc
