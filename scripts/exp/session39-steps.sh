# Sourced by the experiment scripts of sessions 39 and 40 (scripts/exp/session39*.sh,
# session40*.sh) on the GPU machine, from the repository root: the steps they share, each
# adding one row to the summary table.
#   exp_start CUBIN        the set-up: carry unpacked with the cubin at CUBIN (use_carry),
#                          OUT made (default /tmp/out), the card's name and clocks printed
#   row LABEL RC NOTE      one summary row (seconds since t0)
#   gpu_tests LOG T [F..]  the GPU suite (filters F, if any) into OUT/LOG, at most T seconds; its
#                          failed and skipped tests and its `gpu:` line printed
#   bench_traced SAMPLES   `cusync bench --samples SAMPLES` into OUT/bench.txt, its last traced
#                          launches of each side into OUT/bench-traces.tgz
#   mlp_measurements OUT   the sweep (both launches), Auto's paired trial at B = 1 and 256, and
#                          traced B = 1 runs of RowSync/row with both launches (OUT/trace1.tgz)
#   paired_table FILE      per `### name` section and M of `run layers` output: the paired
#                          medians of deps met / twin and pipelined / singles
#   traced_layers M        one traced 2-layer stack at M into OUT/layers-traced-M.txt and
#                          /tmp/tl-M (its traces also into OUT/tl-M.tgz), its periods and block
#                          summaries printed
#   left                   seconds left of `budget` (set by the caller) since t0
#   run_layers LIMIT ARGS  `cusync run layers ARGS --priority up` into OUT/layers.txt, at most
#                          LIMIT seconds and what is left of `budget` (set by the caller)
#   layers_variant NAME BIN CUBIN [ENV=VALUE..]
#                          one `run layers` process (M = 1024 and 16384, 2 layers, ABL_ITERS
#                          rounds, upstream first) of BIN with CUBIN under ENV into
#                          OUT/knobs.txt under `### NAME` (for paired_table)
#   use_parts DEFAULT      `parts` from PARTS (else DEFAULT, e.g. "1 3") and `part N`, true when
#                          part N was asked for
#   whole_suite [T]        the whole GPU suite into OUT/test-all.log (T s, default 300)
#   issue5_stacks          issue 5's stacks with run_layers: 2 layers x101 rounds at M = 16384
#                          (OUT/layers2.csv and its chart), M = 1024, 4096, 32768 x21, 4 and 8
#                          layers x31, then their ratios printed
#   policy_sweep           one `run layers` process per queue order (raster, row), every policy
#                          (band, band4, band2, rowsync) paired by round, at M = 1024 and 4096
#                          beside micro-batching (ITERS rounds, default 15), into OUT/sweep.txt
#   gemm_modes             `cusync gemm-table --modes` (clusters off and on, one process) into
#                          OUT/gemm-modes.txt, its last lines printed
#   card_parts             on any card but an H200: PARTS=$NOT_H200_PARTS when set, and fails
#                          (nothing to run) under H200_ONLY=1
#   exp_parts CUBIN DEFAULT
#                          a parted script's set-up: card_parts (exit 3 when it fails),
#                          exp_start CUBIN, `budget` from BUDGET (default 560 s), use_parts DEFAULT
#   carry_old CUBIN        carry-old/ (the build an A/B compares against) unpacked, its cubin at
#                          CUBIN (exit 4 when it has none); once per script run and CUBIN
#   old_cubin              where ab_layers (and a script's other old-build steps) put carry-old's
#                          cubin
#   ab_layers OLD NEW CUBIN LIMIT FILTER..
#                          the A/B of a device change: carry_old, the GPU tests FILTER.. of the
#                          new build (at most LIMIT s), then old and new `run layers` processes
#                          alternately (A B A B A B; layers_variant, named "old (OLD)" and "new
#                          (NEW)", the new one with its cubin at CUBIN), and their paired_table
#   bench_ab CUBIN         `cusync bench --samples 11` of carry-old/ (its cubin at old_cubin), then
#                          of carry/ (its cubin at CUBIN), into OUT/bench-old.txt and
#                          OUT/bench-new.txt; their scoreboard, queue and post->wait rows printed
#   summary                the table
declare -a ROWS
t0=$SECONDS
row() { ROWS+=("$1|$2|$3|$((SECONDS - t0)) s"); }
exp_start() {
  source scripts/carry-unpack.sh
  use_carry "$1"
  OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
  nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv,noheader
}
gpu_tests() {
  local log=$1 limit=$2; shift 2
  timeout "$limit" carry/bin/test-gpu-test --test-threads=1 "$@" > "$OUT/$log" 2>&1
  row "GPU tests ${*:-(all)}" "$?" "$(grep -E '^gpu:' "$OUT/$log" | tail -1)"
  grep -E "^test .*(FAIL|skipped)|^gpu:|panicked" "$OUT/$log" | cut -c1-220
}
bench_traced() {
  CUSYNC_BENCH_TRACE_DIR=/tmp/bench-traces timeout 150 carry/bin/cusync bench --samples "$1" > "$OUT/bench.txt" 2>&1
  row "bench" "$?" "$(grep -c . "$OUT/bench.txt") lines"
  tar czf "$OUT/bench-traces.tgz" --exclude='*.svg' -C /tmp bench-traces 2>/dev/null
}
mlp_measurements() {
  local out=$1 b
  timeout 120 carry/bin/cusync sweep mlp --batches 1,8,16,64,128,256,512,1024,2048 --samples 10 \
    --launch auto,pdl --csv "$out/sweep.csv" > "$out/sweep.txt" 2>&1
  row "sweep mlp auto,pdl" "$?" "$(grep -c . "$out/sweep.txt") lines"
  for b in 1 256; do
    timeout 60 carry/bin/cusync run mlp --batch $b --policy auto --trial --trial-cache none > /tmp/auto$b.txt 2>&1
    row "run mlp B=$b auto --trial" "$?" "$(grep -E '^auto: runs' /tmp/auto$b.txt | head -1 | cut -c1-60)"
  done
  cat /tmp/auto1.txt /tmp/auto256.txt > "$out/auto.txt"
  mkdir -p /tmp/trace1
  timeout 60 carry/bin/cusync run mlp --batch 1 --policy rowsync --order row --launch auto,pdl \
    --trace /tmp/trace1 > "$out/run-mlp-1.txt" 2>&1
  row "run mlp B=1 --trace" "$?" "$(ls /tmp/trace1 | wc -l) files"
  tar czf "$out/trace1.tgz" -C /tmp trace1
}
summary() {
  local r a b c d
  echo "=== summary ==="
  for r in "${ROWS[@]}"; do
    IFS='|' read -r a b c d <<<"$r"
    printf '%-32s %-4s %-8s %s\n' "$a" "$b" "$d" "$c"
  done
}
paired_table() {
  awk '/^### /{k=substr($0,5)} /^[0-9]+-layer \[/{split($2,a,","); m=substr(a[1],2)}
       /^ +protocol overhead \(no-deps \/ no-protocol\): /{o=$0; sub(/.*no-protocol\): /,"",o); sub(/,.*/,"",o)}
       /^ +pipelined .* \/ single GeMMs: /{p=$0; sub(/.*single GeMMs: /,"",p); sub(/,.*/,"",p);
         printf "%-42s M=%-6s deps met/twin %-18s pipelined/singles %s\n", k, m, o, p}' "$1"
}
traced_layers() {
  timeout 90 carry/bin/cusync run layers --m $1 --layers 2 --iters 3 --no-microbatch --priority up \
    --trace /tmp/tl-$1 > "$OUT/layers-traced-$1.txt" 2>&1
  row "run layers M=$1 --trace" "$?" "$(ls /tmp/tl-$1 2>/dev/null | wc -l) files"
  tar czf "$OUT/tl-$1.tgz" --exclude='*.svg' -C /tmp "tl-$1" 2>/dev/null
  echo "=== traced M=$1 ==="
  grep -E "^blocks: |^  medians per block|^  layer[0-9]|^  +no-protocol twin|first / second" \
    "$OUT/layers-traced-$1.txt" | cut -c1-230
}
left() { echo $((budget - (SECONDS - t0))); }
run_layers() {
  local lim=$1; shift
  [ "$(left)" -gt 30 ] || { row "run layers $*" skip "no time left"; return; }
  [ "$lim" -lt "$(left)" ] || lim=$(($(left) - 10))
  timeout "$lim" carry/bin/cusync run layers "$@" --priority up >> "$OUT/layers.txt" 2>&1
  row "run layers $*" "$?" "$(grep -c . "$OUT/layers.txt") lines"
}
layers_variant() {
  local name=$1 bin=$2 cubin=$3; shift 3
  echo "### $name" >> "$OUT/knobs.txt"
  env CUSYNC_CUBIN_FILE="$cubin" "$@" timeout 100 "$bin" run layers --m 1024,16384 --layers 2 \
    --iters "${ABL_ITERS:-15}" --no-microbatch --priority up >> "$OUT/knobs.txt" 2>&1
  row "$name" "$?" "$(grep -c . "$OUT/knobs.txt") lines"
}
card_parts() {
  local gpu
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  case "$gpu" in *H200*) return 0 ;; esac
  [ -n "${NOT_H200_PARTS:-}" ] && { echo "not an H200 ($gpu): parts $NOT_H200_PARTS only"; PARTS=$NOT_H200_PARTS; }
  [ -n "${H200_ONLY:-}" ] && { echo "not an H200 ($gpu): nothing run"; return 1; }
  return 0
}
use_parts() {
  parts=" ${PARTS:-$1} "
}
part() { [[ "$parts" == *" $1 "* ]]; }
whole_suite() {
  gpu_tests test-all.log "${1:-300}"
}
issue5_stacks() {
  run_layers 200 --m 16384 --layers 2 --iters 101 --csv "$OUT/layers2.csv"
  run_layers 150 --m 1024,4096,32768 --layers 2 --iters 21
  run_layers 150 --m 16384 --layers 4,8 --iters 31
  echo "=== run layers ==="
  grep -E "^[0-9]+-layer|^  (megakernel|same|our|cuBLAS|micro-batching,)|paired|protocol overhead|/ single|/ cuBLAS|micro-batching:|twin [0-9]|below 1" \
    "$OUT/layers.txt" | grep -v "^ *measuring" | cut -c1-200
}
gemm_modes() {
  timeout 150 carry/bin/cusync gemm-table --iters 10 --modes > "$OUT/gemm-modes.txt" 2>&1
  row "gemm-table --modes" "$?" "$(grep -c . "$OUT/gemm-modes.txt") lines"
  tail -25 "$OUT/gemm-modes.txt" | cut -c1-200
}
gemm_table() {
  timeout 200 carry/bin/cusync gemm-table --iters "${GEMM_ITERS:-10}" > "$OUT/gemm-table.txt" 2>&1
  row "gemm-table" "$?" "$(grep -c . "$OUT/gemm-table.txt") lines"
  tail -30 "$OUT/gemm-table.txt" | cut -c1-200
}
exp_parts() {
  card_parts || exit 3
  exp_start "$1"
  budget=${BUDGET:-560}
  use_parts "$2"
}
old_cubin=/tmp/ab-old.cubin
carry_old() {
  [ "${carry_old_at:-}" = "$1" ] && return 0
  unpack_bins carry-old/bin
  unpack_cubin carry-old/ptx "$1" || { echo "carry-old has no cubin"; exit 4; }
  carry_old_at=$1
}
policy_sweep() {
  local order
  for order in raster row; do
    echo "### order $order" >> "$OUT/sweep.txt"
    timeout 200 carry/bin/cusync run layers --m 1024,4096 --layers 2 --iters "${ITERS:-15}" --order $order \
      --policy band,band4,band2,rowsync --priority up >> "$OUT/sweep.txt" 2>&1
    row "run layers --order $order (4 policies)" "$?" "$(grep -c . "$OUT/sweep.txt") lines"
  done
  echo "=== policy sweep ==="
  grep -E "^### |^[0-9]+-layer|^  (megakernel|same|our|cuBLAS|micro-batching)|/ single GeMMs:|/ cuBLAS back to back:|micro-batching:" \
    "$OUT/sweep.txt" | grep -v "^ *measuring" | cut -c1-170
}
ab_layers() {
  local old=$1 new=$2 cubin=$3 limit=$4 r; shift 4
  carry_old "$old_cubin"
  gpu_tests test-persistent.log "$limit" "$@"
  for r in 1 2 3; do
    layers_variant "old ($old) #$r" carry-old/bin/cusync "$old_cubin"
    layers_variant "new ($new) #$r" carry/bin/cusync "$cubin"
  done
  echo "=== paired medians (deps met / twin; pipelined / singles) ==="
  paired_table "$OUT/knobs.txt"
}
bench_ab() {
  local new_cubin=$1 b bin cubin
  carry_old "$old_cubin"
  for b in old new; do
    bin=carry/bin/cusync; cubin=$new_cubin
    [ $b = old ] && { bin=carry-old/bin/cusync; cubin=$old_cubin; }
    CUSYNC_CUBIN_FILE=$cubin timeout 150 $bin bench --samples 11 > "$OUT/bench-$b.txt" 2>&1
    row "bench ($b)" "$?" "$(grep -c . "$OUT/bench-$b.txt") lines"
    echo "=== bench ($b): scoreboard, queue and post->wait rows ==="
    grep -E "^(scoreboard|workqueue|post->wait)" "$OUT/bench-$b.txt" | cut -c1-200
  done
}
