#!/usr/bin/env bash
# Session 16, run 3: the landed build after both reverts (the stream-mode hooks of 8c3a82b,
# session 15's skinny kernel): the whole GPU suite, then `cusync bench` (the protocol table,
# with the MLP pair StreamSync against the serialized graphs).
source "$(dirname "$0")/env.sh"
timeout 330 carry/bin/test-gpu-test --test-threads=1 > $OUT/test-gpu-test.log 2>&1; echo "tests rc=$?"
grep -E "FAILED|panicked|^gpu:|skipped:" $OUT/test-gpu-test.log | head -20
timeout 200 carry/bin/cusync bench --samples 11 > $OUT/bench-table.txt 2>&1; echo "bench rc=$?"
grep -E "stream stage|MLP B=|persistent pair \(|post->wait" $OUT/bench-table.txt
