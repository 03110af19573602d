#!/usr/bin/env bash
# Session 40's first pass (carry `carry/bin`, `carry/ptx`; about 2 minutes): the microbench
# GPU tests (the serialized pair now with NoSync, both stages' stream kernels and no edge,
# beside RowSync and TileSync) and `cusync bench --samples 21` with the bench's last traced
# launches of each side (bench-traces.tgz). Prints a short table last.
# Usage: bash scripts/exp/session40.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/exp/session39-steps.sh
exp_start /tmp/c40.cubin
gpu_tests test-microbench.log 200 microbench::
bench_traced 21
grep -E "serialized (NoSync|RowSync|TileSync)" "$OUT/test-microbench.log" | cut -c1-300
echo "=== bench (derived) ==="; grep -E "per tile|paired median|hooks with|post->wait" "$OUT/bench.txt" | grep -v measuring
summary
