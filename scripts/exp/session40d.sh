#!/usr/bin/env bash
# Session 40's H200 pass (carry `carry/bin`, `carry/ptx`): `cusync bench --samples 21` (traces
# in bench-traces.tgz), the whole GPU suite, then the MLP sweep (auto and programmatic
# launches), and a short table. On any other card it runs the microbench and multigpu GPU tests only when
# asked (`bash scripts/exp/session40d.sh tests`), else nothing: its figures would not be the
# H200's.
# Usage: bash scripts/exp/session40d.sh [tests]
set -uo pipefail
cd "$(dirname "$0")/../.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) ;; *) [ "${1:-}" = tests ] || { echo "not an H200 ($gpu): nothing run"; exit 3; } ;; esac
source scripts/exp/session39-steps.sh
exp_start /tmp/c40.cubin
case "$gpu" in
  *H200*) ;;
  *) echo "not an H200 ($gpu): the microbench and multigpu GPU tests only"
     gpu_tests test-gpu.log 240 microbench:: multigpu::
     grep -E "^test |paired by|refused|^gpu:" "$OUT/test-gpu.log" | cut -c1-300
     exit 3 ;;
esac
bench_traced 21
gpu_tests test-gpu.log 420
grep -E "FAILED" "$OUT/test-gpu.log" | head -5
if [ $((SECONDS - t0)) -lt 460 ]; then
  timeout 120 carry/bin/cusync sweep mlp --batches 1,8,16,64,128,256,512,1024,2048 --samples 10 \
    --launch auto,pdl --csv "$OUT/sweep.csv" > "$OUT/sweep.txt" 2>&1
  row "sweep mlp auto,pdl" "$?" "$(grep -c . "$OUT/sweep.txt") lines"
fi
echo "=== bench (derived) ==="; grep -E "per tile|paired median|hooks with|post->wait" "$OUT/bench.txt" | grep -v measuring | cut -c1-420
[ -f "$OUT/sweep.txt" ] && { echo "=== sweep ==="; head -14 "$OUT/sweep.txt"; }
summary
