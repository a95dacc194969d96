//! Goal: values of a KVS created with lz4 compression read back exactly on every path, take less
//! media when they compress and no more when they do not, and damage to a compressed value is
//! reported naming its file and offset, never returned as data and never a panic.
//! Method: two KVSs side by side (lz4 and none) written with compressible and incompressible
//! values, singly, in batches across both and in transactions, read by get, multi-get, scans,
//! snapshots and transactions, across reopen, a full replay, a crash, cleaning and a backup;
//! then, in a closed KVDB, one record's compressed value damaged (a flipped byte) or replaced
//! by a crafted one with a valid CRC (bytes that do not decompress, a length past the value
//! limit, an unknown flag bit).

mod common;

use common::files::capacity_segments;
use common::small_options;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::{Compression, Db, Durability, ErrorKind, Kvs, KvsOptions, Options};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The two KVSs: values compressed, and values as given.
const KVSS: [(&str, Compression); 2] = [("packed", Compression::Lz4), ("plain", Compression::None)];

fn open_kvss(db: &Db) -> Vec<Kvs> {
    KVSS.iter()
        .map(|&(name, compression)| {
            let options = KvsOptions {
                compression,
                ..KvsOptions::default()
            };
            db.kvs_with_options(name, options).unwrap()
        })
        .collect()
}

/// A value lz4 shrinks to a fraction: a short random phrase, repeated.
fn compressible(rng: &mut impl Rng, len: usize) -> Vec<u8> {
    let phrase: Vec<u8> = (0..16).map(|_| rng.gen_range(b'a'..=b'z')).collect();
    phrase.iter().copied().cycle().take(len).collect()
}

/// A value lz4 cannot shrink: uniform random bytes.
fn incompressible(rng: &mut impl Rng, len: usize) -> Vec<u8> {
    let mut value = vec![0; len];
    rng.fill(&mut value[..]);
    value
}

/// The value of write `i`: compressible or not, from empty to 300 KB.
fn value_of(i: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(i);
    let len = match i % 50 {
        0 => 0,
        1 => 300_000,
        _ => (i as usize * 97) % 5000,
    };
    if i.is_multiple_of(2) {
        compressible(&mut rng, len)
    } else {
        incompressible(&mut rng, len)
    }
}

fn key_of(i: u64) -> Vec<u8> {
    format!("key{:05}", i % 700).into_bytes()
}

/// Writes `count` values from `first` on to both KVSs (the same key and value in each): single
/// puts, batches spanning both KVSs, transactions; every seventh write also deletes a key.
fn write_mixed(db: &Db, kvss: &[Kvs], models: &mut [Model], first: u64, count: u64) {
    for i in first..first + count {
        let (key, value) = (key_of(i), value_of(i));
        let deleted = (i % 7 == 0).then(|| key_of(i * 3 + 1));
        match i % 10 {
            0..=5 => {
                for kvs in kvss {
                    kvs.put(&key, &value).unwrap();
                    if let Some(deleted) = &deleted {
                        kvs.delete(deleted).unwrap();
                    }
                }
            }
            6..=8 => {
                let mut batch = db.batch();
                for kvs in kvss {
                    batch.put(kvs, &key, &value);
                    if let Some(deleted) = &deleted {
                        batch.delete(kvs, deleted);
                    }
                }
                db.write(batch).unwrap();
            }
            _ => {
                let mut txn = db.begin().unwrap();
                for kvs in kvss {
                    txn.put(kvs, &key, &value).unwrap();
                    if let Some(deleted) = &deleted {
                        txn.delete(kvs, deleted).unwrap();
                    }
                }
                txn.commit().unwrap();
            }
        }
        for model in models.iter_mut() {
            model.insert(key.clone(), value.clone());
            if let Some(deleted) = &deleted {
                model.remove(deleted);
            }
        }
    }
}

