#!/bin/bash
# Driver: 3 alternated rounds (before, after | after, before | before, after), one run at a time.
# before = /work/bin/shale-new (commit 7121fe9), after = /work/bin/shale-16 (commit 3af1490).
set -u
OUT=/work/main/bench/results/2026-11-23-issue16-metadata-cost
LOG=$OUT/runs.log
for spec in new:before-r1 16:after-r1 16:after-r2 new:before-r2 new:before-r3 16:after-r3; do
  bin=/work/bin/shale-${spec%%:*}; label=${spec#*:}
  rm -rf /work/benchdata/$label
  mkdir -p $OUT/$label
  echo "$(date -Is) start $label $bin loadavg: $(cat /proc/loadavg)" >> $LOG
  echo "before $(head -1 /proc/stat)" >> $LOG
  /usr/bin/time -v -o $OUT/$label/time.txt \
    $bin bench ycsb --engines shaledb --workloads a --records 1000000 --operations 2000000 \
      --threads 4,16 --rounds 1 --cache-mb 128 --data-dir /work/benchdata/$label --out $OUT/$label \
      > $OUT/$label/stdout.txt 2> $OUT/$label/stderr.txt
  rc=$?
  echo "after  $(head -1 /proc/stat)" >> $LOG
  du -sh /work/benchdata/$label >> $LOG 2>&1
  rm -rf /work/benchdata/$label
  echo "$(date -Is) end $label rc=$rc $(grep 'Elapsed (wall' $OUT/$label/time.txt)" >> $LOG
done
echo "$(date -Is) ALL DONE" >> $LOG
