#!/usr/bin/env bash
# Session 20: why code that never runs slows the path-2 stream stage. ncu's stall reasons (the
# no-instruction stalls of an instruction-cache miss among them), instructions and durations for
# the plain 128x192 kernel and its stream-mode twin, per carried variant, from
# `run mlp --batch 1024` (its GeMM1-alone timing launches both kernels), clocks untouched.
# Usage: bash scripts/exp/ncu-stalls.sh VARIANT...
source "$(dirname "$0")/variants-lib.sh"
unpack_variants "$@"
m=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__cycles_active.avg
for r in no_instruction long_scoreboard barrier wait math_pipe_throttle sleeping membar short_scoreboard mio_throttle lg_throttle dispatch_stall branch_resolving selected not_selected misc drain; do
  m=$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
done
for v in "$@"; do
  CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 200 ncu --clock-control none \
    --kernel-name regex:'^gemm_sm90_bf16_128x192(_stream)?$' --launch-skip 4 --launch-count 4 \
    --metrics "$m" /tmp/cusync-$v run mlp --batch 1024 --policy rowsync --order col > "$OUT/ncu-$v.txt" 2>&1
  echo "ncu $v rc=$?"
  grep -E "^  gemm_sm90|gpu__time|smsp__" "$OUT/ncu-$v.txt" | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | head -90
done