/// Every read path of each KVS returns exactly its model.
fn verify(db: &Db, kvss: &[Kvs], models: &[Model]) {
    for (kvs, model) in kvss.iter().zip(models) {
        let name = kvs.name();
        let scanned: Vec<(Vec<u8>, Vec<u8>)> = kvs
            .iter()
            .map(|item| {
                let (key, value) = item.unwrap();
                (key.to_vec(), value.to_vec())
            })
            .collect();
        let expected: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
        assert!(scanned == expected, "{name}: the scan differs");
        let reversed: Vec<Vec<u8>> = kvs
            .iter()
            .rev()
            .map(|item| item.unwrap().0.to_vec())
            .collect();
        assert!(
            reversed.iter().eq(model.keys().rev()),
            "{name}: reverse scan"
        );
        let keys: Vec<Vec<u8>> = (0..700).map(key_of).collect();
        let values = kvs.multi_get(&keys).unwrap();
        let snapshot = db.snapshot().unwrap();
        let txn = db.begin().unwrap();
        for (index, (key, multi_got)) in keys.iter().zip(values).enumerate() {
            let wanted = model.get(key);
            let got = kvs.get(key).unwrap();
            assert_eq!(
                got.as_deref(),
                wanted.map(Vec::as_slice),
                "{name}: get {index}"
            );
            assert_eq!(
                multi_got.as_deref(),
                wanted.map(Vec::as_slice),
                "{name}: multi_get"
            );
            if index % 10 == 0 {
                let at_snapshot = snapshot.get(kvs, key).unwrap();
                assert_eq!(
                    at_snapshot.as_deref(),
                    wanted.map(Vec::as_slice),
                    "{name}: snapshot"
                );
                let in_txn = txn.get(kvs, key).unwrap();
                assert_eq!(
                    in_txn.as_deref(),
                    wanted.map(Vec::as_slice),
                    "{name}: transaction"
                );
            }
        }
        txn.abort();
    }
}

#[test]
fn every_read_path_returns_what_was_written_across_reopen_replay_cleaning_and_backup() {
    let dir = tempfile::tempdir().unwrap();
    let mut models = [Model::new(), Model::new()];
    let db = Db::open(dir.path(), small_options()).unwrap();
    let kvss = open_kvss(&db);
    write_mixed(&db, &kvss, &mut models, 0, 1500);
    verify(&db, &kvss, &models);
    drop(kvss);
    db.close().unwrap();

    // Reopened from the checkpoint: the KVSs keep their compression.
    let db = Db::open(dir.path(), small_options()).unwrap();
    assert_eq!(
        db.kvs("packed").unwrap().options().compression,
        Compression::Lz4
    );
    assert_eq!(
        db.kvs("plain").unwrap().options().compression,
        Compression::None
    );
    let kvss = open_kvss(&db);
    verify(&db, &kvss, &models);
    drop(kvss);
    db.close().unwrap();

    // Without the checkpoint: every record replayed.
    std::fs::remove_file(dir.path().join("capacity/checkpoint.ckpt")).unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    assert!(!db.recovery_report().checkpoint_loaded);
    let kvss = open_kvss(&db);
    verify(&db, &kvss, &models);

    // Overwritten, then cleaned: the cleaner moves compressed values as they are.
    write_mixed(&db, &kvss, &mut models, 1500, 1500);
    let freed = db.compact().unwrap();
    assert!(freed > 0, "compact cleaned segments");
    verify(&db, &kvss, &models);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report:?}");
    // A backup copies the stored bytes, and the KVSs' compression with its manifest.
    let backup = tempfile::tempdir().unwrap();
    db.backup(backup.path()).unwrap();
    drop(kvss);
    db.close().unwrap();
    for home in [dir.path(), backup.path()] {
        let db = Db::open(home, small_options()).unwrap();
        assert_eq!(
            db.kvs("packed").unwrap().options().compression,
            Compression::Lz4
        );
        let kvss = open_kvss(&db);
        verify(&db, &kvss, &models);
    }
}

/// Live bytes and client bytes written to media after writing `values` to a KVS of a fresh
/// KVDB with `compression`.
fn media_bytes(compression: Compression, values: &[Vec<u8>]) -> (u64, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let options = KvsOptions {
        compression,
        ..KvsOptions::default()
    };
    let kvs = db.kvs_with_options("t", options).unwrap();
    for (index, value) in values.iter().enumerate() {
        kvs.put(format!("key{index:05}"), value).unwrap();
    }
    db.sync().unwrap();
    let stats = db.stats();
    let by_clients = stats
        .media
        .iter()
        .map(|media| media.bytes_written_by_clients)
        .sum();
    (stats.live_bytes, by_clients, stats.user_bytes_written)
}

#[test]
fn compressible_values_take_less_media_and_incompressible_ones_no_more() {
    let mut rng = StdRng::seed_from_u64(1);
    let compressible: Vec<Vec<u8>> = (0..2000).map(|_| compressible(&mut rng, 1000)).collect();
    let (live_none, written_none, user_none) = media_bytes(Compression::None, &compressible);
    let (live_lz4, written_lz4, user_lz4) = media_bytes(Compression::Lz4, &compressible);
    assert_eq!(user_lz4, user_none, "user bytes count values as written");
    assert!(live_lz4 * 4 < live_none, "live {live_lz4} vs {live_none}");
    assert!(
        written_lz4 * 4 < written_none,
        "written {written_lz4} vs {written_none}"
    );

    let incompressible: Vec<Vec<u8>> = (0..2000).map(|_| incompressible(&mut rng, 1000)).collect();
    // Exactly equal: bytes written are not, as they count partial pages rewritten by each
    // flush, which timing decides.
    let (live_none, _, _) = media_bytes(Compression::None, &incompressible);
    let (live_lz4, _, _) = media_bytes(Compression::Lz4, &incompressible);
    assert_eq!(
        live_lz4, live_none,
        "incompressible values are stored as given"
    );
}

