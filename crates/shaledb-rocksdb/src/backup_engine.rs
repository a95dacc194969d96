//! RocksDB's backup engine over ShaleDB's consistent copy (`Db::backup`: every segment read
//! back and verified, the manifest written last). A backup directory holds one KVDB per
//! backup, in `shaledb-backup-<id>-<unix seconds>/`: the name carries the backup's number and
//! when it was taken, so no file of its own needs a format (RocksDB keeps a meta file per
//! backup). A backup is made in `.tmp-shaledb-backup-<id>/` and renamed into place, so one
//! that fails (or a crash) publishes nothing; an open of the engine removes such leftovers and
//! refuses a directory holding anything else, naming it. Verifying a backup runs ShaleDB's
//! check over it; restoring copies it (again with `Db::backup`) into the database directory,
//! replacing a database there only once the copy is complete.

use crate::args::{handle, handle_mut, into_handle, text};
use crate::db::{open_to_inspect, rocksdb_t};
use crate::options::rocksdb_options_t;
use crate::resources::rocksdb_env_t;
use crate::settings::{option_object, recorded_knobs, Settings};
use crate::status::{call, logged, quiet, Code, Result, Status};
use libc::c_char;
use std::path::{Path, PathBuf};

const PREFIX: &str = "shaledb-backup-";
const TEMPORARY: &str = ".tmp-shaledb-backup-";

/// One backup: its number, when it was taken (Unix seconds), and its directory.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Backup {
    id: u32,
    timestamp: i64,
    dir: PathBuf,
}

/// `rocksdb_backup_engine_t`: a backup directory.
pub struct rocksdb_backup_engine_t {
    dir: PathBuf,
}

/// `rocksdb_backup_engine_info_t`: the backups listed by `get_backup_info`, oldest first.
pub struct rocksdb_backup_engine_info_t {
    backups: Vec<(Backup, u64, u32)>,
}

/// `rocksdb_backup_engine_options_t`.
#[derive(Clone, Default)]
pub struct rocksdb_backup_engine_options_t {
    pub(crate) settings: Settings,
    backup_dir: String,
}

/// `rocksdb_restore_options_t`.
#[derive(Clone, Default)]
pub struct rocksdb_restore_options_t {
    pub(crate) settings: Settings,
}

option_object! {
    rocksdb_restore_options_t: rocksdb_restore_options_create, rocksdb_restore_options_destroy;
}

fn io_error(path: &Path, error: std::io::Error) -> Status {
    Status::new(Code::IoError, format!("{}: {error}", path.display()))
}

/// The number and timestamp in a backup directory's name.
fn parse_name(name: &str) -> Option<(u32, i64)> {
    let (id, timestamp) = name.strip_prefix(PREFIX)?.split_once('-')?;
    Some((id.parse().ok()?, timestamp.parse().ok()?))
}

