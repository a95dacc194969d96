#!/bin/bash
# Driver for "Instruction counts": each binary under callgrind, twice, one run at a time.
# The large callgrind .out files and the harness outputs stay in /tmp (not committed).
set -u
OUT=/work/main/bench/results/2026-11-23-issue16-metadata-cost/callgrind
LOG=$OUT/runs.log
for spec in new:before 16:after new:before-2 16:after-2; do
  bin=/work/bin/shale-${spec%%:*}; label=${spec#*:}
  rm -rf /work/benchdata/cg-$label /tmp/cg-$label-out
  echo "$(date -Is) start $label $bin" >> $LOG
  valgrind --tool=callgrind --callgrind-out-file=/tmp/cg-$label.out \
    $bin bench ycsb --engines shaledb --workloads a --records 50000 --operations 50000 \
      --threads 1 --rounds 1 --probe-secs 0 --cache-mb 16 --data-dir /work/benchdata/cg-$label --out /tmp/cg-$label-out \
      > $OUT/$label.stdout.txt 2> $OUT/$label.stderr.txt
  rc=$?
  du -sh /work/benchdata/cg-$label >> $LOG 2>&1
  rm -rf /work/benchdata/cg-$label
  echo "$(date -Is) end $label rc=$rc" >> $LOG
done
echo "$(date -Is) ALL DONE" >> $LOG
