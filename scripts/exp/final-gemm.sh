#!/usr/bin/env bash
# The GeMM suite and table with the B <= 16 stream-K rule (host-only change; same cubin).
cd "$(dirname "$0")/../.."
source scripts/carry-unpack.sh
unpack_cubin carry/ptx /tmp/c.cubin && export CUSYNC_CUBIN_FILE=/tmp/c.cubin
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 CUSYNC_REQUIRE_GPU=1
source scripts/nccl-env.sh
timeout 300 carry/bin/test-gpu-test --test-threads=1 gemm:: > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |chosen|result" $OUT/tests.log | head -40
timeout 200 carry/bin/cusync gemm-table --iters 8 > $OUT/gemm-table.txt 2>&1; echo "table rc=$?"
head -18 $OUT/gemm-table.txt
