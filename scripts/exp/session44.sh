#!/usr/bin/env bash
# Session 44's second call (carry `carry/bin`, `carry/ptx` from `scripts/build-gpu-carry`;
# builds nothing here), after `H200_ONLY=1 REST=0 bash scripts/exp/session43b.sh`:
# 1. `cusync bench --samples 21` (issue 7's table), its last traced launches kept;
# 2. the GPU suite but the persistent tests session43b.sh ran (module filters), in what is
#    left of BUDGET (default 570 s).
# H200_ONLY=1 leaves at once on any other card.
# Usage: [BUDGET=seconds] [H200_ONLY=1] bash scripts/exp/session44.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) ;; *) [ -n "${H200_ONLY:-}" ] && { echo "not an H200 ($gpu): nothing run"; exit 3; } ;; esac
source scripts/exp/session39-steps.sh
exp_start /tmp/c44.cubin
bench_traced 21
echo "=== bench ==="; grep -vE "^ *(measuring|warming)" "$OUT/bench.txt" | tail -60 | cut -c1-200
lim=$((${BUDGET:-570} - (SECONDS - t0)))
gpu_tests test-rest.log $((lim - 10)) intrinsics:: protocol:: stream_mode:: reliability:: mlp:: gemm:: probe:: microbench:: traces:: multigpu::
grep -E "^test .*FAIL|^gpu:" "$OUT/test-rest.log" | cut -c1-200
summary
