//! Goal: with `sync` durability, every acknowledged batch survives `kill -9`, and no batch is
//! ever half applied.
//! Method: a child process (this test binary, re-run in child mode) applies deterministic batches
//! one at a time and prints each acknowledgement; the parent kills it with SIGKILL at a random
//! moment, reopens the KVDB and requires its contents to equal the model after the last
//! acknowledged batch or after the one in flight, nothing in between. Small segments keep
//! checkpoints running, and a thread compacting in a loop beside the writer makes kills land
//! in the middle of cleaning.

mod common;

use rand::Rng;
use shaledb::{Db, Durability, Options};
use std::collections::BTreeMap;
use std::time::Duration;

const CHILD_ENV: &str = "SHALEDB_CRASH_CHILD_DIR";
const KILLS: usize = 16;

fn options() -> Options {
    Options {
        durability: Durability::Sync,
        checkpoint_interval_bytes: 1 << 20,
        ..common::small_options()
    }
}

/// What batch `i` does, as (key, Some(value)) puts, (key, None) deletes and prefix deletes.
enum Write {
    Put(String, Vec<u8>),
    Delete(String),
    PrefixDelete(String),
}

fn batch_writes(i: u64) -> Vec<Write> {
    let group = i / 10;
    let mut writes = vec![Write::Put(
        format!("k{:02}", i % 97),
        vec![(i % 251) as u8; 100 + (i as usize * 37) % 3000],
    )];
    for part in 0..3 {
        writes.push(Write::Put(
            format!("b{group}:{i}:{part}"),
            i.to_le_bytes().to_vec(),
        ));
    }
    if i >= 5 {
        writes.push(Write::Delete(format!("b{}:{}:1", (i - 5) / 10, i - 5)));
    }
    if group >= 3 && i.is_multiple_of(10) {
        // Deletes the keys of a whole group of ten batches; keeps the key set bounded.
        writes.push(Write::PrefixDelete(format!("b{}:", group - 3)));
    }
    writes.push(Write::Put("last".into(), i.to_le_bytes().to_vec()));
    writes
}

/// The model after batches `0..=last`, advanced incrementally (`last` never goes back).
#[derive(Default)]
struct Model {
    applied: u64,
    map: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Model {
    fn advance_to(&mut self, last: Option<u64>) -> &BTreeMap<Vec<u8>, Vec<u8>> {
        let until = last.map_or(0, |last| last + 1);
        assert!(until >= self.applied, "applied batches never disappear");
        for i in self.applied..until {
            for write in batch_writes(i) {
                match write {
                    Write::Put(key, value) => {
                        self.map.insert(key.into_bytes(), value);
                    }
                    Write::Delete(key) => {
                        self.map.remove(key.as_bytes());
                    }
                    Write::PrefixDelete(prefix) => self
                        .map
                        .retain(|key, _| !key.starts_with(prefix.as_bytes())),
                }
            }
        }
        self.applied = until;
        &self.map
    }
}

fn last_applied(db: &Db) -> Option<u64> {
    let kvs = db.kvs("crash").unwrap();
    kvs.get(b"last")
        .unwrap()
        .map(|bytes| u64::from_le_bytes(bytes[..].try_into().unwrap()))
}

/// Child mode: write batches until killed.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return; // not a child: nothing to do
    };
    let db = Db::open(&dir, options()).unwrap();
    let kvs = db.kvs("crash").unwrap();
    let mut next = last_applied(&db).map_or(0, |last| last + 1);
    println!("READY {next}");
    // Clean continuously beside the writer, so kills land in the middle of cleaning too.
    let db = std::sync::Arc::new(db);
    let cleaner = db.clone();
    std::thread::spawn(move || loop {
        cleaner.compact().unwrap();
    });
    loop {
        let mut batch = db.batch();
        for write in batch_writes(next) {
            match write {
                Write::Put(key, value) => batch.put(&kvs, key, value),
                Write::Delete(key) => batch.delete(&kvs, key),
                Write::PrefixDelete(prefix) => batch.prefix_delete(&kvs, prefix),
            }
        }
        db.write(batch).unwrap();
        println!("ACK {next}");
        next += 1;
    }
}

#[test]
fn acknowledged_batches_survive_sigkill() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::thread_rng();
    let mut total_acked = 0;
    let mut model = Model::default();
    for round in 0..KILLS {
        let lifetime = Duration::from_millis(rng.gen_range(100..600));
        let acked = common::run_child_then_kill("crash_child", CHILD_ENV, dir.path(), lifetime);
        // What `shale check` sees first after a crash: a read-only open, which changes nothing.
        let read_only = Db::open(
            dir.path(),
            Options {
                read_only: true,
                ..options()
            },
        )
        .unwrap();
        let report = read_only.check().unwrap();
        assert!(report.is_ok(), "round {round}, read-only: {report:?}");
        drop(read_only);
        let db = Db::open(dir.path(), options()).unwrap();
        let last = last_applied(&db);
        if let Some(acked) = acked {
            let last = last.expect("acknowledged batches exist");
            assert!(
                last == acked || last == acked + 1,
                "round {round}: acked {acked}, found {last}"
            );
            total_acked += 1;
        }
        let expected = model.advance_to(last);
        let found: BTreeMap<Vec<u8>, Vec<u8>> = db
            .kvs("crash")
            .unwrap()
            .iter()
            .map(|item| item.unwrap())
            .map(|(key, value)| (key.to_vec(), value.to_vec()))
            .collect();
        assert_eq!(
            found.len(),
            expected.len(),
            "round {round}: key count after batch {last:?}"
        );
        assert!(
            &found == expected,
            "round {round}: contents differ from the model after batch {last:?}"
        );
        let report = db.check().unwrap();
        assert!(report.is_ok(), "round {round}: {report:?}");
        drop(db);
    }
    assert!(
        total_acked >= KILLS / 2,
        "the child made too little progress to test anything"
    );
}
