#!/usr/bin/env bash
# Written in session 32 for the device call after `scripts/gpu-check` (session 32's device time ran
# out before it could run). The TMA probe streamed the B = 64 weight's 96 strips 15% faster with
# 4 stages than with 9 (2.74 against 2.38 TB/s on an H100); this measures the pipeline depth
# (`run gemm --pipeline-depth`, `--depth-sweep`) on the GeMMs:
#   1. VAR's GPU suite, less the skinny kernels' test (their code did not change): every path-2
#      kernel's ring wraps at the launch's depth (path2_every_pipeline_depth checks depths
#      2..=stages against the f64 reference), and the 64 x 96 tile is the default at B = 17..64;
#   2. `run gemm --depth-sweep` (every depth, three rotating rounds, cuBLAS beside) on the GPT-3
#      MLP's GeMMs: the default at B = 64, 32 and 128, the swapped 128 x 64 tile (the default
#      before) at B = 64, the 128 x 16 tile at B = 1;
#   3. the rows as a table last. (SHORT=1: three tests and 22 single rows, for two minutes;
#      NOTESTS=1: the sweeps without step 1, for a call after `scripts/gpu-check` ran VAR's code.)
# Usage (carry ["carry/variants/VAR"]): [SHORT=1 | NOTESTS=1] bash scripts/exp/session32.sh VAR
source "$(dirname "$0")/variants-lib.sh"
v=${1:?usage: session32.sh VAR}
t_start=$SECONDS
: > "$OUT/rows.txt"
unpack_variants "$v"
if [ "${SHORT:-0}" = 1 ]; then
  # The least that answers both questions (is the new default right; does depth pay), for a
  # call with two minutes of device time: three tests, then two rounds of eleven rows.
  variant_tests "$v" gemm::path2_every_pipeline_depth gemm::path2_tile96 gemm::path2_swapped
  for r in 1 2; do
    for s in "--m 64 --n 12288 --k 6144" "--m 64 --n 6144 --k 12288 --gelu" "--m 32 --n 12288 --k 6144"; do
      timed_row "$v" "default r$r" $s
      timed_row "$v" "default depth 4 r$r" $s --pipeline-depth 4
      timed_row "$v" "swapped r$r" $s --swap-ab on
      case "$s" in *32*) continue ;; esac
      timed_row "$v" "swapped depth 4 r$r" $s --swap-ab on --pipeline-depth 4
    done
  done
  echo "== rows (variant, label, [args], ours ms, ours / cuBLAS speed | kernel) after $((SECONDS - t_start)) s"
  cat "$OUT/rows.txt"
  exit 0
fi
[ "${NOTESTS:-0}" = 1 ] || variant_tests "$v" gemm::every gemm::edge gemm::square gemm::skinny_and gemm::several gemm::launch \
  gemm::timing gemm::path2 gemm::run_gemm mlp:: persistent:: stream_mode:: reliability:: microbench:: \
  chain:: dag:: protocol:: traces:: multigpu:: probe:: intrinsics::
# One `run gemm --depth-sweep` (every depth of the ring, three rotating rounds, cuBLAS beside):
# its lines prefixed with the variant, LABEL and the arguments, into $OUT/rows.txt.
sweep() {
  local label=$1
  shift
  CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 150 /tmp/cusync-$v run gemm "$@" --iters 20 --depth-sweep 2>&1 \
    | grep -E "^ *ours |speed|^ *depth|^ *cuBLAS |rror|^cusync: " | sed "s|^ *|$v $label [$*] |" | tee -a "$OUT/rows.txt"
}
g2="--n 12288 --k 6144"
g1="--n 6144 --k 12288 --gelu"
for m in 64 32 128; do
  for s in "$g2" "$g1"; do sweep "default" --m $m $s; done
done
for s in "$g2" "$g1"; do sweep "swapped" --m 64 $s --swap-ab on; done
for s in "$g2" "$g1"; do sweep "128x16" --m 1 $s --kernel wg128x16 --swap-ab on --skinny off; done
echo "== rows (variant, label, [args], run gemm's lines) after $((SECONDS - t_start)) s"
cat "$OUT/rows.txt"
