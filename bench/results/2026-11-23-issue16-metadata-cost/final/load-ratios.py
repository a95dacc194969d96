#!/usr/bin/env python3
"""Load throughput after/before from DIR/runs.log: medians and the ratio within each pair."""
import re, statistics, sys

runs = {"before": {}, "after": {}}
for line in open(f"{sys.argv[1]}/runs.log"):
    m = re.search(r"end load3m-(before|after)-p(\d+) rc=0 .*?(\d+) ops/s", line)
    if m:
        runs[m.group(1)][int(m.group(2))] = int(m.group(3))
before, after = runs["before"], runs["after"]
print("before ops/s:", [before[p] for p in sorted(before)])
print("after  ops/s:", [after[p] for p in sorted(after)])
median_b, median_a = statistics.median(before.values()), statistics.median(after.values())
print(f"median before {median_b:.0f}, after {median_a:.0f}, after/before {median_a / median_b:.3f}")
pairs = [after[p] / before[p] for p in sorted(before) if p in after]
print("after/before per pair:", [round(r, 3) for r in pairs],
      f"median {statistics.median(pairs):.3f}, pairs below 1: {sum(r < 1 for r in pairs)} of {len(pairs)}")
