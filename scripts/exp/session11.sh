#!/usr/bin/env bash
# Session 11, run 1: banded RowSync for the megakernel's GeMM stacks and single-GPU
# micro-batching. The persistent GPU suite (with the banded chains), then `run layers` on the
# issue's stacks (band and RowSync pipelined side by side with the twin, the dependencies-met
# launch, our single GeMMs, cuBLAS and the best micro-batching chunk), a traced banded launch,
# and the 2-layer stack over M.
source "$(dirname "$0")/env.sh"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
carry/bin/test-gpu-test --test-threads=1 persistent:: > "$OUT/persistent-suite.log" 2>&1; rc=$?
grep -E "FAIL|panicked|^gpu:|passed|skipped" "$OUT/persistent-suite.log" | tail -8
grep -E "RowBandSync" "$OUT/persistent-suite.log" | head -4
echo "== run layers --m 16384 --layers 2,4,8 --iters 5 --trace (${SECONDS}s)"
carry/bin/cusync run layers --m 16384 --layers 2,4,8 --iters 5 --trace "$OUT/trace" 2>&1 | grep -v '^wrote'
rm -f "$OUT"/trace/*.json
echo "== run layers --m 1024,4096,32768 --layers 2 --iters 3 (${SECONDS}s)"
carry/bin/cusync run layers --m 1024,4096,32768 --layers 2 --iters 3 2>&1
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
echo "== done (${SECONDS}s), suite rc=$rc"
exit $rc
