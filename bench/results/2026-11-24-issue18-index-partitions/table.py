"""Prints the index-partition comparison: every run, then the median per build, benchmark and
thread count (puts/s or reads/s or scans/s, CPU per operation, and read latency where reads ran)."""
import json
import pathlib
import statistics
import sys

HERE = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "runs")
BUILDS = ["base18", "p4", "p8", "part1", "part2"]
cells = {}
for path in sorted(HERE.glob("*/results.json")):
    suite, build, round_no = path.parent.name.rsplit("-", 2)[0], *path.parent.name.rsplit("-", 2)[1:]
    for run in json.loads(path.read_text())["runs"]:
        if suite == "rww" and run["workload"] == "fillrandom":
            continue  # the fill before readwhilewriting
        latency = run.get("latency_us", {})
        read = latency.get("READ") or latency.get("SCAN") or {}
        row = (run["ops_per_sec"], run["cpu_seconds_per_1000_ops"] * 1e3, read.get("p99"), read.get("p999"))
        cells.setdefault((run["workload"], run["threads"], build), []).append(row)
        print(f"{round_no} {build:6} {run['workload']:17} {run['threads']:2}t {row[0]:>10,.0f} ops/s "
              f"{row[1]:6.2f} us CPU/op p99 {row[2]} p99.9 {row[3]}")
print()
print("| benchmark | threads | build | median ops/s | CPU µs/op | read p99 µs | read p99.9 µs |")
print("|---|---|---|---|---|---|---|")
for (workload, threads, build), rows in sorted(cells.items()):
    med = lambda i: statistics.median(r[i] for r in rows if r[i] is not None) if any(r[i] is not None for r in rows) else None
    p99, p999 = med(2), med(3)
    print(f"| {workload} | {threads} | {build} | {med(0):,.0f} | {med(1):.2f} | "
          f"{'-' if p99 is None else f'{p99:,.0f}'} | {'-' if p999 is None else f'{p999:,.0f}'} |")
