#!/usr/bin/env bash
# Session 38's short check-and-measure pass for a small device budget (carry `carry/bin`,
# `carry/ptx` from scripts/build-gpu-carry; at most about 9 minutes): the whole GPU suite, the
# MLP sweep with each policy behind the wait kernel and by programmatic launch side by side,
# and a traced B = 256 RowSync run with both launches. Prints a short table last.
# Usage: bash scripts/exp/session38b.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/carry-unpack.sh
use_carry /tmp/c38.cubin
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
t0=$SECONDS
timeout 330 carry/bin/test-gpu-test --test-threads=1 > "$OUT/test-gpu-test.log" 2>&1
suite_rc=$?
echo "GPU suite rc=$suite_rc ($((SECONDS - t0)) s)"
grep -E "FAILED|panicked|SKIPPED|skipped:|^gpu:" "$OUT/test-gpu-test.log" | head -20
grep -E "programmatic|launch: pdl|Programmatic" "$OUT/test-gpu-test.log" | head -12
timeout 200 carry/bin/cusync sweep mlp --batches 1,8,16,64,128,256,512,1024,2048 --samples 10 \
  --launch auto,pdl --csv "$OUT/sweep-pdl.csv" > "$OUT/sweep-pdl.txt" 2>&1
echo "sweep rc=$? ($((SECONDS - t0)) s)"
timeout 60 carry/bin/cusync run mlp --batch 256 --policy rowsync --order col --launch auto,pdl \
  --trace "$OUT/trace" > "$OUT/run-mlp-256.txt" 2>&1
echo "run mlp --trace rc=$? ($((SECONDS - t0)) s)"
grep -E "^  (RowSync|TileSync)|wrote .*svg|makespan|stream mode" "$OUT/run-mlp-256.txt" | head -12
mv "$OUT"/trace/*.svg "$OUT"/ 2>/dev/null; rm -rf "$OUT/trace"
echo "=== sweep (auto vs pdl) ==="
cat "$OUT/sweep-pdl.txt" | grep -v "^wrote"
echo "== $((SECONDS - t0)) s"
