# Sourced by scripts/gpu-check and the experiment scripts (on the GPU machine): samples GPU 0's
# SM clock, power, temperature and clock-event reasons every 200 ms while a step runs, so a
# timing can be read against the clocks it ran at (a long GeMM run on an H100 or H200 may be
# held under its power cap, and then a later variant runs slower than an earlier one).
#   clocks_start FILE   start sampling into FILE (CSV, no header)
#   clocks_stop         stop, and print one summary line of FILE:
#     "N samples: SM MHz min/median/max, power W max, temp C max, power-capped X%, thermal Y%"
# Neither fails the caller: without nvidia-smi, or with fields the driver does not know, the
# summary says "no samples".
CLOCKS_PID=
CLOCKS_FILE=
clocks_start() {
  CLOCKS_FILE=$1
  : > "$CLOCKS_FILE"
  local fields=timestamp,clocks.sm,power.draw,temperature.gpu
  # Drivers before 535 name the reasons clocks_throttle_reasons.*; try the current names first.
  local reasons
  for reasons in clocks_event_reasons.sw_power_cap,clocks_event_reasons.sw_thermal_slowdown,clocks_event_reasons.hw_slowdown \
                 clocks_throttle_reasons.sw_power_cap,clocks_throttle_reasons.sw_thermal_slowdown,clocks_throttle_reasons.hw_slowdown; do
    if nvidia-smi -i 0 --query-gpu="$fields,$reasons" --format=csv,noheader,nounits >/dev/null 2>&1; then
      nvidia-smi -i 0 --query-gpu="$fields,$reasons" --format=csv,noheader,nounits -lms 200 \
        >"$CLOCKS_FILE" 2>/dev/null &
      CLOCKS_PID=$!
      return 0
    fi
  done
  CLOCKS_PID=
}
clocks_stop() {
  if [ -n "$CLOCKS_PID" ]; then
    kill "$CLOCKS_PID" 2>/dev/null
    wait "$CLOCKS_PID" 2>/dev/null
  fi
  CLOCKS_PID=
  clocks_summary "$CLOCKS_FILE"
}
# clocks_summary FILE: the summary line of a sample file (see above).
clocks_summary() {
  awk -F', *' '
    NF >= 7 && $2 + 0 > 0 {
      n++; mhz[n] = $2 + 0; if ($3 + 0 > pmax) pmax = $3 + 0; if ($4 + 0 > tmax) tmax = $4 + 0
      if ($5 ~ /^Active/) cap++
      if ($6 ~ /^Active/ || $7 ~ /^Active/) hot++
    }
    END {
      if (n == 0) { print "no samples"; exit }
      # insertion sort: a few thousand samples at most
      for (i = 2; i <= n; i++) { v = mhz[i]; j = i - 1; while (j > 0 && mhz[j] > v) { mhz[j + 1] = mhz[j]; j-- } mhz[j + 1] = v }
      printf "%d samples: SM MHz %d/%d/%d (min/median/max), power %.0f W max, %d C max, power-capped %.0f%%, thermal or HW slowdown %.0f%%\n",
        n, mhz[1], mhz[int((n + 1) / 2)], mhz[n], pmax, tmax, 100 * cap / n, 100 * hot / n
    }' "${1:-/dev/null}" 2>/dev/null || echo "no samples"
}
