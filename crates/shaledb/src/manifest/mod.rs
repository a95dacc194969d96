//! The manifest: a KVDB's checksummed record of what it should contain (identity, media
//! directories, KVSs, live segments and their seals), kept in `HOME/MANIFEST` as an append-only
//! log of edits, like RocksDB's MANIFEST.
//!
//! ```text
//! "SHALEMF1"  u32 format version (2; 1 was a development format whose seals hashed every
//!             record byte)
//! then records: u32 payload_len, u32 crc, payload = one edit (see `edit.rs`); the crc32c covers
//! the record's own file offset (u64), its length and its payload, so a record is valid only
//! where it was written
//! ```
//!
//! Every edit is appended and `fdatasync`ed before what it describes is relied on: a segment
//! is created (file, header, fsync) and then recorded, and recorded before anything is appended
//! to it; a seal is recorded after the segment's last byte is durable; a segment is recorded
//! freed before its file is deleted. So a crash can leave at most a file the manifest does not
//! know yet (a header-only segment) or a manifest edit whose file action did not happen (a freed
//! segment's file still there), and recovery tells those from damage. Only the last append may
//! be torn (a crash inside it, so it was never acknowledged): a bad record with no valid record
//! anywhere after it is a torn tail, cut off at open (the file as it was is kept as
//! `MANIFEST.torn`); a bad record with a valid one after it is corruption. When the log grows past [`REWRITE_BYTES_MIN`] and four times the state it
//! describes, it is rewritten as the edits of its current state (temporary file, fsync, rename,
//! directory fsync).

mod dirs;
mod edit;
mod state;

pub use dirs::MediaDirs;
pub use edit::Edit;
pub use state::{KvdbState, SegmentEntry};

use crate::codec::{ByteReader, PutBytes};
use crate::error::{Error, Result};
use crate::media::replace_file_durably;
use crate::poison::Poison;
use parking_lot::{MappedMutexGuard, Mutex, MutexGuard};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const FILE_NAME: &str = "MANIFEST";
const MAGIC: &[u8; 8] = b"SHALEMF1";
const FORMAT_VERSION: u32 = 2;
const HEADER_BYTES: usize = 12;
/// Bytes before each edit: its length and its crc32c.
const RECORD_HEADER_BYTES: usize = 8;
/// Largest edit: a media edit with two longest paths, with room to spare.
const EDIT_BYTES_MAX: usize = 1 << 18;
/// Where a manifest with a torn tail is kept before the tail is cut off.
const TORN_COPY_NAME: &str = "MANIFEST.torn";
/// The log is rewritten once it holds this much more than its state would take.
pub const REWRITE_BYTES_MIN: u64 = 1 << 20;

/// What loading the manifest found besides the state.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// The last edit was cut off or failed its checksum: a crash while it was being appended,
    /// so it was never acknowledged. Says where.
    pub torn_tail: Option<String>,
    pub edits: u64,
}

/// An open manifest: the state it describes, and the file edits are appended to.
pub struct Manifest {
    path: PathBuf,
    inner: Mutex<Inner>,
    /// A failed append or sync leaves the manifest's durable state unknown: the KVDB stops.
    poison: Arc<Poison>,
    /// [`REWRITE_BYTES_MIN`], smaller in tests.
    rewrite_bytes_min: u64,
}

struct Inner {
    state: KvdbState,
    /// `None` when opened read-only.
    file: Option<File>,
    /// Bytes of the file, all of them valid records.
    len: u64,
    /// Bytes the state would take rewritten, when last rewritten.
    state_bytes: u64,
    /// The file ends in a torn record, to be cut off before the next edit.
    torn: bool,
    read_only: bool,
}

impl Manifest {
    /// Writes a new manifest holding `state` in `home`, replacing any file there.
    pub fn create(home: &Path, state: KvdbState, poison: Arc<Poison>) -> Result<Manifest> {
        let manifest = Manifest {
            path: home.join(FILE_NAME),
            inner: Mutex::new(Inner {
                state,
                file: None,
                len: 0,
                state_bytes: 0,
                torn: false,
                read_only: false,
            }),
            poison,
            rewrite_bytes_min: REWRITE_BYTES_MIN,
        };
        manifest.rewrite(&mut manifest.inner.lock())?;
        Ok(manifest)
    }

