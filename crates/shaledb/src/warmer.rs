//! Warming the value cache after a restart. Values are read with direct I/O, so a reopened
//! KVDB starts with an empty cache and every read goes to the device until clients have read
//! their hot set again (YCSB C through the server climbed from 14k to 44k ops/s over five runs).
//! So the keys the cache holds are saved in the warm-keys file (`warm_keys.rs`) at a clean close
//! and periodically while open, and at the next open a background job reads their values back
//! through the read path, within a rate, until the list is done, the cache is full or the KVDB
//! closes.

use crate::error::Result;
use crate::index::Entry;
use crate::media::ReadPurpose;
use crate::options::Options;
use crate::store::Store;
use crate::warm_keys::{self, Encoder};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most listed keys of one KVS read together (their device reads in flight at once).
const BATCH_KEYS: usize = 64;

/// Saves the cache's keys, and warms the cache from the last save.
pub struct Warmer {
    store: Arc<Store>,
    /// The KVDB's home, where the warm-keys file lives.
    dir: PathBuf,
    /// Most bytes of the file (`Options::warm_keys_bytes_limit`); 0: no file is written or read.
    max_bytes: u64,
    /// `Options::warm_keys_save_interval`.
    save_interval: Duration,
    /// `Options::warm_reads_per_sec`.
    reads_per_sec: u64,
    /// When the file was last saved, and how much the cache had changed by then; held while
    /// saving, so saves never interleave.
    saved: Mutex<Saved>,
    /// Set from an open that warms from the file until that warming has finished: meanwhile
    /// the file still lists what was hot before this open, which the cache does not yet hold,
    /// so it is not replaced.
    warming: AtomicBool,
}

struct Saved {
    at: Instant,
    changes: u64,
}

impl Warmer {
    /// The warmer of the KVDB in `dir`; warming is due if the options ask for it and a file is
    /// there (the open then starts [`Warmer::warm`] on a thread of its own).
    pub fn new(store: Arc<Store>, dir: PathBuf, options: &Options) -> Self {
        let max_bytes = options.warm_keys_bytes_limit();
        let warming = options.warm_reads_per_sec > 0
            && max_bytes > 0
            && dir.join(warm_keys::FILE_NAME).exists();
        Warmer {
            saved: Mutex::new(Saved {
                at: Instant::now(),
                changes: cache_changes(&store),
            }),
            store,
            dir,
            max_bytes,
            save_interval: options.warm_keys_save_interval,
            reads_per_sec: options.warm_reads_per_sec,
            warming: AtomicBool::new(warming),
        }
    }

    /// Whether warming from the file is due or running.
    pub fn is_warming(&self) -> bool {
        self.warming.load(Ordering::Acquire)
    }

    /// Saves the cache's keys if the save interval has passed (see [`Warmer::save`]).
    pub fn save_if_due(&self) {
        let due =
            !self.save_interval.is_zero() && self.saved.lock().at.elapsed() >= self.save_interval;
        if due {
            self.save();
        }
    }

    /// Replaces the warm-keys file with the keys the cache holds now, as many as fit in its
    /// bound; not while the warming from it runs, nor when no read or write changed the cache
    /// since the last save (or the open). A failure is logged, not returned: the file is a
    /// hint, and losing it costs only a colder next start.
    pub fn save(&self) {
        let mut saved = self.saved.lock();
        saved.at = Instant::now();
        let changes = cache_changes(&self.store);
        if self.max_bytes == 0 || self.is_warming() || changes == saved.changes {
            return;
        }
        let mut encoder = Encoder::new(self.max_bytes);
        self.store
            .cache
            .for_each_key(|kvs_id, key| encoder.push(kvs_id, key));
        match warm_keys::store(&self.dir, &encoder.finish()) {
            Ok(()) => saved.changes = changes,
            Err(error) => {
                tracing::warn!(%error, "the warm-keys file was not saved; the next open warms less")
            }
        }
    }

