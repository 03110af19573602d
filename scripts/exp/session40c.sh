#!/usr/bin/env bash
# Session 40's third pass (carry `carry/bin`, `carry/ptx`): on an H200 the whole GPU suite,
# elsewhere the microbench GPU tests; then `cusync bench --samples 21` (each traced launch of
# the per-tile lines after an untimed one of its own side), its last traced launches of each
# side in bench-traces.tgz. Prints a short table last.
# Usage: bash scripts/exp/session40c.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/carry-unpack.sh
use_carry /tmp/c40.cubin
source scripts/exp/session39-steps.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv,noheader
case "$gpu" in
  *H200*) timeout 450 carry/bin/test-gpu-test --test-threads=1 > "$OUT/test-gpu.log" 2>&1
          row "GPU suite" "$?" "$(grep -E '^gpu:' "$OUT/test-gpu.log" | tail -1)" ;;
  *) timeout 200 carry/bin/test-gpu-test --test-threads=1 microbench:: > "$OUT/test-gpu.log" 2>&1
     row "GPU tests microbench::" "$?" "$(grep -E '^gpu:' "$OUT/test-gpu.log" | tail -1)" ;;
esac
grep -E "FAILED|skipped:" "$OUT/test-gpu.log" | head -5
CUSYNC_BENCH_TRACE_DIR=/tmp/bench-traces timeout 150 carry/bin/cusync bench --samples 21 > "$OUT/bench.txt" 2>&1
row "bench" "$?" "$(grep -c . "$OUT/bench.txt") lines"
tar czf "$OUT/bench-traces.tgz" --exclude='*.svg' -C /tmp bench-traces 2>/dev/null
echo "=== bench (derived) ==="; grep -E "per tile|paired median|hooks with|post->wait" "$OUT/bench.txt" | grep -v measuring | cut -c1-420
summary
