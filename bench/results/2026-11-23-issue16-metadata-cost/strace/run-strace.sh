#!/bin/bash
# fdatasync/fsync counts during one 200,000-record load (4 threads), per binary; one process at a time.
# Pass 1 (-c, counts): count-LABEL.txt.  Pass 2 (-y, paths; run twice per binary): by-file-LABEL.txt.
set -u
for spec in new:before 16:after; do
  bin=/work/bin/shale-${spec%%:*}; l=${spec#*:}
  rm -rf /work/benchdata/st-$l /tmp/st-$l
  strace -f -c -o count-$l.txt -e trace=fdatasync,fsync $bin bench ycsb --engines shaledb --workloads a \
    --records 200000 --operations 1 --threads 4 --rounds 1 --probe-secs 0 --data-dir /work/benchdata/st-$l --out /tmp/st-$l
  rm -rf /work/benchdata/st-$l
done
for spec in new:before 16:after new:before-2 16:after-2; do
  bin=/work/bin/shale-${spec%%:*}; l=${spec#*:}
  rm -rf /work/benchdata/st-$l /tmp/st-$l
  strace -f -y -tt -o /tmp/trace-$l.txt -e trace=fdatasync,fsync $bin bench ycsb --engines shaledb --workloads a \
    --records 200000 --operations 1 --threads 4 --rounds 1 --probe-secs 0 --data-dir /work/benchdata/st-$l --out /tmp/st-$l
  rm -rf /work/benchdata/st-$l
  grep -E 'f(data)?sync\(' /tmp/trace-$l.txt | sed -E 's/.*(fdatasync|fsync)\([0-9]+<([^>]*)>.*/\1 \2/' \
    | sed -E 's#/work/benchdata/st-[^/]*/##; s#seg-[0-9]+#seg-N#g' | sort | uniq -c | sort -rn > by-file-$l.txt
done
