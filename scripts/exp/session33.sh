#!/usr/bin/env bash
# Session 33's second device call, after `scripts/gpu-check` ran main's suite and tables:
#   1. `NOTESTS=1 scripts/exp/session32.sh E`: `run gemm --depth-sweep` of main's default at B = 64,
#      32 and 128, the swapped tile at B = 64 and the 128 x 16 tile at B = 1 (does a shallower ring
#      pay, per shape?);
#   2. `scripts/exp/session33-s96.sh S96`: the 64 x 96 stream stages' tests and `run mlp` at B = 32
#      and 64 against the swapped stages (ROUNDS rounds);
#   2b. B = 128 and 96: the default beside the 64 x 96 tile (split 1 and 2, depth 4 or all);
#   3. the tables last ($OUT/rows-depth.txt, rows-b128.txt, rows-s96.txt; the logs beside them).
# Usage (carry ["carry/variants/E", "carry/variants/S96"]): [ROUNDS=2] bash scripts/exp/session33.sh
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$SECONDS
NOTESTS=1 bash scripts/exp/session32.sh E > "$OUT/depth.log" 2>&1
cp "$OUT/rows.txt" "$OUT/rows-depth.txt"
echo "depth sweeps: $((SECONDS - t0)) s"
# B = 96 and 128 (issue 3's weakest rows): the default beside the 64 x 96 tile (2 row tiles),
# whole K and split in two, 128-byte promotion, at the full ring and at depth 4.
(
  source scripts/exp/variants-lib.sh
  : > "$OUT/rows.txt"
  for m in 128 96; do
    for s in "--n 12288 --k 6144" "--n 6144 --k 12288 --gelu"; do
      timed_row E "default" --m $m $s
      timed_row E "default depth 4" --m $m $s --pipeline-depth 4
      for sk in 1 2; do
        timed_row E "64x96 split $sk" --m $m $s --kernel wg64x96 --split-k $sk --l2-promotion 128
        timed_row E "64x96 split $sk depth 4" --m $m $s --kernel wg64x96 --split-k $sk --l2-promotion 128 --pipeline-depth 4
      done
    done
  done
) > "$OUT/b128.log" 2>&1
cp "$OUT/rows.txt" "$OUT/rows-b128.txt"
bash scripts/exp/session33-s96.sh S96 > "$OUT/s96.log" 2>&1
cp "$OUT/rows.txt" "$OUT/rows-s96.txt"
rm -f "$OUT/rows.txt"
echo "== s96 tests"; grep -E "^tests |FAILED|panicked|^gpu:" "$OUT/s96.log" | head
echo "== depth sweeps (variant, label, [args], run gemm's lines)"; cat "$OUT/rows-depth.txt"
echo "== B = 96 and 128 rows"; cat "$OUT/rows-b128.txt"
echo "== s96 rows after $((SECONDS - t0)) s"; cat "$OUT/rows-s96.txt"
