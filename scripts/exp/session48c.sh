#!/usr/bin/env bash
# Session 48's third pass: where the 2-layer stack's pipelining loses at small M. At M = 1024
# the default policy (RowBandSync over the raster's 8-row groups) makes the whole layer one
# band, so layer 1 waits for all of layer 0; this sweeps the queue order (raster, row) and the
# policy (band, band4, band2, rowsync) at M = 1024 and 4096, with best-chunk micro-batching
# beside them. carry/ = the scheduler warp's build (143829f, cubin b25040bf16187484); builds
# nothing here.
# PARTS picks steps (default "0 6 3"):
#   0 = the whole GPU suite;
#   6 = the sweep: one `run layers` process per queue order, every policy paired by round;
#   3 = issue 5's stacks, in what is left of BUDGET (default 560 s).
# NOT_H200_PARTS: the parts to run instead on any other card; H200_ONLY=1: none.
# Usage: [H200_ONLY=1 | NOT_H200_PARTS="6"] [BUDGET=s] [ITERS=15] [PARTS="0 6 3"] bash scripts/exp/session48c.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/exp/session39-steps.sh
exp_parts /tmp/c48c.cubin "0 6 3"
part 0 && whole_suite
part 6 && policy_sweep
part 3 && issue5_stacks
summary
