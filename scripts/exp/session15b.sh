#!/usr/bin/env bash
# Session 15, run 2: the cp.async ring with its shared-memory ring 1024-byte aligned (run 1's
# kernels put it at 16 mod 128: after the 34 816-byte reduction area and the 16-byte flag).
# carry/ring: dc697d2's mapping (consecutive slots, rows 8 apart per instruction) aligned;
# carry/ring2: consecutive rows per instruction, aligned. L2 sectors and time against cuBLAS,
# then every criterion protocol group on the landed build (issue 7).
source "$(dirname "$0")/env.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
source "$(dirname "$0")/skinny-ab.sh"
for v in ring ring2; do unpack_side carry/$v /tmp/$v.cubin; done
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed_op_ldgsts.sum
for v in ring ring2; do
  echo "=== $v ncu"
  CUSYNC_CUBIN_FILE=/tmp/$v.cubin timeout 100 $NCU --clock-control none --metrics $M -k regex:gemm_skinny --launch-skip 2 --launch-count 1 \
    carry/$v/cusync run gemm --m 1 --n 6144 --k 12288 --skinny on --iters 3 2>&1 | grep -E "^\s+(gpu__|dram__|lts__|smsp__)"
  for shape in "1 6144 12288 --gelu" "1 12288 6144" "8 6144 12288 --gelu" "16 6144 12288 --gelu" "16 12288 6144"; do
    set -- $shape
    echo "=== $v B=$1 ${2}x$3: $(CUSYNC_CUBIN_FILE=/tmp/$v.cubin timeout 60 carry/$v/cusync run gemm --m $1 --n $2 --k $3 ${4:-} --skinny on --iters 30 2>&1 | grep -E "cuBLAS|ours|verified|rror" | sed 's/(96 column.*//; s/(192 column.*//' | tr '\n' ' ')"
  done
done
echo "=== landed: B=1 GeMM1 $(timeout 60 carry/bin/cusync run gemm --m 1 --n 6144 --k 12288 --gelu --skinny on --iters 30 2>&1 | grep -E "cuBLAS|ours|rror" | sed 's/(96 column.*//' | tr '\n' ' ')"
echo "=== criterion: every protocol group"
timeout 330 carry/bin/bench-protocol --bench > $OUT/criterion-protocol-all.txt 2>&1; echo "protocol rc=$?"
grep -E "^[a-z_]+/|time:|protocol_overhead/.*pairs" $OUT/criterion-protocol-all.txt | head -150
