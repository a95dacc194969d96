//! What every open checks of the media directories: that they are the ones the KVDB was
//! created with, each carrying this KVDB's identity for its class.

use super::dirs::{canonical, first_entry_but, LOCK_FILE_NAME};
use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::manifest::{Manifest, MediaDirs};
use crate::media::MediaClass;
use crate::options::Options;
use crate::poison::Poison;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The media directories the caller asked for must be the ones the KVDB was created with.
pub fn check_requested_dirs(home: &Path, options: &Options, media: &MediaDirs) -> Result<()> {
    let same = |asked: &Path, stored: &Path| match (asked.canonicalize(), stored.canonicalize()) {
        (Ok(asked), Ok(stored)) => asked == stored,
        _ => asked == stored,
    };
    let conflict = |what: &str, was: Option<PathBuf>, asked: Option<&PathBuf>| {
        Error::InvalidArgument(format!(
            "KVDB {} was created with {what} {:?}, not {:?}; media classes are fixed at creation",
            home.display(),
            was,
            asked
        ))
    };
    if let Some(asked) = &options.capacity_dir {
        if !same(asked, &media.capacity(home)) {
            return Err(conflict(
                "capacity directory",
                Some(media.capacity(home)),
                Some(asked),
            ));
        }
    }
    if let Some(asked) = &options.staging_dir {
        match media.staging(home) {
            Some(stored) if same(asked, &stored) => {}
            stored => return Err(conflict("staging directory", stored, Some(asked))),
        }
    }
    Ok(())
}

/// The media directories with the staging budget `options` give, when a staging directory was
/// given and its budget differs from the stored one (the budget may change between opens).
pub fn changed_staging_budget(options: &Options, media: &MediaDirs) -> Option<MediaDirs> {
    (options.staging_dir.is_some() && options.staging_bytes_max != media.staging_bytes_max).then(
        || MediaDirs {
            staging_bytes_max: options.staging_bytes_max,
            ..media.clone()
        },
    )
}

/// Checks that `dir` is the `class` directory of KVDB `kvdb_id` in `home`. A directory outside
/// the home that names another home as owner is refused when that home still holds this KVDB
/// (this home is a copy sharing the original's directory), and is to be adopted otherwise (the
/// home was moved): returns its identity then.
pub fn check_identity(
    home: &Path,
    dir: &Path,
    class: MediaClass,
    kvdb_id: u64,
) -> Result<Option<Identity>> {
    let Some(identity) = Identity::load(dir)? else {
        let why = match first_entry_but(dir, &[LOCK_FILE_NAME])? {
            None => "it is empty: is the right device mounted there?".to_string(),
            Some(entry) => format!("it has no identity file (it holds {entry})"),
        };
        return Err(Error::corruption(
            dir.join(crate::identity::FILE_NAME),
            0,
            format!(
                "the {} directory of KVDB {} is not this KVDB's: {why}",
                class.name(),
                home.display()
            ),
        ));
    };
    let mismatch = |why: String| {
        Error::corruption(
            dir.join(crate::identity::FILE_NAME),
            0,
            format!(
                "the {} directory of KVDB {}: {why}",
                class.name(),
                home.display()
            ),
        )
    };
    if identity.kvdb_id != kvdb_id {
        return Err(mismatch(format!(
            "it belongs to another KVDB ({:016x}, not {kvdb_id:016x})",
            identity.kvdb_id
        )));
    }
    if identity.class != class {
        return Err(mismatch(format!(
            "it is a {} directory",
            identity.class.name()
        )));
    }
    let Some(owner) = &identity.owner_home else {
        return Ok(None);
    };
    let canonical_home = canonical(home)?;
    if *owner == canonical_home {
        return Ok(None);
    }
    let owner_still_holds_it = matches!(
        Manifest::open(owner, true, Arc::new(Poison::default())),
        Ok(Some((other, _))) if other.state().kvdb_id == kvdb_id
    );
    if owner_still_holds_it {
        return Err(Error::InvalidArgument(format!(
            "the {} directory {} belongs to the KVDB at {}, and {} is a copy of it that would \
             share it; copy a KVDB with `shale backup DEST` (or copy its media directories too \
             and create the copy's with new paths)",
            class.name(),
            dir.display(),
            owner.display(),
            home.display()
        )));
    }
    Ok(Some(identity))
}
