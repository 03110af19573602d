#!/usr/bin/env bash
# Session 10, run 2: the swapped stream stages (wg128x64: both MLP GeMMs as C^T = B^T A^T on the
# skinny tile). The whole GPU suite (with the swapped-stage test), then the MLP sweep's small
# batches on the default stage tile and on wg128x64, alternated twice, then the GeMM table,
# the protocol table and `run layers` on this build.
source "$(dirname "$0")/env.sh"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
carry/bin/test-gpu-test --test-threads=1 > "$OUT/gpu-suite.log" 2>&1; rc=$?
grep -E "FAIL|panicked|^gpu:" "$OUT/gpu-suite.log" | tail -6
grep -E "swapped [0-9]+x" "$OUT/gpu-suite.log" | head -8
for r in 1 2; do
  for k in default wg128x64; do
    echo "== sweep mlp --batches 1,8,64,128,256 --kernel $k (round $r, ${SECONDS}s)"
    args=(); [ "$k" = default ] || args=(--kernel "$k")
    carry/bin/cusync sweep mlp --batches 1,8,64,128,256 --samples 10 "${args[@]}" 2>/dev/null | grep -E '^ +[0-9]+ wg' | cut -c1-200
  done
done
echo "== gemm-table --iters 8 (${SECONDS}s)"
carry/bin/cusync gemm-table --iters 8 2>/dev/null | tail -32
echo "== bench (${SECONDS}s)"
carry/bin/cusync bench --samples 11 2>/dev/null | grep -E 'stream stage:|post->wait'
echo "== run layers --m 16384 --layers 2,4,8 --iters 5 (${SECONDS}s)"
carry/bin/cusync run layers --m 16384 --layers 2,4,8 --iters 5 2>&1 | grep -E 'pipelined|met|twin|single|cuBLAS'
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
echo "== done (${SECONDS}s), suite rc=$rc"
exit $rc
