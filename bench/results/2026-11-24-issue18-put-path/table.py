"""Prints the put-path comparison: every round, then the median per build and thread count."""
import json
import pathlib
import statistics

HERE = pathlib.Path(__file__).parent / "runs"
BUILDS = ["base", "put1", "put2", "put3"]
medians = {}
for round_no in range(1, 6):
    for build in BUILDS:
        runs = json.loads((HERE / f"{build}-round{round_no}.json").read_text())["runs"]
        cells = []
        for run in runs:
            ops, cpu_us = run["ops_per_sec"], run["cpu_seconds_per_1000_ops"] * 1e3
            medians.setdefault((run["threads"], build), []).append((ops, cpu_us))
            cells.append(f"{run['threads']}t {ops:>9,.0f} puts/s {cpu_us:.2f} us CPU/put")
        print(f"round {round_no} {build:5} " + " | ".join(cells))
print()
print("| threads | build | median puts/s | median CPU us/put |")
print("|---|---|---|---|")
for (threads, build), values in sorted(medians.items()):
    ops = statistics.median(v[0] for v in values)
    cpu = statistics.median(v[1] for v in values)
    print(f"| {threads} | {build} | {ops:,.0f} | {cpu:.2f} |")
