//! Goal: transactions are atomic across a crash: after kill -9 at random moments the bank's
//! total is unchanged, and every acknowledged transfer is there.
//! Method: a child process (this test binary in child mode) runs transfers between two KVSs with
//! `sync` durability, each also incrementing a transfer counter, and prints each
//! acknowledgement; the parent kills it with SIGKILL, reopens and checks the total and that the
//! counter equals the acknowledged count or one more (the transfer in flight).

mod common;

use rand::Rng;
use shaledb::{Db, Durability, Options, TxnOptions};
use std::time::Duration;

const CHILD_ENV: &str = "SHALEDB_TXN_CRASH_CHILD_DIR";
const ACCOUNTS: u32 = 10;
const BALANCE: u64 = 1000;
const KILLS: usize = 8;

fn options() -> Options {
    Options {
        durability: Durability::Sync,
        ..common::small_options()
    }
}

fn read_u64(value: Option<bytes::Bytes>) -> u64 {
    value.map_or(0, |value| u64::from_le_bytes(value[..].try_into().unwrap()))
}

#[test]
fn transfer_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return; // not a child
    };
    let db = Db::open(&dir, options()).unwrap();
    let (checking, savings, meta) = (
        db.kvs("checking").unwrap(),
        db.kvs("savings").unwrap(),
        db.kvs("meta").unwrap(),
    );
    if meta.get("transfers").unwrap().is_none() {
        let mut txn = db.begin().unwrap();
        for account in 0..ACCOUNTS {
            txn.put(&checking, account.to_be_bytes(), BALANCE.to_le_bytes())
                .unwrap();
            txn.put(&savings, account.to_be_bytes(), BALANCE.to_le_bytes())
                .unwrap();
        }
        txn.put(&meta, "transfers", 0u64.to_le_bytes()).unwrap();
        txn.commit().unwrap();
    }
    let mut rng = rand::thread_rng();
    loop {
        let (from, to, amount) = (
            rng.gen_range(0..ACCOUNTS),
            rng.gen_range(0..ACCOUNTS),
            rng.gen_range(1..100u64),
        );
        let count = db
            .transact(TxnOptions::default(), 1, |txn| {
                let from_balance = read_u64(txn.get(&checking, from.to_be_bytes())?);
                let to_balance = read_u64(txn.get(&savings, to.to_be_bytes())?);
                let amount = amount.min(from_balance);
                let count = read_u64(txn.get(&meta, "transfers")?) + 1;
                txn.put(
                    &checking,
                    from.to_be_bytes(),
                    (from_balance - amount).to_le_bytes(),
                )?;
                txn.put(
                    &savings,
                    to.to_be_bytes(),
                    (to_balance + amount).to_le_bytes(),
                )?;
                txn.put(&meta, "transfers", count.to_le_bytes())?;
                Ok(count)
            })
            .unwrap();
        println!("ACK {count}");
    }
}

#[test]
fn transfers_survive_sigkill_atomically() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::thread_rng();
    let mut progressed = 0;
    for round in 0..KILLS {
        let lifetime = Duration::from_millis(rng.gen_range(100..500));
        let acked = common::run_child_then_kill("transfer_child", CHILD_ENV, dir.path(), lifetime);
        let db = Db::open(dir.path(), options()).unwrap();
        let (checking, savings, meta) = (
            db.kvs("checking").unwrap(),
            db.kvs("savings").unwrap(),
            db.kvs("meta").unwrap(),
        );
        let transfers = read_u64(meta.get("transfers").unwrap());
        if let Some(acked) = acked {
            assert!(
                transfers == acked || transfers == acked + 1,
                "round {round}: acked {acked}, found {transfers}"
            );
            progressed += 1;
        }
        if meta.get("transfers").unwrap().is_some() {
            let total: u64 = (0..ACCOUNTS)
                .map(|account| {
                    read_u64(checking.get(account.to_be_bytes()).unwrap())
                        + read_u64(savings.get(account.to_be_bytes()).unwrap())
                })
                .sum();
            assert_eq!(
                total,
                2 * u64::from(ACCOUNTS) * BALANCE,
                "round {round}: money appeared or vanished"
            );
        }
        drop(db);
    }
    assert!(
        progressed >= KILLS / 2,
        "the child made too little progress to test anything"
    );
}
