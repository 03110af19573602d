#!/usr/bin/env bash
# Session 24: where the serialized MLP's protocol cost lies. Variant X (landed device code,
# host with the experiment knob CUSYNC_EXP_DROP on serialized graphs only): `cusync bench`
# with the full protocol, with GeMM2's waits dropped (GeMM1 still posts), and with both
# edges dropped (the stream kernels with nothing to post or wait), in interleaved rounds.
# The knob is not in the product: X is built (scripts/exp/build-variant.sh X) with these lines
# in StreamGraph::desc (host/src/stream/graph.rs), after `let (mut post, mut wait) = ...`:
#   if self.serialized {
#       match std::env::var("CUSYNC_EXP_DROP").as_deref() {
#           Ok("wait") => wait = None,
#           Ok("both") => (post, wait) = (None, None),
#           _ => {}
#       }
#   }
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
    bench_rows "$OUT/bench-$cfg-$r.txt" "  r$r "
  done
done
tar czf "$OUT/attrib.tgz" -C "$OUT" $(cd "$OUT" && ls bench-*.txt) && rm -f "$OUT"/bench-*.txt
