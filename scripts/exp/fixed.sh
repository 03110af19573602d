#!/usr/bin/env bash
# Experiment: fixed cost vs streaming rate of the skinny GeMMs (K swept), and ncu memory metrics.
source "$(dirname "$0")/env.sh"
B=carry/bin/cusync
for k in 768 1536 3072 6144 12288 24576; do
  for cfg in "" "--kernel wg128x192 --swap-ab off --stream-k off --split-k 1"; do
    echo "== m=64 n=12288 k=$k $cfg"
    $B run gemm --m 64 --n 12288 --k $k $cfg --iters 30 2>&1 | grep -E "ours|cuBLAS " | head -2
  done
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
M=dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,dram__sectors_read.sum,sm__cycles_active.avg,sm__cycles_elapsed.avg,lts__t_sectors_op_read.sum,lts__t_requests_op_read.sum,l1tex__m_xbar2l1tex_read_sectors.sum,smsp__inst_executed.sum
timeout 120 $NCU --clock-control none --metrics $M --launch-skip 2 --launch-count 8 $B run gemm --m 64 --n 12288 --k 6144 --iters 2 > $OUT/ncu.txt 2>&1
grep -E "^  [a-z_]+.*\(|dram__|lts__|gpu__time|sm__|l1tex|smsp" $OUT/ncu.txt | awk '/\(/{k=$1" "$2; next} {printf "%s %s %s %s\n", k, $1, $(NF-1), $NF}' | sort -u -k1,3 | head -60