const CRASH_CHILD_ENV: &str = "SHALEDB_COMPRESSION_CRASH_CHILD_DIR";

/// Child mode of the next test: writes value `i` under key `i` to both KVSs, durably, and
/// acknowledges each, until it is killed.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CRASH_CHILD_ENV) else {
        return;
    };
    let options = Options {
        durability: Durability::Sync,
        ..small_options()
    };
    let db = Db::open(&dir, options).unwrap();
    let kvss = open_kvss(&db);
    for i in 0u64.. {
        for kvs in &kvss {
            kvs.put(i.to_be_bytes(), value_of(i)).unwrap();
        }
        println!("ACK {i}");
    }
}

#[test]
fn acknowledged_compressed_values_survive_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let acked = common::run_child_then_kill(
        "crash_child",
        CRASH_CHILD_ENV,
        dir.path(),
        std::time::Duration::from_millis(1500),
    )
    .expect("the child acknowledged writes");
    let db = Db::open(dir.path(), small_options()).unwrap();
    for kvs in open_kvss(&db) {
        for i in 0..=acked + 1 {
            match kvs.get(i.to_be_bytes()).unwrap() {
                Some(value) => assert_eq!(value.to_vec(), value_of(i), "{} {i}", kvs.name()),
                None => assert!(i > acked, "{}: acknowledged write {i} lost", kvs.name()),
            }
        }
    }
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

/// A record found in a segment file: where, and its bytes.
struct FoundRecord {
    path: PathBuf,
    offset: u64,
    bytes: Vec<u8>,
}

/// Bytes of a record header (see `record.rs`): crc32c, kind, flags, key_len, kvs_id, value_len,
/// seqno.
const HEADER_BYTES: usize = 24;
const FLAG_VALUE_LZ4: u8 = 2;

/// The record of `key` in the capacity segments of `home`, read as an operator would.
fn find_record(home: &Path, key: &[u8]) -> FoundRecord {
    for path in capacity_segments(home) {
        let file = std::fs::read(&path).unwrap();
        let mut offset = 4096;
        while offset + HEADER_BYTES <= file.len() && file[offset..offset + HEADER_BYTES] != [0; 24]
        {
            let key_len = u16::from_le_bytes(file[offset + 6..offset + 8].try_into().unwrap());
            let value_len = u32::from_le_bytes(file[offset + 12..offset + 16].try_into().unwrap());
            let end = offset + HEADER_BYTES + key_len as usize + value_len as usize;
            if &file[offset + HEADER_BYTES..offset + HEADER_BYTES + key_len as usize] == key {
                return FoundRecord {
                    path,
                    offset: offset as u64,
                    bytes: file[offset..end].to_vec(),
                };
            }
            offset = end;
        }
    }
    panic!("no record of {key:?}");
}

/// Writes compressible values to an lz4 KVS and closes the KVDB (its segments sealed and
/// checkpointed, so the next open reads none of them); returns the record of one key.
fn write_and_find(home: &Path, key: &[u8]) -> FoundRecord {
    let db = Db::open(home, small_options()).unwrap();
    let kvs = open_kvss(&db).remove(0);
    let mut rng = StdRng::seed_from_u64(2);
    for index in 0..300 {
        kvs.put(format!("key{index:05}"), compressible(&mut rng, 2000))
            .unwrap();
    }
    drop(kvs);
    db.close().unwrap();
    let found = find_record(home, key);
    assert_ne!(
        found.bytes[5] & FLAG_VALUE_LZ4,
        0,
        "the value is stored compressed"
    );
    found
}

/// Writes `bytes` over the record at `found`, with its CRC made to match them.
fn overwrite_resealed(found: &FoundRecord, mut bytes: Vec<u8>) {
    let crc = crc32c::crc32c(&bytes[4..]);
    bytes[..4].copy_from_slice(&crc.to_le_bytes());
    common::files::write_at(&found.path, found.offset, &bytes);
}

