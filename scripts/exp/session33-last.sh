#!/usr/bin/env bash
# session33-final.sh cut to what session 33's last 347 s of device time could hold (carry
# ["carry/variants/F"]): the GPU tests the session's changes touch (every path-2 test with
# M <= 64 products, which on an H100 now run 5 stages of their ring; the MLP's, whose stages
# at B = 17..64 now run the 64 x 96 tile; `run gemm`'s), then one round of `run mlp` at B = 64
# and 32 (default against the swapped stages, RowSync) and `run gemm` at B = 64 (default
# against the whole ring). Usage: bash scripts/exp/session33-last.sh F
source "$(dirname "$0")/variants-lib.sh"
v=${1:?usage: session33-last.sh VAR}
t_start=$SECONDS
unpack_variants "$v"
gunzip -c "carry/variants/$v/test-gpu-test.gz" > /tmp/test-$v && chmod +x /tmp/test-$v
CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin CUSYNC_MULTIGPU=0 timeout 170 /tmp/test-$v --test-threads=1 \
  gemm::path2_swapped gemm::path2_tile gemm::path2_every gemm::path2_split gemm::path2_stream_k \
  gemm::path2_edges gemm::path2_clusters gemm::run_gemm mlp:: > "$OUT/tests-$v.log" 2>&1
echo "tests $v rc=$? ($((SECONDS - t_start)) s)" | tee "$OUT/summary.txt"
grep -E "FAILED|panicked|^gpu:" "$OUT/tests-$v.log" | head -20 | tee -a "$OUT/summary.txt"
: > "$OUT/rows.txt"
for b in 64 32; do
  mlp_row "$v" "$OUT/rows.txt" "mlp default" --batch $b --policy rowsync
  mlp_row "$v" "$OUT/rows.txt" "mlp swapped" --batch $b --policy rowsync --kernel wg128x64
done
for s in "--n 12288 --k 6144" "--n 6144 --k 12288 --gelu"; do
  timed_row "$v" "default" --m 64 $s
  timed_row "$v" "whole ring" --m 64 $s --pipeline-depth 11
done
echo "== after $((SECONDS - t_start)) s"; cat "$OUT/summary.txt" "$OUT/rows.txt"
