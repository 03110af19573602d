# Sourced by the session-15 experiment scripts (after env.sh): helpers for A/B runs of the
# skinny GeMM between two carried builds.
#   unpack_side DIR DEST       DIR's gzipped `cusync` and sm_90a cubin (scripts/carry-unpack.sh)
#                              unpacked, the cubin to DEST with its fingerprint file
#   skinny_ab NAME_A BIN_A CUBIN_A NAME_B BIN_B CUBIN_B
#                              `run gemm --skinny on --iters 30` at the MLP's B = 1 / 8 / 16
#                              shapes, two rounds, the two binaries alternating; ours and cuBLAS
#                              per line
unpack_side() {
  unpack_bins "$1" && unpack_cubin "$1" "$2"
}
skinny_ab() {
  local names=("$1" "$4") bins=("$2" "$5") cubins=("$3" "$6") shape rep s m n k epi
  for shape in "1 6144 12288 --gelu" "1 12288 6144" "8 6144 12288 --gelu" "16 6144 12288 --gelu" "16 12288 6144"; do
    read -r m n k epi <<< "$shape"
    for rep in 1 2; do
      for s in 0 1; do
        echo "${names[s]} B=$m ${n}x$k #$rep: $(CUSYNC_CUBIN_FILE=${cubins[s]} timeout 60 ${bins[s]} run gemm --m $m --n $n --k $k $epi --skinny on --iters 30 2>&1 | grep -E "cuBLAS|ours|rror" | sed 's/(96 column.*//; s/(192 column.*//; s/TFLOP.s.*//' | tr '\n' ' ' | tr -s ' ')"
      done
    done
  done
}
