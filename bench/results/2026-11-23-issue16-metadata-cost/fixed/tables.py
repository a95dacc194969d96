#!/usr/bin/env python3
"""Medians of after/before per cell, over the three rounds in this directory (run from it)."""
import json, statistics, glob

def cells(label):
    out = {}
    for run in json.load(open(f"{label}/results.json"))["runs"]:
        key = (run["workload"], run["threads"])
        lat = run["latency_us"]
        out[key] = {
            "ops/s": run["ops_per_sec"],
            "p99 " + "/".join(sorted(lat)): [lat[k]["p99"] for k in sorted(lat)],
            "CPU s/1000 ops": run["cpu_seconds_per_1000_ops"],
            "device bytes written / user byte": run["device_bytes_written"] / max(run["user_bytes_written"], 1),
        }
    return out

before = [cells(d) for d in sorted(glob.glob("before-r*"))]
after = [cells(d) for d in sorted(glob.glob("after-r*"))]
print("| workload | threads | metric | before (3 rounds) | after (3 rounds) | median after/before |")
print("|---|---|---|---|---|---|")
for key in before[0]:
    for metric in before[0][key]:
        b = [r[key][metric] for r in before]
        a = [r[key][metric] for r in after]
        if isinstance(b[0], list):
            for i, op in enumerate(metric.split(" ")[1].split("/")):
                bi = [x[i] for x in b]; ai = [x[i] for x in a]
                print(f"| {key[0]} | {key[1]} | {op} p99 µs | {bi} | {ai} | {statistics.median(ai)/statistics.median(bi):.3f} |")
        else:
            fmt = lambda xs: "[" + ", ".join(f"{x:.4g}" for x in xs) + "]"
            print(f"| {key[0]} | {key[1]} | {metric} | {fmt(b)} | {fmt(a)} | {statistics.median(a)/statistics.median(b):.3f} |")
