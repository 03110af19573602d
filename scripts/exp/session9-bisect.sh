#!/usr/bin/env bash
# Session 9: which part of the post-warp build slows the stream stage's tiles. Sides, run by
# this binary (same host side and kernel parameters; each cubin's fingerprint file names this
# binary's PTX): a = session 8's cubin, b2 = this build, b3 = b2 without the look-ahead
# acquire, b4 = b2 with the post done by consumer thread 128 again (no post warp).
source "$(dirname "$0")/env.sh"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
SIDES="b2"
for d in ab b3 b4; do
  if [ -f carry/$d/cusync_device.sm_90a.cubin.xz ]; then
    python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" \
      carry/$d/cusync_device.sm_90a.cubin.xz /tmp/$d.cubin && cp carry/$d/cusync_device.sm_90a.cubin.fnv /tmp/$d.cubin.fnv \
      && SIDES="$SIDES ${d/ab/a}"
  fi
done
a() { CUSYNC_CUBIN_FILE=/tmp/ab.cubin "$@"; }
b3() { CUSYNC_CUBIN_FILE=/tmp/b3.cubin "$@"; }
b4() { CUSYNC_CUBIN_FILE=/tmp/b4.cubin "$@"; }
b2() { "$@"; }
echo "sides: $SIDES"
for r in 1 2; do
  for side in $SIDES; do
    echo "== [$side] bench (${SECONDS}s)"
    $side carry/bin/cusync bench --samples 11 2>/dev/null | grep -E 'stream stage'
  done
done
for side in $SIDES; do
  echo "== [$side] run mlp --batch 1024 --policy rowsync --order col --trace (${SECONDS}s)"
  rm -rf /tmp/tr-$side
  $side carry/bin/cusync run mlp --batch 1024 --policy rowsync --order col --trace /tmp/tr-$side 2>&1 | sed -n 3,3p
  python3 scripts/exp/tile-period.py /tmp/tr-$side/*.csv 2>&1
done
echo "== done (${SECONDS}s)"
