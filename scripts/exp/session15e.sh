#!/usr/bin/env bash
# Session 15, run 5: the skinny kernels' segment end through shared-window addresses (the
# cross-warp reduction as STS/LDS.128 and the last-arrival flag as a shared volatile word, not
# generic ST.E/LD.E). The skinny and MLP GPU tests, then A/B against the landed build (carry/ab)
# at five shapes, two rounds, the binaries alternating.
source "$(dirname "$0")/env.sh"
timeout 280 carry/bin/test-gpu-test --test-threads=1 mlp:: gemm::skinny gemm::run_gemm > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |^gpu:|FAILED|panicked|test result" $OUT/tests.log | head -40
( cd carry/ab && gunzip -c cusync.gz > cusync && chmod +x cusync ) && gunzip -c carry/ab/cusync_device.sm_90a.cubin.gz > /tmp/ab.cubin \
  && cp carry/ab/cusync_device.sm_90a.cubin.fnv /tmp/ab.cubin.fnv
for shape in "1 6144 12288 --gelu" "1 12288 6144" "8 6144 12288 --gelu" "16 6144 12288 --gelu" "16 12288 6144"; do
  set -- $shape
  for rep in 1 2; do
    for v in sts landed; do
      if [ $v = sts ]; then bin=carry/bin/cusync; cub=$CUSYNC_CUBIN_FILE; else bin=carry/ab/cusync; cub=/tmp/ab.cubin; fi
      echo "$v B=$1 ${2}x$3 #$rep: $(CUSYNC_CUBIN_FILE=$cub timeout 60 $bin run gemm --m $1 --n $2 --k $3 ${4:-} --skinny on --iters 30 2>&1 | grep -E "cuBLAS|ours|rror" | sed 's/(96 column.*//; s/(192 column.*//; s/TFLOP.s.*//' | tr '\n' ' ' | tr -s ' ')"
    done
  done
done
