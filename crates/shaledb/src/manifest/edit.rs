//! Manifest edits and their encoding. Each edit is one record of the manifest:
//!
//! ```text
//! u8 tag, then by tag (integers little-endian; strings and paths as u16 length + bytes):
//!  1 identity         u64 kvdb_id
//!  2 media            path capacity_dir, u8 has_staging, [path staging_dir], u64 staging_bytes_max
//!  3 next ids         u32 next_kvs_id, u32 next_segment_id
//!  4 KVS created      u32 id, string name, u32 prefix_len, u8 media_policy
//!  5 KVS dropped      u32 id
//!  6 segment created  u32 id, u8 media class, u8 head, u64 created_seqno
//!  7 segment sealed   u32 id, u64 end_bytes, u64 record_count, u32 records_crc
//!  8 segment freed    u32 id (no longer live; its file may still exist)
//!  9 segment deleted  u32 id (its file is gone)
//! 10 segment durable  u32 id, u64 end_bytes (an active segment was fdatasynced this far)
//! 11 KVS created      as 4, then u8 compression (0 none, 1 lz4): a KVS that compresses its values
//! 12 KVS created      as 11, then its key groups: u8 kind, then by kind
//!                     1 (prefix) u16 len; 2 (length-prefixed) u16 offset, u8 width
//! ```
//!
//! A KVS is recorded with the oldest tag that holds its options: 4 for one with default
//! compression and key groups, 11 for one that compresses, 12 for one with key groups. So a KVDB
//! stays readable by a ShaleDB from before an option it does not use, and one that uses it is
//! refused by such a ShaleDB at open (an unknown tag), never misread.

use super::dirs::MediaDirs;
use crate::codec::{ByteReader, PutBytes};
use crate::compression::Compression;
use crate::error::Result;
use crate::key_groups::KeyGroups;
use crate::limits::{KEY_BYTES_MAX, KVS_NAME_BYTES_MAX};
use crate::media::MediaClass;
use crate::options::{KvsOptions, MediaPolicy};
use crate::segment::{HeadKind, Seal, SegmentId};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// One change to what a KVDB contains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    Identity {
        kvdb_id: u64,
    },
    Media(MediaDirs),
    NextIds {
        next_kvs_id: u32,
        next_segment_id: u32,
    },
    KvsCreated {
        id: u32,
        name: String,
        options: KvsOptions,
    },
    KvsDropped {
        id: u32,
    },
    SegmentCreated {
        id: SegmentId,
        class: MediaClass,
        head: HeadKind,
        created_seqno: u64,
    },
    SegmentSealed {
        id: SegmentId,
        seal: Seal,
    },
    SegmentFreed {
        id: SegmentId,
    },
    SegmentDeleted {
        id: SegmentId,
    },
    /// An active segment's records up to `end_bytes` are durable: after a crash they must be
    /// there (only what follows may be torn).
    SegmentDurable {
        id: SegmentId,
        end_bytes: u64,
    },
}

