#!/bin/bash
# Pacer gated by device share: gate0 (pacing off, the default) vs gate400 (read target 400 us).
set -u
OUT=/work/benchruns/pace
mkdir -p $OUT
for round in 1 2; do
  for build in gate0 gate400; do
    bin=/work/bin/shale-$build
    data=/work/benchdata/pace-$build
    rm -rf $data
    $bin bench db --engines shaledb --benchmarks fillrandom,readwhilewriting,readrandomwriterandom \
      --num 1000000 --duration 20 --warmup-secs 5 --threads 4,16 --rounds 1 --cache-mb 64 \
      --probe-secs 0 --data-dir $data --out $OUT/db-$build-r$round > $OUT/db-$build-r$round.log 2>&1
    rm -rf $data
    $bin bench ycsb --engines shaledb --workloads a --records 1000000 --duration 20 \
      --warmup-secs 5 --threads 4,16 --rounds 2 --cache-mb 128 --probe-secs 0 \
      --data-dir $data --out $OUT/a-$build-r$round > $OUT/a-$build-r$round.log 2>&1
    rm -rf $data
    echo "round $round $build done $(date +%T)"
  done
done
