use super::*;
use crate::compression::Compression;
use crate::error::ErrorKind;
use crate::key_groups::KeyGroups;
use crate::media::MediaClass;
use crate::options::{KvsOptions, MediaPolicy};
use crate::segment::{HeadKind, Seal, SegmentId};

fn media() -> MediaDirs {
    MediaDirs {
        capacity_dir: PathBuf::from("capacity"),
        staging_dir: Some(PathBuf::from("/mnt/fast/kvdb")),
        staging_bytes_max: 1 << 30,
    }
}

fn one_of_each() -> Vec<Edit> {
    vec![
        Edit::Identity { kvdb_id: 42 },
        Edit::Media(media()),
        Edit::NextIds {
            next_kvs_id: 3,
            next_segment_id: 9,
        },
        Edit::KvsCreated {
            id: 4,
            name: "users".into(),
            options: KvsOptions {
                prefix_len: 5,
                media_policy: MediaPolicy::StagingMaxCapacity,
                compression: Compression::None,
                key_groups: KeyGroups::None,
            },
        },
        Edit::KvsCreated {
            id: 5,
            name: "pages".into(),
            options: KvsOptions {
                prefix_len: 0,
                media_policy: MediaPolicy::CapacityOnly,
                compression: Compression::Lz4,
                key_groups: KeyGroups::None,
            },
        },
        Edit::KvsCreated {
            id: 6,
            name: "orders".into(),
            options: KvsOptions {
                key_groups: KeyGroups::Prefix { len: 8 },
                ..KvsOptions::default()
            },
        },
        Edit::KvsCreated {
            id: 7,
            name: "redis-0".into(),
            options: KvsOptions {
                compression: Compression::Lz4,
                key_groups: KeyGroups::LengthPrefixed {
                    offset: 1,
                    width: 4,
                },
                ..KvsOptions::default()
            },
        },
        Edit::KvsDropped { id: 4 },
        Edit::SegmentCreated {
            id: SegmentId(10),
            class: MediaClass::Staging,
            head: HeadKind::CleanerOld,
            created_seqno: 77,
        },
        Edit::SegmentDurable {
            id: SegmentId(10),
            end_bytes: 6000,
        },
        Edit::SegmentSealed {
            id: SegmentId(10),
            seal: Seal {
                end_bytes: 8192,
                record_count: 3,
                records_crc: 0xdead_beef,
            },
        },
        Edit::SegmentFreed { id: SegmentId(10) },
        Edit::SegmentDeleted { id: SegmentId(10) },
    ]
}

#[test]
fn every_edit_round_trips() {
    for edit in one_of_each() {
        let mut bytes = Vec::new();
        edit.encode(&mut bytes);
        let path = Path::new("MANIFEST");
        let decoded = Edit::decode(&mut ByteReader::new(&bytes, path, "edit", 0)).unwrap();
        assert_eq!(decoded, edit);
        assert!(
            Edit::decode(&mut ByteReader::new(
                &bytes[..bytes.len() - 1],
                path,
                "edit",
                0
            ))
            .is_err(),
            "a cut edit is an error: {edit:?}"
        );
    }
}

#[test]
fn only_a_compressing_kvs_needs_the_new_tag() {
    let created = |compression| {
        let mut bytes = Vec::new();
        Edit::KvsCreated {
            id: 1,
            name: "k".into(),
            options: KvsOptions {
                compression,
                ..KvsOptions::default()
            },
        }
        .encode(&mut bytes);
        bytes
    };
    // Tag 4 exactly as before compression existed, so earlier versions still read it.
    assert_eq!(
        created(Compression::None),
        [4, 1, 0, 0, 0, 1, 0, b'k', 0, 0, 0, 0, 0]
    );
    let mut lz4 = created(Compression::Lz4);
    assert_eq!((lz4[0], lz4[lz4.len() - 1]), (11, 1));
    *lz4.last_mut().unwrap() = 9;
    let error =
        Edit::decode(&mut ByteReader::new(&lz4, Path::new("MANIFEST"), "edit", 0)).unwrap_err();
    assert!(error.to_string().contains("unknown compression"), "{error}");
}

