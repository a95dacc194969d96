#!/bin/bash
# Driver for part "Longer runs": 3 alternated rounds, 2,000,000 operations per workload, one run at a time.
set -u
OUT=/work/main/bench/results/2026-11-23-issue15-layering
LOG=$OUT/runs-long.log
for spec in old:long-old-r1 new:long-new-r1 new:long-new-r2 old:long-old-r2 old:long-old-r3 new:long-new-r3; do
  bin=/work/bin/shale-${spec%%:*}; label=${spec#*:}
  rm -rf /work/benchdata/$label
  mkdir -p $OUT/$label
  echo "$(date -Is) start $label $bin loadavg: $(cat /proc/loadavg)" >> $LOG
  echo "before $(head -1 /proc/stat)" >> $LOG
  /usr/bin/time -v -o $OUT/$label/time.txt \
    $bin bench ycsb --engines shaledb --workloads a,c --records 1000000 --operations 2000000 \
      --threads 4,16 --rounds 1 --cache-mb 128 --data-dir /work/benchdata/$label --out $OUT/$label \
      > $OUT/$label/stdout.txt 2> $OUT/$label/stderr.txt
  rc=$?
  echo "after  $(head -1 /proc/stat)" >> $LOG
  du -sh /work/benchdata/$label >> $LOG 2>&1
  rm -rf /work/benchdata/$label
  echo "$(date -Is) end $label rc=$rc $(grep 'Elapsed (wall' $OUT/$label/time.txt)" >> $LOG
done
echo "$(date -Is) ALL DONE" >> $LOG
