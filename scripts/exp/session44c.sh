#!/usr/bin/env bash
# Session 44's A/B of the programmatic megakernel launch (a87d4c2: the megakernel starts
# while its prefill runs, and waits for it with `griddepcontrol.wait`). Carry: `carry/bin`,
# `carry/ptx` (scripts/build-gpu-carry at a87d4c2 or later) and `carry/old` (cusync.gz and the
# cubin of the build before, 36ba3cc); builds nothing here.
# 1. GPU tests `persistent` and `traces::layers` on the new build (every megakernel launch of
#    the suite's persistent tests is programmatic on sm_90);
# 2. A/B, alternating old and new processes (old, new, old, new): `run layers --layers 2
#    --iters 11 --no-microbatch --priority up` at M = 1024 and 4096. Within each process deps
#    met (prefill + megakernel) / twin (megakernel alone, unchanged) is the launch overhead
#    the change targets;
# 3. on the H200 only: session44b.sh's rounds on the new build (2 layers x101, 4 and 8 x31,
#    M = 1024, 4096, 32768 x21, a traced M = 1024 stack), if BUDGET (default 560) leaves 200 s.
# Usage: [BUDGET=seconds] bash scripts/exp/session44c.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
source scripts/exp/session39-steps.sh
exp_start /tmp/c44c.cubin
gunzip -c carry/old/cusync.gz > /tmp/cusync-old && chmod +x /tmp/cusync-old
gunzip -c carry/old/cusync_device.sm_90a.cubin.gz > /tmp/old.cubin && cp carry/old/cusync_device.sm_90a.cubin.fnv /tmp/old.cubin.fnv
gpu_tests test-persistent.log 120 persistent traces::layers
grep -E "^test .*(FAIL|fail)|^gpu:" "$OUT/test-persistent.log" | cut -c1-220
ab() { # ab LABEL BINARY CUBIN
  CUSYNC_CUBIN_FILE=$3 timeout 60 "$2" run layers --m 1024,4096 --layers 2 --iters 11 --no-microbatch \
    --priority up > "$OUT/ab-$1.txt" 2>&1
  row "ab $1" "$?" "$(grep -c . "$OUT/ab-$1.txt") lines"
}
ab old1 /tmp/cusync-old /tmp/old.cubin
ab new1 carry/bin/cusync /tmp/c44c.cubin
ab old2 /tmp/cusync-old /tmp/old.cubin
ab new2 carry/bin/cusync /tmp/c44c.cubin
echo "=== A/B (deps met / twin and pipelined / singles, paired by round; medians, ms) ==="
for f in old1 new1 old2 new2; do
  echo "--- $f"
  grep -E "^2-layer|^  megakernel|^  same|^  our GeMM|protocol overhead \(no-deps / no-protocol\):|/ single GeMMs:|/ cuBLAS back to back:" "$OUT/ab-$f.txt" | cut -c1-150
done
case "$gpu" in *H200*)
  lim=$((${BUDGET:-560} - (SECONDS - t0)))
  if [ $lim -gt 200 ]; then
    timeout $((lim - 10)) bash scripts/exp/session44b.sh > "$OUT/session44b.txt" 2>&1
    row "session44b.sh" "$?" "$(grep -c . "$OUT/session44b.txt") lines"
    sed -n '/=== run layers ===/,$p' "$OUT/session44b.txt" | cut -c1-200
  fi ;;
*) echo "not an H200 ($gpu): its figures are this card's" ;;
esac
# At most 8 files come back: the A/B outputs in one archive, no chart.
tar czf "$OUT/ab.tgz" -C "$OUT" ab-old1.txt ab-new1.txt ab-old2.txt ab-new2.txt && rm -f "$OUT"/ab-*.txt
rm -f "$OUT/layers2.svg"
summary
