#!/usr/bin/env bash
# The A/B of branch `post-prefetch` (carry/ from `scripts/build-gpu-carry` at 27146ed, whose
# code is the tip's; cubin 94872e5dca5637bd: a post reads its CSR row's bounds and first
# consumer ids before its fence and each next batch's ids while the arrivals are in flight)
# against main's batched post (carry-old/: dd5b393, cubin 54a8d4167fb9648e), both carried;
# builds nothing here.
# PARTS picks steps (default "1 5 2 6"):
#   1 = the GPU tests `persistent`, `traces`, `microbench`, `protocol` and `reliability` (new
#       build), then old and new builds alternately (A B A B A B), 2 layers at M = 1024 and
#       16384: deps met / twin and pipelined / singles, paired by round within each process;
#   5 = one traced 2-layer stack at M = 1024 (new build), its traces into OUT/tl-1024.tgz:
#       layer 0's tile time pipelined against deps met is the post's length;
#   2 = `cusync bench --samples 11`, old then new (issue 7's scoreboard rows);
#   6 = the policy sweep (new build);
#   0 = the whole GPU suite (new build, at most SUITE_LIMIT s, default 420);
#   3 = issue 5's stacks (new build), in what is left of BUDGET (default 560 s);
#   4 = issue 4's MLP sweep (`sweep mlp`, B = 1 to 2048, auto and PDL launches), Auto's trial
#       at B = 1 and 256, a traced B = 1 MLP (new build);
#   7 = issue 3's GeMM table (`gemm-table --iters 10`, new build; the GeMM code is main's).
# NOT_H200_PARTS: the parts to run instead on any other card; H200_ONLY=1: none.
# Usage: [H200_ONLY=1 | NOT_H200_PARTS="1 5"] [BUDGET=s] [ABL_ITERS=15] [PARTS="1 5 2 6"] bash scripts/exp/session51.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/exp/session39-steps.sh
exp_parts /tmp/c51.cubin "1 5 2 6"
part 1 && ab_layers "batched post, dd5b393" "post-prefetch, 27146ed" /tmp/c51.cubin 240 persistent traces microbench protocol reliability
part 5 && traced_layers 1024
part 2 && bench_ab /tmp/c51.cubin
part 6 && policy_sweep
part 0 && whole_suite "${SUITE_LIMIT:-420}"
part 3 && issue5_stacks
part 4 && mlp_measurements "$OUT"
part 7 && gemm_table
summary
