//! The `shale` binary's memory allocator: jemalloc, for the whole process.
//!
//! Measured on `shale serve` under redis-benchmark (docs/SERVER.md, "The allocator"): glibc's
//! malloc and free took ~17% of the instructions of a pipelined LPUSH, jemalloc about a third of
//! that; CPU per request fell on the commands over many keys (MSET by a fifth, GET by about a
//! tenth), moved within the spread on SET, and did not fall on those to one hot key (LPUSH, HSET,
//! SADD). redis-server ships with jemalloc too, so the comparison stays like for like. Its symbols replace glibc's malloc family
//! (`unprefixed_malloc_on_supported_platforms`), so C and C++ code in the process allocates from
//! it as well: RocksDB, the benchmark peer that runs in this process, gets the allocator its
//! experts deploy it with, and the peers still share one allocator. The libraries (`shaledb`,
//! its C and Python bindings) leave the choice to the program that embeds them.

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Tells the benchmark harness how to return freed memory to the kernel between engines, which
/// glibc's `malloc_trim` no longer does once jemalloc holds the heap.
pub fn install() {
    shaledb_bench::measure::set_freed_memory_release(release_freed_memory);
}

/// Purges every jemalloc arena's unused dirty pages now, rather than after their decay time.
fn release_freed_memory() {
    // MALLCTL_ARENAS_ALL (4096 in jemalloc 5) names every arena.
    const PURGE_ALL_ARENAS: &[u8] = b"arena.4096.purge\0";
    // SAFETY: the name is NUL-terminated, and "arena.<i>.purge" reads and writes no value, so
    // null old and new pointers with zero lengths are what mallctl expects for it.
    let status = unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL_ARENAS.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if status != 0 {
        tracing::warn!(
            status,
            "jemalloc could not purge its arenas: engine RSS may count memory freed earlier"
        );
    }
}

#[cfg(test)]
mod tests {
    use shaledb_bench::measure::rss_bytes;

    #[test]
    fn release_returns_freed_memory_to_the_kernel() {
        const CHUNK: usize = 1 << 10;
        const TOTAL: usize = 256 << 20;
        let chunks: Vec<Vec<u8>> = (0..TOTAL / CHUNK).map(|_| vec![1u8; CHUNK]).collect();
        let held = rss_bytes();
        drop(chunks);
        // jemalloc keeps the freed pages of its small-object slabs for its decay time (10 s):
        // without the purge, all of them stay resident.
        super::release_freed_memory();
        let released = held.saturating_sub(rss_bytes());
        assert!(
            released >= TOTAL as u64 / 2,
            "{released} of {TOTAL} freed bytes returned"
        );
    }
}
