import json, pathlib, statistics, sys
HERE = pathlib.Path(sys.argv[1])
for path in sorted(HERE.glob("*/results.json")):
    suite, build, rnd = path.parent.name.rsplit("-", 2)
    for run in json.loads(path.read_text())["runs"]:
        if run["workload"] in ("fillrandom", "load"):
            continue
        lat = run["latency_us"]
        read = lat.get("READ", {})
        write = lat.get("WRITE") or lat.get("UPDATE") or {}
        st = run.get("engine_stats") or {}
        print(f"{rnd} {build:8} {run['workload']:22} {run['threads']:2}t {run['ops_per_sec']:>9,.0f} ops/s "
              f"read p99 {read.get('p99')} p99.9 {read.get('p999')} reads {read.get('count')} writes {write.get('count')} "
              f"paced_s {st.get('paced_secs')} limit {st.get('write_rate_limit')}")
