//! Goal: damaged files give a clear error or a correct recovery, never wrong data or a panic.
//! Method: write known data, close, damage one file (flip bytes, truncate, delete or garble the
//! checkpoint, garble the manifest), reopen, and compare every key with what was written.

mod common;

use common::files::{capacity_segments, snapshot_files};
use common::small_options;
use shaledb::{Db, ErrorKind};
use std::collections::BTreeMap;
use std::path::Path;

fn write_data(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(dir, small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    let mut model = BTreeMap::new();
    for index in 0..3000u32 {
        let key = format!("key{index:05}").into_bytes();
        let value = vec![(index % 256) as u8; 500 + (index as usize % 7) * 100];
        kvs.put(&key, &value).unwrap();
        model.insert(key, value);
    }
    for index in (0..3000u32).step_by(3) {
        let key = format!("key{index:05}").into_bytes();
        kvs.delete(&key).unwrap();
        model.remove(&key);
    }
    db.close().unwrap();
    model
}

/// Every key either reads back exactly as written, is absent, or fails with Corruption.
/// Returns (exact, absent, corrupt) counts.
fn audit(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) -> (usize, usize, usize) {
    let kvs = db.kvs("t").unwrap();
    let mut counts = (0, 0, 0);
    for index in 0..3000u32 {
        let key = format!("key{index:05}").into_bytes();
        match kvs.get(&key) {
            Ok(Some(value)) => {
                assert_eq!(
                    Some(&value.to_vec()),
                    model.get(&key),
                    "wrong data for {index}"
                );
                counts.0 += 1;
            }
            Ok(None) => counts.1 += 1,
            Err(error) => {
                assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
                counts.2 += 1;
            }
        }
    }
    counts
}

fn flip_byte(path: &Path, offset: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, offset).unwrap();
    byte[0] ^= 0x5a;
    file.write_all_at(&byte, offset).unwrap();
}

#[test]
fn flipped_byte_in_a_segment_is_reported_never_returned() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_data(dir.path());
    let victim = capacity_segments(dir.path())[0].clone();
    flip_byte(&victim, 100_000);
    let db = Db::open(dir.path(), small_options()).unwrap();
    // Scans and multi-gets read values in batches: the damage stops them with an error there
    // too, never skipped, and everything they return before it is exact.
    let kvs = db.kvs("t").unwrap();
    let mut scan_error = None;
    for item in kvs.iter() {
        match item {
            Ok((key, value)) => assert_eq!(model.get(&key[..]), Some(&value.to_vec())),
            Err(error) => {
                scan_error = Some(error);
                break;
            }
        }
    }
    let scan_error = scan_error.expect("a scan over every key meets the damaged record");
    assert_eq!(scan_error.kind(), ErrorKind::Corruption, "{scan_error}");
    let absent_first = std::iter::once(&b"absent"[..]).chain(model.keys().map(Vec::as_slice));
    let multi_get_error = kvs.multi_get(absent_first).unwrap_err();
    assert_eq!(multi_get_error.kind(), ErrorKind::Corruption);
    let (exact, _, corrupt) = audit(&db, &model);
    assert!(exact > 1500, "undamaged data stays readable");
    assert!(corrupt >= 1, "the damaged record is reported on read");
    let report = db.check().unwrap();
    assert!(!report.is_ok());
    assert!(
        report
            .corruptions
            .iter()
            .any(|line| line.contains(victim.to_str().unwrap())),
        "{report:?}"
    );
}

/// Opening fails with a corruption naming `file`, and the failed open changed no file.
fn open_fails_naming(dir: &Path, file: &Path) {
    let before = snapshot_files(dir);
    let error = Db::open(dir, small_options())
        .err()
        .expect("the open must fail");
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    assert!(
        error.to_string().contains(file.to_str().unwrap()),
        "{error} does not name {}",
        file.display()
    );
    assert_eq!(snapshot_files(dir), before, "a failed open wrote something");
}

