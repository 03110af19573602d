#!/usr/bin/env bash
# Session 15, run 5: the skinny kernels' segment end through shared-window addresses (the
# cross-warp reduction as STS/LDS.128 and the last-arrival flag as a shared volatile word, not
# generic ST.E/LD.E). The skinny and MLP GPU tests, then A/B against the landed build (carry/ab)
# at five shapes, two rounds, the binaries alternating.
source "$(dirname "$0")/env.sh"
timeout 280 carry/bin/test-gpu-test --test-threads=1 mlp:: gemm::skinny gemm::run_gemm > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |^gpu:|FAILED|panicked|test result" $OUT/tests.log | head -40
source "$(dirname "$0")/skinny-ab.sh"
unpack_side carry/ab /tmp/ab.cubin
skinny_ab sts carry/bin/cusync "$CUSYNC_CUBIN_FILE" landed carry/ab/cusync /tmp/ab.cubin
