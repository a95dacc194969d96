# Sourced by the benchmarks that run two servers side by side (bench-serve, bench-ycsb-redis).

# wait_for_idle: waits (10 s at most) until the machine idles (below 10% busy over 0.2 s): the
# server just measured done with what its writes left it to do (a flush, the cleaner, an AOF
# rewrite), so none of it lands in the next run, which may be the other server's.
wait_for_idle() {
    local before after
    before=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
    for _ in $(seq 50); do
        sleep 0.2
        after=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
        awk -v before="$before" -v after="$after" 'BEGIN {
            split(before, b, " "); split(after, a, " ")
            busy = a[1] - b[1]; idle = a[2] - b[2]
            exit !(busy + idle > 0 && busy / (busy + idle) < 0.1) }' && return 0
        before=$after
    done
}