#[test]
fn flipped_byte_in_a_replayed_segment_fails_the_open_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path());
    std::fs::remove_file(dir.path().join("capacity/checkpoint.ckpt")).unwrap();
    let victim = capacity_segments(dir.path())[0].clone();
    flip_byte(&victim, 100_000);
    open_fails_naming(dir.path(), &victim);
    // Still detected at the next open: the failed one wrote no checkpoint without the record.
    open_fails_naming(dir.path(), &victim);
}

#[test]
fn truncated_sealed_segment_fails_the_open() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path());
    let victim = capacity_segments(dir.path())[0].clone();
    let len = std::fs::metadata(&victim).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&victim)
        .unwrap()
        .set_len(len / 2 + 123)
        .unwrap();
    open_fails_naming(dir.path(), &victim);
}

#[test]
fn lost_or_damaged_checkpoint_rebuilds_the_exact_index() {
    for damage in ["delete", "flip", "truncate"] {
        let dir = tempfile::tempdir().unwrap();
        let model = write_data(dir.path());
        let checkpoint = dir.path().join("capacity/checkpoint.ckpt");
        match damage {
            "delete" => std::fs::remove_file(&checkpoint).unwrap(),
            "flip" => flip_byte(&checkpoint, 40),
            _ => std::fs::OpenOptions::new()
                .write(true)
                .open(&checkpoint)
                .unwrap()
                .set_len(100)
                .unwrap(),
        }
        let db = Db::open(dir.path(), small_options()).unwrap();
        assert!(!db.recovery_report().checkpoint_loaded, "{damage}");
        assert_eq!(
            audit(&db, &model),
            (model.len(), 3000 - model.len(), 0),
            "{damage}"
        );
        let report = db.check().unwrap();
        assert!(report.is_ok(), "{damage}: {report:?}");
    }
}

#[test]
fn garbled_manifest_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path());
    let manifest = dir.path().join("MANIFEST");
    std::fs::write(&manifest, b"\x00garbage").unwrap();
    open_fails_naming(dir.path(), &manifest);
}

const TORN_BATCH_CHILD_ENV: &str = "SHALEDB_TORN_BATCH_CHILD_DIR";

/// Child mode of the next test: writes a key and makes it durable, then writes a batch too big
/// to stay in memory (the flusher writes it to the file, but nothing makes it durable) and
/// crashes (aborts), leaving its segments active (unsealed), as a crash does.
#[test]
fn torn_batch_child() {
    let Ok(dir) = std::env::var(TORN_BATCH_CHILD_ENV) else {
        return;
    };
    let db = Db::open(&dir, small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    kvs.put(b"before", b"kept").unwrap();
    db.sync().unwrap();
    let mut batch = db.batch();
    for key in [b"b1", b"b2", b"b3"] {
        batch.put(&kvs, key, vec![3u8; 200_000]);
    }
    db.write(batch).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300)); // the flusher writes it out
    std::process::abort();
}

#[test]
fn a_batch_cut_by_a_torn_tail_is_dropped_whole() {
    let dir = tempfile::tempdir().unwrap();
    common::run_child_until_it_crashes("torn_batch_child", TORN_BATCH_CHILD_ENV, dir.path());
    // The crash left the batch, never made durable, in an active segment; cut its end as a
    // torn write would.
    let segment = capacity_segments(dir.path())
        .into_iter()
        .max_by_key(|path| std::fs::metadata(path).unwrap().len())
        .unwrap();
    let len = std::fs::metadata(&segment).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(len - 8192)
        .unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    assert_eq!(
        db.recovery_report().incomplete_batches_dropped,
        1,
        "{:?}",
        db.recovery_report()
    );
    let kvs = db.kvs("t").unwrap();
    assert_eq!(kvs.get(b"before").unwrap().as_deref(), Some(&b"kept"[..]));
    for key in [b"b1", b"b2", b"b3"] {
        assert_eq!(
            kvs.get(key).unwrap(),
            None,
            "no part of a torn batch is applied"
        );
    }
    assert!(db.check().unwrap().is_ok());
}
