#!/usr/bin/env bash
# Session 14, run 7: the ring's copies with consecutive shared destinations (lane 8t+i copies
# (i^2t, t) into slot 8t+i). ours vs cuBLAS at B = 1 / 16 (checked on 256 samples each), then
# the L2 sectors it reads (ncu) against the weight's 4.72 M.
source "$(dirname "$0")/env.sh"
for shape in "1 6144 12288 --gelu" "1 12288 6144" "16 6144 12288 --gelu" "16 12288 6144"; do
  set -- $shape
  r=$(timeout 60 carry/bin/cusync run gemm --m $1 --n $2 --k $3 ${4:-} --skinny on --iters 30 2>&1 | grep -E "cuBLAS|ours|verified|rror" | sed 's/(96 column.*//; s/(192 column.*//' | tr '\n' ' ')
  echo "B=$1 ${2}x$3: $r"
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
timeout 100 $NCU --clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum -k regex:gemm_skinny --launch-skip 2 --launch-count 1 \
  carry/bin/cusync run gemm --m 1 --n 6144 --k 12288 --skinny on --iters 3 2>&1 | grep -E "^\s+(gpu__|dram__|lts__)"
