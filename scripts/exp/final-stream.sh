#!/usr/bin/env bash
# Session 8's last pass (host change only, the same cubin): the whole GPU suite, the protocol
# table, the MLP sweep and one `run mlp` (GeMM1 alone, hooked and not).
source "$(dirname "$0")/env.sh"
mkdir -p "$OUT"
carry/bin/test-gpu-test --test-threads=1 > "$OUT/test-gpu-test.log" 2>&1; rc=$?
grep -E '^gpu:|FAIL' "$OUT/test-gpu-test.log" | tail -5
carry/bin/cusync bench --samples 11 > "$OUT/bench-table.txt" 2>/dev/null
grep -E 'stream stage|persistent pair \(|post->wait' "$OUT/bench-table.txt"
carry/bin/cusync sweep mlp --samples 10 2>/dev/null | tee "$OUT/mlp-sweep.txt"
carry/bin/cusync run mlp --batch 1024 2>&1 | head -16 | tee "$OUT/run-mlp.txt"
exit $rc
