#!/usr/bin/env bash
# Session 38's check of the programmatic launch as the MLP's default (8908910), for a small
# budget (carry `carry/bin`, `carry/ptx` from scripts/build-gpu-carry; about 1 minute): the
# GPU tests of Policy::Auto's trial, the MLP traces and the programmatic chain, then `run mlp`
# without --launch (its variants must be the `/pdl` ones) and Auto's trial at B = 256.
# Usage: bash scripts/exp/session38c.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/carry-unpack.sh
use_carry /tmp/c38.cubin
t0=$SECONDS
timeout 90 carry/bin/test-gpu-test --test-threads=1 mlp::auto traces::mlp stream_mode::programmatic \
  > /tmp/t38c.log 2>&1
echo "GPU tests rc=$? ($((SECONDS - t0)) s)"
grep -E "^test |FAILED|panicked|^gpu:" /tmp/t38c.log | head -8
timeout 60 carry/bin/cusync run mlp --batch 1024 --policy rowsync --order col 2>&1 |
  grep -E "verified|^  (Row|Tile)|^ +1024 " | head -6
timeout 60 carry/bin/cusync run mlp --batch 256 --policy auto --trial --trial-cache none 2>&1 |
  grep -E "^auto|verified|^  (Row|Tile)" | head -6
echo "== $((SECONDS - t0)) s"
