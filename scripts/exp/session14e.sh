#!/usr/bin/env bash
# Session 14, run 8: the whole pass on the landed build (skinny kernels back on registers, the
# read probe added), then the probe beside the GeMM and cuBLAS at B = 1.
CUSYNC_MULTIGPU=0 bash scripts/gpu-check
source "$(dirname "$0")/env.sh"
timeout 100 carry/bin/cusync run gemm --m 1 --n 6144 --k 12288 --gelu --iters 20 --read-probe 2>&1 | grep -E "^  ours|cuBLAS|read probe|pattern|runs of|whole rows|the GeMM"
