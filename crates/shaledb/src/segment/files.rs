//! Segment files in a media directory: their names, and listing them.

use super::id::SegmentId;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

pub fn segment_file_name(id: SegmentId) -> String {
    format!("seg-{:010}.log", id.0)
}

/// Parses a name made by [`segment_file_name`].
pub fn parse_segment_file_name(name: &str) -> Option<SegmentId> {
    let digits = name.strip_prefix("seg-")?.strip_suffix(".log")?;
    digits.parse().ok().map(SegmentId)
}

/// Every segment file in `dir` (by its name; other files are not listed), in id order.
pub fn list_segment_files(dir: &Path) -> Result<Vec<(SegmentId, PathBuf)>> {
    let list = |error| Error::io(format!("list {}", dir.display()), error);
    let mut files = Vec::new();
    for item in std::fs::read_dir(dir).map_err(list)? {
        let item = item.map_err(list)?;
        if let Some(id) = item.file_name().to_str().and_then(parse_segment_file_name) {
            files.push((id, item.path()));
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip() {
        assert_eq!(
            parse_segment_file_name(&segment_file_name(SegmentId(42))),
            Some(SegmentId(42))
        );
        assert_eq!(parse_segment_file_name("seg-x.log"), None);
    }
}
