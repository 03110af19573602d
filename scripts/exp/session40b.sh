#!/usr/bin/env bash
# Session 40's second pass (carry `carry/bin`, `carry/ptx`; built with the temporary
# experiment switches CUSYNC_EXP_NO_PRIORITY and CUSYNC_EXP_NO_HOLD, reverted and never
# committed: this records run 2 and cannot be rerun as it is on main): the
# microbench GPU tests, then `cusync bench --samples 11` three times: as built, with the
# graph's streams at default priority, and with neither side's timing hold. Which kernel of
# the serialized graph has the slow first tile, and why.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/exp/session39-steps.sh
exp_start /tmp/c40.cubin
gpu_tests test-microbench.log 200 microbench::
for v in base NO_PRIORITY NO_HOLD; do
  mkdir -p /tmp/bt-$v
  env ${v/base/X}=1 CUSYNC_EXP_$v=1 CUSYNC_BENCH_TRACE_DIR=/tmp/bt-$v timeout 150 carry/bin/cusync bench --samples 11 > "$OUT/bench-$v.txt" 2>&1
  row "bench $v" "$?" "$(grep -c . "$OUT/bench-$v.txt") lines"
done
tar czf "$OUT/bench-traces.tgz" --exclude='*.svg' -C /tmp bt-base bt-NO_PRIORITY bt-NO_HOLD 2>/dev/null
grep -E "serialized (NoSync|RowSync|TileSync)" "$OUT/test-microbench.log" | cut -c1-200
for v in base NO_PRIORITY NO_HOLD; do
  echo "=== bench $v ==="; grep -E "B=1 .*(per tile|paired median|hooks with)" "$OUT/bench-$v.txt" | grep -v measuring | cut -c1-330
done
summary
