#!/usr/bin/env bash
# Session 9's landed build (device code back to session 8's, c1bb63c's cubin; this session's
# GPU test added): the whole GPU suite, then the protocol table's stream-stage rows and the
# MLP sweep.
source "$(dirname "$0")/env.sh"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
carry/bin/test-gpu-test --test-threads=1 > "$OUT/gpu-suite.log" 2>&1; rc=$?
grep -E "FAIL|panicked|^gpu:" "$OUT/gpu-suite.log" | tail -6
grep -E "delayed" "$OUT/gpu-suite.log" | head -4
echo "== bench (${SECONDS}s)"
carry/bin/cusync bench --samples 11 2>/dev/null | grep -E 'stream stage|post->wait'
echo "== sweep (${SECONDS}s)"
carry/bin/cusync sweep mlp --samples 10 2>/dev/null | grep -E '^ +[0-9]+ wg' | cut -c1-200
echo "== done (${SECONDS}s), suite rc=$rc"
exit $rc
