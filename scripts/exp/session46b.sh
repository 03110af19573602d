#!/usr/bin/env bash
# Session 46's second pass: the scheduler warp (carry/ from `scripts/build-gpu-carry` at the
# scheduler-warp commit) beside the build before it (carry-old/: d332705, the producer thread
# pops itself), both carried; builds nothing here.
# 1. the GPU tests `persistent` and `traces::layers` on the scheduler-warp build;
# 2. old and new builds alternately (A B A B), 2 layers at M = 1024 and 16384: deps met / twin
#    and pipelined / singles, paired by round within each process;
# 3. the new build's knobs: each ablation (CUSYNC_ABLATE), all of them, and the post warp's
#    suspend-time hint (CUSYNC_POST_WAIT_NS);
# 4. a traced 2-layer stack at M = 16384 (new build);
# 5. issue 5's stacks (new build): 2 layers x101 rounds, then M = 1024, 4096, 32768 x21, 4 and 8
#    layers x31, in what is left of BUDGET (default 560 s).
# PARTS picks steps (default "1 2 3"): 0 = the whole GPU suite first, 1 = steps 1 and 2 above
# (the only part that needs carry-old/), 2 = steps 3 and 4, 3 = step 5, 4 = a traced 8-layer
# stack, 5 = the plain kernel with clusters off and on; one part per call returns something
# even if a machine is taken back.
# NOT_H200_PARTS: the parts to run instead on any other card.
# Usage: [H200_ONLY=1 | NOT_H200_PARTS="0"] [BUDGET=s] [ABL_ITERS=15] [PARTS="1 2 3"] bash scripts/exp/session46b.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/exp/session39-steps.sh
exp_parts /tmp/c46.cubin "1 2 3"
if part 1; then
  carry_old /tmp/c46old.cubin
fi
part 0 && whole_suite
part 1 && gpu_tests test-persistent.log 150 persistent traces::layers
part 1 && grep -E "^test .*FAIL|^gpu:|blocks: |panicked|test result" "$OUT/test-persistent.log" | cut -c1-220
# NAME BUILD(new|old) ENV=VALUE...: one `run layers` process of that build (layers_variant).
layers_run() {
  local name=$1 build=$2; shift 2
  if [ "$build" = old ]; then
    layers_variant "$name" carry-old/bin/cusync /tmp/c46old.cubin "$@"
  else
    layers_variant "$name" carry/bin/cusync /tmp/c46.cubin "$@"
  fi
}
part 1 && for r in 1 2; do
  layers_run "old (d332705) #$r" old
  layers_run "new (scheduler warp) #$r" new
done
part 2 && for ab in no-posts no-prefetch no-fence no-pdl no-posts,no-prefetch,no-fence,no-pdl; do
  layers_run "new, CUSYNC_ABLATE=$ab" new CUSYNC_ABLATE=$ab
done
part 2 && for ns in 20000 200000; do
  layers_run "new, CUSYNC_POST_WAIT_NS=$ns" new CUSYNC_POST_WAIT_NS=$ns
done
echo "=== paired medians (deps met / twin; pipelined / singles) ==="
[ -f "$OUT/knobs.txt" ] && paired_table "$OUT/knobs.txt"
part 2 && [ "$(left)" -gt 150 ] && traced_layers 16384
part 2 && tar czf "$OUT/traces.tgz" --exclude='*.svg' -C /tmp tl-16384 2>/dev/null
part 3 && issue5_stacks
# Part 4: one traced 8-layer stack at M = 16384 (new build): whether the blocks still drift out of
#    lockstep in the middle layers (session 43's run 3).
if part 4; then
  timeout 120 carry/bin/cusync run layers --m 16384 --layers 8 --iters 1 --no-microbatch --priority up \
    --trace /tmp/tl8 > "$OUT/layers8-traced.txt" 2>&1
  row "run layers 8 layers --trace" "$?" "$(ls /tmp/tl8 2>/dev/null | wc -l) files"
  grep -E "^blocks: |^  layer[0-9]|apart|boundary" "$OUT/layers8-traced.txt" | cut -c1-230
  tar czf "$OUT/traces8.tgz" --exclude='*.svg' -C /tmp tl8 2>/dev/null
fi
# Part 5: the plain 128 x 256 kernel with and without clusters of 2 (B multicast), alternately, at
#    16384 x 8192 x 8192, cuBLAS beside in each process: what clusters would be worth to the
#    megakernel's tile (it runs single blocks).
if part 5; then
  for r in 1 2; do
    for c in off on; do
      echo "### cluster $c #$r" >> "$OUT/cluster.txt"
      timeout 60 carry/bin/cusync run gemm --m 16384 --n 8192 --k 8192 --kernel wg128x256 --cluster $c \
        --iters 30 >> "$OUT/cluster.txt" 2>&1
      row "run gemm cluster $c #$r" "$?" "$(grep -c . "$OUT/cluster.txt") lines"
    done
  done
  grep -E "^### |ms|cuBLAS" "$OUT/cluster.txt" | cut -c1-200
fi
summary
