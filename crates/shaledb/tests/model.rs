//! Goal: any sequence of puts, deletes, prefix deletes, batches, compactions, checkpoints and
//! reopens (with or without the index checkpoint) leaves exactly what a BTreeMap model holds.
//! Method: proptest generates operation sequences over two KVSs and a small key space, with
//! small segments so the cleaner and segment rolls take part; after every step the whole
//! contents are compared through gets and ordered scans in both directions.

mod common;

use common::small_options;
use proptest::prelude::*;
use shaledb::Db;
use std::collections::BTreeMap;

/// One write of a batch: (KVS, key, Some((value length, fill)) for a put or None for a delete).
type BatchWrite = (usize, u8, Option<(usize, u8)>);

#[derive(Debug, Clone)]
enum Op {
    Put {
        kvs: usize,
        key: u8,
        value_len: usize,
        fill: u8,
    },
    Delete {
        kvs: usize,
        key: u8,
    },
    PrefixDelete {
        kvs: usize,
        prefix: u8,
    },
    Batch(Vec<BatchWrite>),
    Compact,
    Checkpoint,
    Reopen {
        lose_checkpoint: bool,
    },
}

fn key(key: u8) -> Vec<u8> {
    format!("{}{:03}", (b'a' + key % 4) as char, key).into_bytes()
}

fn value(len: usize, fill: u8) -> Vec<u8> {
    (0..len)
        .map(|index| fill.wrapping_add(index as u8))
        .collect()
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..2usize, any::<u8>(), 0..20_000usize, any::<u8>())
            .prop_map(|(kvs, key, value_len, fill)| Op::Put { kvs, key, value_len, fill }),
        3 => (0..2usize, any::<u8>()).prop_map(|(kvs, key)| Op::Delete { kvs, key }),
        1 => (0..2usize, 0..4u8).prop_map(|(kvs, prefix)| Op::PrefixDelete { kvs, prefix }),
        2 => prop::collection::vec((0..2usize, any::<u8>(), prop::option::of((0..5000usize, any::<u8>()))), 1..8)
            .prop_map(Op::Batch),
        1 => Just(Op::Compact),
        1 => Just(Op::Checkpoint),
        1 => any::<bool>().prop_map(|lose_checkpoint| Op::Reopen { lose_checkpoint }),
    ]
}

type Model = [BTreeMap<Vec<u8>, Vec<u8>>; 2];

fn verify(db: &Db, model: &Model) {
    for (index, expected) in model.iter().enumerate() {
        let kvs = db
            .kvs_with_options(&format!("kvs{index}"), kvs_options(index))
            .unwrap();
        let forward: Vec<(Vec<u8>, Vec<u8>)> = kvs
            .iter()
            .map(|item| item.unwrap())
            .map(|(key, value)| (key.to_vec(), value.to_vec()))
            .collect();
        let wanted: Vec<(Vec<u8>, Vec<u8>)> = expected
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        assert_eq!(forward, wanted, "forward scan of kvs{index}");
        let backward: Vec<Vec<u8>> = kvs
            .iter()
            .rev()
            .map(|item| item.unwrap().0.to_vec())
            .collect();
        let wanted_keys: Vec<Vec<u8>> = expected.keys().rev().cloned().collect();
        assert_eq!(backward, wanted_keys, "reverse scan of kvs{index}");
        for probe in 0..=255u8 {
            let got = kvs.get(key(probe)).unwrap().map(|value| value.to_vec());
            assert_eq!(
                got.as_ref(),
                expected.get(&key(probe)),
                "get {probe} in kvs{index}"
            );
        }
    }
}

/// Two KVSs: kvs0 on capacity only, kvs1 writing to a staging class whose survivors move down.
fn options(dir: &std::path::Path) -> shaledb::Options {
    shaledb::Options {
        staging_dir: Some(dir.join("fast")),
        staging_bytes_max: 4 * small_options().segment_bytes,
        ..small_options()
    }
}

fn kvs_options(index: usize) -> shaledb::KvsOptions {
    shaledb::KvsOptions {
        media_policy: if index == 1 {
            shaledb::MediaPolicy::StagingMaxCapacity
        } else {
            shaledb::MediaPolicy::CapacityOnly
        },
        ..shaledb::KvsOptions::default()
    }
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Some(Db::open(dir.path(), options(dir.path())).unwrap());
    let mut model: Model = Default::default();
    for op in ops {
        let current = db.as_ref().unwrap();
        let kvs = |index: usize| {
            current
                .kvs_with_options(&format!("kvs{index}"), kvs_options(index))
                .unwrap()
        };
        match op {
            Op::Put {
                kvs: index,
                key: k,
                value_len,
                fill,
            } => {
                kvs(index).put(key(k), value(value_len, fill)).unwrap();
                model[index].insert(key(k), value(value_len, fill));
            }
            Op::Delete { kvs: index, key: k } => {
                kvs(index).delete(key(k)).unwrap();
                model[index].remove(&key(k));
            }
            Op::PrefixDelete { kvs: index, prefix } => {
                let prefix = vec![b'a' + prefix];
                kvs(index).prefix_delete(&prefix).unwrap();
                model[index].retain(|key, _| !key.starts_with(&prefix));
            }
            Op::Batch(writes) => {
                let mut batch = current.batch();
                for (index, k, put) in &writes {
                    match put {
                        Some((len, fill)) => batch.put(&kvs(*index), key(*k), value(*len, *fill)),
                        None => batch.delete(&kvs(*index), key(*k)),
                    }
                }
                current.write(batch).unwrap();
                for (index, k, put) in writes {
                    match put {
                        Some((len, fill)) => model[index].insert(key(k), value(len, fill)),
                        None => model[index].remove(&key(k)),
                    };
                }
            }
            Op::Compact => {
                current.compact().unwrap();
            }
            Op::Checkpoint => current.checkpoint().unwrap(),
            Op::Reopen { lose_checkpoint } => {
                db.take().unwrap().close().unwrap();
                if lose_checkpoint {
                    // With a staging class, checkpoints live there (the fastest class).
                    std::fs::remove_file(dir.path().join("fast/checkpoint.ckpt")).unwrap();
                }
                db = Some(Db::open(dir.path(), options(dir.path())).unwrap());
            }
        }
        verify(db.as_ref().unwrap(), &model);
    }
    let report = db.as_ref().unwrap().check().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn matches_a_btreemap(ops in prop::collection::vec(op(), 1..60)) {
        run(ops);
    }
}
