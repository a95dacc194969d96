//! Where a KVDB's media directories are, as its manifest stores them.

use crate::media::MediaClass;
use std::path::{Path, PathBuf};

/// The media directories of a KVDB, as stored: relative to the home when inside it (so the home
/// opens the same by any path, and a copy of it uses its own), otherwise absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaDirs {
    pub capacity_dir: PathBuf,
    pub staging_dir: Option<PathBuf>,
    pub staging_bytes_max: u64,
}

impl MediaDirs {
    /// The capacity directory, made absolute against `home`.
    pub fn capacity(&self, home: &Path) -> PathBuf {
        home.join(&self.capacity_dir)
    }

    /// The staging directory, if any, made absolute against `home`.
    pub fn staging(&self, home: &Path) -> Option<PathBuf> {
        self.staging_dir.as_ref().map(|dir| home.join(dir))
    }

    /// Every media directory with its class, made absolute against `home`.
    pub fn classes(&self, home: &Path) -> Vec<(MediaClass, PathBuf)> {
        let mut dirs = vec![(MediaClass::Capacity, self.capacity(home))];
        dirs.extend(self.staging(home).map(|dir| (MediaClass::Staging, dir)));
        dirs
    }

    /// Where index checkpoints live: the fastest class present, made absolute against `home`.
    pub fn checkpoint_dir(&self, home: &Path) -> PathBuf {
        self.staging(home).unwrap_or_else(|| self.capacity(home))
    }
}
