//! CRC-32C, the checksum of every on-media format (records, segment seals, manifests,
//! checkpoints, key lists).
//!
//! Most of what the write path checksums is short: a record of a few dozen bytes, then its
//! 4-byte CRC chained into the segment's seal. The `crc32c` crate's hardware path costs about
//! 150 instructions per call whatever the length (it splits the input by alignment and sets up a
//! three-way parallel scheme for long buffers): under callgrind its two calls per put were 300
//! of an INCR's 9,700 instructions. Inputs up to `SHORT_BYTES_MAX` run a plain loop of the
//! SSE4.2 instruction instead (about 3 instructions per 8 bytes); longer ones, and CPUs without
//! SSE4.2, go to the crate. Both compute the same function (tested below).

/// Longest input the plain loop takes: past it the crate's parallel scheme is faster.
const SHORT_BYTES_MAX: usize = 256;

pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c_append(0, bytes)
}

/// The CRC of the bytes `crc` covers followed by `bytes`.
pub fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if bytes.len() <= SHORT_BYTES_MAX && std::is_x86_feature_detected!("sse4.2") {
        // SAFETY: `short_sse42` only needs SSE4.2, which the CPU was just found to have (std
        // caches the detection).
        return unsafe { short_sse42(crc, bytes) };
    }
    crc32c::crc32c_append(crc, bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn short_sse42(crc: u32, bytes: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut state = u64::from(!crc);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let word = u64::from_le_bytes(word.try_into().expect("chunks of 8 bytes"));
        state = _mm_crc32_u64(state, word);
    }
    let mut state = state as u32;
    for &byte in words.remainder() {
        state = _mm_crc32_u8(state, byte);
    }
    !state
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        // RFC 3720's check value, and the empty input.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    proptest! {
        #[test]
        fn matches_the_crate_at_every_length_and_start(
            bytes in proptest::collection::vec(any::<u8>(), 0..600),
            start: u32,
            split in 0usize..600,
        ) {
            prop_assert_eq!(crc32c(&bytes), crc32c::crc32c(&bytes));
            prop_assert_eq!(crc32c_append(start, &bytes), crc32c::crc32c_append(start, &bytes));
            let (head, tail) = bytes.split_at(split.min(bytes.len()));
            prop_assert_eq!(crc32c_append(crc32c(head), tail), crc32c::crc32c(&bytes));
        }
    }
}
