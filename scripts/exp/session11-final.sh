#!/usr/bin/env bash
# Session 11, run 3: the whole pass (`gpu-check`, whose `run layers` now times the banded
# megakernel upstream and downstream first beside the twin, the dependencies-met launch, our
# single GeMMs, cuBLAS and the best micro-batching chunk), then issue 5's 2-layer stack over M
# (1024 to 32768) with RowSync beside the band, and a traced launch at M = 1024 (one band: no
# overlap is possible there) into layers-m.txt.
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
CUSYNC_MULTIGPU=0 bash scripts/gpu-check; rc=$?
source scripts/exp/env.sh
carry/bin/cusync run layers --m 1024,2048,4096,8192,16384,32768 --layers 2 --iters 3 --policy band,rowsync \
  --trace /tmp/trace-m1024 > "$OUT/layers-m.txt" 2>&1 || rc=1
echo "== run layers over M (layers-m.txt)"
grep -E '^2-layer|single GeMMs =|micro-batching:' "$OUT/layers-m.txt" | grep -v RowSync
grep -E '^cusync trace|^SM busy|^  [01] layer|tails|stage 0 -> 1' "$OUT/layers-m.txt"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
echo "== done (${SECONDS}s), rc=$rc"
exit $rc
