//! What a put costs in CPU when several threads write at once: each thread commits one-put
//! batches of a 100,000-key set (the server's SET of a random key, without the server) and the
//! threads' CPU time per put is printed. `shared` has every thread write one KVS; `own-kvs` gives
//! each thread a KVS of its own in the one KVDB (the log, the commit order and the segments
//! shared, the index not); `separate` gives each thread a KVDB of its own (nothing shared but the
//! machine). Comparing them tells what sharing costs beyond what the threads cost each other
//! through the machine alone (docs/SERVER.md, "Two writing threads").
//!
//! `cargo run --release -p shaledb --example write_scaling -- DIR THREADS [shared|own-kvs|separate]`

use rustix::time::{clock_gettime, ClockId};
use shaledb::{Db, Kvs, Options};
use std::sync::Arc;

const KEYS: u64 = 100_000;
const PUTS: u64 = 2_000_000;

fn key(number: u64) -> String {
    format!("\0\0\0\x10key:{number:012}s")
}

fn thread_cpu_nanos() -> u64 {
    let now = clock_gettime(ClockId::ThreadCPUTime);
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

fn main() -> shaledb::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(threads)) = (
        args.next(),
        args.next().and_then(|n| n.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: write_scaling DIR THREADS [shared|own-kvs|separate]");
        std::process::exit(2);
    };
    if threads == 0 {
        eprintln!("THREADS is at least 1");
        std::process::exit(2);
    }
    let per_thread = PUTS / threads as u64;
    let mode = args.next().unwrap_or_else(|| "shared".into());
    let (kvdbs, kvs_per_kvdb) = match mode.as_str() {
        "shared" => (1, 1),
        "own-kvs" => (1, threads),
        "separate" => (threads, 1),
        _ => {
            eprintln!("the mode is shared, own-kvs or separate");
            std::process::exit(2);
        }
    };
    // Fresh KVDBs each run; the directory is the caller's scratch space.
    let dbs: Vec<Arc<Db>> = (0..kvdbs)
        .map(|number| {
            let path = format!("{dir}/{number}");
            let _ = std::fs::remove_dir_all(&path);
            Db::open(&path, Options::default()).map(Arc::new)
        })
        .collect::<shaledb::Result<_>>()?;
    // Thread `t` writes KVS `t % kvs_per_kvdb` of KVDB `t % kvdbs`, filled first.
    let mut kvss: Vec<(Arc<Db>, Kvs)> = Vec::new();
    for thread in 0..threads {
        let db = dbs[thread % kvdbs].clone();
        let kvs = db.kvs(&format!("keys{}", thread % kvs_per_kvdb))?;
        if thread < kvdbs * kvs_per_kvdb {
            for number in 0..KEYS {
                kvs.put(key(number), b"xxx")?;
            }
        }
        kvss.push((db, kvs));
    }
    let workers: Vec<_> = kvss
        .into_iter()
        .enumerate()
        .map(|(thread, (db, kvs))| {
            std::thread::spawn(move || -> shaledb::Result<u64> {
                // xorshift64: the keys in an order no two threads share.
                let mut state = 0x9e37_79b9_7f4a_7c15 ^ (thread as u64 + 1);
                let start = thread_cpu_nanos();
                for _ in 0..per_thread {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let mut batch = db.batch();
                    batch.put(&kvs, key(state % KEYS), b"xxx");
                    let point = db.write_unsynced(batch)?;
                    debug_assert!(point.is_empty(), "interval durability syncs by itself");
                }
                Ok(thread_cpu_nanos() - start)
            })
        })
        .collect();
    let mut cpu_nanos = 0;
    for worker in workers {
        cpu_nanos += worker.join().expect("a writer panicked")?;
    }
    println!(
        "{threads} threads, {mode}: {:.0} ns of CPU per put",
        cpu_nanos as f64 / (per_thread * threads as u64) as f64
    );
    Ok(())
}
