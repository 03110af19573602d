#!/usr/bin/env bash
# Session 39's second pass (carry `carry/bin`, `carry/ptx` from scripts/build-gpu-carry; about
# 2 minutes on an H100, 7 on an H200): the microbench GPU tests and `cusync bench` with the
# per-tile spans of 11 alternating launches; on an H200 also the sweep (auto,pdl), Auto's
# paired trial at B = 1 and 256, `run layers` for 2 and 4 layers and the GeMM table, which
# run 1 could only measure on an H100. Prints a short table last.
# The bench's last traced launches of each side go back in bench-traces.tgz.
# Usage: bash scripts/exp/session39b.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/carry-unpack.sh
use_carry /tmp/c39b.cubin
source scripts/exp/session39-steps.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv,noheader
timeout 150 carry/bin/test-gpu-test --test-threads=1 microbench:: > "$OUT/test-microbench.log" 2>&1
row "GPU tests microbench::" "$?" "$(grep -E '^gpu:' "$OUT/test-microbench.log" | tail -1)"
CUSYNC_BENCH_TRACE_DIR=/tmp/bench-traces timeout 120 carry/bin/cusync bench --samples 11 > "$OUT/bench.txt" 2>&1
row "bench" "$?" "$(grep -c . "$OUT/bench.txt") lines"
tar czf "$OUT/bench-traces.tgz" --exclude='*.svg' -C /tmp bench-traces 2>/dev/null
case "$gpu" in
  *H200*)
    mlp_measurements "$OUT"
    timeout 150 carry/bin/cusync run layers --m 16384 --layers 2,4 --iters 5 > "$OUT/layers.txt" 2>&1
    row "run layers 2,4" "$?" "$(grep -c . "$OUT/layers.txt") lines"
    if [ $((SECONDS - t0)) -lt 400 ]; then
      timeout 150 carry/bin/cusync gemm-table --iters 8 > "$OUT/gemm-table.txt" 2>&1
      row "gemm-table" "$?" "$(grep -c '^|' "$OUT/gemm-table.txt") rows"
    fi
    ;;
  *) row "H200 measurements" "-" "skipped on $gpu" ;;
esac
echo "=== bench (derived) ==="; grep -E "per tile|every wait met|hooks with|empty kernel|post->wait" "$OUT/bench.txt" | grep -v measuring
[ -f "$OUT/sweep.txt" ] && { echo "=== sweep ==="; head -12 "$OUT/sweep.txt"; }
[ -f "$OUT/auto.txt" ] && { echo "=== auto ==="; grep -E '^auto: the trial' "$OUT/auto.txt"; }
[ -f "$OUT/layers.txt" ] && { echo "=== layers ==="; grep -E ' / |overhead|vs best' "$OUT/layers.txt"; }
[ -f "$OUT/gemm-table.txt" ] && { echo "=== gemm-table ==="; grep -E '^\|' "$OUT/gemm-table.txt" | head -20; }
summary
