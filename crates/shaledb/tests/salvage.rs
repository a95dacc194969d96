//! Goal: a damaged KVDB that a normal open refuses can be salvaged: `Options::salvage` opens it
//! anyway, keeps every readable record, sets damaged and unexpected files aside (never deletes
//! them), reports exactly what may be lost or may have come back, and leaves a KVDB that opens
//! normally again.
//! Method: damage a closed KVDB (a record in a segment the open replays, a damaged tombstone, a
//! segment header, a missing segment file, a stray segment file), check that the normal open
//! fails, salvage, and compare every key with the model and with the report.

mod common;

use common::files::{capacity_segments, write_at};
use common::small_options;
use shaledb::{Db, ErrorKind, Options, SalvageReport};
use std::collections::BTreeMap;
use std::path::Path;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// 3000 keys of ~1.2 KiB over several segments; every fifth deleted.
fn write_data(dir: &Path) -> Model {
    let db = Db::open(dir, small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    let mut model = Model::new();
    for index in 0..3000u32 {
        let key = format!("key{index:05}").into_bytes();
        let value = vec![(index % 251) as u8; 1200 + (index as usize % 5) * 30];
        kvs.put(&key, &value).unwrap();
        model.insert(key, value);
    }
    for index in (0..3000u32).step_by(5) {
        let key = format!("key{index:05}").into_bytes();
        kvs.delete(&key).unwrap();
        model.remove(&key);
    }
    db.close().unwrap();
    model
}

fn salvage_options() -> Options {
    Options {
        salvage: true,
        ..small_options()
    }
}

/// Salvages `dir` (after checking a normal open refuses it) and returns the report and what
/// each key of the model reads as.
fn salvage(dir: &Path, model: &Model) -> (SalvageReport, BTreeMap<Vec<u8>, Option<Vec<u8>>>) {
    let refused = Db::open(dir, small_options())
        .err()
        .expect("a normal open refuses");
    assert_eq!(refused.kind(), ErrorKind::Corruption, "{refused}");
    let db = Db::open(dir, salvage_options()).unwrap();
    let report = db
        .recovery_report()
        .salvage
        .clone()
        .expect("a salvage report");
    assert!(!report.problems.is_empty());
    let file = report.report_file.clone().expect("the report is written");
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        written["problems"].as_array().unwrap().len(),
        report.problems.len()
    );
    let kvs = db.kvs("t").unwrap();
    let mut read = BTreeMap::new();
    for index in 0..3000u32 {
        let key = format!("key{index:05}").into_bytes();
        read.insert(
            key.clone(),
            kvs.get(&key).unwrap().map(|value| value.to_vec()),
        );
    }
    assert!(db.check().unwrap().is_ok(), "{:?}", db.check().unwrap());
    db.close().unwrap();
    // A salvaged KVDB opens normally again, as the salvage left it.
    let again = Db::open(dir, small_options()).unwrap();
    let kvs = again.kvs("t").unwrap();
    for (key, value) in &read {
        assert_eq!(&kvs.get(key).unwrap().map(|value| value.to_vec()), value);
    }
    assert!(again.check().unwrap().is_ok());
    let _ = model;
    (report, read)
}

/// Every key reads as the model says, except those the report names (lost or suspect).
fn assert_only_reported_keys_differ(
    model: &Model,
    read: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    report: &SalvageReport,
) {
    let named = |key: &[u8]| {
        let escaped = key.escape_ascii().to_string();
        report
            .lost_keys
            .iter()
            .chain(&report.suspect_keys)
            .any(|line| line.split(' ').nth(1) == Some(escaped.as_str()))
    };
    let mut differing = 0;
    for (key, value) in read {
        if value.as_ref() != model.get(key) {
            differing += 1;
            assert!(
                named(key),
                "{} differs and the report does not say so",
                key.escape_ascii()
            );
        }
    }
    assert!(differing > 0 || !report.unreadable_regions.is_empty() || !report.set_aside.is_empty());
}

#[test]
fn a_damaged_record_in_a_replayed_segment_is_salvaged_and_its_region_reported() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_data(dir.path());
    std::fs::remove_file(dir.path().join("capacity/checkpoint.ckpt")).unwrap();
    let victim = capacity_segments(dir.path())[0].clone();
    write_at(&victim, 4096 + 24 + 9 + 200, &[0xee]); // inside the first record's value
    let (report, read) = salvage(dir.path(), &model);
    assert_eq!(report.unreadable_regions.len(), 1, "{report:#?}");
    assert!(report.unreadable_regions[0].contains(victim.to_str().unwrap()));
    assert!(report
        .rescued_segments
        .iter()
        .any(|aside| aside.contains(".damaged")));
    assert!(
        !victim.exists() && Path::new(&report.rescued_segments[0]).exists(),
        "kept aside"
    );
    assert_only_reported_keys_differ(&model, &read, &report);
    let readable = read
        .iter()
        .filter(|(key, value)| value.as_ref() == model.get(*key))
        .count();
    assert!(
        readable >= 2999,
        "only the damaged record may be lost: {readable}"
    );
}

