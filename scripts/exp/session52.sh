#!/usr/bin/env bash
# Session 52's pass: main as it stands (carry/ from `scripts/build-gpu-carry` at main's head),
# measured on the H200 for every open issue; builds nothing here.
# PARTS picks steps (default "3 4 7 2 0"), in this order:
#   3 = issue 5's stacks (2 layers x101 at M = 16384, M = 1024/4096/32768 x21, 4 and 8 layers
#       x31), in what is left of BUDGET (default 560 s);
#   4 = issue 4's MLP sweep (B = 1 to 2048, auto and PDL launches), Auto's trial at B = 1 and
#       256, a traced B = 1 MLP;
#   7 = issue 3's GeMM table (`gemm-table --iters 10`);
#   2 = issue 7's table (`cusync bench --samples 21`, its last traced launches into
#       OUT/bench-traces.tgz);
#   0 = the whole GPU suite (at most SUITE_LIMIT s, default 420).
# NOT_H200_PARTS: the parts to run instead on any other card; H200_ONLY=1: none.
# Usage: [H200_ONLY=1 | NOT_H200_PARTS="0"] [BUDGET=s] [SUITE_LIMIT=s] [PARTS="3 4 7 2 0"] bash scripts/exp/session52.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/exp/session39-steps.sh
exp_parts /tmp/c52.cubin "3 4 7 2 0"
part 3 && issue5_stacks
part 4 && mlp_measurements "$OUT"
part 7 && gemm_table
if part 2; then
  bench_traced 21
  grep -E "^[a-zA-Z].*  (ns|us|%)  " "$OUT/bench.txt" | cut -c1-200
fi
part 0 && whole_suite "${SUITE_LIMIT:-420}"
summary
