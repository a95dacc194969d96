#!/bin/bash
set -u
OUT=/work/benchruns/partE2
mkdir -p $OUT
for round in 1 2; do
  for build in part2 p4b; do
    bin=/work/bin/shale-$build
    data=/work/benchdata/partE2-$build
    rm -rf $data
    $bin bench db --engines shaledb --benchmarks fillrandom --num 2000000 --duration 30 \
      --warmup-secs 0 --threads 4 --rounds 1 --cache-mb 64 --probe-secs 0 \
      --data-dir $data --out $OUT/fill-$build-r$round > $OUT/fill-$build-r$round.log 2>&1
    rm -rf $data
    $bin bench ycsb --engines shaledb --workloads e --records 1000000 --duration 30 \
      --warmup-secs 5 --threads 16 --rounds 1 --cache-mb 64 --probe-secs 0 \
      --data-dir $data --out $OUT/e-$build-r$round > $OUT/e-$build-r$round.log 2>&1
    rm -rf $data
    echo "round $round $build done $(date +%T)"
  done
done
