#!/bin/bash
# Issue 18's first like-for-like headline run: ShaleDB beside RocksDB as it ships and as tuned,
# at equal engine RSS (each peer's cache calibrated to ShaleDB's engine RSS with a 128 MiB
# cache), every run warmed up 5 s then timed 20 s, 1,000,000 YCSB records (~1.1 GB, 8.6x the
# budget), 4 and 16 threads, 2 alternating rounds. Binary: `./scripts/bench`'s build
# (--features rocksdb against Debian's librocksdb 7.8.3), copied to /work/bin/shale-18h.
set -u
OUT=$(cd "$(dirname "$0")" && pwd)
rm -rf /work/benchdata/headline
/work/bin/shale-18h bench ycsb --engines shaledb,rocksdb,rocksdb-tuned --workloads a,b,c,f,d,e \
    --records 1000000 --duration 20 --warmup-secs 5 --equal-rss-secs 20 --threads 4,16 \
    --rounds 2 --cache-mb 128 --data-dir /work/benchdata/headline --out "$OUT/ycsb" \
    > "$OUT/stdout.txt" 2> "$OUT/stderr.txt"
echo "rc=$?" >> "$OUT/stdout.txt"
rm -rf /work/benchdata/headline "$OUT"/ycsb/*.png
