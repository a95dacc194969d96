#!/bin/bash
# Driver for part "Instruction counts": each binary under callgrind, twice, one run at a time.
set -u
OUT=/work/main/bench/results/2026-11-23-issue15-layering/callgrind
LOG=$OUT/runs.log
for spec in old:old new:new old:old-2 new:new-2; do
  bin=/work/bin/shale-${spec%%:*}; label=${spec#*:}
  rm -rf /work/benchdata/cg-$label
  echo "$(date -Is) start $label $bin" >> $LOG
  valgrind --tool=callgrind --callgrind-out-file=$OUT/$label.out \
    $bin bench ycsb --engines shaledb --workloads a,c --records 50000 --operations 100000 \
      --threads 1 --rounds 1 --probe-secs 0 --cache-mb 16 --data-dir /work/benchdata/cg-$label --out $OUT/$label \
      > $OUT/$label.stdout.txt 2> $OUT/$label.stderr.txt
  rc=$?
  du -sh /work/benchdata/cg-$label >> $LOG 2>&1
  rm -rf /work/benchdata/cg-$label
  echo "$(date -Is) end $label rc=$rc" >> $LOG
done
echo "$(date -Is) ALL DONE" >> $LOG
