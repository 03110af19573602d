#!/usr/bin/env bash
# Session 13, run 3: the protocol's overhead again on the landed device code (the protocol
# table twice, the criterion tracing group with the skinny stage's rows), and the MLP's small
# batches once more.
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for i in 1 2; do
  timeout 200 carry/bin/cusync bench --samples 11 > $OUT/bench-$i.txt 2>&1; echo "bench $i rc=$?"
  grep -E "stream stage|post->wait" $OUT/bench-$i.txt
done
timeout 200 carry/bin/bench-protocol --bench tracing > $OUT/criterion-tracing.txt 2>&1; echo "criterion rc=$?"
grep -E "^tracing/|time:" $OUT/criterion-tracing.txt | head -40
timeout 120 carry/bin/cusync sweep mlp --batches 1,8,16 --samples 10 2>&1 | tail -4
