#!/usr/bin/env bash
# Session 22, second half of scripts/exp/session22c.sh: `gemm-table --iters 8` and `run layers
# --m 16384 --layers 2 --iters 5` per carried variant (each ratio to cuBLAS from its own run).
# Before them, one more round of scripts/exp/variants.sh.
# Usage: bash scripts/exp/session22d.sh VARIANT...
source "$(dirname "$0")/variants-lib.sh"
bench=("$@")
bash scripts/exp/variants.sh 1 "$@"
unpack_variants "$@"
for v in "${bench[@]}"; do
  t0=$SECONDS
  CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 200 /tmp/cusync-$v gemm-table --iters 8 > "$OUT/gemm-table-$v.txt" 2>&1 || echo "gemm-table $v rc=$?"
  echo "gemm-table $v ($((SECONDS-t0)) s)"
done
for v in "${bench[@]}"; do
  CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 120 /tmp/cusync-$v run layers --m 16384 --layers 2 --iters 5 --no-microbatch 2>&1 \
    | tail -14 | sed "s/^/  $v layers: /"
done
for v in "${bench[@]}"; do echo "=== gemm-table $v"; tail -28 "$OUT/gemm-table-$v.txt"; done
