#!/usr/bin/env bash
# Session 9's pass of the post-warp candidate (device tool, carry ["carry"]): the whole
# check-and-measure pass (scripts/gpu-check, multi-GPU off) on this build, then the stream
# stage's protocol rows and the traced B = 1024 MLP's tile periods side by side with session
# 8's cubin (carry/ab; scripts/exp/sides.sh).
cd "$(dirname "$0")/../.."
CUSYNC_MULTIGPU=0 bash scripts/gpu-check > /tmp/gpu-check.txt 2>&1; rc=$?
cp /tmp/gpu-check.txt "${OUT:-/tmp/out}/gpu-check.txt"
sed -n '/== cusync gpu-check summary/,$p' /tmp/gpu-check.txt
source scripts/exp/env.sh
source scripts/exp/sides.sh
b() { "$@"; }
SIDES="b"
add_side a carry/ab
echo
{
for r in 1 2; do
  for side in $SIDES; do
    echo "== [$side] bench, stream-stage rows (round $r)"
    $side carry/bin/cusync bench --samples 11 2>/dev/null | grep -E 'stream stage|persistent pair \('
  done
done
for side in $SIDES; do trace_periods $side; done
} 2>&1 | tee "${OUT:-/tmp/out}/ab.txt"
exit $rc
