#!/bin/bash
set -u
OUT=/work/benchruns/partE
mkdir -p $OUT
for round in 1 2; do
  for build in base18 part1 part2; do
    bin=/work/bin/shale-$build
    data=/work/benchdata/partE-$build
    rm -rf $data
    $bin bench ycsb --engines shaledb --workloads e --records 1000000 --duration 30 \
      --warmup-secs 5 --threads 4,16 --rounds 1 --cache-mb 64 --probe-secs 0 \
      --data-dir $data --out $OUT/e-$build-r$round > $OUT/e-$build-r$round.log 2>&1
    rm -rf $data
    echo "round $round $build done $(date +%T)"
  done
done
