#!/usr/bin/env bash
# Makes carry/variants/NAME out of what scripts/build-gpu-carry left in carry/ (the `cusync`
# binary, the sm_90a cubin and its fingerprint, the GPU test binary), for the variants-lib
# scripts, without building anything again (session 34: the same build, carried once).
# Usage: bash scripts/exp/carry-variant.sh NAME
set -euo pipefail
cd "$(dirname "$0")/../.."
name=${1:?usage: carry-variant.sh NAME}
dst=carry/variants/$name
[ -f carry/bin/cusync.gz ] && [ -f carry/ptx/cusync_device.sm_90a.cubin.gz ] \
  || { echo "carry-variant: run scripts/build-gpu-carry first"; exit 1; }
rm -rf "$dst" && mkdir -p "$dst"
cp carry/bin/cusync.gz "$dst/cusync.gz"
cp carry/ptx/cusync_device.sm_90a.cubin.gz "$dst/c.cubin.gz"
cp carry/ptx/cusync_device.sm_90a.cubin.fnv "$dst/c.cubin.fnv"
cp carry/bin/test-gpu-test.gz "$dst/test-gpu-test.gz"
git rev-parse --short HEAD > "$dst/commit"
du -sh "$dst"
