#!/usr/bin/env bash
# Session 37's check of the H200's 128 x 16 MLP stages as its default at B <= 16 (carry
# `carry/bin`, `carry/ptx`, built by scripts/build-gpu-carry; about 2 minutes): the GPU suite's
# MLP tests (the skinny stages' test asserts the default at B = 8), the sweep at B = 1, 8, 16
# with the new default stages, and Policy::Auto's trial at B = 1.
# Usage: bash scripts/exp/session37.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/carry-unpack.sh
use_carry /tmp/c37.cubin
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
timeout 150 carry/bin/test-gpu-test --test-threads=1 mlp:: > "$OUT/tests-mlp.log" 2>&1
echo "GPU tests mlp:: rc=$? ($((SECONDS - t0)) s)"
grep -E "FAILED|panicked|^gpu:" "$OUT/tests-mlp.log" | head -20
timeout 120 carry/bin/cusync sweep mlp --batches 1,8,16 --samples 10 2>&1 | tee "$OUT/sweep-small.txt" | grep -v "^wrote"
timeout 60 carry/bin/cusync run mlp --batch 1 --policy auto --trial --trial-cache none 2>&1 | grep -E "^auto|verified" | tee "$OUT/auto-b1.txt"
echo "== $((SECONDS - t0)) s"
