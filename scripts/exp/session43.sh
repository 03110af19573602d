#!/usr/bin/env bash
# Session 43's pass (carry `carry/bin`, `carry/ptx`; builds nothing here).
# On any card:
# 1. the GPU tests of `run layers --trace`'s report (now with the dependencies-met megakernel
#    beside the pipelined one and the singles) and of the pinned 128 x 16 tile;
# 2. traced 2-layer launches at M = 16384 with each priority (`run layers --trace`: pipelined,
#    deps met and back-to-back singles, each layer's CTA period and halves). Where does the
#    megakernel's layer-1 step (H100, session 42: 1.15x the singles) come from: the pipelining
#    (pipelined slower than deps met) or the megakernel (both slow)?
# On the H200 (on any card with `any`, its figures labelled as that card's): session 42's
# issue 5 and 7 measurements (paired 2-layer stack at 21 rounds, 4 and 8 layers at 11, M =
# 1024, 4096, 32768 at 7; `cusync bench --samples 21` if BUDGET, default 540, leaves 120 s).
# Usage: [BUDGET=seconds] bash scripts/exp/session43.sh [any]
set -uo pipefail
cd "$(dirname "$0")/../.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
source scripts/exp/session39-steps.sh
exp_start /tmp/c43.cubin
gpu_tests test-traces.log 150 traces::layers gemm::path2_tile16
grep -E "pinned|pipelined|first / second|^test |^gpu:" "$OUT/test-traces.log" | cut -c1-220
for pr in up down; do
  echo "=== run layers --trace, priority $pr ===" >> "$OUT/layers-traced.txt"
  timeout 120 carry/bin/cusync run layers --m 16384 --layers 2 --iters 3 --no-microbatch --priority $pr \
    --trace /tmp/tl-$pr >> "$OUT/layers-traced.txt" 2>&1
  row "run layers 2 --trace ($pr)" "$?" "$(ls /tmp/tl-$pr 2>/dev/null | wc -l) files"
done
tar czf "$OUT/trace-layers.tgz" --exclude='*.svg' --exclude='*.json' -C /tmp tl-up tl-down 2>/dev/null
echo "=== traced layers: per-layer periods ==="
grep -E "^===|pipelined .* us|first / second|paired|SM clock" "$OUT/layers-traced.txt" | cut -c1-240
case "$gpu" in
  *H200*) ;;
  *) [ "${1:-}" = any ] || { echo "not an H200 ($gpu): issue 5's figures are left for the H200"; summary; exit 3; }
     echo "not an H200 ($gpu): its figures are this card's, not the H200's" ;;
esac
timeout 150 carry/bin/cusync run layers --m 16384 --layers 2 --iters 21 --csv "$OUT/layers2.csv" > "$OUT/layers.txt" 2>&1
row "run layers 2 x21" "$?" "$(grep -c . "$OUT/layers.txt") lines"
timeout 150 carry/bin/cusync run layers --m 16384 --layers 4,8 --iters 11 >> "$OUT/layers.txt" 2>&1
row "run layers 4,8 x11" "$?" "$(grep -c . "$OUT/layers.txt") lines"
timeout 150 carry/bin/cusync run layers --m 1024,4096,32768 --layers 2 --iters 7 > "$OUT/layers-m.txt" 2>&1
row "run layers M x7" "$?" "$(grep -c . "$OUT/layers-m.txt") lines"
lim=$((${BUDGET:-540} - (SECONDS - t0)))
if [ $lim -gt 120 ]; then bench_traced 21; rm -f "$OUT/bench-traces.tgz"; fi   # at most 8 files come back
echo "=== run layers ==="; grep -E "^[0-9]+-layer|paired|protocol overhead|/ single|/ cuBLAS|micro-batching:|SM clock" -A0 "$OUT/layers.txt" "$OUT/layers-m.txt" | grep -v "^ *measuring" | cut -c1-200
[ -f "$OUT/bench.txt" ] && { echo "=== bench ==="; grep -E "paired|post|wait|\+|-" "$OUT/bench.txt" | head -40 | cut -c1-200; }
summary
