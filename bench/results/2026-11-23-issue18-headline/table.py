"""The headline table from ycsb/results.json: per workload and thread count, median ops/s of
each engine, ShaleDB's median paired ratio against each RocksDB and against the better of the
two in each round, the main operation's p99 / p99.9 (median-throughput round), engine RSS and
cache. Reads the run beside it, or the results directory given as its argument (later headline
runs use this script)."""
import json, statistics, sys, os
here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
runs = json.load(open(os.path.join(here, "ycsb", "results.json")))["runs"]
groups = {}
for run in runs:
    groups.setdefault((run["workload"], run["threads"]), []).append(run)
main_ops = ["READ", "SCAN", "UPDATE", "INSERT", "READ-MODIFY-WRITE"]
print("| workload | threads | shaledb ops/s | rocksdb | rocksdb-tuned | vs rocksdb | vs tuned | **vs best** | p99 / p99.9 µs (shaledb, best-throughput rocksdb) | engine RSS MiB (s, r, t) | cache MiB (s, r, t) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for (workload, threads), rs in groups.items():
    by = {e: sorted([r for r in rs if r["engine"] == e], key=lambda r: r["ops_per_sec"]) for e in ("shaledb", "rocksdb", "rocksdb-tuned")}
    med = {e: v[len(v) // 2] for e, v in by.items() if v}
    def ratio(peers):
        out = []
        for r in by["shaledb"]:
            best = max((p["ops_per_sec"] for e in peers for p in by[e] if p["round"] == r["round"]), default=0)
            if best:
                out.append(r["ops_per_sec"] / best)
        return statistics.median(out) if out else float("nan")
    def tail(run):
        op = next((o for o in main_ops if o in run["latency_us"]), None)
        l = run["latency_us"][op]
        return f"{op} {l['p99']}/{l['p999']}"
    best_peer = max(("rocksdb", "rocksdb-tuned"), key=lambda e: med[e]["ops_per_sec"]) if "rocksdb" in med else None
    mib = lambda b: f"{b / 2**20:.0f}"
    print(f"| {workload} | {threads} | {med['shaledb']['ops_per_sec']:.0f} | {med['rocksdb']['ops_per_sec']:.0f} | "
          f"{med['rocksdb-tuned']['ops_per_sec']:.0f} | {ratio(['rocksdb']):.2f} | {ratio(['rocksdb-tuned']):.2f} | "
          f"**{ratio(['rocksdb', 'rocksdb-tuned']):.2f}** | {tail(med['shaledb'])}; {best_peer} {tail(med[best_peer])} | "
          f"{mib(med['shaledb']['engine_rss_bytes'])}, {mib(med['rocksdb']['engine_rss_bytes'])}, {mib(med['rocksdb-tuned']['engine_rss_bytes'])} | "
          f"{mib(med['shaledb']['cache_bytes'])}, {mib(med['rocksdb']['cache_bytes'])}, {mib(med['rocksdb-tuned']['cache_bytes'])} |")
