//! Helpers shared by the CLI's integration tests.

use std::path::{Path, PathBuf};

/// Damages a stored record as a failing disk would: in the capacity segment of the KVDB at `db`
/// that holds `needle`, XORs `mask` into the byte `offset` past the needle's last occurrence (the
/// newest copy). Returns the segment's path, which the error must name.
pub fn damage_record(db: &Path, needle: &[u8], offset: usize, mask: u8) -> PathBuf {
    let holds_needle = |bytes: &[u8]| bytes.windows(needle.len()).rposition(|w| w == needle);
    let (segment, mut bytes, at) = std::fs::read_dir(db.join("capacity"))
        .unwrap()
        .map(|item| item.unwrap().path())
        .find_map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            let at = holds_needle(&bytes)?;
            Some((path, bytes, at))
        })
        .expect("a capacity segment holds the needle");
    bytes[at + offset] ^= mask;
    std::fs::write(&segment, bytes).unwrap();
    segment
}
