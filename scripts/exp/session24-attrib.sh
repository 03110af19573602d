#!/usr/bin/env bash
# Session 24: where the serialized MLP's protocol cost lies. Variant X (landed device code,
# host with the experiment knob CUSYNC_EXP_DROP on serialized graphs only): `cusync bench`
# with the full protocol, with GeMM2's waits dropped (GeMM1 still posts), and with both
# edges dropped (the stream kernels with nothing to post or wait), in interleaved rounds.
# Usage: bash scripts/exp/session24-attrib.sh ROUNDS
source "$(dirname "$0")/variants-lib.sh"
rounds=$1
unpack_variants X
t0=$SECONDS
for r in $(seq 1 "$rounds"); do
  for cfg in none wait both; do
    CUSYNC_EXP_DROP=$cfg CUSYNC_CUBIN_FILE=/tmp/c-X.cubin timeout 120 /tmp/cusync-X bench --samples 11 > "$OUT/bench-$cfg-$r.txt" 2>&1 || echo "bench $cfg round $r rc=$?"
  done
done
echo "bench rounds ($((SECONDS-t0)) s)"
for cfg in none wait both; do
  echo "=== drop $cfg"
  for r in $(seq 1 "$rounds"); do
    grep -E "^stream stage B=1024|^MLP B=1024.*paired|^MLP B=1 skinny.*paired" "$OUT/bench-$cfg-$r.txt" | sed "s/^/  r$r /"
  done
done
tar czf "$OUT/attrib.tgz" -C "$OUT" $(cd "$OUT" && ls bench-*.txt) && rm -f "$OUT"/bench-*.txt
