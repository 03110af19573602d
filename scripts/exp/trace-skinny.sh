#!/usr/bin/env bash
# The run-gemm tests with --trace, then the skinny GeMMs' per-tile traces (for the SM pattern).
source "$(dirname "$0")/env.sh"
timeout 200 carry/bin/test-gpu-test --test-threads=1 gemm::run_gemm gemm::path2_swapped > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |traced|result" $OUT/tests.log
for args in "--m 64 --n 12288 --k 6144" "--m 64 --n 12288 --k 24576" "--m 64 --n 6144 --k 12288 --gelu" "--m 1 --n 12288 --k 6144"; do
  echo "== $args"
  carry/bin/cusync run gemm $args --iters 10 --trace $OUT/traces 2>&1 | grep -E "ours|traced|wrote|rror"
done
rm -f $OUT/traces/*.svg $OUT/traces/*.json
