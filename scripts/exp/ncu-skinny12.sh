#!/usr/bin/env bash
# Session 12: where the skinny kernel's time goes against cuBLAS's at B = 1 (ncu, clocks
# untouched): DRAM bytes and throughput, SM throughput, duration, warps active, instructions.
source "$(dirname "$0")/env.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
M=dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread,smsp__inst_executed.sum
for cfg in "--m 1 --n 12288 --k 6144" "--m 1 --n 6144 --k 12288 --gelu"; do
  for k in gemm_skinny 'nvjet|gemv|splitK'; do
    echo "=== $cfg, kernels matching $k"
    timeout 120 $NCU --clock-control none --target-processes all --metrics $M -k regex:"$k" --launch-skip 2 --launch-count 2 \
      carry/bin/cusync run gemm $cfg --iters 2 2>&1 | grep -E "^  [a-zA-Z_].*\(|dram__|gpu__time|sm__|launch__|inst_exec" | head -24
  done
done
