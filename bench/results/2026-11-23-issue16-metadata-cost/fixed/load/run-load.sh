#!/bin/bash
# YCSB load alone (1,000,000 records, 16 threads), 9 alternated pairs (before first in odd
# pairs, after first in even ones): the load phase lasts ~4 s, too short for 3 rounds to tell
# a few percent. `--workloads c --operations 1000` ends each run right after its load.
set -u
OUT=/work/main/bench/results/2026-11-23-issue16-metadata-cost/fixed/load
LOG=$OUT/runs.log
for pair in 1 2 3 4 5 6 7 8 9; do
  if (( pair % 2 )); then order="new:before 16b:after"; else order="16b:after new:before"; fi
  for spec in $order; do
    bin=/work/bin/shale-${spec%%:*}; label=${spec#*:}-p$pair
    rm -rf /work/benchdata/$label; mkdir -p $OUT/$label
    echo "$(date -Is) start $label loadavg: $(cat /proc/loadavg)" >> $LOG
    $bin bench ycsb --engines shaledb --workloads c --records 1000000 --operations 1000 \
      --threads 16 --rounds 1 --cache-mb 128 --probe-secs 0 --data-dir /work/benchdata/$label \
      --out $OUT/$label > /dev/null 2> $OUT/$label/stderr.txt
    echo "$(date -Is) end $label rc=$? $(grep 'load ' $OUT/$label/stderr.txt)" >> $LOG
    rm -rf /work/benchdata/$label $OUT/$label/*.png $OUT/$label/*.svg $OUT/$label/report.md
  done
done
echo "$(date -Is) ALL DONE" >> $LOG
