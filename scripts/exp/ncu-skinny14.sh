#!/usr/bin/env bash
# Session 14: why the cp.async skinny kernel is slow (ncu sections: speed of light, warp states,
# memory, occupancy, launch), against the cp.async read probe (g4).
source "$(dirname "$0")/env.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
S="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section SchedulerStats"
echo "=== gemm_skinny_bf16_m16, B = 1, 6144 x 12288"
timeout 150 $NCU --clock-control none $S -k regex:gemm_skinny --launch-skip 2 --launch-count 1 \
  carry/bin/cusync run gemm --m 1 --n 6144 --k 12288 --skinny on --iters 2 2>&1 | grep -vE "^==PROF==|^    -+|^\s*$" | sed -n '/gemm_skinny/,$p' | head -120
echo "=== bench_read_async_g4"
timeout 150 $NCU --clock-control none $S -k regex:bench_read_async_g4 --launch-skip 2 --launch-count 1 \
  carry/bin/cusync run gemm --m 1 --n 6144 --k 12288 --iters 3 --read-probe 2>&1 | grep -vE "^==PROF==|^    -+|^\s*$" | sed -n '/bench_read_async_g4/,$p' | grep -E "Duration|Throughput|Stall|stall|Warp Cycles|Issued|Eligible|Active Warps|Shared Memory|L1|Registers|Block Limit|One or More|No Eligible" | head -40
