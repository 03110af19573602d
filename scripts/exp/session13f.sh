#!/usr/bin/env bash
# Session 13, run 6: the MLP suite on the final test code (one skipped-post helper for the
# path-2 and skinny stages; device code unchanged, PTX md5 9e9481c6).
source "$(dirname "$0")/env.sh"
timeout 200 carry/bin/test-gpu-test --test-threads=1 mlp:: > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |skipped post|^gpu:" $OUT/tests.log
