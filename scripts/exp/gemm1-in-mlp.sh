#!/usr/bin/env bash
# Experiment: GeMM1's tiles inside the stream-mode MLP against StreamSync's (per-stage lines of
# the traced runs), over batch, policy and order.
source "$(dirname "$0")/env.sh"
B=carry/bin/cusync
while read -r args; do
  echo "== run mlp $args"
  $B run mlp $args --trace /tmp/t 2>&1 | grep -E '^cusync trace|^  [01] gemm|ending at' | sed 's/^/  /'
done <<'LIST'
--batch 256 --policy rowsync --order col
--batch 256 --policy tilesync --order col
--batch 256 --policy rowsync --order row
--batch 512 --policy rowsync --order col
--batch 128 --policy rowsync --order col
--batch 256 --policy rowsync --order col --kernel wg128x128
LIST
