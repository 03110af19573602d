#!/usr/bin/env bash
# Session 13, run 4: the criterion benches after the iter_custom fix (every call now runs
# operations in proportion to criterion's `iters`): the tracing group (the stream stages'
# hooks, path 2 and skinny), post->wait, and the B = 1 GeMM group.
source "$(dirname "$0")/env.sh"
timeout 200 carry/bin/bench-protocol --bench 'tracing|post_to_wait' > $OUT/criterion-protocol.txt 2>&1; echo "protocol rc=$?"
grep -E "^(tracing|post_to_wait)/|time:|iterations" $OUT/criterion-protocol.txt | head -60
timeout 200 carry/bin/bench-gemm --bench 'mlp2_b1$' > $OUT/criterion-gemm.txt 2>&1; echo "gemm rc=$?"
grep -E "^gemm/|time:" $OUT/criterion-gemm.txt | head -20
