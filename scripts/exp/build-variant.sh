#!/usr/bin/env bash
# Builds the working tree's `cusync` binary and sm_90a cubin (ptxas here, with the binary's PTX
# fingerprint) into carry/variants/NAME, for scripts/exp/variants.sh to time side by side.
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1
dst=carry/variants/$name
rm -rf "$dst" && mkdir -p "$dst"
cargo build --release -p cusync --bins
BIN=$(scripts/get-ptxas)
"$BIN/ptxas" -arch=sm_90a target/cusync_device.sm_90a.ptx -o "$dst/c.cubin"
target/release/cusync ptx-fingerprint > "$dst/c.cubin.fnv"
cp target/release/cusync "$dst/cusync" && strip "$dst/cusync"
gzip "$dst/cusync" "$dst/c.cubin"
git rev-parse --short HEAD > "$dst/commit"; git diff --quiet HEAD -- device || echo "+dirty" >> "$dst/commit"
du -sh "$dst"
