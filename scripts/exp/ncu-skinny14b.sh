#!/usr/bin/env bash
# Session 14: the cp.async skinny kernel (consecutive-lane copies) under ncu: DRAM and L2
# traffic, L2 hit rate, and every warp-stall reason per issued instruction, beside the read
# probe's cp.async pattern (g4).
source "$(dirname "$0")/env.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
M="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for k in gemm_skinny bench_read_async_g4; do
  extra=""; [ $k = bench_read_async_g4 ] && extra="--read-probe"
  echo "=== $k"
  timeout 150 $NCU --clock-control none --metrics "$M" -k regex:$k --launch-skip 2 --launch-count 1 \
    carry/bin/cusync run gemm --m 1 --n 6144 --k 12288 --skinny on --iters 3 $extra 2>&1 | grep -E "^\s+(gpu__|dram__|lts__|smsp__|l1tex__)" | awk '$NF != "0" && $NF != "0.00"'
done
