#!/usr/bin/env bash
# Two alternations of (compression none, compression lz4), each ShaleDB and RocksDB tuned.
set -euo pipefail
bin=/work/target-lz4/release/shale
data=/work/wt-lz4/shale-data/issue18-lz4
for pass in 1 2; do
  for compression in none lz4; do
    out=/tmp/issue18-lz4/$compression-$pass
    echo "== pass $pass compression $compression $(date -u +%H:%M:%S) load: $(cut -d' ' -f1-3 /proc/loadavg)"
    "$bin" bench db --engines shaledb,rocksdb-tuned --benchmarks fillrandom,readrandom \
        --num 400000 --compression_ratio 0.5 --compression "$compression" \
        --threads 4 --rounds 1 --data-dir "$data" --out "$out" 2>&1 | tee "$out.stdout.txt"
  done
done
