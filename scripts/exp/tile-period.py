#!/usr/bin/env python3
"""Per stage of a cusync CSV trace: the median time from a tile's start to the start of the
next tile on the same CTA (the tile plus the gap before the next one), and the median tile
time (t_end - t_start), in microseconds. Usage: tile-period.py TRACE.csv [...]"""
import csv, statistics, sys
from collections import defaultdict

for path in sys.argv[1:]:
    rows = [r for r in csv.reader(l for l in open(path) if not l.startswith("#"))]
    head, rows = rows[0], rows[1:]
    col = {n: i for i, n in enumerate(head)}
    per_cta = defaultdict(list)
    tiles = defaultdict(list)
    for r in rows:
        st = int(r[col["stage"]])
        t0, t1 = int(r[col["t_start"]]), int(r[col["t_end"]])
        per_cta[(st, r[col["sm"]], r[col["cta"]])].append(t0)
        tiles[st].append(t1 - t0)
    periods = defaultdict(list)
    for (st, _, _), ts in per_cta.items():
        ts.sort()
        periods[st] += [b - a for a, b in zip(ts, ts[1:])]
    for st in sorted(tiles):
        p = periods[st]
        med = statistics.median(p) / 1e3 if p else float("nan")
        print(f"{path.split('/')[-1]}: stage {st}: {len(tiles[st])} tiles, median tile "
              f"{statistics.median(tiles[st]) / 1e3:.2f} us, median start-to-next-start {med:.2f} us "
              f"({len(p)} pairs)")
