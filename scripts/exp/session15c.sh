#!/usr/bin/env bash
# Session 15, run 3: the whole pass on the landed build (the skinny kernels' weight through the
# aligned cp.async ring), the read probe beside it, then the ring against the register kernel
# of 7bbe4b7 (carried in carry/regs) side by side: each shape twice, the two binaries
# alternating, cuBLAS timed in each process.
CUSYNC_MULTIGPU=0 bash scripts/gpu-check
source "$(dirname "$0")/env.sh"
timeout 100 carry/bin/cusync run gemm --m 1 --n 6144 --k 12288 --gelu --iters 20 --read-probe 2>&1 | grep -E "^  ours|cuBLAS|read probe|pattern|runs of|whole rows|the GeMM"
( cd carry/regs && gunzip -c cusync.gz > cusync && chmod +x cusync ) && gunzip -c carry/regs/cusync_device.sm_90a.cubin.gz > /tmp/regs.cubin \
  && cp carry/regs/cusync_device.sm_90a.cubin.fnv /tmp/regs.cubin.fnv
for shape in "1 6144 12288 --gelu" "1 12288 6144" "8 6144 12288 --gelu" "16 6144 12288 --gelu" "16 12288 6144"; do
  set -- $shape
  for rep in 1 2; do
    for v in ring regs; do
      if [ $v = ring ]; then bin=carry/bin/cusync; cub=$CUSYNC_CUBIN_FILE; else bin=carry/regs/cusync; cub=/tmp/regs.cubin; fi
      echo "$v B=$1 ${2}x$3 #$rep: $(CUSYNC_CUBIN_FILE=$cub timeout 60 $bin run gemm --m $1 --n $2 --k $3 ${4:-} --skinny on --iters 30 2>&1 | grep -E "cuBLAS|ours|rror" | sed 's/(96 column.*//; s/(192 column.*//; s/TFLOP.s.*//' | tr '\n' ' ' | tr -s ' ')"
    done
  done
done
