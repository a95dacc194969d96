#!/bin/bash
# YCSB load alone, 3,000,000 records, 16 threads, 10 rounds, order rotated each round:
# new = 7121fe9 (before issue 16), 16f = 05af4cd, 16g = 16f with durable points every 1 s.
set -u
OUT=$(cd "$(dirname "$0")" && pwd)
LOG=$OUT/runs.log
orders=("new 16f 16g" "16f 16g new" "16g new 16f")
for round in $(seq 1 10); do
  for bin in ${orders[$(( (round-1) % 3 ))]}; do
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
