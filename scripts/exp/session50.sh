#!/usr/bin/env bash
# Session 50's pass, on main at the batched post (carry/ from `scripts/build-gpu-carry` on
# branch `batched-post`'s tip dd5b393, merged fast-forward; cubin 54a8d4167fb9648e); builds
# nothing here.
# PARTS picks steps (default "1 4 2 5 3"):
#   1 = the protocol's GPU tests: persistent, protocol, reliability, microbench, traces;
#   4 = the GPU tests session 50's H100 suite did not reach (multigpu, probe, traces, the 16-row
#       path-2 tile);
#   2 = `cusync bench --samples 11` (issue 7's table on this card);
#   3 = issue 5's stacks, in what is left of BUDGET (default 560 s);
#   5 = one traced 2-layer stack at M = 1024 (the band boundary: where the pipelined launch's
#       last 6-7 us over deps met go), its traces into OUT/tl-1024.tgz;
#   0 = the whole GPU suite (at most SUITE_LIMIT s, default 420: the H100 ran 73 of 102 tests in
#       300 s).
# NOT_H200_PARTS: the parts to run instead on any other card.
# Usage: [NOT_H200_PARTS="4 2 5"] [BUDGET=s] [SUITE_LIMIT=s] [PARTS="1 4 2 5 3"] bash scripts/exp/session50.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/exp/session39-steps.sh
exp_parts /tmp/c50.cubin "1 4 2 5 3"
part 1 && gpu_tests test-protocol.log 150 persistent protocol reliability microbench traces
part 4 && gpu_tests test-rest.log 200 multigpu probe traces gemm::path2_tile16
if part 2; then
  timeout 150 carry/bin/cusync bench --samples 11 > "$OUT/bench.txt" 2>&1
  row "bench" "$?" "$(grep -c . "$OUT/bench.txt") lines"
  grep -E "^[a-z].*  (ns|us)  " "$OUT/bench.txt" | cut -c1-200
fi
part 5 && traced_layers 1024
part 3 && issue5_stacks
part 0 && whole_suite "${SUITE_LIMIT:-420}"
summary
