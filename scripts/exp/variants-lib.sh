# Sourced by scripts/exp/variants.sh and gemm-table-ab.sh (on the GPU machine): the repository
# root as working directory, the CUDA libraries, a GPU required, $OUT, and
#   unpack_variants NAME...   each carry/variants/NAME (scripts/exp/build-variant.sh) unpacked
#                             to /tmp/cusync-NAME and /tmp/c-NAME.cubin (with its fingerprint)
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 CUSYNC_REQUIRE_GPU=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
unpack_variants() {
  local v d
  for v in "$@"; do
    d=carry/variants/$v
    gunzip -c "$d/cusync.gz" > /tmp/cusync-$v && chmod +x /tmp/cusync-$v
    gunzip -c "$d/c.cubin.gz" > /tmp/c-$v.cubin && cp "$d/c.cubin.fnv" /tmp/c-$v.cubin.fnv
  done
}
