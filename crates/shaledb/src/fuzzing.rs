//! Fuzz entry points: every decoder of bytes read from media, fed any bytes. Each returns
//! normally whatever the input, and panics only when a property fails: a decoder never panics,
//! turns down bad bytes with `Corruption`, and what it accepts encodes back to the same bytes
//! (or, for the scanner, every record it visits decodes where it says). The proptest
//! properties at the end run each one over random and mutated inputs in every test run;
//! `fuzz/` runs them under cargo-fuzz for as long as `scripts/fuzz` is told to. An input that
//! ever fails becomes a regression test here.

use crate::checkpoint;
use crate::error::ErrorKind;
use crate::identity;
use crate::limits::{RECORD_HEADER_BYTES, VALUE_BYTES_MAX};
use crate::manifest;
use crate::media::{AlignedBuf, MediaCounters, OsStorage, ReadPurpose, SegmentFile, WritePurpose};
use crate::record::{self, DecodeError, RecordRef, FLAG_VALUE_LZ4};
use crate::segment::{scan_records, SegmentHeader};
use crate::warm_keys;
use std::path::Path;
use std::sync::Arc;

fn rejected_as_corruption(result: crate::error::Result<impl Sized>, what: &str) {
    if let Err(error) = result {
        assert_eq!(error.kind(), ErrorKind::Corruption, "{what}: {error}");
    }
}

/// The record decoder: accepted records encode back to the bytes they were read from, and
/// their values read back (a compressed one decompressed within the value limit) or are
/// refused with a reason. The same bytes are tried again with their CRC made to match, so
/// that changed bytes reach the checks behind the CRC (flags, the compressed value), as a
/// writer's bug or a crafted file would.
pub fn record(bytes: &[u8]) {
    decode_record(bytes);
    if bytes.len() >= RECORD_HEADER_BYTES {
        let mut resealed = bytes.to_vec();
        let key_len = u16::from_le_bytes([bytes[6], bytes[7]]) as usize;
        let value_len = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
        let end = record::encoded_len(key_len, value_len).min(bytes.len());
        let crc = crate::checksum::crc32c(&resealed[record::CRC_BYTES..end]);
        resealed[..record::CRC_BYTES].copy_from_slice(&crc.to_le_bytes());
        decode_record(&resealed);
    }
}

fn decode_record(bytes: &[u8]) {
    match record::decode(bytes) {
        Ok(decoded) => {
            let mut again = Vec::new();
            record::encode(&mut again, &decoded);
            assert_eq!(
                again,
                bytes[..decoded.encoded_len()],
                "a record re-encodes as read"
            );
            match decoded.value() {
                Ok(value) => assert!(value.len() <= VALUE_BYTES_MAX),
                Err(_) => assert_ne!(
                    decoded.flags & FLAG_VALUE_LZ4,
                    0,
                    "only a compressed value can fail to read"
                ),
            }
        }
        Err(DecodeError::Truncated { needed }) => assert!(needed > bytes.len()),
        Err(DecodeError::Unwritten | DecodeError::Corrupt(_)) => {}
    }
}

/// The segment header decoder: accepted headers encode back to the same first bytes.
pub fn segment_header(bytes: &[u8]) {
    let path = Path::new("fuzz-segment");
    if let Ok(header) = SegmentHeader::decode(bytes, path) {
        let page = header.encode();
        assert_eq!(
            &page.as_slice()[..36],
            &bytes[..36],
            "a header re-encodes as read"
        );
    } else {
        rejected_as_corruption(SegmentHeader::decode(bytes, path), "segment header");
    }
}

