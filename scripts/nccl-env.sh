# Sourced (not run) by scripts/gpu-check: makes NCCL loadable for cudarc.
# cudarc dlopens libnccl.so (or .so.13/.12/.../.1), never libnccl.so.2, the soname the
# nvidia-nccl-cu13 Python package ships; so link libnccl.so -> libnccl.so.2 in a directory of
# our own and put it, and the package's lib/, on LD_LIBRARY_PATH (cusync::baselines::nccl).
#   source scripts/nccl-env.sh
NCCL_LIB=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
if [ -n "$NCCL_LIB" ] && [ -e "$NCCL_LIB/libnccl.so.2" ]; then
  mkdir -p /tmp/cusync-nccl && ln -sf "$NCCL_LIB/libnccl.so.2" /tmp/cusync-nccl/libnccl.so
  export LD_LIBRARY_PATH=/tmp/cusync-nccl:$NCCL_LIB:${LD_LIBRARY_PATH:-}
  echo "NCCL: $NCCL_LIB/libnccl.so.2 (linked as /tmp/cusync-nccl/libnccl.so)"
else
  echo "NCCL: the nvidia-nccl-cu13 package was not found (python3 -c 'import nvidia.nccl'); NCCL tests will report skipped"
fi
