#!/usr/bin/env bash
# Session 38's check of programmatic dependent launch (WaitKernelPolicy::Programmatic: every
# stage on one stream, each consumer launched programmatically, no wait kernel), carry
# `carry/bin`, `carry/ptx` from scripts/build-gpu-carry; about 4 minutes. The GPU tests that
# run it (the three-stage chain, the skipped post, every mlp:: check), then the MLP sweep with
# each policy launched both ways side by side (`--launch auto,pdl`).
# Usage: bash scripts/exp/session38.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 CUSYNC_REQUIRE_GPU=1
source scripts/carry-unpack.sh
unpack_bins carry/bin
unpack_cubin carry/ptx /tmp/c38.cubin && export CUSYNC_CUBIN_FILE=/tmp/c38.cubin
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
t0=$SECONDS
for f in stream_mode:: reliability::producer_skipping mlp::; do
  timeout 240 carry/bin/test-gpu-test --test-threads=1 "$f" > "$OUT/tests-${f%%:*}.log" 2>&1
  echo "GPU tests $f rc=$? ($((SECONDS - t0)) s)"
  grep -E "FAILED|panicked|^gpu:|programmatic|launch: pdl" "$OUT/tests-${f%%:*}.log" | head -12
done
timeout 300 carry/bin/cusync sweep mlp --batches 1,8,16,64,128,256,512,1024,2048 --samples 10 \
  --launch auto,pdl --csv "$OUT/sweep-pdl.csv" 2>&1 | tee "$OUT/sweep-pdl.txt" | grep -v "^wrote"
echo "sweep rc=${PIPESTATUS[0]} ($((SECONDS - t0)) s)"
# Per variant medians, both launches side by side (policy/order vs policy/order/pdl).
python3 - "$OUT/sweep-pdl.csv" <<'PY' || true
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("columns:", ", ".join(rows[0].keys()) if rows else "none")
PY
echo "== $((SECONDS - t0)) s"
