#!/usr/bin/env bash
# Session 48's pass: the scheduler warp's code (unchanged on the device since 7fa5191's build
# but for the reverted prefill) on the card the issues' targets are set for; builds nothing here.
# PARTS picks steps (default "0 3 5"):
#   0 = the whole GPU suite;
#   3 = issue 5's stacks: 2 layers x101 rounds at M = 16384, M = 1024, 4096, 32768 x21, 4 and
#       8 layers x31, in what is left of BUDGET (default 560 s);
#   5 = the plain GeMM table with clusters off and on, in one process (`cusync gemm-table
#       --modes`): whether clusters of 2 are worth trying in the megakernel's tile.
# NOT_H200_PARTS: the parts to run instead on any other card; H200_ONLY=1: none.
# Usage: [H200_ONLY=1 | NOT_H200_PARTS="3"] [BUDGET=s] [PARTS="0 3 5"] bash scripts/exp/session48.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/exp/session39-steps.sh
exp_parts /tmp/c48.cubin "0 3 5"
part 0 && whole_suite
part 3 && issue5_stacks
part 5 && gemm_modes
summary