    /// Loads the manifest of `home`: `Ok(None)` if there is none; `Corruption` if any record but
    /// a torn last one fails validation or contradicts the ones before it. Loading writes
    /// nothing: a torn last record is cut off (by rewriting the manifest) only before the first
    /// edit is recorded, so an open that fails later leaves the file as it found it.
    pub fn open(
        home: &Path,
        read_only: bool,
        poison: Arc<Poison>,
    ) -> Result<Option<(Manifest, LoadReport)>> {
        let path = home.join(FILE_NAME);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(Error::io(format!("read {}", path.display()), error)),
        };
        let (state, report, len) = decode(&bytes, &path)?;
        let torn = report.torn_tail.is_some();
        let file = if read_only || torn {
            None
        } else {
            Some(open_for_append(&path)?)
        };
        let manifest = Manifest {
            inner: Mutex::new(Inner {
                state,
                file,
                len,
                state_bytes: len,
                torn,
                read_only,
            }),
            path,
            poison,
            rewrite_bytes_min: REWRITE_BYTES_MIN,
        };
        Ok(Some((manifest, report)))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The state the manifest describes, locked: edits wait while it is held.
    pub fn state(&self) -> MappedMutexGuard<'_, KvdbState> {
        MutexGuard::map(self.inner.lock(), |inner| &mut inner.state)
    }

    /// Appends `edit` and makes it durable, then applies it to the state. An edit that
    /// contradicts the state is a bug in the caller. A failed write is undone and returned; a
    /// failed `fdatasync` also poisons the KVDB.
    pub fn record(&self, edit: &Edit) -> Result<()> {
        self.poison.check()?;
        let mut inner = self.inner.lock();
        let mut next = inner.state.clone();
        if let Err(why) = next.apply(edit) {
            panic!("manifest edit {edit:?} contradicts the state: {why}");
        }
        if inner.read_only {
            return Err(Error::ReadOnly);
        }
        if inner.torn {
            // Keep the file as found, then cut the torn tail by writing the state anew.
            let found = std::fs::read(&self.path)
                .map_err(|error| Error::io(format!("read {}", self.path.display()), error))?;
            let dir = self.path.parent().expect("the manifest lives in the home");
            replace_file_durably(dir, TORN_COPY_NAME, &found)?;
            self.rewrite(&mut inner)?;
            inner.torn = false;
        }
        let file = inner
            .file
            .as_ref()
            .expect("a writable manifest has its file open");
        let at = inner.len;
        let mut bytes = Vec::new();
        encode_record(edit, at, &mut bytes);
        if let Err(error) = file.write_all_at(&bytes, at) {
            // Cut what may have landed, so the next append follows the last whole record.
            if let Err(undo) = file.set_len(at) {
                self.poison.set(format!(
                    "manifest append failed ({error}) and could not be undone: {undo}"
                ));
            }
            return Err(Error::io(
                format!("append to {}", self.path.display()),
                error,
            ));
        }
        if let Err(error) = file.sync_data() {
            self.poison
                .set(format!("fdatasync {} failed: {error}", self.path.display()));
            return Err(Error::io(
                format!("fdatasync {}", self.path.display()),
                error,
            ));
        }
        inner.len += bytes.len() as u64;
        inner.state = next;
        if inner.len > self.rewrite_bytes_min.max(4 * inner.state_bytes) {
            if let Err(error) = self.rewrite(&mut inner) {
                // The appended log is still whole and valid; try again after the next edit.
                tracing::warn!(%error, "rewriting the manifest failed; it keeps growing for now");
            }
        }
        Ok(())
    }

    /// Replaces the file with the edits of the current state.
    fn rewrite(&self, inner: &mut Inner) -> Result<()> {
        let mut bytes = Vec::with_capacity(4096);
        bytes.extend_from_slice(MAGIC);
        bytes.put_u32(FORMAT_VERSION);
        for edit in inner.state.as_edits() {
            encode_record(&edit, 0, &mut bytes);
        }
        let dir = self.path.parent().expect("the manifest lives in the home");
        let name = self.path.file_name().expect("a file name");
        replace_file_durably(dir, &name.to_string_lossy(), &bytes)?;
        inner.file = Some(open_for_append(&self.path)?);
        inner.len = bytes.len() as u64;
        inner.state_bytes = inner.len;
        Ok(())
    }
}

fn open_for_append(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|error| Error::io(format!("open {}", path.display()), error))
}

