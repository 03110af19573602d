#!/usr/bin/env bash
# Session 17, run 1: path-2 stream stages with the early dependency poll (before the free-stage
# wait), the persistent register split (88 / 208) up to 128 x 192 tiles, and posts through the
# post warp (the post ring shared with the megakernel). The GPU suite, `cusync bench` (the
# protocol table: the stage alone, the serialized MLP pairs), the MLP sweep, the 2-layer stack.
source "$(dirname "$0")/env.sh"
t0=$SECONDS
timeout 330 carry/bin/test-gpu-test --test-threads=1 > $OUT/test-gpu-test.log 2>&1; echo "tests rc=$? ($((SECONDS-t0)) s)"
grep -E "FAILED|panicked|^gpu:|skipped:|test result" $OUT/test-gpu-test.log | head -20
t0=$SECONDS
timeout 200 carry/bin/cusync bench --samples 11 > $OUT/bench-table.txt 2>&1; echo "bench rc=$? ($((SECONDS-t0)) s)"
grep -E "stream stage|MLP B=|persistent pair \(|post->wait" $OUT/bench-table.txt
t0=$SECONDS
timeout 150 carry/bin/cusync sweep mlp --samples 10 > $OUT/mlp-sweep.txt 2>&1; echo "sweep rc=$? ($((SECONDS-t0)) s)"
cat $OUT/mlp-sweep.txt | tail -30
t0=$SECONDS
timeout 100 carry/bin/cusync run layers --m 16384 --layers 2 --iters 5 > $OUT/layers.txt 2>&1; echo "layers rc=$? ($((SECONDS-t0)) s)"
tail -15 $OUT/layers.txt
