#!/usr/bin/env bash
# Session 43's second pass (carry `carry/bin`, `carry/ptx` built at eb43334 or later: the
# committing pop of the path-2 megakernel; builds nothing here).
# On any card:
# 1. the GPU tests of the persistent megakernels (filter `persistent`: path 1 and path 2,
#    bitwise against StreamSync / the plain kernels, fan-in/out, faults and timeouts) and of
#    `run layers --trace`'s report;
# 2. one traced 2-layer stack at M = 16384, upstream first: does layer 1 now run as fast
#    pipelined as with every dependency met?
# 3. issue 5's stack, paired by round: on the H200 at 21 rounds (2 layers), 11 (4, 8), and M =
#    1024, 4096, 32768 at 7; on another card at 11 rounds (2 layers) and 5 (4, 8), labelled.
# 4. the rest of the GPU suite, if BUDGET (default 560) leaves 150 s (REST=0: not at all).
# H200_ONLY=1 leaves at once on any other card (run 2 of session 43 did it all on an H100).
# Usage: [BUDGET=seconds] [H200_ONLY=1] [REST=0] bash scripts/exp/session43b.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) ;; *) [ -n "${H200_ONLY:-}" ] && { echo "not an H200 ($gpu): nothing run"; exit 3; } ;; esac
source scripts/exp/session39-steps.sh
exp_start /tmp/c43b.cubin
gpu_tests test-persistent.log 200 persistent traces::layers
grep -E "^test .*(FAIL|fail)|pipelined .* us|^gpu:" "$OUT/test-persistent.log" | cut -c1-220
timeout 120 carry/bin/cusync run layers --m 16384 --layers 2 --iters 3 --no-microbatch --priority up \
  --trace /tmp/tl-up > "$OUT/layers-traced.txt" 2>&1
row "run layers 2 --trace (up)" "$?" "$(ls /tmp/tl-up 2>/dev/null | wc -l) files"
tar czf "$OUT/trace-layers.tgz" --exclude='*.svg' --exclude='*.json' -C /tmp tl-up 2>/dev/null
echo "=== traced layers: per-layer periods ==="
grep -E "pipelined .* us|first / second|paired|/ single|cusync trace:" "$OUT/layers-traced.txt" | cut -c1-240
case "$gpu" in
  *H200*) r2=21; r48=11 ;;
  *) r2=11; r48=5; echo "not an H200 ($gpu): its figures are this card's, not the H200's" ;;
esac
timeout 150 carry/bin/cusync run layers --m 16384 --layers 2 --iters $r2 --priority up --csv "$OUT/layers2.csv" > "$OUT/layers.txt" 2>&1
row "run layers 2 x$r2" "$?" "$(grep -c . "$OUT/layers.txt") lines"
timeout 150 carry/bin/cusync run layers --m 16384 --layers 4,8 --iters $r48 --priority up >> "$OUT/layers.txt" 2>&1
row "run layers 4,8 x$r48" "$?" "$(grep -c . "$OUT/layers.txt") lines"
case "$gpu" in *H200*)
  timeout 150 carry/bin/cusync run layers --m 1024,4096,32768 --layers 2 --iters 7 --priority up >> "$OUT/layers.txt" 2>&1
  row "run layers M x7" "$?" "$(grep -c . "$OUT/layers.txt") lines" ;;
esac
echo "=== run layers ==="; grep -E "^[0-9]+-layer|paired|protocol overhead|/ single|/ cuBLAS|micro-batching:|SM clock" "$OUT/layers.txt" | grep -v "^ *measuring" | cut -c1-200
lim=$((${BUDGET:-560} - (SECONDS - t0)))
if [ $lim -gt 150 ] && [ "${REST:-1}" != 0 ]; then
  gpu_tests test-rest.log $((lim - 20)) intrinsics:: protocol:: stream_mode:: reliability:: mlp:: gemm:: probe:: microbench:: traces:: multigpu::
  grep -E "^test .*FAIL|^gpu:" "$OUT/test-rest.log" | cut -c1-200
fi
summary
