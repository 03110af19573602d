#!/usr/bin/env bash
# Session 40's first pass (carry `carry/bin`, `carry/ptx`; about 2 minutes): the microbench
# GPU tests (the serialized pair now with NoSync, both stages' stream kernels and no edge,
# beside RowSync and TileSync) and `cusync bench --samples 21` with the bench's last traced
# launches of each side (bench-traces.tgz). Prints a short table last.
# Usage: bash scripts/exp/session40.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/carry-unpack.sh
use_carry /tmp/c40.cubin
source scripts/exp/session39-steps.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv,noheader
timeout 200 carry/bin/test-gpu-test --test-threads=1 microbench:: > "$OUT/test-microbench.log" 2>&1
row "GPU tests microbench::" "$?" "$(grep -E '^gpu:' "$OUT/test-microbench.log" | tail -1)"
CUSYNC_BENCH_TRACE_DIR=/tmp/bench-traces timeout 200 carry/bin/cusync bench --samples 21 > "$OUT/bench.txt" 2>&1
row "bench" "$?" "$(grep -c . "$OUT/bench.txt") lines"
tar czf "$OUT/bench-traces.tgz" --exclude='*.svg' -C /tmp bench-traces 2>/dev/null
grep -E "serialized (NoSync|RowSync|TileSync)" "$OUT/test-microbench.log" | cut -c1-300
echo "=== bench (derived) ==="; grep -E "per tile|paired median|hooks with|post->wait" "$OUT/bench.txt" | grep -v measuring
summary
