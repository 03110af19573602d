#!/usr/bin/env bash
# The GeMM suite and table with the B <= 16 stream-K rule (host-only change; same cubin).
source "$(dirname "$0")/env.sh"
timeout 300 carry/bin/test-gpu-test --test-threads=1 gemm:: > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |chosen|result" $OUT/tests.log | head -40
timeout 200 carry/bin/cusync gemm-table --iters 8 > $OUT/gemm-table.txt 2>&1; echo "table rc=$?"
head -18 $OUT/gemm-table.txt