impl rocksdb_backup_engine_t {
    /// Opens the backup directory `dir` (created if missing), removing backups left
    /// unfinished; with `destroy_old_data`, every backup too.
    fn open(dir: &str, destroy_old_data: bool) -> Result<Self> {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).map_err(|error| io_error(&dir, error))?;
        let engine = rocksdb_backup_engine_t { dir };
        for entry in engine.entries()? {
            let name = entry
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            if name.starts_with(TEMPORARY) {
                eprintln!(
                    "shaledb-rocksdb: removing an unfinished backup: {}",
                    entry.display()
                );
                std::fs::remove_dir_all(&entry).map_err(|error| io_error(&entry, error))?;
            }
        }
        if destroy_old_data {
            for backup in engine.backups()? {
                std::fs::remove_dir_all(&backup.dir)
                    .map_err(|error| io_error(&backup.dir, error))?;
            }
        }
        engine.backups()?;
        Ok(engine)
    }

    fn entries(&self) -> Result<Vec<PathBuf>> {
        let entries = std::fs::read_dir(&self.dir).map_err(|error| io_error(&self.dir, error))?;
        entries
            .map(|entry| {
                entry
                    .map(|entry| entry.path())
                    .map_err(|error| io_error(&self.dir, error))
            })
            .collect()
    }

    /// Every backup, oldest first; anything else in the directory is an error naming it.
    fn backups(&self) -> Result<Vec<Backup>> {
        let mut backups = Vec::new();
        for entry in self.entries()? {
            let name = entry
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            if name.starts_with(TEMPORARY) {
                continue;
            }
            match parse_name(&name) {
                Some((id, timestamp)) if entry.is_dir() => backups.push(Backup {
                    id,
                    timestamp,
                    dir: entry,
                }),
                _ => {
                    return Err(Status::new(
                        Code::Corruption,
                        format!(
                            "{}: not a backup (a backup directory holds only {PREFIX}<id>-<time>/)",
                            entry.display()
                        ),
                    ))
                }
            }
        }
        backups.sort_by_key(|backup| backup.id);
        Ok(backups)
    }

    fn backup(&self, id: u32) -> Result<Backup> {
        self.backups()?
            .into_iter()
            .find(|backup| backup.id == id)
            .ok_or_else(|| Status::new(Code::NotFound, format!("Backup not found: {id}")))
    }

    /// Copies `db` into a new backup, published by renaming once complete.
    fn create(&self, db: &rocksdb_t, flush: bool) -> Result<()> {
        if flush {
            db.engine().sync()?;
        }
        let id = self.backups()?.last().map_or(1, |last| last.id + 1);
        let temporary = self.dir.join(format!("{TEMPORARY}{id}"));
        let copied = db.engine().backup(&temporary);
        if let Err(error) = copied {
            let _ = std::fs::remove_dir_all(&temporary);
            return Err(error.into());
        }
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs() as i64);
        let published = self.dir.join(format!("{PREFIX}{id}-{timestamp}"));
        std::fs::rename(&temporary, &published).map_err(|error| io_error(&published, error))?;
        sync_dir(&self.dir)
    }

    fn purge(&self, keep: u32) -> Result<()> {
        let backups = self.backups()?;
        let remove = backups.len().saturating_sub(keep as usize);
        for backup in &backups[..remove] {
            std::fs::remove_dir_all(&backup.dir).map_err(|error| io_error(&backup.dir, error))?;
        }
        sync_dir(&self.dir)
    }

    /// Runs ShaleDB's check over a backup: any damage is a "Corruption" naming it.
    fn verify(&self, id: u32) -> Result<()> {
        let backup = self.backup(id)?;
        let copy = open_to_inspect(&backup.dir)?;
        let report = copy.check()?;
        copy.close()?;
        if !report.is_ok() {
            let problems: Vec<&String> = report
                .corruptions
                .iter()
                .chain(&report.file_errors)
                .chain(&report.index_errors)
                .chain(&report.live_bytes_mismatches)
                .collect();
            return Err(Status::new(
                Code::Corruption,
                format!("backup {id} ({}): {problems:?}", backup.dir.display()),
            ));
        }
        Ok(())
    }

    /// Restores backup `id` (the latest when `None`) into `db_dir`: copied beside it, then put
    /// in place of the database there (which must not be open).
    fn restore(&self, id: Option<u32>, db_dir: &Path) -> Result<()> {
        let backup = match id {
            Some(id) => self.backup(id)?,
            None => self
                .backups()?
                .pop()
                .ok_or_else(|| Status::new(Code::NotFound, "no backup to restore"))?,
        };
        let name = db_dir
            .file_name()
            .ok_or_else(|| Status::invalid("database directory has no name"))?;
        let sibling =
            |what: &str| db_dir.with_file_name(format!(".{}.{what}", name.to_string_lossy()));
        let (incoming, outgoing) = (sibling("restoring"), sibling("replaced"));
        for leftover in [&incoming, &outgoing] {
            if leftover.exists() {
                std::fs::remove_dir_all(leftover).map_err(|error| io_error(leftover, error))?;
            }
        }
        let source = open_to_inspect(&backup.dir)?;
        let copied = source.backup(&incoming);
        source.close()?;
        copied?;
        if db_dir.exists() {
            // Refuses a database that is open (locked) before touching it.
            match open_to_inspect(db_dir) {
                Ok(existing) => existing.close()?,
                Err(error) if error.kind() == engine::ErrorKind::NotFound => {}
                Err(error) => return Err(crate::db::open_failed(&db_dir.to_string_lossy(), error)),
            }
            std::fs::rename(db_dir, &outgoing).map_err(|error| io_error(db_dir, error))?;
        }
        std::fs::rename(&incoming, db_dir).map_err(|error| io_error(db_dir, error))?;
        if outgoing.exists() {
            std::fs::remove_dir_all(&outgoing).map_err(|error| io_error(&outgoing, error))?;
        }
        Ok(())
    }
}