/// The scanner, over a segment file holding `bytes` after a header page: every record it
/// visits decodes at its offset, in order, and the scan ends within the file.
pub fn scan(bytes: &[u8]) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("seg");
    let header = SegmentHeader {
        id: crate::segment::SegmentId(1),
        class: crate::media::MediaClass::Capacity,
        head: crate::segment::HeadKind::Client,
        created_seqno: 1,
    };
    let counters = Arc::new(MediaCounters::default());
    let file = SegmentFile::create(
        &OsStorage,
        &path,
        false,
        counters,
        &header.encode(),
        WritePurpose::Client,
    )
    .expect("a segment file");
    let mut data = AlignedBuf::zeroed(bytes.len().max(1));
    data.extend_from_slice(bytes);
    file.write_at(4096, data.padded(), WritePurpose::Client)
        .expect("written");
    let file_len = file.len_bytes().expect("its length");
    let mut last = 0;
    let summary = scan_records(
        &file,
        4096,
        u64::MAX,
        ReadPurpose::Other,
        |offset, found: &RecordRef<'_>| {
            assert!(offset >= last, "records are visited in order");
            let at = (offset - 4096) as usize;
            let again = record::decode(&bytes[at..]).expect("a visited record decodes where it is");
            assert_eq!(again, *found);
            last = offset + found.encoded_len() as u64;
            Ok(())
        },
    )
    .expect("the scan reads the file");
    assert!(summary.end_offset <= file_len);
}

/// The checkpoint decoder.
pub fn checkpoint(bytes: &[u8]) {
    rejected_as_corruption(
        checkpoint::decode(bytes.to_vec(), Path::new("fuzz-checkpoint")),
        "checkpoint",
    );
}

/// The manifest decoder: an accepted manifest's state, rewritten, reads back the same.
pub fn manifest(bytes: &[u8]) {
    let path = Path::new("fuzz-manifest");
    match manifest::decode(bytes, path) {
        Ok((state, _, _)) => {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let poison = Arc::new(crate::poison::Poison::default());
            manifest::Manifest::create(dir.path(), state.clone(), poison.clone()).expect("written");
            let (again, _) = manifest::Manifest::open(dir.path(), true, poison)
                .expect("read back")
                .expect("there");
            assert_eq!(
                *again.state(),
                state,
                "a manifest's state survives a rewrite"
            );
        }
        Err(error) => assert_eq!(error.kind(), ErrorKind::Corruption, "manifest: {error}"),
    }
}

/// The identity-file decoder.
pub fn identity(bytes: &[u8]) {
    rejected_as_corruption(
        identity::decode(bytes, Path::new("fuzz-identity")),
        "identity",
    );
}

