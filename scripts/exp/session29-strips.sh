#!/usr/bin/env bash
# Session 29 (no code change needed): why does the B = 64 GeMM2 (96 swapped 128 x 64 tiles,
# whole K) stream its weight at 3.9 TB/s with twelve SMs 20% slower, when cuBLAS streams the
# same bytes in 38-41 us? Two hypotheses, one run each way:
#   strips     - how many SMs stream at once: the same 151 MB weight cut into 64, 96, 128 and
#                132 whole-K strips (N x K chosen so N / 128 is the strip count);
#   activation - the batch operand's share of each SM's traffic: the 96-strip shape at
#                M = 1, 16, 32, 64 (the activation box is 8 KB a K-step at M = 64, and nearly
#                nothing at M = 1), whole tiles forced.
# Per row: our ms and cuBLAS's, and from one traced launch the tiles' median and longest
# time, how many tiles took 1.10x the median or more, and the weight's rate over the span.
# Usage: bash scripts/exp/session29-strips.sh VARIANT   (a carry/variants/NAME build)
source "$(dirname "$0")/variants-lib.sh"
v=${1:?usage: session29-strips.sh VARIANT}
unpack_variants "$v"
strip_row() {
  local label=$1 s=$2 d bytes
  d=$OUT/strips/$label
  CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 60 /tmp/cusync-$v run gemm $s --skinny off --swap-ab on --split-k 1 \
    --stream-k off --iters 20 --trace "$d" 2>&1 | grep -E "ours  |cuBLAS  |rror" | sed "s/^ */  $label /"
  bytes=$(echo "$s" | awk '{for (i = 1; i < NF; i++) { if ($i == "--n") n = $(i+1); if ($i == "--k") k = $(i+1) } print 2 * n * k}')
  # Tile durations (us) sorted, then the span's start and end (ns) last: mawk has no asort.
  { awk -F, '!/^#/ && $1 != "stage" {printf "%.3f\n", ($8 - $7) / 1000}' "$d"/*.csv | sort -n
    awk -F, '!/^#/ && $1 != "stage" {if (s == 0 || $7 < s) s = $7; if ($8 > e) e = $8} END {print "span", s, e}' "$d"/*.csv
  } | awk -v label="$label" -v bytes="$bytes" '
    $1 == "span" { span = ($3 - $2) / 1000; next }
    { d[++n] = $1 }
    END {
      med = d[int((n + 1) / 2)]; slow = 0
      for (i = 1; i <= n; i++) if (d[i] >= 1.1 * med) slow++
      printf "  %s trace: %d tiles, median %.1f us, longest %.1f us, %d at >= 1.10x median, span %.1f us, %.2f TB/s\n",
        label, n, med, d[n], slow, span, bytes / span / 1e6 }'
}
echo "== strips (M = 64, the same 151 MB weight)"
strip_row strips64 "--m 64 --n 8192 --k 9216"
strip_row strips96 "--m 64 --n 12288 --k 6144"
strip_row strips128 "--m 64 --n 16384 --k 4608"
strip_row strips132 "--m 64 --n 16896 --k 4464"
echo "== activation (96 strips, whole tiles)"
for m in 1 16 32 64; do strip_row "act-m$m" "--m $m --n 12288 --k 6144"; done
rm -f "$OUT"/strips/*/*.svg "$OUT"/strips/*/*.json
tar czf "$OUT/strips.tgz" -C "$OUT" strips && rm -rf "$OUT/strips"
