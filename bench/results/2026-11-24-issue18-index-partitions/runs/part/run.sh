#!/bin/bash
# Index partitions: base18 (a3a783f) vs part1 (83e078d), builds alternated in each round.
set -u
OUT=/work/benchruns/part
for round in 1 2 3; do
  for build in base18 part1; do
    bin=/work/bin/shale-$build
    data=/work/benchdata/part-$build
    rm -rf $data
    $bin bench db --engines shaledb --benchmarks fillrandom --num 2000000 --duration 30 \
      --warmup-secs 0 --threads 1,2,4 --rounds 1 --cache-mb 64 --probe-secs 0 \
      --data-dir $data --out $OUT/fill-$build-r$round > $OUT/fill-$build-r$round.log 2>&1
    rm -rf $data
    $bin bench db --engines shaledb --benchmarks fillrandom,readwhilewriting --num 1000000 --duration 20 \
      --warmup-secs 5 --threads 4,16 --rounds 1 --cache-mb 64 --probe-secs 0 \
      --data-dir $data --out $OUT/rww-$build-r$round > $OUT/rww-$build-r$round.log 2>&1
    rm -rf $data
    $bin bench ycsb --engines shaledb --workloads e --records 1000000 --duration 30 \
      --warmup-secs 5 --threads 4 --rounds 1 --cache-mb 64 --probe-secs 0 \
      --data-dir $data --out $OUT/e-$build-r$round > $OUT/e-$build-r$round.log 2>&1
    rm -rf $data
    echo "round $round $build done $(date +%T)"
  done
done
