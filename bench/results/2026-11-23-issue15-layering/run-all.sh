#!/bin/bash
# Driver: 3 alternated rounds, one run at a time.
set -u
OUT=/work/main/bench/results/2026-11-23-issue15-layering
for spec in old:old-r1 new:new-r1 new:new-r2 old:old-r2 old:old-r3 new:new-r3; do
  bin=/work/bin/shale-${spec%%:*}; label=${spec#*:}
  rm -rf /work/benchdata/$label
  mkdir -p $OUT/$label
  echo "$(date -Is) start $label $bin" >> $OUT/runs.log
  /usr/bin/time -v -o $OUT/$label/time.txt \
    $bin bench ycsb --engines shaledb --workloads a,c --records 1000000 --operations 400000 \
      --threads 4,16 --rounds 1 --cache-mb 128 --data-dir /work/benchdata/$label --out $OUT/$label \
      > $OUT/$label/stdout.txt 2> $OUT/$label/stderr.txt
  rc=$?
  du -sh /work/benchdata/$label >> $OUT/runs.log 2>&1
  rm -rf /work/benchdata/$label
  echo "$(date -Is) end $label rc=$rc $(grep 'Elapsed (wall' $OUT/$label/time.txt)" >> $OUT/runs.log
done
echo "$(date -Is) ALL DONE" >> $OUT/runs.log
