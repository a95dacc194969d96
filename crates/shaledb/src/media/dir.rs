//! Durable directory operations: an `fsync` of the directory after a file is created,
//! renamed or deleted in it, the atomic replacement of a small file, and a durable delete.

use crate::error::{Error, Result};
use std::fs::File;
use std::path::Path;

/// `fsync` on a directory, so that creating, renaming or deleting a file in it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(|error| Error::io(format!("fsync directory {}", dir.display()), error))
}

/// The file [`replace_file_durably`] writes before it renames it to `name`: a crash can leave
/// it behind, never renamed.
pub fn temporary_name(name: &str) -> String {
    format!("{name}.tmp")
}

/// Replaces `dir/name` with `bytes` atomically and durably: writes `dir/name.tmp`, fsyncs it,
/// renames it over `dir/name`, and fsyncs `dir`.
pub fn replace_file_durably(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let temporary = dir.join(temporary_name(name));
    let mut file = std::fs::File::create(&temporary)
        .map_err(|error| Error::io(format!("create {}", temporary.display()), error))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|error| Error::io(format!("write {}", temporary.display()), error))?;
    std::fs::rename(&temporary, dir.join(name))
        .map_err(|error| Error::io(format!("rename {}", temporary.display()), error))?;
    sync_dir(dir)
}

/// Deletes `path` durably (its directory is fsynced); a file already gone is fine.
pub fn remove_file_durably(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(Error::io(format!("remove {}", path.display()), error)),
    }
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Renames `path` aside, to `NAME.damaged` (or `NAME.damaged.N` if that exists), durably: a
/// damaged or unexpected file is kept for inspection, never deleted. Returns the new path.
pub fn set_file_aside(path: &Path) -> Result<std::path::PathBuf> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let dir = path.parent().unwrap_or(Path::new("."));
    let aside = (0..)
        .map(|attempt| match attempt {
            0 => dir.join(format!("{name}.damaged")),
            attempt => dir.join(format!("{name}.damaged.{attempt}")),
        })
        .find(|candidate| !candidate.exists())
        .expect("some name is free");
    std::fs::rename(path, &aside)
        .map_err(|error| Error::io(format!("rename {} aside", path.display()), error))?;
    sync_dir(dir)?;
    Ok(aside)
}