#[test]
fn only_a_kvs_with_key_groups_needs_tag_12_and_bad_groups_are_named() {
    let created = |key_groups| {
        let mut bytes = Vec::new();
        Edit::KvsCreated {
            id: 1,
            name: "k".into(),
            options: KvsOptions {
                key_groups,
                ..KvsOptions::default()
            },
        }
        .encode(&mut bytes);
        bytes
    };
    assert_eq!(created(KeyGroups::None)[0], 4);
    let grouped = created(KeyGroups::LengthPrefixed {
        offset: 0,
        width: 4,
    });
    // Tag 12, then tag 11's fields (compression none), then kind 2, offset 0, width 4.
    assert_eq!(grouped[0], 12);
    assert_eq!(grouped[grouped.len() - 5..], [0, 2, 0, 0, 4]);
    let decode_error = |bytes: &[u8]| {
        Edit::decode(&mut ByteReader::new(
            bytes,
            Path::new("MANIFEST"),
            "edit",
            0,
        ))
        .unwrap_err()
        .to_string()
    };
    let mut unknown_kind = grouped.clone();
    let kind_at = unknown_kind.len() - 4;
    unknown_kind[kind_at] = 7;
    assert!(decode_error(&unknown_kind).contains("unknown key groups"));
    let mut too_wide = grouped.clone();
    *too_wide.last_mut().unwrap() = 9;
    assert!(decode_error(&too_wide).contains("key groups out of range"));
    let mut empty_prefix = created(KeyGroups::Prefix { len: 3 });
    let len_at = empty_prefix.len() - 2;
    empty_prefix[len_at] = 0;
    assert!(decode_error(&empty_prefix).contains("key groups out of range"));
}

/// A manifest built one `record` call per edit, and the state after each call.
fn build(home: &Path) -> Vec<KvdbState> {
    let poison = Arc::new(Poison::default());
    let manifest = Manifest::create(home, KvdbState::new(42, media()), poison).unwrap();
    let mut states = vec![manifest.state().clone()];
    for edit in one_of_each().into_iter().skip(3) {
        manifest.record(&edit).unwrap();
        states.push(manifest.state().clone());
    }
    states
}

fn reopen(home: &Path) -> Result<Option<(Manifest, LoadReport)>> {
    Manifest::open(home, true, Arc::new(Poison::default()))
}

#[test]
fn a_reopened_manifest_holds_every_recorded_edit() {
    let dir = tempfile::tempdir().unwrap();
    let states = build(dir.path());
    let (manifest, report) = reopen(dir.path()).unwrap().unwrap();
    assert_eq!(&*manifest.state(), states.last().unwrap());
    assert_eq!(report.torn_tail, None);
    assert!(reopen(&dir.path().join("nowhere")).unwrap().is_none());
}

#[test]
fn a_long_log_is_rewritten_as_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut manifest = Manifest::create(
        dir.path(),
        KvdbState::new(7, media()),
        Arc::new(Poison::default()),
    )
    .unwrap();
    manifest.rewrite_bytes_min = 4096;
    for id in 1..1_000u32 {
        let created = Edit::SegmentCreated {
            id: SegmentId(id),
            class: MediaClass::Capacity,
            head: HeadKind::Client,
            created_seqno: u64::from(id),
        };
        manifest.record(&created).unwrap();
        if id > 1 {
            let id = SegmentId(id - 1);
            manifest.record(&Edit::SegmentFreed { id }).unwrap();
            manifest.record(&Edit::SegmentDeleted { id }).unwrap();
        }
    }
    let file_bytes = std::fs::metadata(manifest.path()).unwrap().len();
    assert!(file_bytes < 2 * 4096, "{file_bytes} bytes: never rewritten");
    let (reopened, _) = reopen(dir.path()).unwrap().unwrap();
    assert_eq!(*reopened.state(), *manifest.state());
    assert_eq!(reopened.state().segments.len(), 1);
    assert_eq!(reopened.state().next_segment_id, 1_000);
}

/// Damage anywhere but the last record is corruption. Damage in the last record, or a file
/// cut short, loads as a state the manifest really had before (a prefix of its edits, with the
/// torn part reported), never as a state it never had.
#[test]
fn damage_is_corruption_unless_it_reads_as_an_earlier_state() {
    let dir = tempfile::tempdir().unwrap();
    let states = build(dir.path());
    let path = dir.path().join(FILE_NAME);
    let bytes = std::fs::read(&path).unwrap();
    let last_start = bytes.len() - {
        let mut last = Vec::new();
        encode_record(&Edit::SegmentDeleted { id: SegmentId(10) }, 0, &mut last);
        last.len()
    };
    let load = |damaged: &[u8]| {
        std::fs::write(&path, damaged).unwrap();
        reopen(dir.path()).map(|found| {
            let (manifest, report) = found.expect("the file is there");
            let state = manifest.state().clone();
            (state, report.torn_tail.is_some())
        })
    };
    for at in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x10;
        match load(&damaged) {
            Err(error) => assert_eq!(error.kind(), ErrorKind::Corruption, "flip at {at}: {error}"),
            Ok((state, torn)) => {
                assert!(
                    at >= last_start,
                    "flip at {at}, before the last record, undetected"
                );
                assert!(torn, "flip at {at}: not reported");
                assert_eq!(&state, &states[states.len() - 2], "flip at {at}");
            }
        }
    }
    for len in 0..bytes.len() {
        match load(&bytes[..len]) {
            Err(error) => assert_eq!(error.kind(), ErrorKind::Corruption, "cut to {len}: {error}"),
            Ok((state, _)) => assert!(
                states.contains(&state),
                "cut to {len}: a state the manifest never had: {state:?}"
            ),
        }
    }
}

