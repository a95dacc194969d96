//! Value bytes of a chosen compressibility, shaped as RocksDB's db_bench makes them
//! (`CompressibleString` in its util/testutil.cc): `len x ratio` random printable bytes (at
//! least one), repeated to `len`, which a block compressor such as lz4 shrinks to about `ratio`
//! of `len`; a ratio of 1 is random printable bytes throughout. The random bytes are cut from a
//! window made once, so a value costs a random number and a copy, not a random number per byte
//! (which was half the CPU of a load: issue 18).

use anyhow::{ensure, Result};
use rand::{Rng, SeedableRng};

/// db_bench's `--compression_ratio` default.
pub const DB_BENCH_COMPRESSION_RATIO: f64 = 0.5;

/// Bytes of each of db_bench's `RandomGenerator` pieces: each is a `CompressibleString`.
const PIECE_BYTES: usize = 100;

/// db_bench's `RandomGenerator` holds at least 1 MiB of pieces (more for larger values).
const DB_BENCH_WINDOW_BYTES: usize = 1 << 20;

/// A ratio is a fraction of a value: more than 0, at most 1.
pub fn check_ratio(ratio: f64) -> Result<()> {
    ensure!(
        ratio > 0.0 && ratio <= 1.0,
        "compression ratio {ratio} must be more than 0 and at most 1"
    );
    Ok(())
}

/// `len` random printable bytes (`' '..='~'`, db_bench's and YCSB's alphabet) from `seed`.
pub fn printable(len: usize, seed: u64) -> Box<[u8]> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..len).map(|_| rng.gen_range(b' '..=b'~')).collect()
}

/// How many of a `len`-byte compressible value's bytes are random (`CompressibleString`'s
/// `raw`: `len x ratio`, truncated, at least 1).
fn random_len(len: usize, ratio: f64) -> usize {
    ((len as f64 * ratio) as usize).clamp(1, len.max(1))
}

/// Fills `value` with `random` repeated.
fn repeat_into(value: &mut [u8], random: &[u8]) {
    for chunk in value.chunks_mut(random.len()) {
        chunk.copy_from_slice(&random[..chunk.len()]);
    }
}

/// Fills `value` as a `CompressibleString` of `ratio` whose random bytes are cut from `window`
/// at a random offset (`window` must hold `value.len()` bytes). At ratio 1 it is one copy
/// from the window, with exactly the random number such a copy always took.
pub fn fill_compressible(value: &mut [u8], ratio: f64, window: &[u8], rng: &mut impl Rng) {
    let random = random_len(value.len(), ratio);
    let start = rng.gen_range(0..=window.len() - random);
    repeat_into(value, &window[start..start + random]);
}

/// db_bench's `RandomGenerator`: a window of 100-byte pieces, each compressible to the ratio,
/// that values are cut from. db_bench cuts each thread's values one after another; this cuts
/// them at random piece boundaries (no per-thread state), so a value of whole pieces
/// compresses exactly as db_bench's do.
pub struct PieceWindow {
    bytes: Box<[u8]>,
}

impl PieceWindow {
    /// Pieces for values of up to `value_size` bytes, compressible to `ratio`.
    pub fn new(value_size: usize, ratio: f64) -> Self {
        let len = DB_BENCH_WINDOW_BYTES
            .max(value_size)
            .next_multiple_of(PIECE_BYTES);
        // db_bench seeds its generator with 301.
        let random = printable(len, 301);
        let mut bytes = vec![0; len].into_boxed_slice();
        let raw = random_len(PIECE_BYTES, ratio);
        for (piece, source) in bytes
            .chunks_mut(PIECE_BYTES)
            .zip(random.chunks(PIECE_BYTES))
        {
            repeat_into(piece, &source[..raw]);
        }
        PieceWindow { bytes }
    }

    /// A value of `len` bytes, starting at a random piece.
    pub fn value(&self, len: usize, rng: &mut impl Rng) -> Vec<u8> {
        let start = rng.gen_range(0..=(self.bytes.len() - len) / PIECE_BYTES) * PIECE_BYTES;
        self.bytes[start..start + len].to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What lz4 (the block format ShaleDB and RocksDB use) makes of `value`, as a fraction.
    fn lz4_ratio(value: &[u8]) -> f64 {
        lz4_flex::block::compress(value).len() as f64 / value.len() as f64
    }

    #[test]
    fn pieces_compress_to_about_the_ratio_as_db_benchs_do() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for ratio in [0.25, 0.5, 0.75] {
            let window = PieceWindow::new(400, ratio);
            let value = window.value(400, &mut rng);
            assert_eq!(value.len(), 400);
            assert!(value.iter().all(|byte| (b' '..=b'~').contains(byte)));
            // Each 100-byte piece: `raw` random bytes repeated (CompressibleString's shape).
            let raw = (100.0 * ratio) as usize;
            for piece in value.chunks(100) {
                assert_eq!(piece[..100 - raw], piece[raw..]);
            }
            let measured = lz4_ratio(&value);
            assert!(
                (measured - ratio).abs() < 0.12,
                "ratio {ratio}: lz4 made {measured}"
            );
        }
        let incompressible = PieceWindow::new(400, 1.0).value(4000, &mut rng);
        assert!(lz4_ratio(&incompressible) > 0.99);
    }

    #[test]
    fn values_differ_and_cost_one_random_number() {
        let window = PieceWindow::new(400, 0.5);
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let values: std::collections::HashSet<Vec<u8>> =
            (0..1000).map(|_| window.value(400, &mut rng)).collect();
        // 1,000 draws from 10,486 pieces: about 48 collide.
        assert!(values.len() > 900, "{} distinct of 1000", values.len());
        // A value larger than the usual window gets a window of its own size.
        let large = PieceWindow::new(3 << 20, 0.5);
        assert_eq!(large.value(3 << 20, &mut rng).len(), 3 << 20);
    }

    #[test]
    fn fields_compress_to_the_ratio_and_ratio_one_is_a_plain_copy() {
        let window = printable(64 * 1024, 7);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut field = vec![0; 1000];
        fill_compressible(&mut field, 0.5, &window, &mut rng);
        assert_eq!(field[..500], field[500..]);
        assert!((lz4_ratio(&field) - 0.5).abs() < 0.05);
        // Ratio 1: exactly the copy at the offset the same random number gives.
        let mut same = rand::rngs::StdRng::seed_from_u64(4);
        fill_compressible(&mut field, 1.0, &window, &mut same);
        let mut same = rand::rngs::StdRng::seed_from_u64(4);
        let start = same.gen_range(0..=window.len() - 1000);
        assert_eq!(field, window[start..start + 1000]);
        // An empty value takes nothing.
        fill_compressible(&mut [], 0.5, &window, &mut rng);
    }

    #[test]
    fn ratios_outside_zero_to_one_are_refused() {
        assert!(check_ratio(0.5).is_ok() && check_ratio(1.0).is_ok());
        for ratio in [0.0, -0.5, 1.5, f64::NAN] {
            assert!(check_ratio(ratio).is_err(), "{ratio}");
        }
    }
}
