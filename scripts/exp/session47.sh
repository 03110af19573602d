#!/usr/bin/env bash
# Session 47's pass: the path-2 megakernel's last block writes the next launch's prefill
# (carry/ from `scripts/build-gpu-carry` at 5f95e07, whose CUSYNC_PREFILL=kernel put the prefill
# kernel back; the change was reverted after this pass found it neutral, so at later commits
# part 1's two arms run the same code); builds nothing here.
# PARTS picks steps (default "1 3"):
#   0 = the whole GPU suite;
#   1 = the GPU tests `persistent` and `traces::layers`, then the prefill kernel before every
#       launch (CUSYNC_PREFILL=kernel) and the last block's prefill alternately (A B A B), 2
#       layers at M = 1024 and 16384: deps met / twin and pipelined / singles, paired by round;
#   2 = a traced 2-layer stack at M = 1024 (the blocks' lifetimes: what a launch spends
#       outside its tiles);
#   3 = issue 5's stacks: 2 layers x101 rounds at M = 16384, M = 1024, 4096, 32768 x21, 4 and
#       8 layers x31, in what is left of BUDGET (default 560 s).
# NOT_H200_PARTS: the parts to run instead on any other card; H200_ONLY=1: none.
# Usage: [H200_ONLY=1 | NOT_H200_PARTS="1"] [BUDGET=s] [ABL_ITERS=15] [PARTS="1 3"] bash scripts/exp/session47.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/exp/session39-steps.sh
exp_parts /tmp/c47.cubin "1 3"
part 0 && whole_suite
if part 1; then
  gpu_tests test-persistent.log 150 persistent traces::layers
  grep -E "^test .*(FAIL|prefill)|^gpu:|panicked|reported after" "$OUT/test-persistent.log" | cut -c1-220
  for r in 1 2; do
    layers_variant "prefill kernel (CUSYNC_PREFILL=kernel) #$r" carry/bin/cusync /tmp/c47.cubin CUSYNC_PREFILL=kernel
    layers_variant "last block's prefill (default) #$r" carry/bin/cusync /tmp/c47.cubin
  done
  echo "=== paired medians (deps met / twin; pipelined / singles) ==="
  paired_table "$OUT/knobs.txt"
fi
part 2 && traced_layers 1024
part 3 && issue5_stacks
summary
