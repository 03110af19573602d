#!/usr/bin/env bash
# Session 49's pass: the batched post (carry/ from `scripts/build-gpu-carry` on branch
# `batched-post`, its tip; not on main: a
# post's arrivals are POST_BATCH relaxed fetch-adds in flight together between fences, its
# pushes one push_batch) beside the scheduler warp's build before it (carry-old/: e0272fb, cubin
# b25040bf16187484), both carried; builds nothing here.
# PARTS picks steps (default "1 6 2 0"):
#   1 = the GPU tests `persistent`, `traces::layers`, `microbench`, `protocol` and
#       `reliability` (new build),
#       then old and new builds alternately (A B A B A B), 2 layers at M = 1024 and 16384:
#       deps met / twin and pipelined / singles, paired by round within each process;
#   6 = session48c.sh's sweep (new build): queue order (raster, row) x policy (band, band4,
#       band2, rowsync) at M = 1024 and 4096, beside micro-batching;
#   2 = `cusync bench --samples 11`, old then new (issue 7's table: the scoreboard rows);
#   0 = the whole GPU suite (new build);
#   3 = issue 5's stacks (new build), in what is left of BUDGET (default 560 s).
# NOT_H200_PARTS: the parts to run instead on any other card; H200_ONLY=1: none.
# Usage: [H200_ONLY=1 | NOT_H200_PARTS="1 6"] [BUDGET=s] [ABL_ITERS=15] [PARTS="1 6 2 0"] bash scripts/exp/session49.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/exp/session39-steps.sh
exp_parts /tmp/c49.cubin "1 6 2 0"
part 1 && ab_layers "scheduler warp, e0272fb" "batched post, branch tip" /tmp/c49.cubin 240 persistent traces::layers microbench protocol reliability
part 6 && policy_sweep
part 2 && bench_ab /tmp/c49.cubin
part 0 && whole_suite
part 3 && issue5_stacks
summary
