//! How long an index checkpoint of N keys takes: fills a KVS with N random 16-byte keys, then
//! writes five checkpoints and prints each one's wall time.
//!
//! `cargo run --release -p shaledb --example checkpoint_cost -- DIR KEYS`

use shaledb::{Db, Options};
use std::time::Instant;

fn main() -> shaledb::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(keys)) = (args.next(), args.next().and_then(|n| n.parse::<u64>().ok()))
    else {
        eprintln!("usage: checkpoint_cost DIR KEYS");
        std::process::exit(2);
    };
    // A fresh KVDB each run; the directory is the caller's scratch space.
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir, Options::default())?;
    let kvs = db.kvs("keys")?;
    for first in (0..keys).step_by(1000) {
        let mut batch = db.batch();
        for number in first..(first + 1000).min(keys) {
            let scattered = number.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_000_000;
            batch.put(&kvs, format!("user{scattered:012}").as_bytes(), b"v");
        }
        db.write(batch)?;
    }
    for _ in 0..5 {
        let started = Instant::now();
        db.checkpoint()?;
        println!("checkpoint of {keys} keys: {:?}", started.elapsed());
    }
    Ok(())
}
