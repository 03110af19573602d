#!/usr/bin/env bash
# Session 9: why the final build's MLP is slower than session 8's at B = 128 and 256. Sides,
# run by this binary (same host side and kernel parameters; each cubin's fingerprint file names
# this binary's PTX): b = this build (post warp; post-ring and pipeline waits suspended),
# a = session 8's cubin, y = b with the post ring's waits spinning again, w = b without the post
# warp (consumer thread 128 posts, as in a; pipeline waits still suspended).
source "$(dirname "$0")/env.sh"
SIDES="b"
for d in ab y w; do
  if [ -f carry/$d/cusync_device.sm_90a.cubin.xz ]; then
    python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" \
      carry/$d/cusync_device.sm_90a.cubin.xz /tmp/$d.cubin && cp carry/$d/cusync_device.sm_90a.cubin.fnv /tmp/$d.cubin.fnv \
      && SIDES="$SIDES ${d/ab/a}"
  fi
done
a() { CUSYNC_CUBIN_FILE=/tmp/ab.cubin "$@"; }
y() { CUSYNC_CUBIN_FILE=/tmp/y.cubin "$@"; }
w() { CUSYNC_CUBIN_FILE=/tmp/w.cubin "$@"; }
b() { "$@"; }
echo "sides: $SIDES"
for r in 1 2; do
  for side in $SIDES; do
    echo "== [$side] sweep mlp --batches 128,256,1024 (round $r, ${SECONDS}s)"
    $side carry/bin/cusync sweep mlp --batches 128,256,1024 --samples 10 2>/dev/null | grep -E '^ +[0-9]+ wg' | cut -c1-200
  done
done
for side in $SIDES; do
  echo "== [$side] bench (${SECONDS}s)"
  $side carry/bin/cusync bench --samples 11 2>/dev/null | grep -E 'stream stage:'
done
echo "== done (${SECONDS}s)"
