#!/bin/bash
# Second measurement, after the fix of the cleaner regression (commit 33c8d32): 3 alternated
# rounds (before, after | after, before | before, after), one run at a time, nothing else running.
# before = /work/bin/shale-new (commit 7121fe9), after = /work/bin/shale-16b (commit 33c8d32).
set -u
OUT=/work/main/bench/results/2026-11-23-issue16-metadata-cost/fixed
LOG=$OUT/runs.log
for spec in new:before-r1 16b:after-r1 16b:after-r2 new:before-r2 new:before-r3 16b:after-r3; do
  bin=/work/bin/shale-${spec%%:*}; label=${spec#*:}
  rm -rf /work/benchdata/$label
  mkdir -p $OUT/$label
  echo "$(date -Is) start $label $bin loadavg: $(cat /proc/loadavg)" >> $LOG
  /usr/bin/time -v -o $OUT/$label/time.txt \
    $bin bench ycsb --engines shaledb --workloads a --records 1000000 --operations 2000000 \
      --threads 4,16 --rounds 1 --cache-mb 128 --data-dir /work/benchdata/$label --out $OUT/$label \
      > $OUT/$label/stdout.txt 2> $OUT/$label/stderr.txt
  rc=$?
  rm -rf /work/benchdata/$label $OUT/$label/*.png
  echo "$(date -Is) end $label rc=$rc $(grep 'Elapsed (wall' $OUT/$label/time.txt)" >> $LOG
done
echo "$(date -Is) ALL DONE" >> $LOG
