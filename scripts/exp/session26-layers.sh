#!/usr/bin/env bash
# Session 26: the megakernel's stacks (issue 5) on a carried variant after the 16-byte epilogue
# stores: `run layers` at M = 16384 over 2, 4 and 8 layers (pipelined, deps met, no-protocol
# twin, our singles, cuBLAS back to back, best-chunk micro-batching, side by side).
# Usage: bash scripts/exp/session26-layers.sh VARIANT
source "$(dirname "$0")/variants-lib.sh"
unpack_variants "$1"
CUSYNC_CUBIN_FILE=/tmp/c-$1.cubin timeout 200 /tmp/cusync-$1 run layers --m 16384 --layers 2,4,8 --iters 5 2>&1 | tee "$OUT/layers-$1.txt" | tail -45
