#!/usr/bin/env bash
# Per-stage summary of cusync trace CSVs (no GPU): tiles, first and last t_dispatch, first
# t_start, first and last t_ready, last t_end, in µs from the trace's first dispatch. Only the
# last 12 digits of each %globaltimer value are kept (awk's doubles would round 19 digits to
# 256 ns); a run is far shorter than the 1000 s they span.
# Usage: bash scripts/exp/trace-summary.sh FILE.csv...
for f in "$@"; do
  echo "$(basename "$f"):"
  awk -F, 'function t(x) { return substr(x, length(x) - 11) + 0 }
    /^[0-9]/ {
      s=$1; n[s]++; d=t($5); r=t($6); b=t($7); e=t($8)
      if (g == "" || d < g) g=d
      if (!(s in d0) || d < d0[s]) d0[s]=d; if (d > d1[s]) d1[s]=d
      if (!(s in s0) || b < s0[s]) s0[s]=b
      if (!(s in r0) || r < r0[s]) r0[s]=r; if (r > r1[s]) r1[s]=r
      if (e > e1[s]) e1[s]=e
    }
    END { for (s in n) printf "  stage %s tiles %d dispatch %.2f..%.2f start %.2f ready %.2f..%.2f end %.2f us\n",
      s, n[s], (d0[s]-g)/1e3, (d1[s]-g)/1e3, (s0[s]-g)/1e3, (r0[s]-g)/1e3, (r1[s]-g)/1e3, (e1[s]-g)/1e3 }' "$f" | sort
done
