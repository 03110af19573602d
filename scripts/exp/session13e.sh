#!/usr/bin/env bash
# Session 13, run 5: every criterion protocol group after the iter_custom fix.
source "$(dirname "$0")/env.sh"
timeout 400 carry/bin/bench-protocol --bench > $OUT/criterion-protocol-all.txt 2>&1; echo "protocol rc=$?"
grep -E "^[a-z_]+/|time:" $OUT/criterion-protocol-all.txt | head -120
