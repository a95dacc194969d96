#!/bin/bash
# Tail latency at equal offered load for YCSB B, D and F (A and C: ../2026-11-24-issue18-offered-load).
set -u
OUT=$(cd "$(dirname "$0")" && pwd)
BIN=${SHALE:-shale}
rm -rf /work/benchdata/offered-bdf
"$BIN" bench ycsb --engines shaledb,rocksdb-tuned --workloads b,d,f --records 1000000 \
    --duration 30 --warmup-secs 5 --equal-rss-secs 10 --threads 16 --rounds 1 \
    --cache-mb 128 --target 10000,20000,40000,0 \
    --data-dir /work/benchdata/offered-bdf --out "$OUT" > "$OUT/run.log" 2>&1
echo "rc=$?" >> "$OUT/run.log"
rm -rf /work/benchdata/offered-bdf "$OUT"/*.png
