#!/usr/bin/env bash
# Times the variants scripts/exp/build-variant.sh carried (carry/variants/*), side by side in
# rounds (`cusync bench`, `cusync sweep mlp`), then prints the rows that compare them.
# Usage: bash scripts/exp/variants.sh ROUNDS VARIANT...
source "$(dirname "$0")/variants-lib.sh"
rounds=$1; shift
unpack_variants "$@"
for r in $(seq 1 "$rounds"); do
  for v in "$@"; do
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 120 /tmp/cusync-$v bench --samples 11 > "$OUT/bench-$v-$r.txt" 2>&1 || echo "bench $v round $r rc=$?"
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 120 /tmp/cusync-$v sweep mlp --samples 10 > "$OUT/sweep-$v-$r.txt" 2>&1 || echo "sweep $v round $r rc=$?"
  done
done
for v in "$@"; do
  echo "=== $v ($(cat carry/variants/$v/commit | tr '\n' ' '))"
  for r in $(seq 1 "$rounds"); do
    bench_rows "$OUT/bench-$v-$r.txt" "  r$r "
    grep -E "^ +(1|64|256|512|1024|2048) " "$OUT/sweep-$v-$r.txt" | awk -v r=$r '{print "  r" r " B=" $1, $2, "SS=" $10, "TS=" $11, "RS=" $12, "best=" $13, "cuBLAS=" $14, "vsSS=" $(NF-1), "vsCuBLAS=" $NF}'
  done
done
# The device tool returns at most 8 files: one archive.
tar czf "$OUT/variants.tgz" -C "$OUT" $(cd "$OUT" && ls bench-*.txt sweep-*.txt) && rm -f "$OUT"/bench-*.txt "$OUT"/sweep-*.txt