/// The warm-keys decoder: an accepted file's keys survive a rewrite, which puts them in key
/// order, and a file already in that order re-encodes as read (a file in another order is
/// accepted: it is only a hint).
pub fn warm_keys(bytes: &[u8]) {
    let path = Path::new("fuzz-warm-keys");
    let keys = |list: &warm_keys::KeyList| -> Vec<(u32, Vec<u8>)> {
        list.iter()
            .map(|(kvs_id, key)| (kvs_id, key.to_vec()))
            .collect()
    };
    match warm_keys::decode(bytes.to_vec(), path) {
        Ok(list) => {
            let read = keys(&list);
            let mut encoder = warm_keys::Encoder::new(u64::MAX);
            for (kvs_id, key) in &read {
                assert!(encoder.push(*kvs_id, key[..].into()), "no bound");
            }
            let again = encoder.finish();
            let mut sorted = read.clone();
            sorted.sort();
            let reread = warm_keys::decode(again.clone(), path).expect("a written file decodes");
            assert_eq!(keys(&reread), sorted, "the keys survive a rewrite");
            if sorted == read {
                assert_eq!(again, bytes, "a file in key order re-encodes as read");
            }
        }
        Err(error) => assert_eq!(error.kind(), ErrorKind::Corruption, "warm-keys: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Valid encodings of each kind of input, to mutate: for records, a put stored compressed
    /// then two stored as given.
    fn sample_record() -> Vec<u8> {
        let value = b"a compressible value, ".repeat(12);
        let compressed = crate::compression::Compression::Lz4
            .compress(&value)
            .unwrap();
        let mut bytes = Vec::new();
        for seqno in 1..4u64 {
            let (flags, stored_value) = if seqno == 1 {
                (FLAG_VALUE_LZ4, &compressed[..])
            } else {
                (0, &[7; 300][..])
            };
            record::encode(
                &mut bytes,
                &RecordRef {
                    kind: record::RecordKind::Put,
                    flags,
                    kvs_id: 1,
                    seqno,
                    key: b"some-key",
                    stored_value,
                },
            );
        }
        bytes
    }

    fn sample_manifest() -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let media = manifest::MediaDirs {
            capacity_dir: "capacity".into(),
            staging_dir: None,
            staging_bytes_max: 1 << 20,
        };
        let poison = Arc::new(crate::poison::Poison::default());
        let written =
            manifest::Manifest::create(dir.path(), manifest::KvdbState::new(9, media), poison)
                .unwrap();
        written
            .record(&manifest::Edit::KvsCreated {
                id: 1,
                name: "users".into(),
                options: Default::default(),
            })
            .unwrap();
        written
            .record(&manifest::Edit::KvsCreated {
                id: 2,
                name: "pages".into(),
                options: crate::options::KvsOptions {
                    compression: crate::compression::Compression::Lz4,
                    ..Default::default()
                },
            })
            .unwrap();
        std::fs::read(dir.path().join(manifest::FILE_NAME)).unwrap()
    }

    fn sample_warm_keys() -> Vec<u8> {
        let mut encoder = warm_keys::Encoder::new(1 << 20);
        for (kvs_id, key) in [(1, &b"user:1"[..]), (2, b"k"), (1, b"user:22")] {
            encoder.push(kvs_id, key.into());
        }
        encoder.finish()
    }

    /// Any bytes, or a valid sample with a few bytes changed and maybe cut short.
    fn input(sample: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
        let len = sample.len();
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..2048),
            (
                proptest::collection::vec((0..len, any::<u8>()), 0..4),
                0..=len
            )
                .prop_map(move |(changes, cut)| {
                    let mut bytes = sample.clone();
                    for (at, value) in changes {
                        bytes[at] = value;
                    }
                    bytes.truncate(cut.max(1));
                    bytes
                }),
        ]
    }

    /// Inputs the fuzzer found failing, kept as regression tests (and in `fuzz/seeds`).
    #[test]
    fn fuzzer_findings_stay_fixed() {
        // A header with a valid CRC but its reserved bytes set was accepted (cargo-fuzz,
        // segment_header, 2026-11-23).
        let mut reserved_set = SegmentHeader {
            id: crate::segment::SegmentId(1),
            class: crate::media::MediaClass::Capacity,
            head: crate::segment::HeadKind::Client,
            created_seqno: 0,
        }
        .encode()
        .as_slice()[..36]
            .to_vec();
        reserved_set[14] = 1;
        let crc = crate::checksum::crc32c(&reserved_set[..32]);
        reserved_set[32..36].copy_from_slice(&crc.to_le_bytes());
        segment_header(&reserved_set);
        let error = SegmentHeader::decode(&reserved_set, Path::new("x")).unwrap_err();
        assert!(error.to_string().contains("reserved"), "{error}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn records_decode_safely(bytes in input(sample_record())) {
            record(&bytes);
        }

        #[test]
        fn segment_headers_decode_safely(bytes in input(SegmentHeader {
            id: crate::segment::SegmentId(3),
            class: crate::media::MediaClass::Staging,
            head: crate::segment::HeadKind::CleanerOld,
            created_seqno: 42,
        }.encode().as_slice().to_vec())) {
            segment_header(&bytes);
        }

        #[test]
        fn manifests_decode_safely(bytes in input(sample_manifest())) {
            manifest(&bytes);
        }

        #[test]
        fn warm_keys_files_decode_safely(bytes in input(sample_warm_keys())) {
            warm_keys(&bytes);
        }

        #[test]
        fn checkpoints_and_identities_decode_safely(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            checkpoint(&bytes);
            identity(&bytes);
        }
    }

    proptest! {
        // Each case writes a file: fewer cases.
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn segments_scan_safely(bytes in input(sample_record())) {
            scan(&bytes);
        }
    }
}
