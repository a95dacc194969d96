#!/bin/bash
# Issue 18's headline rerun after part 2's engine work (batched scan reads, the value cache keyed
# by key, the allocation-free get, the sorter): same command as 2026-11-23-issue18-headline.
# ShaleDB beside RocksDB 7.8.3 as it ships and as tuned, each peer's cache calibrated to
# ShaleDB's engine RSS with a 128 MiB cache, 5 s warm-up then 20 s timed, 1,000,000 YCSB records
# (~1.1 GB, 8.6x the budget), 4 and 16 threads, 2 alternating rounds, no compression on either
# side. Binary: `./scripts/bench`'s build (--features rocksdb against Debian's librocksdb),
# copied to /work/bin/shale-hl2.
set -u
OUT=$(cd "$(dirname "$0")" && pwd)
rm -rf /work/benchdata/headline2
/work/bin/shale-hl2 bench ycsb --engines shaledb,rocksdb,rocksdb-tuned --workloads a,b,c,f,d,e \
    --records 1000000 --duration 20 --warmup-secs 5 --equal-rss-secs 20 --threads 4,16 \
    --rounds 2 --cache-mb 128 --data-dir /work/benchdata/headline2 --out "$OUT/ycsb" \
    > "$OUT/stdout.txt" 2> "$OUT/stderr.txt"
echo "rc=$?" >> "$OUT/stdout.txt"
rm -rf /work/benchdata/headline2 "$OUT"/ycsb/*.png