#[test]
fn a_lost_tombstone_brings_its_key_back_and_the_report_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_data(dir.path());
    std::fs::remove_file(dir.path().join("capacity/checkpoint.ckpt")).unwrap();
    let key = b"key00005"; // deleted
    let victim = capacity_segments(dir.path())
        .into_iter()
        .rev()
        .find(|path| {
            let bytes = std::fs::read(path).unwrap();
            bytes.windows(key.len()).any(|window| window == key)
        })
        .unwrap();
    let bytes = std::fs::read(&victim).unwrap();
    let at = bytes
        .windows(key.len())
        .rposition(|window| window == key)
        .unwrap();
    write_at(&victim, at as u64, b"X"); // the tombstone's key
    let (report, read) = salvage(dir.path(), &model);
    assert_only_reported_keys_differ(&model, &read, &report);
    assert!(
        read[&key[..]].is_some(),
        "the deleted key is back: its tombstone was lost"
    );
    assert!(
        report
            .suspect_keys
            .iter()
            .any(|line| line.starts_with("t key00005 ")),
        "and the report says it may have come back"
    );
}

#[test]
fn a_damaged_segment_header_loses_that_segment_only_and_names_its_keys() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_data(dir.path());
    let victim = capacity_segments(dir.path())[1].clone();
    write_at(&victim, 20, &[0xff, 0xff]);
    let (report, read) = salvage(dir.path(), &model);
    assert!(report
        .set_aside
        .iter()
        .any(|aside| aside.contains(victim.file_name().unwrap().to_str().unwrap())));
    assert!(!report.lost_keys.is_empty(), "{report:#?}");
    assert_only_reported_keys_differ(&model, &read, &report);
}

#[test]
fn a_missing_segment_loses_that_segment_only_and_names_its_keys() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_data(dir.path());
    std::fs::remove_file(&capacity_segments(dir.path())[0]).unwrap();
    let (report, read) = salvage(dir.path(), &model);
    assert!(!report.lost_keys.is_empty(), "{report:#?}");
    assert_only_reported_keys_differ(&model, &read, &report);
}

#[test]
fn a_stray_segment_file_is_set_aside_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_data(dir.path());
    let stray = dir.path().join("capacity/seg-0000009999.log");
    let source = capacity_segments(dir.path()).last().unwrap().clone();
    assert!(!stray.exists());
    std::fs::copy(source, &stray).unwrap();
    let (report, read) = salvage(dir.path(), &model);
    assert!(report
        .set_aside
        .iter()
        .any(|aside| aside.contains("seg-0000009999.log")));
    assert!(report.lost_keys.is_empty() && report.suspect_keys.is_empty());
    for (key, value) in &model {
        assert_eq!(read[key].as_ref(), Some(value));
    }
}

/// Finding 3's salvage: with its manifest deleted, a KVDB is refused; a salvage rebuilds the
/// manifest from the segment files and brings every record back (the KVS's name is lost with
/// the manifest: it comes back as `salvaged-kvs-1`). A damaged manifest keeps what its readable
/// records say, names included.
#[test]
fn a_lost_or_damaged_manifest_is_rebuilt_from_the_segments() {
    for damage in ["deleted", "damaged"] {
        let dir = tempfile::tempdir().unwrap();
        let model = write_data(dir.path());
        let manifest = dir.path().join("MANIFEST");
        match damage {
            "deleted" => std::fs::remove_file(&manifest).unwrap(),
            _ => {
                // Damage the record after the one that creates the KVS (not the last record,
                // which would read as a torn tail): records are u32 length, u32 crc, payload.
                let bytes = std::fs::read(&manifest).unwrap();
                let mut at = 12;
                let mut after_kvs = None;
                while at < bytes.len() {
                    let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
                    if after_kvs == Some(0) {
                        after_kvs = Some(at);
                        break;
                    }
                    if bytes[at + 8] == 4 {
                        after_kvs = Some(0); // the next record is the one
                    }
                    at += 8 + len;
                }
                let target = after_kvs
                    .filter(|&at| at > 0)
                    .expect("a record after the KVS");
                write_at(&manifest, target as u64 + 9, &[0xaa; 4]);
            }
        }
        let refused = Db::open(dir.path(), small_options()).err().expect(damage);
        assert_eq!(refused.kind(), ErrorKind::Corruption, "{damage}: {refused}");
        {
            let db = Db::open(dir.path(), salvage_options()).unwrap();
            let report = db.recovery_report().salvage.clone().unwrap();
            assert!(
                report
                    .problems
                    .iter()
                    .any(|line| line.contains("manifest was rebuilt")),
                "{damage}: {report:#?}"
            );
            let name = match damage {
                "deleted" => "salvaged-kvs-1",
                _ => "t",
            };
            assert_eq!(db.list_kvs().unwrap(), [name], "{damage}");
            let kvs = db.kvs(name).unwrap();
            for index in 0..3000u32 {
                let key = format!("key{index:05}").into_bytes();
                assert_eq!(
                    kvs.get(&key).unwrap().map(|value| value.to_vec()).as_ref(),
                    model.get(&key),
                    "{damage}: {}",
                    key.escape_ascii()
                );
            }
            assert!(
                db.check().unwrap().is_ok(),
                "{damage}: {:?}",
                db.check().unwrap()
            );
        }
        let again = Db::open(dir.path(), small_options()).unwrap();
        assert!(again.check().unwrap().is_ok(), "{damage}");
    }
}
