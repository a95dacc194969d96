#!/bin/sh
# Supplementary checks (not part of the requested grid):
#  (a) written-multiple 20 instead of 6, zipfian 0.5 and 0.9: is 6x long enough for steady state?
#  (b) 2,000,000 records (~2 GiB) instead of 200,000 (DIST=zipfian by default; RATIOS to pick targets): does the 64 MiB reserve
#      (4 x 16 MiB segments, added on top of live/target) distort the 200 MiB curve?
set -e
R=/work/main/bench/results/2026-11-24-issue18-space-curve
S=/work/benchdata/space-curve
BIN=/work/bin/shale-hl2
mkdir -p "$R/supplement" "$S"
cd "$S"
run() { # name records multiple dist ratio
  out="$R/supplement/$1"
  echo "$(date -u +%FT%TZ) $1 load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$R/supplement/runs.log"
  /usr/bin/time -f "%e s elapsed, %U user, %S sys, %M KiB maxrss" \
    "$BIN" bench gc --data-dir "$S/run" --records "$2" --value-size 1024 \
      --written-multiple "$3" --distribution "$4" --live-ratio "$5" \
      > "$out.txt" 2> "$out.stderr.txt"
  echo "$(date -u +%FT%TZ) $1 done: $(tail -1 "$out.stderr.txt")" >> "$R/supplement/runs.log"
}
case "${1:-all}" in
  wm20|all)
    run zipfian-0.5-wm20 200000 20 zipfian 0.5
    run zipfian-0.9-wm20 200000 20 zipfian 0.9 ;;
esac
case "${1:-all}" in
  big|all)
    D=${DIST:-zipfian}
    for r in ${RATIOS:-0.5 0.6 0.7 0.75 0.8 0.85 0.9}; do run $D-$r-2M 2000000 6 $D $r; done ;;
esac
#  (c) a second round of the 2 GiB zipfian 0.8 run, for run-to-run variation at that size
case "${1:-all}" in
  repeat|all)
    run zipfian-0.8-2M-r2 2000000 6 zipfian 0.8 ;;
esac
