# Sourced by the side-by-side experiment scripts (after env.sh): one binary drives several
# builds' cubins, each a "side" named by a shell function that runs a command on it.
#   add_side NAME DIR   DIR's xz-compressed cubin (cusync_device.sm_90a.cubin.xz, a fifth of
#                       gzip's size, unpacked with Python's lzma) and fingerprint file become
#                       side NAME (CUSYNC_CUBIN_FILE=/tmp/NAME.cubin); appended to $SIDES. A
#                       DIR without a cubin adds nothing. The fingerprint file must name this
#                       binary's PTX (the builds share the host side and kernel parameters).
#   trace_periods SIDE  the traced B = 1024 RowSync/col MLP on SIDE: its table row and the
#                       tile periods of both traces (scripts/exp/tile-period.py).
# The embedded build's side is `b` (or whatever the script names it with `SIDES=`).
add_side() {
  local name=$1 dir=$2
  [ -f "$dir/cusync_device.sm_90a.cubin.xz" ] || return 0
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" \
    "$dir/cusync_device.sm_90a.cubin.xz" "/tmp/$name.cubin" || return 1
  cp "$dir/cusync_device.sm_90a.cubin.fnv" "/tmp/$name.cubin.fnv" || return 1
  eval "$name() { CUSYNC_CUBIN_FILE=/tmp/$name.cubin \"\$@\"; }"
  SIDES="$SIDES $name"
}
trace_periods() {
  local side=$1
  echo "== [$side] run mlp --batch 1024 --policy rowsync --order col --trace (${SECONDS}s)"
  rm -rf "/tmp/tr-$side"
  $side carry/bin/cusync run mlp --batch 1024 --policy rowsync --order col --trace "/tmp/tr-$side" 2>&1 | sed -n 3,3p
  python3 scripts/exp/tile-period.py "/tmp/tr-$side"/*.csv 2>&1
  if [ -n "${OUT:-}" ]; then mkdir -p "$OUT/trace-$side" && cp "/tmp/tr-$side"/*.csv "$OUT/trace-$side/" 2>/dev/null; fi
  return 0
}
