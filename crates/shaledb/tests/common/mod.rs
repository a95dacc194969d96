//! Helpers shared by the integration tests.
#![allow(dead_code)]

use shaledb::{Durability, Options};

/// Small segments and buffers so tests exercise rolls, cleaning and checkpoints quickly.
pub fn small_options() -> Options {
    Options {
        segment_bytes: 2 << 20,
        write_buffer_bytes: shaledb::limits::WRITE_BUFFER_BYTES_MIN,
        flush_chunk_bytes: 256 << 10,
        checkpoint_interval_bytes: 4 << 20,
        cache_bytes: 1 << 20,
        durability: Durability::None,
        ..Options::default()
    }
}
