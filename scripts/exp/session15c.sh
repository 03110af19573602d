#!/usr/bin/env bash
# Session 15, run 3: the whole pass on the landed build (the skinny kernels' weight through the
# aligned cp.async ring), the read probe beside it, then the ring against the register kernel
# of 7bbe4b7 (carried in carry/regs) side by side: each shape twice, the two binaries
# alternating, cuBLAS timed in each process.
CUSYNC_MULTIGPU=0 bash scripts/gpu-check
source "$(dirname "$0")/env.sh"
timeout 100 carry/bin/cusync run gemm --m 1 --n 6144 --k 12288 --gelu --iters 20 --read-probe 2>&1 | grep -E "^  ours|cuBLAS|read probe|pattern|runs of|whole rows|the GeMM"
source "$(dirname "$0")/skinny-ab.sh"
unpack_side carry/regs /tmp/regs.cubin
skinny_ab ring carry/bin/cusync "$CUSYNC_CUBIN_FILE" regs carry/regs/cusync /tmp/regs.cubin
