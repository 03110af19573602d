#!/usr/bin/env bash
# Session 18 (runs 1 and 2): the GPU suite on one carried variant (with its test binary), then
# `cusync bench` and `sweep mlp` for the carried variants in interleaved rounds
# (scripts/exp/variants.sh), then, for the variants after `--`, the plain kernels' `gemm-table`
# (scripts/exp/gemm-table-ab.sh).
# Usage: bash scripts/exp/session18.sh SUITE_VARIANT ROUNDS VARIANT... -- TABLE_VARIANT...
source "$(dirname "$0")/variants-lib.sh"
suite=$1; rounds=$2; shift 2
bench=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do bench+=("$1"); shift; done; shift
unpack_variants "$suite"
if [ -f "carry/variants/$suite/test-gpu-test.gz" ]; then
  gunzip -c "carry/variants/$suite/test-gpu-test.gz" > /tmp/test-$suite && chmod +x /tmp/test-$suite
  t0=$SECONDS
  CUSYNC_CUBIN_FILE=/tmp/c-$suite.cubin CUSYNC_MULTIGPU=0 timeout 260 /tmp/test-$suite --test-threads=1 > "$OUT/suite-$suite.log" 2>&1
  echo "suite $suite rc=$? ($((SECONDS-t0)) s)"
  grep -E "FAILED|panicked|skipped:|test result|^gpu:" "$OUT/suite-$suite.log" | head -20
fi
t0=$SECONDS
bash scripts/exp/variants.sh "$rounds" "${bench[@]}"
echo "variants ($((SECONDS-t0)) s)"
[ $# -gt 0 ] && bash scripts/exp/gemm-table-ab.sh 1 "$@"
