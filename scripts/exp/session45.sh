#!/usr/bin/env bash
# Session 45's first call (carry `carry/bin`, `carry/ptx` from `scripts/build-gpu-carry` at the
# session's base; builds nothing here):
# 1. the GPU tests `persistent` and `traces::layers`: the programmatic megakernel launch
#    (a87d4c2) has run on an H100 only;
# 2. scripts/exp/session44b.sh's stacks: 2 layers x101 rounds (the sign test decides issue 5's
#    2-layer clause), 4 and 8 layers x31, M = 1024, 4096, 32768 x21, one traced M = 1024 stack.
# H200_ONLY=1 leaves at once on any other card.
# Usage: [H200_ONLY=1] bash scripts/exp/session45.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) ;; *) [ -n "${H200_ONLY:-}" ] && { echo "not an H200 ($gpu): nothing run"; exit 3; } ;; esac
source scripts/exp/session39-steps.sh
exp_start /tmp/c45.cubin
gpu_tests test-persistent.log 120 persistent traces::layers
grep -E "^test .*FAIL|^gpu:" "$OUT/test-persistent.log" | cut -c1-200
timeout 200 carry/bin/cusync run layers --m 16384 --layers 2 --iters 101 --priority up --csv "$OUT/layers2.csv" > "$OUT/layers.txt" 2>&1
row "run layers 2 x101" "$?" "$(grep -c . "$OUT/layers.txt") lines"
timeout 150 carry/bin/cusync run layers --m 1024,4096,32768 --layers 2 --iters 21 --priority up >> "$OUT/layers.txt" 2>&1
row "run layers M x21" "$?" "$(grep -c . "$OUT/layers.txt") lines"
timeout 150 carry/bin/cusync run layers --m 16384 --layers 4,8 --iters 31 --priority up >> "$OUT/layers.txt" 2>&1
row "run layers 4,8 x31" "$?" "$(grep -c . "$OUT/layers.txt") lines"
timeout 60 carry/bin/cusync run layers --m 1024 --layers 2 --iters 3 --no-microbatch --priority up \
  --trace /tmp/tl-1024 > "$OUT/layers-traced-1024.txt" 2>&1
row "run layers M=1024 --trace" "$?" "$(ls /tmp/tl-1024 2>/dev/null | wc -l) files"
tar czf "$OUT/trace-1024.tgz" --exclude='*.svg' -C /tmp tl-1024 2>/dev/null
echo "=== run layers ==="; grep -E "^[0-9]+-layer|^  (megakernel|same|our|cuBLAS|micro-batching,)|paired|protocol overhead|/ single|/ cuBLAS|micro-batching:|twin [0-9]|below 1" "$OUT/layers.txt" | grep -v "^ *measuring" | cut -c1-200
summary
