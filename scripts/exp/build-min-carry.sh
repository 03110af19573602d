#!/usr/bin/env bash
# A smaller carry than scripts/build-gpu-carry, for experiment runs: the `cusync` binary, the
# GPU test binary and the sm_90a cubin (ptxas here) with its fingerprint, stripped and gzipped
# into carry/ (what scripts/exp/env.sh unpacks). No criterion, no CPU suites, no sm_80.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf carry/bin carry/ptx && mkdir -p carry/bin carry/ptx
cargo build --release -p cusync --bins
cp target/release/cusync carry/bin/cusync
cargo test --release -p cusync-tests --test gpu --no-run --message-format=json-render-diagnostics \
  | python3 -c '
import json, sys, shutil
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        shutil.copy(m["executable"], "carry/bin/test-gpu-test")
        print("carried carry/bin/test-gpu-test")
'
BIN=$(scripts/get-ptxas)
"$BIN/ptxas" -arch=sm_90a -v target/cusync_device.sm_90a.ptx -o target/cusync_device.sm_90a.cubin > target/ptxas.sm_90a.log 2>&1
grep -c "Compiling entry" target/ptxas.sm_90a.log
target/release/cusync ptx-fingerprint > target/cusync_device.sm_90a.cubin.fnv
gzip -c target/cusync_device.sm_90a.cubin > carry/ptx/cusync_device.sm_90a.cubin.gz
cp target/cusync_device.sm_90a.cubin.fnv target/ptxas.sm_90a.log carry/ptx/
strip carry/bin/* 2>/dev/null || true
for f in carry/bin/*; do gzip -f "$f"; done
du -sh carry
