#!/usr/bin/env bash
# Session 27, run 1: where the bandwidth-bound and few-tile shapes lose. `gemm-table` with every
# split-K factor in SPLITS forced and every work decomposition (`--modes`), for one carried
# variant; the table and the split and mode rows printed last.
# Usage: bash scripts/exp/session27-splits.sh VARIANT [SPLITS]
source "$(dirname "$0")/variants-lib.sh"
v=$1; splits=${2:-1,2,3,4,6,8}
unpack_variants "$v"
t0=$SECONDS
CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 400 /tmp/cusync-$v gemm-table --iters 10 --splits "$splits" --modes \
  > "$OUT/gemm-table-$v.txt" 2>&1
echo "gemm-table rc=$? ($((SECONDS-t0)) s)"
cat "$OUT/gemm-table-$v.txt"
