#!/bin/sh
# Issue 18 (cheap values): alternating before/after runs of the YCSB load (and db_bench fillrandom).
# /tmp/shale-before: release build of 22133fb; /tmp/shale-after: 22133fb plus this change
# (both with CARGO_TARGET_DIR=/work/target-helper-ycsb cargo build --release -p shale-cli).
# Prints: benchmark, pair, binary, ops/s, CPU ms per 1000 ops (from results.json).
# The 300k series ran twice; runs.txt numbers the second one's pairs 4-6.
set -e
for records in 300000 300000 1000000; do
  for i in 1 2 3; do for b in before after; do
    rm -rf /tmp/ycsb-prof /tmp/ycsb-prof-out; sync
    /tmp/shale-$b bench ycsb --engines shaledb --workloads c --records $records --operations 1000 \
      --threads 4 --rounds 1 --cache-mb 128 --probe-secs 0 --data-dir /tmp/ycsb-prof --out /tmp/ycsb-prof-out >/dev/null 2>&1
    python3 -c "
import json; d = json.load(open('/tmp/ycsb-prof-out/results.json'))
r = [r for r in d['runs'] if r['workload'] == 'load'][0]
print('ycsb-load-$records $i $b', round(r['ops_per_sec']), round(r['cpu_seconds_per_1000_ops'] * 1e3, 2))"
  done; done
done
for i in 1 2 3; do for b in before after; do
  rm -rf /tmp/db-prof /tmp/db-prof-out; sync
  /tmp/shale-$b bench db --engines shaledb --benchmarks fillrandom --num 300000 --threads 4 --rounds 1 \
    --cache-mb 128 --probe-secs 0 --data-dir /tmp/db-prof --out /tmp/db-prof-out >/dev/null 2>&1
  python3 -c "
import json; d = json.load(open('/tmp/db-prof-out/results.json'))
r = [r for r in d['runs'] if r['workload'] == 'fillrandom'][0]
print('db-fillrandom-300000 $i $b', round(r['ops_per_sec']), round(r['cpu_seconds_per_1000_ops'] * 1e3, 2))"
done; done
rm -rf /tmp/ycsb-prof /tmp/ycsb-prof-out /tmp/db-prof /tmp/db-prof-out
