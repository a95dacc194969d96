//! Value compression: the [`Compression`] a KVS is created with, and the lz4 form of a stored
//! value (an lz4 block with the value's length before it, as a little-endian u32), whose
//! decoding is bounded: it never allocates more than `VALUE_BYTES_MAX` and refuses damage with
//! a reason, never a panic.

use crate::error::Error;
use crate::limits::VALUE_BYTES_MAX;

/// How a KVS stores its values. Fixed when the KVS is created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// Values are stored as given (the default).
    #[default]
    None,
    /// Each value is stored as an lz4 block when that is smaller than the value, else as given,
    /// so incompressible values cost nothing on media.
    Lz4,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
        }
    }

    /// The compressed form of `value` to store in its place, if this compression makes it
    /// smaller; `None` means the value is stored as given.
    pub fn compress(self, value: &[u8]) -> Option<Vec<u8>> {
        match self {
            Compression::None => None,
            Compression::Lz4 => {
                let stored = lz4_flex::block::compress_prepend_size(value);
                (stored.len() < value.len()).then_some(stored)
            }
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

impl std::str::FromStr for Compression {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self, Error> {
        match text {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            other => Err(Error::InvalidArgument(format!(
                "compression {other:?}: expected none or lz4"
            ))),
        }
    }
}

/// The value stored as `stored` by [`Compression::Lz4`]; an error says why it cannot be.
pub fn decompress_lz4(stored: &[u8]) -> Result<Vec<u8>, String> {
    let Some((length, block)) = stored.split_first_chunk::<4>() else {
        return Err(format!(
            "an lz4 value of {} bytes is shorter than its length field",
            stored.len()
        ));
    };
    let length = u32::from_le_bytes(*length) as usize;
    if length > VALUE_BYTES_MAX {
        return Err(format!(
            "an lz4 value says it holds {length} bytes, past the value limit {VALUE_BYTES_MAX}"
        ));
    }
    let mut value = vec![0; length];
    match lz4_flex::block::decompress_into(block, &mut value) {
        Ok(written) if written == length => Ok(value),
        Ok(written) => Err(format!(
            "an lz4 value holds {written} bytes, not the {length} it says"
        )),
        Err(error) => Err(format!("an lz4 value does not decompress: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_a_smaller_form_is_stored() {
        let repetitive = b"abcd".repeat(100);
        let stored = Compression::Lz4
            .compress(&repetitive)
            .expect("compressible");
        assert!(stored.len() < repetitive.len() / 4, "{}", stored.len());
        assert_eq!(decompress_lz4(&stored).unwrap(), repetitive);
        assert_eq!(Compression::None.compress(&repetitive), None);
        // Nothing to gain: stored as given.
        assert_eq!(Compression::Lz4.compress(b""), None);
        assert_eq!(Compression::Lz4.compress(b"short"), None);
        let mut random = vec![0; 4096];
        rand::Rng::fill(
            &mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1),
            &mut random[..],
        );
        assert_eq!(Compression::Lz4.compress(&random), None);
    }

    #[test]
    fn damage_is_refused_with_a_reason() {
        let stored = Compression::Lz4.compress(&[9; 1000]).unwrap();
        let reason = |bytes: &[u8]| decompress_lz4(bytes).unwrap_err();
        assert!(reason(&stored[..3]).contains("shorter than its length field"));
        let mut too_large = stored.clone();
        too_large[..4].copy_from_slice(&(VALUE_BYTES_MAX as u32 + 1).to_le_bytes());
        assert!(reason(&too_large).contains("past the value limit"));
        let mut too_long = stored.clone();
        too_long[..4].copy_from_slice(&1001u32.to_le_bytes());
        assert!(reason(&too_long).contains("holds 1000 bytes, not the 1001"));
        let mut too_short = stored.clone();
        too_short[..4].copy_from_slice(&999u32.to_le_bytes());
        assert!(reason(&too_short).contains("does not decompress"));
        assert!(reason(&stored[..stored.len() - 1]).contains("does not decompress"));
    }

    #[test]
    fn names_parse_back() {
        for compression in [Compression::None, Compression::Lz4] {
            assert_eq!(
                compression.name().parse::<Compression>().unwrap(),
                compression
            );
        }
        let error = "zstd".parse::<Compression>().unwrap_err();
        assert!(error.to_string().contains("none or lz4"), "{error}");
    }

    proptest! {
        #[test]
        fn values_round_trip(value in proptest::collection::vec(0..4u8, 0..3000)) {
            match Compression::Lz4.compress(&value) {
                Some(stored) => {
                    prop_assert!(stored.len() < value.len());
                    prop_assert_eq!(decompress_lz4(&stored).unwrap(), value);
                }
                None => prop_assert!(value.len() < 1000, "{} bytes of 4 symbols", value.len()),
            }
        }

        #[test]
        fn any_bytes_decompress_or_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(value) = decompress_lz4(&bytes) {
                prop_assert_eq!(value.len() as u32, u32::from_le_bytes(bytes[..4].try_into().unwrap()));
            }
        }
    }
}
