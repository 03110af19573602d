#!/usr/bin/env bash
# Session 39's check-and-measure pass (carry `carry/bin`, `carry/ptx` from
# scripts/build-gpu-carry; at most about 9 minutes): the whole GPU suite on the MLP's
# programmatic default (host commits 8908910..7cb3cdc, not yet run on a GPU), `run mlp` with no
# --launch, the protocol bench, the sweep (default launch and the wait kernel side by side),
# Auto's trial at B = 256, traced B = 1 runs of StreamSync and RowSync/row with both launches
# (where a B = 1 GeMM2 tile's time goes), then the GeMM table if the time allows. Prints a
# short table last.
# Then Auto's paired rule at B = 1 and 256, and `run layers` for 2 and 4 layers where the time
# allows.
# Usage: bash scripts/exp/session39.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/carry-unpack.sh
use_carry /tmp/c39.cubin
source scripts/exp/session39-steps.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv,noheader
timeout 330 carry/bin/test-gpu-test --test-threads=1 > "$OUT/test-gpu-test.log" 2>&1
rc=$?
row "GPU suite" "$rc" "$(grep -E '^gpu:' "$OUT/test-gpu-test.log" | tail -1)"
grep -E "FAILED|panicked|SKIPPED|^gpu:" "$OUT/test-gpu-test.log" | head -20
timeout 60 carry/bin/cusync run mlp --batch 1024 --policy rowsync --order col > /tmp/run1024.txt 2>&1
row "run mlp B=1024 (no --launch)" "$?" "$(grep -cE '/pdl' /tmp/run1024.txt) /pdl lines"
grep -E "verified|^  (Row|Tile|Stream)" /tmp/run1024.txt | head -6
timeout 60 carry/bin/cusync bench --samples 11 > "$OUT/bench.txt" 2>&1
row "bench" "$?" "$(grep -c . "$OUT/bench.txt") lines"
mlp_measurements "$OUT"
if [ $((SECONDS - t0)) -lt 420 ]; then
  timeout 120 carry/bin/cusync run layers --m 16384 --layers 2,4 --iters 5 > "$OUT/layers.txt" 2>&1
  row "run layers 2,4" "$?" "$(grep -c . "$OUT/layers.txt") lines"
else
  row "run layers" "-" "skipped: too little time left"
fi
if [ $((SECONDS - t0)) -lt 380 ]; then
  timeout 150 carry/bin/cusync gemm-table --iters 8 > "$OUT/gemm-table.txt" 2>&1
  row "gemm-table" "$?" "$(grep -c '^|' "$OUT/gemm-table.txt") rows"
else
  row "gemm-table" "-" "skipped: too little time left"
fi
echo "=== bench (derived) ==="; grep -E "per tile|every wait met|hooks with|empty|post .* wait" "$OUT/bench.txt" | head -20
echo "=== sweep ==="; grep -v '^wrote' "$OUT/sweep.txt" | tail -30
echo "=== auto B=1, B=256 ==="; grep -E '^auto' "$OUT/auto.txt"
echo "=== layers ==="; tail -25 "$OUT/layers.txt" 2>/dev/null
echo "=== B=1 traces ==="; grep -vE "^wrote" "$OUT/run-mlp-1.txt" | head -25
summary
