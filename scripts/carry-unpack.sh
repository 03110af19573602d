# Sourced by the GPU-machine scripts (gpu-check, gpu-explore, gpu-ab): unpacks what
# scripts/build-gpu-carry packed (the device tool carries at most 64 MiB).
#   unpack_ptx DIR           every DIR/*.ptx.gz beside itself (for ptxas and CUSYNC_PTX_FILE)
#   unpack_cubin DIR DEST    DIR's sm_90a cubin to DEST with its fingerprint file DEST.fnv;
#                            fails when DIR has none (loaded through CUSYNC_CUBIN_FILE=DEST)
#   unpack_bins DIR          every DIR/*.gz (the binaries, gzipped: each embeds the PTX text)
#                            beside itself, executable
#   use_carry DEST           the experiment scripts' set-up (below)
unpack_ptx() {
  local f
  for f in "$1"/*.ptx.gz; do [ -e "$f" ] && gunzip -c "$f" > "${f%.gz}"; done
  return 0
}
unpack_cubin() {
  [ -f "$1/cusync_device.sm_90a.cubin.gz" ] || return 1
  gunzip -c "$1/cusync_device.sm_90a.cubin.gz" > "$2" && cp "$1/cusync_device.sm_90a.cubin.fnv" "$2.fnv"
}
unpack_bins() {
  local f
  for f in "$1"/*.gz; do [ -e "$f" ] && gunzip -c "$f" > "${f%.gz}" && chmod +x "${f%.gz}"; done
  return 0
}
# use_carry DEST: the experiment scripts' set-up on the GPU machine: CUDA's libraries on the
# path, GPU tests required (never skipped), carry/bin unpacked and carry/ptx's cubin at DEST,
# loaded through CUSYNC_CUBIN_FILE (without one, the PTX is JIT-compiled).
use_carry() {
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64 CUSYNC_REQUIRE_GPU=1
  unpack_bins carry/bin
  if unpack_cubin carry/ptx "$1"; then export CUSYNC_CUBIN_FILE=$1; fi
}
