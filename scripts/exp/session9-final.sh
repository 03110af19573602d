#!/usr/bin/env bash
# Session 9's last pass (device tool, carry ["carry"]): the whole check-and-measure pass
# (scripts/gpu-check, multi-GPU off) on this build, then the stream stage's protocol rows and
# the traced B = 1024 MLP's tile periods side by side with session 8's cubin (carry/ab, run by
# this binary: the host side and every kernel's parameters are unchanged, so its fingerprint
# file names this binary's PTX).
cd "$(dirname "$0")/../.."
CUSYNC_MULTIGPU=0 bash scripts/gpu-check > /tmp/gpu-check.txt 2>&1; rc=$?
cp /tmp/gpu-check.txt "${OUT:-/tmp/out}/gpu-check.txt"
sed -n '/== cusync gpu-check summary/,$p' /tmp/gpu-check.txt
source scripts/exp/env.sh
SIDES="b"
if [ -f carry/ab/cusync_device.sm_90a.cubin.xz ]; then
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" \
    carry/ab/cusync_device.sm_90a.cubin.xz /tmp/ab.cubin && cp carry/ab/cusync_device.sm_90a.cubin.fnv /tmp/ab.cubin.fnv \
    && SIDES="b a"
fi
a() { CUSYNC_CUBIN_FILE=/tmp/ab.cubin "$@"; }
b() { "$@"; }
echo
{
for r in 1 2; do
  for side in $SIDES; do
    echo "== [$side] bench, stream-stage rows (round $r)"
    $side carry/bin/cusync bench --samples 11 2>/dev/null | grep -E 'stream stage|persistent pair \('
  done
done
for side in $SIDES; do
  echo "== [$side] run mlp --batch 1024 --policy rowsync --order col --trace"
  rm -rf /tmp/tr-$side
  $side carry/bin/cusync run mlp --batch 1024 --policy rowsync --order col --trace /tmp/tr-$side 2>&1 | sed -n 3,3p
  python3 scripts/exp/tile-period.py /tmp/tr-$side/*.csv 2>&1
done
} 2>&1 | tee "${OUT:-/tmp/out}/ab.txt"
exit $rc
