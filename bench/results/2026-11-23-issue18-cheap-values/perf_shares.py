#!/usr/bin/env python3
"""Shares of a `perf record --call-graph dwarf` profile: the fraction of all samples (the whole
process, every thread) whose call stack contains a frame, inlined frames included.
Usage: perf_shares.py perf.data"""
import subprocess
import sys

out = subprocess.run(["perf", "script", "-i", sys.argv[1], "-F", "comm,tid,period,ip,sym"],
                     capture_output=True, text=True, check=True).stdout
samples, current = [], None
for line in out.split("\n"):
    if not line.strip():
        if current:
            samples.append(current)
        current = None
    elif not line.startswith((" ", "\t")):
        last = line.split()[-1]
        current = {"period": int(last) if last.isdigit() else 1, "frames": []}
    elif current is not None:
        current["frames"].append(line.strip().split(" ", 1)[-1])
if current:
    samples.append(current)
total = sum(s["period"] for s in samples)


def share(*needles):
    hit = sum(s["period"] for s in samples
              if any(n in f for f in s["frames"] for n in needles))
    return 100 * hit / total


print(f"samples {len(samples)}")
print(f"YCSB record building (RecordShape::build, update_field): "
      f"{share('RecordShape::build', 'RecordShape::update_field'):.1f}%")
print(f"db_bench value(): {share('dbbench::value'):.1f}%")
print(f"ChaCha block refills (thread_rng): {share('refill_wide'):.1f}%")
print(f"engine (a shaledb:: frame): {share('shaledb::'):.1f}%")
print(f"run-phase worker threads: {share('run_phase'):.1f}%")
