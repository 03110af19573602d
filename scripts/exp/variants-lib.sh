# Sourced by scripts/exp/variants.sh and gemm-table-ab.sh (on the GPU machine): the repository
# root as working directory, the CUDA libraries, a GPU required, $OUT, and
#   unpack_variants NAME...   each carry/variants/NAME (scripts/exp/build-variant.sh) unpacked
#                             to /tmp/cusync-NAME and /tmp/c-NAME.cubin (with its fingerprint)
#   run_suite NAME            the GPU suite with NAME's test binary and cubin (when the variant
#                             carries a test binary), its summary lines printed, the log in $OUT
#   gemm_rows LABEL "SHAPE" VARIANT...  `run gemm` lines per variant (below)
#   timed_row VARIANT LABEL ARGS...     one `run gemm` as one row of $OUT/rows.txt (below)
#   variant_tests VARIANT FILTER...     VARIANT's test binary on the GPU tests matching a FILTER
#   suite_then_variants SUITE ROUNDS VARIANT... -- REST...
#                             run_suite SUITE, then scripts/exp/variants.sh ROUNDS VARIANT...;
#                             leaves the variants in ${bench[@]} and REST in ${rest[@]}
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
run_suite() {
  local v=$1 t0
  unpack_variants "$v"
  [ -f "carry/variants/$v/test-gpu-test.gz" ] || return 0
  gunzip -c "carry/variants/$v/test-gpu-test.gz" > /tmp/test-$v && chmod +x /tmp/test-$v
  t0=$SECONDS
  CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin CUSYNC_MULTIGPU=0 timeout 260 /tmp/test-$v --test-threads=1 > "$OUT/suite-$v.log" 2>&1
  echo "suite $v rc=$? ($((SECONDS-t0)) s)"
  grep -E "FAILED|panicked|skipped:|test result|^gpu:" "$OUT/suite-$v.log" | head -20
}
# variant_tests VARIANT FILTER...: VARIANT's carried test binary (with its cubin) on the GPU tests
# whose names contain a FILTER, the log in $OUT/tests-VARIANT.log, its rc and summary lines printed.
variant_tests() {
  local v=$1 t0
  shift
  gunzip -c "carry/variants/$v/test-gpu-test.gz" > /tmp/test-$v && chmod +x /tmp/test-$v
  t0=$SECONDS
  CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin CUSYNC_MULTIGPU=0 timeout 240 /tmp/test-$v --test-threads=1 "$@" \
    > "$OUT/tests-$v.log" 2>&1
  echo "tests $v [$*] rc=$? ($((SECONDS - t0)) s)"
  grep -E "FAILED|panicked|skipped|problems|^gpu:" "$OUT/tests-$v.log" | head -20
}
suite_then_variants() {
  local suite=$1 t0
  rounds=$2; shift 2
  bench=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do bench+=("$1"); shift; done; shift
  rest=("$@")
  run_suite "$suite"
  t0=$SECONDS
  [ ${#bench[@]} -gt 0 ] && bash scripts/exp/variants.sh "$rounds" "${bench[@]}"
  echo "variants ($((SECONDS-t0)) s)"
}
# gemm_rows LABEL "SHAPE" VARIANT...: `run gemm SHAPE --iters 20` with each unpacked variant, its
# time, traced timeline and ratio-to-cuBLAS lines prefixed "VARIANT LABEL [SHAPE]".
gemm_rows() {
  local label=$1 s=$2 v
  shift 2
  for v in "$@"; do
    CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 60 /tmp/cusync-$v run gemm $s --iters 20 2>&1 \
      | grep -E "ours  |traced launch|speed|rror" | sed "s/^ */  $v $label [$s] /"
  done
}
# One `run gemm` of VARIANT as one row (its ms, ours / cuBLAS speed, any error (a line with
# "rror" or the CLI's "cusync: " failure line), and the kernel it ran), printed and appended to
# $OUT/rows.txt: timed_row VARIANT LABEL ARGS...
timed_row() {
  local v=$1 label=$2 line
  shift 2
  line=$(CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 60 /tmp/cusync-$v run gemm "$@" --iters 30 2>&1 \
    | awk '/^ *ours +[0-9]/ {ms = $2; what = $0; sub(/.*TFLOP\/s */, "", what)} /speed/ {r = $NF}
           /rror|^cusync: / {err = err $0 " "} END {printf "%s %s %s| %s", ms, r, err, what}')
  echo "$v $label [$*] $line" | tee -a "$OUT/rows.txt"
}
# The protocol-overhead rows of a `cusync bench` output file, each prefixed with PREFIX.
bench_rows() {
  grep -E "^stream stage B=1024|^MLP B=1024.*paired|^MLP B=1 skinny.*paired" "$1" | sed "s/^/$2/"
}
# One `run mlp` of VARIANT as one line (its table row and any error) appended to FILE and
# printed: mlp_row VARIANT FILE LABEL ARGS...
mlp_row() {
  local v=$1 file=$2 label=$3 line
  shift 3
  line=$(CUSYNC_CUBIN_FILE=/tmp/c-$v.cubin timeout 120 /tmp/cusync-$v run mlp "$@" 2>&1 \
    | awk '/^ +[0-9]+ +(wg|skinny)/ {row = $0} /rror|^cusync: / {err = err $0 " "} END {printf "%s %s", row, err}')
  echo "$v $label [$*] $line" | tee -a "$file"
}
