#!/usr/bin/env bash
# Session 16, run 2: the whole pass on the landed build (path-2 stream stages poll the next
# semaphores at once and resolve a prefetched ticket's tile early; count-first skinny reverted),
# then criterion's paired protocol_overhead group (the stream stage alone, and the MLP pair,
# StreamSync against the serialized graph with RowSync and TileSync).
CUSYNC_MULTIGPU=0 bash scripts/gpu-check
source "$(dirname "$0")/env.sh"
timeout 200 carry/bin/bench-protocol --bench protocol_overhead > $OUT/criterion.log 2>&1; echo "criterion rc=$?"
grep -E "overhead/.*pairs|time:" $OUT/criterion.log
