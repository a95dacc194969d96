#!/bin/bash
# YCSB load alone, 3,000,000 records (3.4 GB), 16 threads, 5 rounds, the binaries rotated:
# new = 7121fe9 (before the integrity work), 16c = fix + chained seal checksums,
# 16d = 16c + the seal of a full segment recorded after appends moved on to the next one.
set -u
OUT=$(cd "$(dirname "$0")" && pwd)
LOG=$OUT/runs.log
orders=("new 16c 16d" "16c 16d new" "16d new 16c" "new 16d 16c" "16c new 16d")
for round in 1 2 3 4 5; do
  for bin in ${orders[$((round-1))]}; do
    label=$bin-r$round
    rm -rf /work/benchdata/$label; mkdir -p $OUT/$label
    /work/bin/shale-$bin bench ycsb --engines shaledb --workloads c --records 3000000 --operations 1000 \
      --threads 16 --rounds 1 --cache-mb 128 --probe-secs 0 --data-dir /work/benchdata/$label \
      --out $OUT/$label > /dev/null 2> $OUT/$label/stderr.txt
    echo "$(date -Is) $label rc=$? $(grep 'load ' $OUT/$label/stderr.txt)" >> $LOG
    rm -rf /work/benchdata/$label $OUT/$label/*.png $OUT/$label/*.svg $OUT/$label/report.md
  done
done
echo "$(date -Is) ALL DONE" >> $LOG
