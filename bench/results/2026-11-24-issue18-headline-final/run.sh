#!/bin/bash
# The headline after issue 18's engine work: every default as shipped, 40 s runs after 5 s warm-up,
# RocksDB as it ships and tuned beside ShaleDB at equal RSS, 2 rounds, 4 and 16 threads.
# E is left out to keep the run within the session; its last side-by-side is ../2026-11-24-issue18-headline.
set -u
OUT=$(cd "$(dirname "$0")" && pwd)
BIN=${SHALE:-shale}
rm -rf /work/benchdata/headline3
"$BIN" bench ycsb --engines shaledb,rocksdb,rocksdb-tuned --workloads a,b,c,d,f \
    --records 1000000 --duration 40 --warmup-secs 5 --equal-rss-secs 20 --threads 4,16 \
    --rounds 2 --cache-mb 128 --data-dir /work/benchdata/headline3 --out "$OUT/ycsb" \
    > "$OUT/stdout.txt" 2> "$OUT/stderr.txt"
echo "rc=$?" >> "$OUT/stdout.txt"
rm -rf /work/benchdata/headline3 "$OUT"/ycsb/*.png
