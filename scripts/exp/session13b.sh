#!/usr/bin/env bash
# Session 13, run 2: A/B of the skinny kernels (A: run 1's cubin in carry/ab, the segment's
# loads stopping at its end; B: this build, the next segment's first weight loads issued
# before a segment's reduction), 64- and 128-column blocks, alternating sides, three rounds;
# then the whole GPU pass (gpu-check) on B, and the MLP sweep at B = 1 / 8 / 16.
cd "$(dirname "$0")/../.."
source scripts/carry-unpack.sh
unpack_bins carry/bin
for side in ptx ab; do unpack_ptx carry/$side; unpack_cubin carry/$side /tmp/$side.cubin; done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 CUSYNC_REQUIRE_GPU=1
a() { CUSYNC_PTX_FILE=carry/ab/cusync_device.sm_90a.ptx CUSYNC_CUBIN_FILE=/tmp/ab.cubin "$@" 2>/dev/null; }
b() { CUSYNC_CUBIN_FILE=/tmp/ptx.cubin "$@" 2>/dev/null; }
for round in 1 2 3; do
  for shape in "1 6144 12288 --gelu" "1 12288 6144" "16 6144 12288 --gelu" "16 12288 6144"; do
    set -- $shape
    for c in 64 128; do
      for side in a b; do
        r=$($side timeout 60 carry/bin/cusync run gemm --m $1 --n $2 --k $3 ${4:-} --skinny on --skinny-cols $c --iters 20 | awk '/^  ours +[0-9]/{o=$2} /^  cuBLAS /{c=$2} /ours \/ cuBLAS/{s=$NF} END{print "ours", o, "cuBLAS", c, "ratio", s}')
        echo "round $round B=$1 ${2}x$3 cols $c [$side] $r"
      done
    done
  done
done
export CUSYNC_CUBIN_FILE=/tmp/ptx.cubin
timeout 150 carry/bin/cusync sweep mlp --batches 1,8,16 --samples 10 2>&1 | tail -4
OUT=${OUT:-/tmp/out} CUSYNC_MULTIGPU=0 timeout 420 bash scripts/gpu-check 2>&1 | tail -80
