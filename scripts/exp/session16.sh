#!/usr/bin/env bash
# Session 16, run 1: the skinny kernel counting first (its last arrival keeps its partial in
# registers and waits, bounded, for the others' publishes) and issue 7's stream-stage hooks
# (no clock read untraced, no wait call without a wait edge). The GPU tests these touch, the
# skinny A/B against session 15's landed build (carry/ab), then criterion's paired
# protocol_overhead group (with the MLP pair: StreamSync against the serialized graph).
source "$(dirname "$0")/env.sh"
timeout 300 carry/bin/test-gpu-test --test-threads=1 gemm::skinny gemm::run_gemm mlp:: microbench::serialized \
  > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |^gpu:|FAILED|panicked|test result|reported after|after the report|serialized MLP" $OUT/tests.log | head -40
source "$(dirname "$0")/skinny-ab.sh"
unpack_side carry/ab /tmp/ab.cubin
skinny_ab count1st carry/bin/cusync "$CUSYNC_CUBIN_FILE" landed carry/ab/cusync /tmp/ab.cubin
timeout 200 carry/bin/bench-protocol --bench protocol_overhead > $OUT/criterion.log 2>&1; echo "criterion rc=$?"
grep -E "protocol_overhead|time:" $OUT/criterion.log | head -60