/// Makes renames and removals in `dir` durable.
fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|error| io_error(dir, error))
}

/// Bytes and files under `dir`.
fn footprint(dir: &Path) -> (u64, u32) {
    let mut total = (0, 0);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            let (bytes, files) = footprint(&path);
            total = (total.0 + bytes, total.1 + files);
        } else if let Ok(meta) = entry.metadata() {
            total = (total.0 + meta.len(), total.1 + 1);
        }
    }
    total
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_open(
    _options: *const rocksdb_options_t,
    path: *const c_char,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_backup_engine_t {
    call(errptr, std::ptr::null_mut(), || {
        Ok(into_handle(rocksdb_backup_engine_t::open(
            text(path, "backup directory")?,
            false,
        )?))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_open_opts(
    options: *const rocksdb_backup_engine_options_t,
    _env: *mut rocksdb_env_t,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_backup_engine_t {
    call(errptr, std::ptr::null_mut(), || {
        let options = handle(options, "backup engine options")?;
        let destroy = options.settings.flag(
            BACKUP_ENGINE_KNOBS,
            "rocksdb_backup_engine_options_set_destroy_old_data",
        );
        Ok(into_handle(rocksdb_backup_engine_t::open(
            &options.backup_dir,
            destroy,
        )?))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_create_new_backup(
    be: *mut rocksdb_backup_engine_t,
    db: *mut rocksdb_t,
    errptr: *mut *mut c_char,
) {
    rocksdb_backup_engine_create_new_backup_flush(be, db, 0, errptr)
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_create_new_backup_flush(
    be: *mut rocksdb_backup_engine_t,
    db: *mut rocksdb_t,
    flush_before_backup: libc::c_uchar,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        handle(be, "backup engine")?.create(handle(db, "db")?, flush_before_backup != 0)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_purge_old_backups(
    be: *mut rocksdb_backup_engine_t,
    num_backups_to_keep: u32,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        handle(be, "backup engine")?.purge(num_backups_to_keep)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_verify_backup(
    be: *mut rocksdb_backup_engine_t,
    backup_id: u32,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        handle(be, "backup engine")?.verify(backup_id)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_restore_db_from_latest_backup(
    be: *mut rocksdb_backup_engine_t,
    db_dir: *const c_char,
    _wal_dir: *const c_char,
    _restore_options: *const rocksdb_restore_options_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        handle(be, "backup engine")?.restore(None, Path::new(text(db_dir, "database directory")?))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_restore_db_from_backup(
    be: *mut rocksdb_backup_engine_t,
    db_dir: *const c_char,
    _wal_dir: *const c_char,
    _restore_options: *const rocksdb_restore_options_t,
    backup_id: u32,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        handle(be, "backup engine")?.restore(
            Some(backup_id),
            Path::new(text(db_dir, "database directory")?),
        )
    })
}

/// The backups, oldest first; NULL if the directory cannot be read (c.h has no error here).
#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_get_backup_info(
    be: *mut rocksdb_backup_engine_t,
) -> *const rocksdb_backup_engine_info_t {
    logged("get_backup_info", std::ptr::null(), || {
        let backups = handle(be, "backup engine")?.backups()?;
        let backups = backups
            .into_iter()
            .map(|backup| {
                let (bytes, files) = footprint(&backup.dir);
                (backup, bytes, files)
            })
            .collect();
        Ok(into_handle(rocksdb_backup_engine_info_t { backups }).cast_const())
    })
}

fn info_at<T>(
    info: *const rocksdb_backup_engine_info_t,
    index: libc::c_int,
    none: T,
    field: impl FnOnce(&(Backup, u64, u32)) -> T,
) -> T {
    quiet(None, || {
        let info = handle(info, "backup info").ok()?;
        info.backups.get(usize::try_from(index).ok()?).map(field)
    })
    .unwrap_or(none)
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_info_count(
    info: *const rocksdb_backup_engine_info_t,
) -> libc::c_int {
    quiet(0, || {
        handle(info, "backup info").map_or(0, |info| info.backups.len() as libc::c_int)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_info_timestamp(
    info: *const rocksdb_backup_engine_info_t,
    index: libc::c_int,
) -> i64 {
    info_at(info, index, 0, |(backup, _, _)| backup.timestamp)
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_info_backup_id(
    info: *const rocksdb_backup_engine_info_t,
    index: libc::c_int,
) -> u32 {
    info_at(info, index, 0, |(backup, _, _)| backup.id)
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_info_size(
    info: *const rocksdb_backup_engine_info_t,
    index: libc::c_int,
) -> u64 {
    info_at(info, index, 0, |(_, bytes, _)| *bytes)
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_info_number_files(
    info: *const rocksdb_backup_engine_info_t,
    index: libc::c_int,
) -> u32 {
    info_at(info, index, 0, |(_, _, files)| *files)
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_info_destroy(info: *const rocksdb_backup_engine_info_t) {
    quiet((), || crate::args::drop_handle(info.cast_mut()))
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_close(be: *mut rocksdb_backup_engine_t) {
    quiet((), || crate::args::drop_handle(be))
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_options_create(
    backup_dir: *const c_char,
) -> *mut rocksdb_backup_engine_options_t {
    into_handle(rocksdb_backup_engine_options_t {
        backup_dir: text(backup_dir, "backup directory")
            .unwrap_or_default()
            .to_string(),
        ..Default::default()
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_options_destroy(
    options: *mut rocksdb_backup_engine_options_t,
) {
    quiet((), || crate::args::drop_handle(options))
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_options_set_backup_dir(
    options: *mut rocksdb_backup_engine_options_t,
    backup_dir: *const c_char,
) {
    quiet((), || {
        if let (Ok(options), Ok(dir)) = (
            handle_mut(options, "backup engine options"),
            text(backup_dir, "backup directory"),
        ) {
            options.backup_dir = dir.to_string();
        }
    })
}

/// The Env of the backup directory: ShaleDB does its own I/O there.
#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_options_set_env(
    _options: *mut rocksdb_backup_engine_options_t,
    _env: *mut rocksdb_env_t,
) {
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_names_carry_their_number_and_time() {
        assert_eq!(
            parse_name("shaledb-backup-12-1700000000"),
            Some((12, 1_700_000_000))
        );
        assert_eq!(parse_name("shaledb-backup-x-1"), None);
        assert_eq!(parse_name("meta"), None);
    }

    /// The largest file under `dir`.
    fn largest_file(dir: &Path) -> PathBuf {
        let mut best: Option<(u64, PathBuf)> = None;
        let mut stack = vec![dir.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let len = entry.metadata().unwrap().len();
                    if best.as_ref().is_none_or(|(most, _)| len > *most) {
                        best = Some((len, path));
                    }
                }
            }
        }
        best.unwrap().1
    }

    #[test]
    fn a_damaged_backup_fails_verification_and_an_intact_one_restores() {
        use crate::db::{rocksdb_close, rocksdb_get, rocksdb_open, rocksdb_put};
        use std::ffi::CString;
        let dir = tempfile::tempdir().unwrap();
        let path = CString::new(dir.path().join("db").to_str().unwrap()).unwrap();
        let options = crate::options::rocksdb_options_create();
        crate::options::rocksdb_options_set_create_if_missing(options, 1);
        let write = crate::read_write_options::rocksdb_writeoptions_create();
        let mut err = std::ptr::null_mut();
        let db = rocksdb_open(options, path.as_ptr(), &mut err);
        assert!(err.is_null());
        let value = vec![b'v'; 1000];
        for i in 0..200 {
            let key = format!("key{i:04}");
            rocksdb_put(
                db,
                write,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            );
            assert!(err.is_null());
        }
        let backups =
            rocksdb_backup_engine_t::open(dir.path().join("backups").to_str().unwrap(), false)
                .unwrap();
        backups.create(handle(db, "db").unwrap(), true).unwrap();
        backups.create(handle(db, "db").unwrap(), false).unwrap();
        rocksdb_close(db);
        let listed = backups.backups().unwrap();
        assert_eq!(listed.iter().map(|b| b.id).collect::<Vec<_>>(), [1, 2]);
        backups.verify(1).unwrap();
        backups.purge(1).unwrap();
        assert_eq!(backups.backups().unwrap().len(), 1);
        // Restore the latest over the database, then read it back.
        backups.restore(None, &dir.path().join("db")).unwrap();
        let db = rocksdb_open(options, path.as_ptr(), &mut err);
        assert!(err.is_null());
        let read = crate::read_write_options::rocksdb_readoptions_create();
        let mut len = 0;
        let got = rocksdb_get(db, read, b"key0007".as_ptr().cast(), 7, &mut len, &mut err);
        assert!(err.is_null() && len == 1000);
        crate::db::rocksdb_free(got.cast());
        rocksdb_close(db);
        // Damage the backup's largest file: verification names the backup.
        let victim = largest_file(&backups.backup(2).unwrap().dir);
        let mut bytes = std::fs::read(&victim).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle..middle + 64].fill(0x5a);
        std::fs::write(&victim, bytes).unwrap();
        let error = backups.verify(2).unwrap_err();
        assert!(
            matches!(error.code, Code::Corruption | Code::IoError),
            "{error}"
        );
        assert!(
            error.to_string().contains("shaledb-backup-2")
                || error.to_string().contains(&victim.display().to_string()),
            "{error}"
        );
        crate::read_write_options::rocksdb_readoptions_destroy(read);
        crate::read_write_options::rocksdb_writeoptions_destroy(write);
        crate::options::rocksdb_options_destroy(options);
    }

    #[test]
    fn an_unexpected_entry_in_the_backup_directory_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".tmp-shaledb-backup-3")).unwrap();
        let engine = rocksdb_backup_engine_t::open(dir.path().to_str().unwrap(), false).unwrap();
        // An unfinished backup was removed at open.
        assert!(!dir.path().join(".tmp-shaledb-backup-3").exists());
        assert!(engine.backups().unwrap().is_empty());
        std::fs::write(dir.path().join("stray"), b"x").unwrap();
        let error = engine.backups().unwrap_err();
        assert_eq!(error.code, Code::Corruption);
        assert!(error.message.contains("stray"));
        assert!(rocksdb_backup_engine_t::open(dir.path().to_str().unwrap(), false).is_err());
    }
}

recorded_knobs!(rocksdb_backup_engine_options_t, BACKUP_ENGINE_KNOBS, "rocksdb_backup_engine_options_set_" {
        rocksdb_backup_engine_options_set_share_table_files(libc::c_uchar) => rocksdb_backup_engine_options_get_share_table_files(libc::c_uchar) = 1, -;
        rocksdb_backup_engine_options_set_sync(libc::c_uchar) => rocksdb_backup_engine_options_get_sync(libc::c_uchar) = 1, -;
        rocksdb_backup_engine_options_set_destroy_old_data(libc::c_uchar) => rocksdb_backup_engine_options_get_destroy_old_data(libc::c_uchar) = 0, -;
        rocksdb_backup_engine_options_set_backup_log_files(libc::c_uchar) => rocksdb_backup_engine_options_get_backup_log_files(libc::c_uchar) = 1, -;
        rocksdb_backup_engine_options_set_backup_rate_limit(u64) => rocksdb_backup_engine_options_get_backup_rate_limit(u64) = 0, -;
        rocksdb_backup_engine_options_set_restore_rate_limit(u64) => rocksdb_backup_engine_options_get_restore_rate_limit(u64) = 0, -;
        rocksdb_backup_engine_options_set_max_background_operations(libc::c_int) => rocksdb_backup_engine_options_get_max_background_operations(libc::c_int) = 1, -;
        rocksdb_backup_engine_options_set_callback_trigger_interval_size(u64) => rocksdb_backup_engine_options_get_callback_trigger_interval_size(u64) = 4 << 20, -;
        rocksdb_backup_engine_options_set_max_valid_backups_to_open(libc::c_int) => rocksdb_backup_engine_options_get_max_valid_backups_to_open(libc::c_int) = i32::MAX as i64, -;
        rocksdb_backup_engine_options_set_share_files_with_checksum_naming(libc::c_int) => rocksdb_backup_engine_options_get_share_files_with_checksum_naming(libc::c_int) = 3, -;
});
recorded_knobs!(rocksdb_restore_options_t, RESTORE_KNOBS, "rocksdb_restore_options_set_" {
        rocksdb_restore_options_set_keep_log_files(libc::c_int) = 0, -;
});