#[test]
fn a_torn_tail_is_cut_and_kept_aside_when_opened_for_writing() {
    let dir = tempfile::tempdir().unwrap();
    let states = build(dir.path());
    let path = dir.path().join(FILE_NAME);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let (manifest, report) = Manifest::open(dir.path(), false, Arc::new(Poison::default()))
        .unwrap()
        .unwrap();
    assert!(report.torn_tail.is_some());
    assert_eq!(
        std::fs::read(&path).unwrap(),
        &bytes[..bytes.len() - 3],
        "loading wrote nothing"
    );
    assert!(!dir.path().join(TORN_COPY_NAME).exists());
    manifest
        .record(&Edit::KvsCreated {
            id: 8,
            name: "first".into(),
            options: KvsOptions::default(),
        })
        .unwrap();
    assert_eq!(
        std::fs::read(dir.path().join(TORN_COPY_NAME)).unwrap(),
        &bytes[..bytes.len() - 3]
    );
    manifest
        .record(&Edit::KvsCreated {
            id: 9,
            name: "after".into(),
            options: KvsOptions::default(),
        })
        .unwrap();
    let (reopened, report) = reopen(dir.path()).unwrap().unwrap();
    assert_eq!(report.torn_tail, None, "the torn bytes are gone");
    assert_eq!(
        reopened.state().kvs_named("after").map(|(id, _)| id),
        Some(9)
    );
    assert_eq!(reopened.state().segments, states[states.len() - 2].segments);
}

#[test]
fn edits_that_contradict_the_state_are_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let header = |bytes: &mut Vec<u8>| {
        bytes.extend_from_slice(MAGIC);
        bytes.put_u32(FORMAT_VERSION);
    };
    let kvs = |id: u32, name: &str| Edit::KvsCreated {
        id,
        name: name.into(),
        options: KvsOptions::default(),
    };
    let cases: Vec<(&str, Vec<Edit>)> = vec![
        ("same KVS id twice", vec![kvs(1, "a"), kvs(1, "b")]),
        ("same KVS name twice", vec![kvs(1, "a"), kvs(2, "a")]),
        ("unknown KVS dropped", vec![Edit::KvsDropped { id: 5 }]),
        (
            "segment freed unknown",
            vec![Edit::SegmentFreed { id: SegmentId(3) }],
        ),
        (
            "segment deleted live",
            vec![
                Edit::SegmentCreated {
                    id: SegmentId(3),
                    class: MediaClass::Capacity,
                    head: HeadKind::Client,
                    created_seqno: 1,
                },
                Edit::SegmentDeleted { id: SegmentId(3) },
            ],
        ),
        ("second identity", vec![Edit::Identity { kvdb_id: 99 }]),
    ];
    for (what, edits) in cases {
        let mut bytes = Vec::new();
        header(&mut bytes);
        for edit in [Edit::Identity { kvdb_id: 1 }, Edit::Media(media())]
            .iter()
            .chain(&edits)
        {
            encode_record(edit, 0, &mut bytes);
        }
        // Something after it, so the bad edit is not the last append.
        encode_record(&kvs(100, "later"), 0, &mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        let error = reopen(dir.path())
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"));
        assert_eq!(error.kind(), ErrorKind::Corruption, "{what}: {error}");
    }
    let mut no_media = Vec::new();
    header(&mut no_media);
    encode_record(&Edit::Identity { kvdb_id: 1 }, 0, &mut no_media);
    std::fs::write(&path, &no_media).unwrap();
    assert!(
        reopen(dir.path()).is_err(),
        "a manifest needs its media edit"
    );
}

#[test]
fn a_read_only_manifest_refuses_edits() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let before = std::fs::read(dir.path().join(FILE_NAME)).unwrap();
    let (manifest, _) = reopen(dir.path()).unwrap().unwrap();
    let refused = manifest.record(&Edit::KvsCreated {
        id: 50,
        name: "new".into(),
        options: KvsOptions::default(),
    });
    assert_eq!(refused.unwrap_err().kind(), ErrorKind::ReadOnly);
    assert_eq!(
        manifest.state().kvs_named("new"),
        None,
        "the state is unchanged"
    );
    assert_eq!(std::fs::read(dir.path().join(FILE_NAME)).unwrap(), before);
}
