#!/usr/bin/env bash
# Session 45's pass (carry `carry/bin`, `carry/ptx` from `scripts/build-gpu-carry` with the block
# stamps; builds nothing here):
# 1. the GPU tests `persistent` and `traces::layers` (the programmatic megakernel launch's first
#    H200 run; the traced twin and the block stamps);
# 2. traced 2-layer stacks at M = 1024 and 16384: per layer the CTA periods of pipelined, deps
#    met, the no-protocol twin and the singles, and each megakernel launch's time outside its
#    tiles (block entry, setup, first pop, drain);
# 3. the dependencies-met megakernel ablated (CUSYNC_ABLATE: no posts, no prefetch, both) beside
#    its twin at M = 1024 and 4096;
# 4. issue 5's stacks: 2 layers x101 rounds (the sign test decides the 2-layer clause),
#    M = 1024, 4096, 32768 x21, 4 and 8 layers x31, in what is left of BUDGET (default 560 s).
# H200_ONLY=1 leaves at once on any other card.
# Usage: [H200_ONLY=1] [BUDGET=seconds] [ABL_M=1024,4096] [ABL_ITERS=15] bash scripts/exp/session45b.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) ;; *) [ -n "${H200_ONLY:-}" ] && { echo "not an H200 ($gpu): nothing run"; exit 3; } ;; esac
source scripts/exp/session39-steps.sh
exp_start /tmp/c45.cubin
budget=${BUDGET:-560}
gpu_tests test-persistent.log 150 persistent traces::layers
grep -E "^test .*FAIL|^gpu:|blocks: " "$OUT/test-persistent.log" | cut -c1-220
traced_layers 1024
# Ablations of the dependencies-met megakernel (CUSYNC_ABLATE), each beside the twin in one
# process: which per-tile part of the protocol costs what.
for ab in none no-posts no-prefetch no-posts,no-prefetch; do
  v=$ab; [ "$ab" = none ] && v=
  echo "### CUSYNC_ABLATE=$ab" >> "$OUT/ablate.txt"
  CUSYNC_ABLATE=$v timeout 90 carry/bin/cusync run layers --m "${ABL_M:-1024,4096}" --layers 2 --iters "${ABL_ITERS:-15}" --no-microbatch \
    --priority up >> "$OUT/ablate.txt" 2>&1
  row "ablate $ab" "$?" "$(grep -c . "$OUT/ablate.txt") lines"
done
echo "=== ablations (deps met / twin) ==="
grep -E "^### |^[0-9]+-layer|protocol overhead|dependency met up front|no protocol code|^cusync:" "$OUT/ablate.txt" | grep -v "^ *measuring" | cut -c1-200
[ "$(left)" -gt 60 ] && traced_layers 16384
tar czf "$OUT/traces.tgz" --exclude='*.svg' -C /tmp tl-1024 tl-16384 2>/dev/null
issue5_stacks
summary
