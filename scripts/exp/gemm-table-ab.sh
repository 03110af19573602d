#!/usr/bin/env bash
# Session 17, run 4: `cusync gemm-table` for variants carried by scripts/exp/build-variant.sh,
# in interleaved rounds (plain kernels against cuBLAS in each run). Usage: ROUNDS VARIANT...
source "$(dirname "$0")/variants-lib.sh"
rounds=$1; shift
unpack_variants "$@"
for r in $(seq 1 "$rounds"); do
  for v in "$@"; do
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 150 /tmp/cusync-$v gemm-table --iters 8 > "$OUT/gemm-table-$v-$r.txt" 2>&1 || echo "gemm-table $v round $r rc=$?"
  done
done
# shape, path 2 ms, cuBLAS ms, path 2 / cuBLAS per variant and round.
for v in "$@"; do
  echo "=== $v ($(tr '\n' ' ' < carry/variants/$v/commit))"
  for r in $(seq 1 "$rounds"); do
    awk -F'|' -v r=$r 'NR>2 && NF>10 {gsub(/ +/," "); printf "  r%s %s | p2 %s | cuBLAS %s | p2/cuBLAS %s | ours/cuBLAS %s\n", r, $2, $5, $7, $9, $8}' "$OUT/gemm-table-$v-$r.txt"
  done
done
tar czf "$OUT/gemm-tables.tgz" -C "$OUT" $(cd "$OUT" && ls gemm-table-*.txt) && rm -f "$OUT"/gemm-table-*.txt