    /// If warming is due, reads the values of the keys the warm-keys file lists into the
    /// cache, at most `Options::warm_reads_per_sec` keys a second, until the list is done or
    /// the cache is full, or until `pause` says the KVDB is closing: `pause(d)` sleeps up to
    /// `d` (no time: only looks) and returns true once it is. A file that does not decode is
    /// logged and counted, and warms nothing.
    pub fn warm(&self, mut pause: impl FnMut(Duration) -> bool) {
        if self.is_warming() && self.warm_from_file(&mut pause) {
            self.warming.store(false, Ordering::Release);
        }
    }

    /// False when stopped by the close, before the end of the list.
    fn warm_from_file(&self, pause: &mut impl FnMut(Duration) -> bool) -> bool {
        let counters = &self.store.counters;
        let list = match warm_keys::load(&self.dir, self.max_bytes) {
            Ok(Some(list)) => list,
            Ok(None) => return true,
            Err(error) => {
                counters.warm_keys_files_rejected.add(1);
                tracing::warn!(
                    path = %self.dir.join(warm_keys::FILE_NAME).display(),
                    %error,
                    "the warm-keys file is ignored (a hint only: the cache warms from reads)"
                );
                return true;
            }
        };
        counters.warm_keys_listed.add(list.len() as u64);
        let started = Instant::now();
        let mut listed = 0u64;
        let mut keys = list.iter().peekable();
        while let Some((kvs_id, first)) = keys.next() {
            if self.store.cache.is_nearly_full() {
                break;
            }
            let mut batch = vec![first];
            while batch.len() < BATCH_KEYS {
                match keys.next_if(|(next_id, _)| *next_id == kvs_id) {
                    Some((_, key)) => batch.push(key),
                    None => break,
                }
            }
            if let Err(error) = self.warm_batch(kvs_id, &batch) {
                tracing::warn!(%error, "warming the value cache stopped");
                return true;
            }
            listed += batch.len() as u64;
            // Warming is due only with a positive rate.
            let due = Duration::from_secs_f64(listed as f64 / self.reads_per_sec as f64);
            if pause(due.saturating_sub(started.elapsed())) {
                return false;
            }
        }
        tracing::info!(
            listed = list.len(),
            read = counters.warm_values_read.get(),
            secs = started.elapsed().as_secs_f64(),
            "the value cache was warmed from the warm-keys file"
        );
        true
    }

    /// Reads the values of `keys` of KVS `kvs_id` that exist, are not cached yet and are not
    /// kept in their index entries (those need no warming); a KVS dropped since the file was
    /// saved, or a key deleted, is skipped.
    fn warm_batch(&self, kvs_id: u32, keys: &[&[u8]]) -> Result<()> {
        let Some(kvs) = self.store.kvs.get(kvs_id) else {
            return Ok(());
        };
        let cache = &self.store.cache;
        let versions: Vec<(&[u8], Entry)> = keys
            .iter()
            .filter_map(|&key| match kvs.index.get_with_value(key, None)? {
                (entry, None) => Some((key, entry)),
                (_, Some(_kept)) => None,
            })
            .filter(|(key, entry)| !cache.holds(kvs_id, key, entry.seqno))
            .collect();
        for read in self
            .store
            .read_values(kvs_id, &versions, ReadPurpose::Warming)
        {
            // `None`: the cleaner moved the record meanwhile; a hint may skip it.
            if read?.is_some() {
                self.store.counters.warm_values_read.add(1);
            }
        }
        Ok(())
    }
}

/// A number that grows whenever reads or writes may have changed what the cache holds: a miss
/// inserts the value it reads, a write replaces or drops its key's. (A hit changes nothing the
/// file records.)
fn cache_changes(store: &Store) -> u64 {
    store.counters.cache_misses.get() + store.counters.user_bytes_written.get()
}
