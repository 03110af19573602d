#!/usr/bin/env bash
# Experiment: DRAM bytes and throughput of our B=64 GeMM2 kernel vs cuBLAS's (ncu).
source "$(dirname "$0")/env.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
M=dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_op_read_hit_rate.pct,launch__grid_size,launch__registers_per_thread
for cfg in "--m 64 --n 12288 --k 6144 --kernel wg128x192 --stream-k off --split-k 1" "--m 64 --n 6144 --k 12288 --gelu" "--m 1 --n 6144 --k 12288 --gelu"; do
  echo "=== $cfg"
  timeout 150 $NCU --clock-control none --target-processes all --metrics $M --launch-count 12 carry/bin/cusync run gemm $cfg --iters 2 > "$OUT/ncu_$RANDOM.txt" 2>&1
done
ls -la $OUT
