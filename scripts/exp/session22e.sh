#!/usr/bin/env bash
# Session 22: the GPU suite on SUITE, one round of scripts/exp/variants.sh (`bench`, `sweep
# mlp`) over the variants, the 2-layer megakernel stack (`run layers --m 16384 --layers 2
# --iters 5 --no-microbatch`) per variant, and `gemm-table --iters 8` on the last variant.
# Usage: bash scripts/exp/session22e.sh SUITE VARIANT...
source "$(dirname "$0")/variants-lib.sh"
suite_then_variants "$1" 1 "${@:2}" --
for v in "${bench[@]}"; do
  CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 120 /tmp/cusync-$v run layers --m 16384 --layers 2 --iters 5 --no-microbatch 2>&1 \
    | tail -14 | sed "s/^/  $v layers: /"
done
v=${bench[-1]}; t0=$SECONDS
CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 200 /tmp/cusync-$v gemm-table --iters 8 > "$OUT/gemm-table-$v.txt" 2>&1 || echo "gemm-table $v rc=$?"
echo "gemm-table $v ($((SECONDS-t0)) s)"; tail -30 "$OUT/gemm-table-$v.txt"
