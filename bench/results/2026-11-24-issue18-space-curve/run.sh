#!/bin/sh
# Issue 18: write/space amplification vs the cleaner's live-ratio target.
# Binary: /work/bin/shale-hl2 (sha256 aff091b1bfe173cd..., the headline binary, commit ade8ecd).
# One run at a time; stdout -> raw/<distribution>-<ratio>[-r2].txt, stderr (/usr/bin/time) -> .stderr.txt
set -e
R=/work/main/bench/results/2026-11-24-issue18-space-curve
S=/work/benchdata/space-curve
BIN=/work/bin/shale-hl2
mkdir -p "$R/raw" "$S"
cd "$S"
run() { # dist ratio suffix
  out="$R/raw/$1-$2$3"
  echo "$(date -u +%FT%TZ) $1 $2$3 load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$R/runs.log"
  /usr/bin/time -f "%e s elapsed, %U user, %S sys, %M KiB maxrss" \
    "$BIN" bench gc --data-dir "$S/run" --records 200000 --value-size 1024 \
      --written-multiple 6 --distribution "$1" --live-ratio "$2" \
      > "$out.txt" 2> "$out.stderr.txt"
  echo "$(date -u +%FT%TZ) $1 $2$3 done: $(tail -1 "$out.stderr.txt")" >> "$R/runs.log"
}
for d in zipfian uniform; do
  for r in 0.5 0.6 0.7 0.75 0.8 0.85 0.9; do run $d $r ""; done
done
for r in 0.5 0.7 0.8; do run zipfian $r -r2; done
