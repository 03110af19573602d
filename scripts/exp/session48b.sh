#!/usr/bin/env bash
# Session 48's second pass: the source-first pop (carry/ from `scripts/build-gpu-carry` at
# 33d9a59: a launch's first pop polls the source stages only, source stages pop by one
# fetch-add, source-stage tiles skip the proxy fence) beside the scheduler warp's build before
# it (carry-old/: 143829f, cubin b25040bf16187484), both carried; builds nothing here.
# PARTS picks steps (default "0 1 3 5"):
#   0 = the whole GPU suite (new build);
#   1 = the GPU tests `persistent` and `traces::layers` (new build), then old and new builds
#       alternately (A B A B A B), 2 layers at M = 1024 and 16384: deps met / twin and
#       pipelined / singles, paired by round within each process;
#   3 = issue 5's stacks (new build): 2 layers x101 rounds at M = 16384, M = 1024, 4096, 32768
#       x21, 4 and 8 layers x31, in what is left of BUDGET (default 560 s);
#   5 = the plain GeMM table with clusters off and on, in one process (`cusync gemm-table
#       --modes`).
# NOT_H200_PARTS: the parts to run instead on any other card; H200_ONLY=1: none.
# Usage: [H200_ONLY=1 | NOT_H200_PARTS="1"] [BUDGET=s] [ABL_ITERS=15] [PARTS="0 1 3 5"] bash scripts/exp/session48b.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/exp/session39-steps.sh
exp_parts /tmp/c48b.cubin "0 1 3 5"
part 0 && whole_suite
part 1 && ab_layers "scheduler warp, 143829f" "source-first pop, 33d9a59" /tmp/c48b.cubin 150 persistent traces::layers
part 3 && issue5_stacks
part 5 && gemm_modes
summary
