#!/usr/bin/env bash
# Session 27: is a slow B = 64 tile slow because of its SM or its data? The landed kernel and
# variant R (the plain kernel's units rotated by half, an experiment) traced side by side on
# the B = 64 GeMMs; per variant the 14 slowest tiles as "cta sm tile us". CSVs to $OUT.
# Usage: bash scripts/exp/session27-rotate.sh VARIANT...
source "$(dirname "$0")/variants-lib.sh"
unpack_variants "$@"
for r in 1 2; do
  for v in "$@"; do
    for s in "--m 64 --n 12288 --k 6144" "--m 64 --n 6144 --k 12288 --gelu"; do
      d=$OUT/rot/$v-$r-${s// /}
      CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 60 /tmp/cusync-$v run gemm $s --iters 20 --trace "$d" 2>&1 \
        | grep -E 'ours  |traced' | sed "s/^/$v r$r [$s] /"
      awk -F, '!/^#/ && $1 != "stage" {printf "%d %d %d %.1f\n", $4, $3, $2, ($8-$7)/1000}' "$d"/*.csv \
        | sort -k4 -n -r | head -14 | tr '\n' ';' | sed 's/^/  slowest (cta sm tile us): /'; echo
    done
  done
done
rm -f "$OUT"/rot/*/*.svg "$OUT"/rot/*/*.json
tar czf "$OUT/rot.tgz" -C "$OUT" rot && rm -rf "$OUT/rot"