/// The reopened KVDB reports the damaged record at `found` as corruption saying `reason`, from
/// a get of its key, a scan over it and `check`, and still reads the others.
fn damage_is_reported(home: &Path, found: &FoundRecord, key: &[u8], reason: &str) {
    let db = Db::open(home, small_options()).unwrap();
    let kvs = db.kvs("packed").unwrap();
    let place = format!("{} at offset {}", found.path.display(), found.offset);
    let error = kvs.get(key).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    let message = error.to_string();
    assert!(
        message.contains(&place) && message.contains(reason),
        "{message}"
    );
    let scan_error = kvs
        .iter()
        .find_map(Result::err)
        .expect("a scan meets the damaged record");
    assert!(scan_error.to_string().contains(&place), "{scan_error}");
    assert!(
        kvs.get("key00001").unwrap().is_some(),
        "other values stay readable"
    );
    let report = db.check().unwrap();
    let line = format!("{} at {}: ", found.path.display(), found.offset);
    assert!(
        report
            .corruptions
            .iter()
            .any(|found| found.starts_with(&line) && found.contains(reason)),
        "{report:?}"
    );
}

#[test]
fn a_flipped_byte_in_a_compressed_value_is_caught_by_its_crc() {
    let dir = tempfile::tempdir().unwrap();
    let found = write_and_find(dir.path(), b"key00150");
    let mut bytes = found.bytes.clone();
    let middle = bytes.len() - 20;
    bytes[middle] ^= 0x5a;
    common::files::write_at(&found.path, found.offset, &bytes);
    damage_is_reported(dir.path(), &found, b"key00150", "CRC mismatch");
}

/// Changes a stored compressed value in place.
type Damage = fn(&mut [u8]);

#[test]
fn a_compressed_value_with_a_valid_crc_that_does_not_decompress_is_corruption() {
    let stored_at = HEADER_BYTES + b"key00150".len();
    let cases: [(&str, Damage, &str); 3] = [
        (
            "an lz4 block that is no lz4",
            |stored| stored[4..].fill(0xff),
            "does not decompress",
        ),
        (
            "a length one byte longer than the block holds",
            |stored| {
                let length = u32::from_le_bytes(stored[..4].try_into().unwrap());
                stored[..4].copy_from_slice(&(length + 1).to_le_bytes());
            },
            "not the 2001 it says",
        ),
        (
            "a length past the value limit",
            |stored| {
                let past = shaledb::limits::VALUE_BYTES_MAX as u32 + 1;
                stored[..4].copy_from_slice(&past.to_le_bytes());
            },
            "past the value limit",
        ),
    ];
    for (what, damage, reason) in cases {
        let dir = tempfile::tempdir().unwrap();
        let found = write_and_find(dir.path(), b"key00150");
        let mut bytes = found.bytes.clone();
        damage(&mut bytes[stored_at..]);
        overwrite_resealed(&found, bytes);
        eprintln!("case: {what}");
        damage_is_reported(dir.path(), &found, b"key00150", reason);
    }
}

#[test]
fn a_record_with_an_unknown_flag_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let found = write_and_find(dir.path(), b"key00150");
    let mut bytes = found.bytes.clone();
    bytes[5] |= 0x04;
    overwrite_resealed(&found, bytes);
    damage_is_reported(
        dir.path(),
        &found,
        b"key00150",
        "unknown record flag: bit 2 (0x04)",
    );
}

/// A short value stored compressed is kept in its index entry like any short value: when
/// written, and after a reopen that replays its record from the log (which decompresses it).
#[test]
fn short_compressed_values_are_kept_in_the_index_after_a_replay() {
    let dir = tempfile::tempdir().unwrap();
    let short: &[u8] = b"0000000000000000";
    {
        let db = Db::open(dir.path(), small_options()).unwrap();
        let options = KvsOptions {
            compression: Compression::Lz4,
            ..KvsOptions::default()
        };
        let kvs = db.kvs_with_options("packed", options).unwrap();
        // LZ4 stores these 16 bytes in 15.
        kvs.put(b"short", short).unwrap();
        assert_eq!(kvs.get(b"short").unwrap().as_deref(), Some(short));
        assert_eq!(db.stats().index_value_hits, 1);
        db.close().unwrap();
    }
    std::fs::remove_file(dir.path().join("capacity/checkpoint.ckpt")).unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    assert!(!db.recovery_report().checkpoint_loaded);
    let kvs = db.kvs("packed").unwrap();
    assert_eq!(kvs.get(b"short").unwrap().as_deref(), Some(short));
    assert_eq!(
        db.stats().index_value_hits,
        1,
        "replay kept the value it decompressed"
    );
}
