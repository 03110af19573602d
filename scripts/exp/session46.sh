#!/usr/bin/env bash
# Session 46's pass (carry `carry/bin`, `carry/ptx` from `scripts/build-gpu-carry`; builds
# nothing here):
# 1. the GPU tests `persistent` and `traces::layers` (the tiles-done fix of b28310c, the new
#    ablations and the post warp's suspend-time hint);
# 2. the dependencies-met megakernel beside its no-protocol twin at M = 1024 (per launch) and
#    16384 (per tile), one process per knob: each ablation alone (no-posts now also sends the
#    post warp home; no-fence; no-pdl), all of them, and the post warp's suspend-time hint
#    (CUSYNC_POST_WAIT_NS, which the pipelined launch takes too);
# 3. a traced 2-layer stack at M = 16384 (per-layer CTA periods of pipelined, deps met, twin);
# 4. issue 5's stacks: 2 layers x101 rounds (sign test), M = 1024, 4096, 32768 x21, 4 and 8
#    layers x31, in what is left of BUDGET (default 560 s).
# H200_ONLY=1 leaves at once on any other card; POST_WAIT=ns runs step 4 with that hint.
# Usage: [H200_ONLY=1] [BUDGET=s] [ABL_M=1024,16384] [ABL_ITERS=15] [POST_WAIT=ns] bash scripts/exp/session46.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) ;; *) [ -n "${H200_ONLY:-}" ] && { echo "not an H200 ($gpu): nothing run"; exit 3; } ;; esac
source scripts/exp/session39-steps.sh
exp_start /tmp/c46.cubin
budget=${BUDGET:-560}
left() { echo $((budget - (SECONDS - t0))); }
gpu_tests test-persistent.log 150 persistent traces::layers
grep -E "^test .*FAIL|^gpu:|blocks: |panicked" "$OUT/test-persistent.log" | cut -c1-220
# FILE: per `### name` section and M, the paired medians of deps met / twin and pipelined / singles.
paired_table() {
  awk '/^### /{k=substr($0,5)} /^[0-9]+-layer \[/{split($2,a,","); m=substr(a[1],2)}
       /^ +protocol overhead \(no-deps \/ no-protocol\): /{o=$0; sub(/.*no-protocol\): /,"",o); sub(/,.*/,"",o)}
       /^ +pipelined .* \/ single GeMMs: /{p=$0; sub(/.*single GeMMs: /,"",p); sub(/,.*/,"",p);
         printf "%-42s M=%-6s deps met/twin %-18s pipelined/singles %s\n", k, m, o, p}' "$1"
}
# One knob per process, every variant side by side in it: NAME ENV=VALUE...
knob() {
  local name=$1; shift
  echo "### $name" >> "$OUT/knobs.txt"
  env "$@" timeout 100 carry/bin/cusync run layers --m "${ABL_M:-1024,16384}" --layers 2 --iters "${ABL_ITERS:-15}" \
    --no-microbatch --priority up >> "$OUT/knobs.txt" 2>&1
  row "knob $name" "$?" "$(grep -c . "$OUT/knobs.txt") lines"
}
knob none CUSYNC_ABLATE=
for ab in no-posts no-prefetch no-fence no-pdl no-posts,no-prefetch,no-fence,no-pdl; do
  knob "$ab" CUSYNC_ABLATE=$ab
done
for ns in 20000 200000; do
  knob "post-wait $ns ns" CUSYNC_POST_WAIT_NS=$ns
done
echo "=== knobs: paired medians (deps met / twin; pipelined / singles) ==="
paired_table "$OUT/knobs.txt"
traced() { # M: one traced 2-layer stack and its periods
  timeout 90 carry/bin/cusync run layers --m $1 --layers 2 --iters 3 --no-microbatch --priority up \
    --trace /tmp/tl-$1 > "$OUT/layers-traced-$1.txt" 2>&1
  row "run layers M=$1 --trace" "$?" "$(ls /tmp/tl-$1 2>/dev/null | wc -l) files"
  echo "=== traced M=$1 ==="
  grep -E "^blocks: |^  medians per block|^  layer[0-9]|^  +no-protocol twin|first / second" \
    "$OUT/layers-traced-$1.txt" | cut -c1-230
}
[ "$(left)" -gt 120 ] && traced 16384
tar czf "$OUT/traces.tgz" --exclude='*.svg' -C /tmp tl-16384 2>/dev/null
run_layers() { # LIMIT ARGS...
  local lim=$1; shift
  [ "$(left)" -gt 30 ] || { row "run layers $*" skip "no time left"; return; }
  [ "$lim" -lt "$(left)" ] || lim=$(($(left) - 10))
  env ${POST_WAIT:+CUSYNC_POST_WAIT_NS=$POST_WAIT} timeout "$lim" carry/bin/cusync run layers "$@" --priority up >> "$OUT/layers.txt" 2>&1
  row "run layers $*" "$?" "$(grep -c . "$OUT/layers.txt") lines"
}
run_layers 200 --m 16384 --layers 2 --iters 101 --csv "$OUT/layers2.csv"
run_layers 150 --m 1024,4096,32768 --layers 2 --iters 21
run_layers 150 --m 16384 --layers 4,8 --iters 31
echo "=== run layers ==="; grep -E "^[0-9]+-layer|^  (megakernel|same|our|cuBLAS|micro-batching,)|paired|protocol overhead|/ single|/ cuBLAS|micro-batching:|twin [0-9]|below 1" "$OUT/layers.txt" | grep -v "^ *measuring" | cut -c1-200
summary
