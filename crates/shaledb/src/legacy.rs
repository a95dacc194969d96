//! The catalog: which KVSs a KVDB holds, their ids and options. A small JSON file in the home
//! directory, replaced atomically (write a temporary file, fsync, rename, fsync the directory).

use crate::error::{Error, Result};
use crate::media::replace_file_durably;
use crate::options::KvsOptions;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const FILE_NAME: &str = "catalog.json";
const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CatalogEntry {
    pub id: u32,
    pub options: KvsOptions,
}

/// The media classes of a KVDB, fixed when it is created.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MediaDirs {
    pub capacity_dir: PathBuf,
    pub staging_dir: Option<PathBuf>,
    pub staging_bytes_max: u64,
}

impl MediaDirs {
    /// Where index checkpoints live: the fastest class present.
    pub fn checkpoint_dir(&self) -> &Path {
        self.staging_dir.as_deref().unwrap_or(&self.capacity_dir)
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Catalog {
    pub format_version: u32,
    /// Ids are never reused, so records of a dropped KVS can never be mistaken for a new one's.
    pub next_kvs_id: u32,
    pub kvs: BTreeMap<String, CatalogEntry>,
    /// Absent in catalogs written before media classes existed: capacity inside the home.
    #[serde(default)]
    pub media: Option<MediaDirs>,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            format_version: FORMAT_VERSION,
            next_kvs_id: 1,
            kvs: BTreeMap::new(),
            media: None,
        }
    }
}

impl Catalog {
    /// Loads the catalog, or `None` if the KVDB is new.
    pub fn load(home: &Path) -> Result<Option<Self>> {
        let path = home.join(FILE_NAME);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(Error::io(format!("read {}", path.display()), error)),
        };
        let catalog: Catalog = serde_json::from_slice(&text).map_err(|error| {
            Error::corruption(&path, 0, format!("catalog is not valid: {error}"))
        })?;
        if catalog.format_version != FORMAT_VERSION {
            return Err(Error::corruption(
                &path,
                0,
                format!(
                    "unsupported catalog format version {}",
                    catalog.format_version
                ),
            ));
        }
        Ok(Some(catalog))
    }

    pub fn store(&self, home: &Path) -> Result<()> {
        let text = serde_json::to_vec_pretty(self).expect("the catalog always serializes");
        replace_file_durably(home, FILE_NAME, &text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Catalog::load(dir.path()).unwrap(), None);
        let mut catalog = Catalog::default();
        catalog.kvs.insert(
            "users".into(),
            CatalogEntry {
                id: 1,
                options: KvsOptions {
                    prefix_len: 4,
                    ..KvsOptions::default()
                },
            },
        );
        catalog.next_kvs_id = 2;
        catalog.store(dir.path()).unwrap();
        assert_eq!(Catalog::load(dir.path()).unwrap(), Some(catalog));
        std::fs::write(dir.path().join(FILE_NAME), b"{not json").unwrap();
        assert_eq!(
            Catalog::load(dir.path()).unwrap_err().kind(),
            crate::error::ErrorKind::Corruption
        );
    }
}
