# Sourced by the experiment scripts beside it (on the GPU machine, from the carry that
# scripts/build-gpu-carry makes): the repository root as working directory, the carried
# cubin (CUSYNC_CUBIN_FILE) and PTX if carried, the CUDA libraries, NCCL, a GPU required.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source scripts/carry-unpack.sh
unpack_bins carry/bin
unpack_ptx carry/ptx
unpack_cubin carry/ptx /tmp/c.cubin && export CUSYNC_CUBIN_FILE=/tmp/c.cubin
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 CUSYNC_REQUIRE_GPU=1
source scripts/nccl-env.sh
