#!/usr/bin/env bash
# Session 15, run 1: where the cp.async skinny kernel's second L2 read comes from (issue 3).
# ncu's full set (and its per-SASS-instruction source counters) on: the landed register skinny
# kernel, session 14's cp.async ring kernel (dc697d2, carried in carry/ring), the ring with
# consecutive rows per copy instruction (carry/ring2: dc697d2 plus that change), the read probe's
# cp.async pattern, and the probe with the skinny kernel's rows per lane (row-blocked) through
# cp.async and registers. Then the probe sweep, and criterion's interleaved protocol overhead
# (issue 7). Reports land in $OUT/ncu.
source "$(dirname "$0")/env.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
mkdir -p "$OUT/ncu"
source "$(dirname "$0")/skinny-ab.sh"
for v in ring ring2; do unpack_side carry/$v /tmp/$v.cubin; done
GEMM1="run gemm --m 1 --n 6144 --k 12288 --skinny on --iters 3"
prof() { # name kernel-regex launch-skip cubin binary args...
  local name=$1 k=$2 skip=$3 cubin=$4; shift 4
  CUSYNC_CUBIN_FILE=$cubin timeout 150 $NCU --clock-control none --set full --import-source no -k regex:$k \
    --launch-skip $skip --launch-count 1 -o "$OUT/ncu/$name" "$@" > "$OUT/ncu/$name.log" 2>&1
  $NCU -i "$OUT/ncu/$name.ncu-rep" --page raw --csv > "$OUT/ncu/$name.raw.csv" 2>&1
  $NCU -i "$OUT/ncu/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu/$name.sass.csv" 2>&1
  echo "=== $name: $(grep -c . "$OUT/ncu/$name.sass.csv") sass lines"
  $NCU -i "$OUT/ncu/$name.ncu-rep" --page raw --print-units base 2>&1 | grep -E \
    "gpu__time_duration.sum |dram__bytes_read.sum |lts__t_sectors_srcunit_tex_op_read.sum |lts__t_requests_srcunit_tex_op_read.sum |lts__t_sectors_srcunit_tex_op_read_lookup_(hit|miss).sum |lts__t_sectors_srcunit_ltcfabric.sum |lts__t_sectors_op_read.sum |l1tex__m_xbar2l1tex_read_sectors.sum |smsp__inst_executed_op_ldgsts.sum |smsp__sass_inst_executed_op_ldgsts.sum |lts__t_sectors_srcnode_gpc_op_read.sum "
}
prof skinny_regs gemm_skinny 2 /tmp/c.cubin carry/bin/cusync $GEMM1
prof skinny_ring gemm_skinny 2 /tmp/ring.cubin carry/ring/cusync $GEMM1
prof skinny_ring2 gemm_skinny 2 /tmp/ring2.cubin carry/ring2/cusync $GEMM1
# Sweep order (ReadPattern::sweep): d16 128/256/512, g4 128..1024, g6 128..1024, g6 chunk-major,
# g6 whole rows, d16 row-blocked, g4 row-blocked; 5 + 3 launches each.
prof probe_g4 bench_read_async_g4 2 /tmp/c.cubin carry/bin/cusync $GEMM1 --read-probe
prof probe_g4_rowblk bench_read_async_g4 34 /tmp/c.cubin carry/bin/cusync $GEMM1 --read-probe
prof probe_d16 bench_read_runs_d16 2 /tmp/c.cubin carry/bin/cusync $GEMM1 --read-probe
prof probe_d16_rowblk bench_read_runs_d16 26 /tmp/c.cubin carry/bin/cusync $GEMM1 --read-probe
echo "=== probe sweep (landed build)"
timeout 100 carry/bin/cusync run gemm --m 1 --n 6144 --k 12288 --gelu --iters 20 --read-probe 2>&1 | grep -E "^  ours|cuBLAS|read probe|pattern|runs of|whole rows|the GeMM"
for v in ring ring2; do
  for shape in "1 6144 12288 --gelu" "1 12288 6144" "16 6144 12288 --gelu"; do
    set -- $shape
    echo "=== $v B=$1 ${2}x$3: $(CUSYNC_CUBIN_FILE=/tmp/$v.cubin timeout 60 carry/$v/cusync run gemm --m $1 --n $2 --k $3 ${4:-} --skinny on --iters 30 2>&1 | grep -E "cuBLAS|ours|verified|rror" | tr '\n' ' ')"
  done
done
echo "=== criterion: protocol overhead, interleaved"
timeout 200 carry/bin/bench-protocol --bench 'protocol_overhead|tracing/(skinny_)?stream_(nohooks|trace_off)' 2>&1 | grep -vE "^\s*$|Warning|Benchmarking.*(Warming|Collecting|Analyzing)" | tail -60
