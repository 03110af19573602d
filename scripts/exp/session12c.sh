#!/usr/bin/env bash
# Session 12, run 7: the review's device refactor of the skinny kernels (one predicated-load
# macro, the lane's place as (g, t, warp)); the GeMM suite, then B = 1 timed skinny / path 2 /
# cuBLAS side by side.
source "$(dirname "$0")/env.sh"
timeout 300 carry/bin/test-gpu-test --test-threads=1 gemm:: > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |forced problems|^gpu:" $OUT/tests.log | head -30
timeout 120 carry/bin/cusync gemm-table --iters 10 > $OUT/gemm-table.txt 2>&1; echo "table rc=$?"
head -7 $OUT/gemm-table.txt
