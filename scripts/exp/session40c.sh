#!/usr/bin/env bash
# Session 40's third pass (carry `carry/bin`, `carry/ptx`): on an H200 the whole GPU suite,
# elsewhere the microbench GPU tests; then `cusync bench --samples 21` (each traced launch of
# the per-tile lines after an untimed one of its own side), its last traced launches of each
# side in bench-traces.tgz. Prints a short table last.
# Usage: bash scripts/exp/session40c.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/exp/session39-steps.sh
exp_start /tmp/c40.cubin
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) gpu_tests test-gpu.log 450 ;;
  *) gpu_tests test-gpu.log 200 microbench:: ;;
esac
grep -E "FAILED|skipped:" "$OUT/test-gpu.log" | head -5
bench_traced 21
echo "=== bench (derived) ==="; grep -E "per tile|paired median|hooks with|post->wait" "$OUT/bench.txt" | grep -v measuring | cut -c1-420
summary
