#!/usr/bin/env bash
# The MLP measured side by side (interleaved rounds, graphs timed to their last stream's end):
# the stream-mode and MLP GPU tests, the sweep, and traced runs at B = 128 and 256.
source "$(dirname "$0")/env.sh"
B=carry/bin/cusync
carry/bin/test-gpu-test --test-threads=1 mlp:: stream 2>&1 | grep -E '^test |test result' | tail -30
$B sweep mlp --samples 10 2>/dev/null
for b in 128 256; do
  $B run mlp --batch $b --policy rowsync --trace /tmp/mlp-trace 2>&1 | grep -vE '^ +[0-9.]+ - ' | head -60
done
mkdir -p "$OUT" && cp /tmp/mlp-trace/*.csv "$OUT/" 2>/dev/null
