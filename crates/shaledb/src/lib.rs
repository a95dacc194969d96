//! ShaleDB: a log-structured key-value storage engine for flash, with its index in DRAM.
//!
//! ```no_run
//! # fn main() -> shaledb::Result<()> {
//! let db = shaledb::Db::open("/tmp/shale-doc", shaledb::Options::default())?;
//! let users = db.kvs("users")?;
//! users.put(b"user:1", b"Ada")?;
//! assert_eq!(users.get(b"user:1")?.as_deref(), Some(&b"Ada"[..]));
//! let mut batch = db.batch();
//! batch.put(&users, b"user:2", b"Grace");
//! batch.delete(&users, b"user:1");
//! db.write(batch)?;
//! for item in users.prefix(b"user:") {
//!     let (key, value) = item?;
//!     println!("{key:?} = {value:?}");
//! }
//! db.sync()?;
//! # Ok(()) }
//! ```
//!
//! See `docs/ARCHITECTURE.md` for the data flow, on-media format and invariants.

mod backup;
mod batch;
mod bounds;
mod cache;
mod check;
mod checkpoint;
mod checkpointer;
mod checksum;
mod codec;
mod commit;
mod compression;
mod conflicts;
mod counters;
mod db;
mod engine;
mod error;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
mod gc;
mod home;
mod identity;
mod index;
mod iter;
mod key_groups;
mod kvs;
mod legacy;
pub mod limits;
mod log;
mod manifest;
mod media;
mod options;
mod pacer;
mod poison;
mod record;
mod recovery;
mod segment;
mod sharded_counter;
mod short_bytes;
mod snapshot;
mod snapshot_registry;
mod sorter;
mod space;
mod stats;
mod store;
mod txn;
mod warm_keys;
mod warmer;
mod worker;

pub use backup::BackupReport;
pub use batch::WriteBatch;
pub use bytes::Bytes;
pub use check::CheckReport;
pub use commit::SyncPoint;
pub use compression::Compression;
pub use db::Db;
pub use error::{Error, ErrorKind, Result};
pub use index::RangeSize;
pub use iter::{Iter, Keys};
pub use kvs::Kvs;
pub use manifest::FILE_NAME as MANIFEST_FILE_NAME;
pub use media::{MediaClass, OsStorage, Storage, StorageFile};
pub use options::{Durability, KeyGroups, KvsOptions, MediaPolicy, Options};
pub use recovery::{RecoveryReport, SalvageReport};
pub use sharded_counter::Counter as ShardedCounter;
pub use snapshot::Snapshot;
pub use stats::{MediaStats, Stats};
pub use txn::{Transaction, TxnIter, TxnOptions};