impl Edit {
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Edit::Identity { kvdb_id } => {
                out.put_u8(1);
                out.put_u64(*kvdb_id);
            }
            Edit::Media(media) => {
                out.put_u8(2);
                out.put_bytes16(media.capacity_dir.as_os_str().as_bytes());
                match &media.staging_dir {
                    Some(dir) => {
                        out.put_u8(1);
                        out.put_bytes16(dir.as_os_str().as_bytes());
                    }
                    None => out.put_u8(0),
                }
                out.put_u64(media.staging_bytes_max);
            }
            Edit::NextIds {
                next_kvs_id,
                next_segment_id,
            } => {
                out.put_u8(3);
                out.put_u32(*next_kvs_id);
                out.put_u32(*next_segment_id);
            }
            Edit::KvsCreated { id, name, options } => {
                let tag = if options.key_groups != KeyGroups::None {
                    12
                } else if options.compression != Compression::None {
                    11
                } else {
                    4
                };
                out.put_u8(tag);
                out.put_u32(*id);
                out.put_bytes16(name.as_bytes());
                out.put_u32(options.prefix_len as u32);
                out.put_u8(policy_byte(options.media_policy));
                if tag >= 11 {
                    out.put_u8(compression_byte(options.compression));
                }
                if tag == 12 {
                    put_key_groups(out, options.key_groups);
                }
            }
            Edit::KvsDropped { id } => {
                out.put_u8(5);
                out.put_u32(*id);
            }
            Edit::SegmentCreated {
                id,
                class,
                head,
                created_seqno,
            } => {
                out.put_u8(6);
                out.put_u32(id.0);
                out.put_u8(*class as u8);
                out.put_u8(*head as u8);
                out.put_u64(*created_seqno);
            }
            Edit::SegmentSealed { id, seal } => {
                out.put_u8(7);
                out.put_u32(id.0);
                out.put_u64(seal.end_bytes);
                out.put_u64(seal.record_count);
                out.put_u32(seal.records_crc);
            }
            Edit::SegmentFreed { id } => {
                out.put_u8(8);
                out.put_u32(id.0);
            }
            Edit::SegmentDeleted { id } => {
                out.put_u8(9);
                out.put_u32(id.0);
            }
            Edit::SegmentDurable { id, end_bytes } => {
                out.put_u8(10);
                out.put_u32(id.0);
                out.put_u64(*end_bytes);
            }
        }
    }

    /// Decodes one edit that fills `reader` exactly.
    pub fn decode(reader: &mut ByteReader<'_>) -> Result<Edit> {
        let edit = match reader.u8()? {
            1 => Edit::Identity {
                kvdb_id: reader.u64()?,
            },
            2 => {
                let capacity_dir = path(reader)?;
                let staging_dir = match reader.u8()? {
                    0 => None,
                    1 => Some(path(reader)?),
                    _ => return Err(reader.corrupt("manifest: bad staging flag")),
                };
                Edit::Media(MediaDirs {
                    capacity_dir,
                    staging_dir,
                    staging_bytes_max: reader.u64()?,
                })
            }
            3 => Edit::NextIds {
                next_kvs_id: reader.u32()?,
                next_segment_id: reader.u32()?,
            },
            tag @ (4 | 11 | 12) => {
                let id = reader.u32()?;
                let name = reader.bytes16()?;
                let name = std::str::from_utf8(name)
                    .ok()
                    .filter(|name| !name.is_empty() && name.len() <= KVS_NAME_BYTES_MAX)
                    .ok_or_else(|| reader.corrupt("manifest: bad KVS name"))?
                    .to_string();
                let prefix_len = reader.u32()? as usize;
                if prefix_len > KEY_BYTES_MAX {
                    return Err(reader.corrupt("manifest: KVS prefix_len past the key limit"));
                }
                let media_policy = policy_from_byte(reader.u8()?)
                    .ok_or_else(|| reader.corrupt("manifest: unknown media policy"))?;
                let compression = if tag >= 11 {
                    compression_from_byte(reader.u8()?)
                        .ok_or_else(|| reader.corrupt("manifest: unknown compression"))?
                } else {
                    Compression::None
                };
                let key_groups = if tag == 12 {
                    key_groups(reader)?
                } else {
                    KeyGroups::None
                };
                Edit::KvsCreated {
                    id,
                    name,
                    options: KvsOptions {
                        prefix_len,
                        media_policy,
                        compression,
                        key_groups,
                    },
                }
            }
            5 => Edit::KvsDropped { id: reader.u32()? },
            6 => Edit::SegmentCreated {
                id: SegmentId(reader.u32()?),
                class: MediaClass::from_byte(reader.u8()?)
                    .ok_or_else(|| reader.corrupt("manifest: unknown media class"))?,
                head: HeadKind::from_byte(reader.u8()?)
                    .ok_or_else(|| reader.corrupt("manifest: unknown log head"))?,
                created_seqno: reader.u64()?,
            },
            7 => Edit::SegmentSealed {
                id: SegmentId(reader.u32()?),
                seal: Seal {
                    end_bytes: reader.u64()?,
                    record_count: reader.u64()?,
                    records_crc: reader.u32()?,
                },
            },
            8 => Edit::SegmentFreed {
                id: SegmentId(reader.u32()?),
            },
            9 => Edit::SegmentDeleted {
                id: SegmentId(reader.u32()?),
            },
            10 => Edit::SegmentDurable {
                id: SegmentId(reader.u32()?),
                end_bytes: reader.u64()?,
            },
            tag => return Err(reader.corrupt(format!("manifest: unknown edit tag {tag}"))),
        };
        if !reader.is_empty() {
            return Err(reader.corrupt("manifest: edit longer than its fields"));
        }
        Ok(edit)
    }
}

fn path(reader: &mut ByteReader<'_>) -> Result<PathBuf> {
    let bytes = reader.bytes16()?;
    if bytes.is_empty() || bytes.contains(&0) {
        return Err(reader.corrupt("manifest: bad directory path"));
    }
    Ok(PathBuf::from(OsStr::from_bytes(bytes)))
}

fn policy_byte(policy: MediaPolicy) -> u8 {
    match policy {
        MediaPolicy::CapacityOnly => 0,
        MediaPolicy::StagingOnly => 1,
        MediaPolicy::StagingMaxCapacity => 2,
    }
}

fn policy_from_byte(byte: u8) -> Option<MediaPolicy> {
    match byte {
        0 => Some(MediaPolicy::CapacityOnly),
        1 => Some(MediaPolicy::StagingOnly),
        2 => Some(MediaPolicy::StagingMaxCapacity),
        _ => None,
    }
}

fn compression_byte(compression: Compression) -> u8 {
    match compression {
        Compression::None => 0,
        Compression::Lz4 => 1,
    }
}

fn compression_from_byte(byte: u8) -> Option<Compression> {
    match byte {
        0 => Some(Compression::None),
        1 => Some(Compression::Lz4),
        _ => None,
    }
}

fn put_key_groups(out: &mut Vec<u8>, groups: KeyGroups) {
    match groups {
        KeyGroups::None => out.put_u8(0),
        KeyGroups::Prefix { len } => {
            out.put_u8(1);
            out.put_u16(len);
        }
        KeyGroups::LengthPrefixed { offset, width } => {
            out.put_u8(2);
            out.put_u16(offset);
            out.put_u8(width);
        }
    }
}

/// Key groups as `put_key_groups` wrote them; an unknown kind or one no KVS could have been
/// created with is damage.
fn key_groups(reader: &mut ByteReader<'_>) -> Result<KeyGroups> {
    let groups = match reader.u8()? {
        1 => KeyGroups::Prefix { len: reader.u16()? },
        2 => KeyGroups::LengthPrefixed {
            offset: reader.u16()?,
            width: reader.u8()?,
        },
        _ => return Err(reader.corrupt("manifest: unknown key groups")),
    };
    groups
        .validate()
        .map_err(|_| reader.corrupt("manifest: key groups out of range"))?;
    Ok(groups)
}
