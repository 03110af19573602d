#!/usr/bin/env bash
# Session 9's pass on the GPU machine (device tool, carry ["carry"]): the stream stages' post
# warp and look-ahead acquire. B = this build (carry/ptx), A = session 8's cubin (carry/ab, if
# carried) run by the same binary. Prints the GPU suite's result, the protocol rows and the MLP
# sweep for B and A alternated, then the B = 1024 traces' tile periods, and a short table last.
source "$(dirname "$0")/env.sh"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
HAVE_A=0
if [ -f carry/ab/cusync_device.sm_90a.cubin.gz ]; then
  unpack_ptx carry/ab && unpack_cubin carry/ab /tmp/ab.cubin && HAVE_A=1
fi
# A's fingerprint file names this build's PTX: the host side and every kernel's parameters are
# unchanged between the two builds, so this binary drives either module.
a() { CUSYNC_CUBIN_FILE=/tmp/ab.cubin "$@"; }
b() { "$@"; }
SIDES="b"; [ $HAVE_A = 1 ] && SIDES="b a"

echo "== GPU suite (B)"
timeout ${SUITE_S:-300} carry/bin/test-gpu-test --test-threads=1 ${SUITE_FILTER:-} > "$OUT/gpu-suite.log" 2>&1; rc=$?
grep -E "FAIL|panicked|^gpu:" "$OUT/gpu-suite.log" | tail -8
grep -E "delayed|skipped post" "$OUT/gpu-suite.log" | head -6

for side in $SIDES; do
  echo "== [$side] bench (${SECONDS}s)"
  $side carry/bin/cusync bench --samples 11 > "$OUT/bench-$side.txt" 2>/dev/null
  grep -E 'stream stage|persistent pair \(|post->wait' "$OUT/bench-$side.txt"
done
for side in $SIDES; do
  echo "== [$side] run mlp --batch 1024 --policy rowsync --order col --trace"
  rm -rf /tmp/tr-$side
  $side carry/bin/cusync run mlp --batch 1024 --policy rowsync --order col --trace /tmp/tr-$side 2>&1 | head -12
  python3 scripts/exp/tile-period.py /tmp/tr-$side/*.csv 2>&1
  mkdir -p "$OUT/trace-$side"; cp /tmp/tr-$side/*.csv /tmp/tr-$side/*.svg "$OUT/trace-$side/" 2>/dev/null
done
for r in ${SWEEP_ROUNDS:-1}; do
  for side in $SIDES; do
    echo "== [$side] sweep mlp (round $r)"
    $side carry/bin/cusync sweep mlp --samples 10 2>/dev/null > "$OUT/sweep-$side-$r.txt"
    tail -10 "$OUT/sweep-$side-$r.txt" | cut -c1-200
  done
done
echo "== suite rc=$rc (${SECONDS}s)"
exit $rc