/// Appends the record of `edit` to `out`, which will be written at file offset `base`.
fn encode_record(edit: &Edit, base: u64, out: &mut Vec<u8>) {
    let start = out.len();
    out.put_u32(0);
    out.put_u32(0);
    edit.encode(out);
    let len = (out.len() - start - RECORD_HEADER_BYTES) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    let offset = base + start as u64;
    let crc = record_crc(offset, len, &out[start + RECORD_HEADER_BYTES..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// A record's checksum covers its offset and length too: a damaged length is caught, not
/// followed, and a record is valid only at the offset it was written at.
fn record_crc(offset: u64, len: u32, payload: &[u8]) -> u32 {
    let mut head = [0u8; 12];
    head[..8].copy_from_slice(&offset.to_le_bytes());
    head[8..].copy_from_slice(&len.to_le_bytes());
    crate::checksum::crc32c_append(crate::checksum::crc32c(&head), payload)
}

/// The payload of the valid record at `at` in `bytes`, if there is one.
fn valid_record_at(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let header = bytes.get(at..at + RECORD_HEADER_BYTES)?;
    let len = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
    let crc = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
    if len as usize > EDIT_BYTES_MAX {
        return None;
    }
    let start = at + RECORD_HEADER_BYTES;
    let payload = bytes.get(start..start + len as usize)?;
    (record_crc(at as u64, len, payload) == crc).then_some(payload)
}

/// The state `bytes` describe, what was seen, and the length of their valid records.
pub(crate) fn decode(bytes: &[u8], path: &Path) -> Result<(KvdbState, LoadReport, u64)> {
    check_header(bytes, path)?;
    let replayed = replay_records(bytes, path);
    let mut report = LoadReport {
        edits: replayed.edits,
        ..LoadReport::default()
    };
    let at = replayed.end;
    match replayed.stop {
        None => {}
        Some(Stop::Invalid(error)) => return Err(error),
        Some(Stop::Unreadable) => {
            // A torn last append leaves nothing valid after it; damage does.
            if let Some(later) =
                (at + 1..bytes.len()).find(|&p| valid_record_at(bytes, p).is_some())
            {
                return Err(Error::corruption(
                    path,
                    at as u64,
                    format!("manifest record fails validation (a valid one follows at {later})"),
                ));
            }
            report.torn_tail = Some(format!(
                "{} at offset {at}: the last {} bytes are no whole record",
                path.display(),
                bytes.len() - at
            ));
        }
    }
    let state = replayed.state.ok_or_else(|| {
        Error::corruption(
            path,
            at as u64,
            "manifest ends before its identity and media edits",
        )
    })?;
    Ok((state, report, at as u64))
}

/// For a salvage: the state the readable records of the manifest of `home` describe, up to the
/// first that cannot be read or applied; `None` if not even its identity and media can be.
pub fn readable_prefix(home: &Path) -> Option<KvdbState> {
    let path = home.join(FILE_NAME);
    let bytes = std::fs::read(&path).ok()?;
    check_header(&bytes, &path).ok()?;
    replay_records(&bytes, &path).state
}

fn check_header(bytes: &[u8], path: &Path) -> Result<()> {
    let mut header = ByteReader::new(bytes, path, "manifest", 0);
    if header.take(MAGIC.len()).ok() != Some(&MAGIC[..]) {
        return Err(Error::corruption(
            path,
            0,
            "not a ShaleDB manifest (bad magic)",
        ));
    }
    let version = header.u32()?;
    if version != FORMAT_VERSION {
        return Err(Error::corruption(
            path,
            8,
            format!(
                "unsupported manifest format version {version} (this ShaleDB reads version \
                 {FORMAT_VERSION})"
            ),
        ));
    }
    Ok(())
}

/// What applying a manifest's records in order built, and where and why it stopped.
struct Replayed {
    state: Option<KvdbState>,
    edits: u64,
    /// Offset just past the last record applied.
    end: usize,
    /// `None`: every record applied.
    stop: Option<Stop>,
}

enum Stop {
    /// The record at `end` is no valid record (damaged, or torn).
    Unreadable,
    /// The record at `end` is valid but cannot be decoded or contradicts those before it.
    Invalid(Error),
}

fn replay_records(bytes: &[u8], path: &Path) -> Replayed {
    let mut replayed = Replayed {
        state: None,
        edits: 0,
        end: HEADER_BYTES,
        stop: None,
    };
    let mut identity: Option<u64> = None;
    while replayed.end < bytes.len() {
        let at = replayed.end;
        let Some(payload) = valid_record_at(bytes, at) else {
            replayed.stop = Some(Stop::Unreadable);
            break;
        };
        let mut reader = ByteReader::new(
            payload,
            path,
            "manifest edit",
            (at + RECORD_HEADER_BYTES) as u64,
        );
        let contradiction = |why: String| {
            Error::corruption(
                path,
                at as u64,
                format!("manifest edit contradicts the ones before it: {why}"),
            )
        };
        let applied =
            Edit::decode(&mut reader).and_then(|edit| match (&edit, &mut replayed.state) {
                (Edit::Identity { kvdb_id }, None) if identity.is_none() => {
                    identity = Some(*kvdb_id);
                    Ok(())
                }
                (Edit::Media(media), None) => match identity {
                    Some(kvdb_id) => {
                        replayed.state = Some(KvdbState::new(kvdb_id, media.clone()));
                        Ok(())
                    }
                    None => Err(contradiction("media before identity".into())),
                },
                (_, None) => Err(contradiction(format!(
                    "{edit:?} before the identity and media edits"
                ))),
                (edit, Some(state)) => state.apply(edit).map_err(contradiction),
            });
        if let Err(error) = applied {
            replayed.stop = Some(Stop::Invalid(error));
            break;
        }
        replayed.edits += 1;
        replayed.end = at + RECORD_HEADER_BYTES + payload.len();
    }
    replayed
}

#[cfg(test)]
mod tests;
