#!/bin/bash
# The final measurement of issue 16's cost: before = /work/bin/shale-new (7121fe9, before the
# integrity work), after = /work/bin/shale-16f (the session's last engine change: the cleaner
# fix, chained seal checksums, seals recorded after the roll). Nothing else runs meanwhile.
# 1) YCSB load + A at 4 and 16 threads, 1,000,000 records, 2,000,000 operations, 3 alternated
#    rounds (before, after | after, before | before, after).
# 2) YCSB load alone, 3,000,000 records, 16 threads, 5 alternated pairs (the 1M load lasts ~4 s,
#    too short to resolve a few percent).
set -u
OUT=$(cd "$(dirname "$0")" && pwd)
LOG=$OUT/runs.log
run() { # binary label args...
  local bin=$1 label=$2; shift 2
  rm -rf /work/benchdata/$label; mkdir -p $OUT/$label
  echo "$(date -Is) start $label loadavg: $(cat /proc/loadavg)" >> $LOG
  /work/bin/shale-$bin bench ycsb --engines shaledb --cache-mb 128 --rounds 1 \
    --data-dir /work/benchdata/$label --out $OUT/$label "$@" > /dev/null 2> $OUT/$label/stderr.txt
  echo "$(date -Is) end $label rc=$? $(grep 'load ' $OUT/$label/stderr.txt)" >> $LOG
  rm -rf /work/benchdata/$label $OUT/$label/*.png
}
A="--workloads a --records 1000000 --operations 2000000 --threads 4,16"
for spec in new:before-r1 16f:after-r1 16f:after-r2 new:before-r2 new:before-r3 16f:after-r3; do
  run ${spec%%:*} ${spec#*:} $A
done
L="--workloads c --records 3000000 --operations 1000 --threads 16 --probe-secs 0"
for pair in 1 2 3 4 5; do
  if (( pair % 2 )); then order="new:before 16f:after"; else order="16f:after new:before"; fi
  for spec in $order; do run ${spec%%:*} load3m-${spec#*:}-p$pair $L; done
done
echo "$(date -Is) ALL DONE" >> $LOG
