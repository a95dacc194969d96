//! Reading a KVDB written before the manifest existed: its `catalog.json` (KVS names, ids and
//! options, and its media directories), so `Home::open` can upgrade it. Nothing writes this
//! format any more.

use crate::error::{Error, Result};
use crate::options::KvsOptions;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const FILE_NAME: &str = "catalog.json";
/// What the catalog is renamed to once the manifest holds what it said.
const RETIRED_NAME: &str = "catalog.json.before-manifest";
const FORMAT_VERSION: u32 = 1;

#[derive(serde::Deserialize)]
struct Entry {
    id: u32,
    options: KvsOptions,
}

#[derive(serde::Deserialize)]
struct Media {
    capacity_dir: PathBuf,
    staging_dir: Option<PathBuf>,
    staging_bytes_max: u64,
}

#[derive(serde::Deserialize)]
struct Catalog {
    format_version: u32,
    next_kvs_id: u32,
    kvs: BTreeMap<String, Entry>,
    /// Absent in catalogs written before media classes existed: capacity inside the home.
    #[serde(default)]
    media: Option<Media>,
}

/// What an old catalog says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyCatalog {
    pub next_kvs_id: u32,
    /// (id, name, options) of every KVS.
    pub kvs: Vec<(u32, String, KvsOptions)>,
    /// As the old catalog stored them (absolute, or relative to the working directory then).
    pub capacity_dir: Option<PathBuf>,
    pub staging_dir: Option<PathBuf>,
    pub staging_bytes_max: Option<u64>,
}

impl LegacyCatalog {
    pub fn path(home: &Path) -> PathBuf {
        home.join(FILE_NAME)
    }

    pub fn exists(home: &Path) -> bool {
        Self::path(home).is_file()
    }

    pub fn load(home: &Path) -> Result<LegacyCatalog> {
        let path = Self::path(home);
        let text = std::fs::read(&path)
            .map_err(|error| Error::io(format!("read {}", path.display()), error))?;
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
        let media = catalog.media;
        Ok(LegacyCatalog {
            next_kvs_id: catalog.next_kvs_id,
            kvs: catalog
                .kvs
                .into_iter()
                .map(|(name, entry)| (entry.id, name, entry.options))
                .collect(),
            capacity_dir: media.as_ref().map(|media| media.capacity_dir.clone()),
            staging_dir: media.as_ref().and_then(|media| media.staging_dir.clone()),
            staging_bytes_max: media.map(|media| media.staging_bytes_max),
        })
    }

    /// Renames the catalog out of the way once the manifest replaced it (kept, not deleted).
    pub fn retire(home: &Path) -> Result<()> {
        let (from, to) = (Self::path(home), home.join(RETIRED_NAME));
        std::fs::rename(&from, &to)
            .map_err(|error| Error::io(format!("rename {}", from.display()), error))?;
        crate::media::sync_dir(home)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::options::MediaPolicy;

    #[test]
    fn reads_what_the_old_engine_wrote_and_rejects_garbage() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!LegacyCatalog::exists(dir.path()));
        let text = r#"{
  "format_version": 1,
  "next_kvs_id": 3,
  "kvs": {
    "users": { "id": 2, "options": { "prefix_len": 4, "media_policy": "staging_only" } }
  },
  "media": { "capacity_dir": "/data/cap", "staging_dir": null, "staging_bytes_max": 4096 }
}"#;
        std::fs::write(LegacyCatalog::path(dir.path()), text).unwrap();
        let catalog = LegacyCatalog::load(dir.path()).unwrap();
        assert_eq!(
            catalog,
            LegacyCatalog {
                next_kvs_id: 3,
                kvs: vec![(
                    2,
                    "users".into(),
                    KvsOptions {
                        prefix_len: 4,
                        media_policy: MediaPolicy::StagingOnly,
                        ..KvsOptions::default()
                    }
                )],
                capacity_dir: Some("/data/cap".into()),
                staging_dir: None,
                staging_bytes_max: Some(4096),
            }
        );
        std::fs::write(LegacyCatalog::path(dir.path()), b"{not json").unwrap();
        assert_eq!(
            LegacyCatalog::load(dir.path()).unwrap_err().kind(),
            ErrorKind::Corruption
        );
    }
}
