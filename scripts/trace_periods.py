#!/usr/bin/env python3
"""Is a run's steady state exactly periodic? Reads a `meshsim op ... --trace FILE` trace and,
for the busiest link tracks, compares the gaps between the wire starts of successive Ethernet
chunks of one size (the last chunk of each fabric or EDM packet) at every lag up to 3000
packets, to the picosecond. Prints, per track, how many distinct gaps the run's second quarter
has and the lag at which the most gaps repeat exactly.

An exact steady-state period shortcut (issue 13) can only skip a stretch whose gaps repeat at
one lag throughout: a best fraction well below 100 % says there is no period to skip.

Usage: scripts/trace_periods.py TRACE.json "CHUNK B" [TRACKS]
"""
import json
import sys
from collections import defaultdict


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    path, chunk = sys.argv[1], sys.argv[2]
    shown = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    tracks = defaultdict(list)
    with open(path) as f:
        for e in json.load(f)["traceEvents"]:
            if e.get("cat") == "packet" and e["name"] == chunk:
                tracks[(e["pid"], e["tid"])].append(round(e["ts"] * 1e6))
    if not tracks:
        sys.exit(f"trace_periods: no '{chunk}' packets in {path}")
    for key, ts in sorted(tracks.items(), key=lambda kv: -len(kv[1]))[:shown]:
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        lo, hi = len(gaps) // 4, len(gaps) // 2
        lags = range(1, min(3000, len(gaps) - hi))
        if hi <= lo or not lags:
            print(f"track {key}: {len(ts)} packets, too few to tell")
            continue
        frac, lag = max((sum(gaps[i] == gaps[i + p] for i in range(lo, hi)) / (hi - lo), p) for p in lags)
        print(
            f"track {key}: {len(ts)} packets, {len(set(gaps[lo:hi]))} distinct gaps "
            f"in the second quarter, best lag {lag} packets: {frac:.1%} of gaps equal"
        )


if __name__ == "__main__":
    main()
