//! memcached's protocol as a second front door (`shale serve --memcached ADDR`): the text
//! protocol's storage, retrieval, arithmetic, touch, flush, stats and meta commands of memcached
//! 1.6, on a KVS of its own (`items`), one connection task per client (`connection`).
//!
//! Bounded like the RESP port: `memcached_maxclients` connections, a command line of at most
//! `LINE_BYTES_MAX`, an item of at most one engine value, replies charged to the client budget
//! all clients share. memcached's text protocol has no AUTH: with a password set, the port must
//! be bound to a loopback address (checked at start).

mod connection;
mod items;

use crate::buffers::BufferBudget;
use crate::clients::ClientSlots;
use crate::network_threads::NetworkThreads;
use crate::syncer::Syncer;
pub use items::Items;
use shaledb::SyncPoint;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// How often expired items are looked for, and how many records per look.
const EXPIRE_PERIOD: Duration = Duration::from_secs(1);
const EXPIRE_BATCH_RECORDS: usize = 1000;

/// What memcached connections share.
pub struct Memcached {
    pub items: Items,
    /// The syncer the RESP port uses too: under `sync` durability replies wait for it.
    pub syncer: Arc<Syncer>,
    pub slots: Arc<ClientSlots>,
    pub buffer_budget: Arc<BufferBudget>,
    pub max_output_bytes: usize,
    pub output_stall_timeout: Duration,
    pub started: Instant,
    pub stats: Stats,
}

#[derive(Default)]
pub struct Stats {
    pub total_connections: AtomicU64,
    pub cmd_get: AtomicU64,
    pub cmd_set: AtomicU64,
    pub cmd_touch: AtomicU64,
    pub get_hits: AtomicU64,
    pub get_misses: AtomicU64,
}

impl Stats {
    pub fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Accepts memcached clients until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    memcached: Arc<Memcached>,
    network: Arc<NetworkThreads>,
    mut shutdown: watch::Receiver<bool>,
) {
    tokio::spawn(expire_items(memcached.clone()));
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    Stats::add(&memcached.stats.total_connections);
                    match memcached.slots.try_admit() {
                        Some(slot) => {
                            let (memcached, shutdown) = (memcached.clone(), shutdown.clone());
                            // memcached's connections stay on the thread they start on.
                            network.serve(stream, move |stream, _placement| {
                                Box::pin(connection::serve_client(
                                    memcached, stream, peer, slot, shutdown,
                                ))
                            });
                        }
                        None => {
                            tracing::warn!(%peer, "refusing memcached client: memcached_maxclients reached");
                            tokio::spawn(connection::refuse(stream));
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "memcached accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.changed() => return,
        }
    }
}

/// Deletes expired items in the background, a bounded number of records per step, off the
/// network threads (reads of expired items already answer a miss), and runs a delayed
/// `flush_all` when its time comes on a server no client is talking to.
async fn expire_items(memcached: Arc<Memcached>) {
    let mut ticker = tokio::time::interval(EXPIRE_PERIOD);
    let mut resume = Vec::new();
    loop {
        ticker.tick().await;
        let worker = memcached.clone();
        let from = std::mem::take(&mut resume);
        let step = tokio::task::spawn_blocking(move || {
            // A delayed flush_all was acknowledged when it was asked for, not when it runs.
            worker.items.flush_if_due(&mut SyncPoint::default())?;
            worker.items.expire(&from, EXPIRE_BATCH_RECORDS)
        })
        .await;
        match step {
            Ok(Ok((_, next))) => resume = next.unwrap_or_default(),
            Ok(Err(error)) => tracing::error!(?error, "expiring memcached items failed"),
            Err(error) => tracing::error!(%error, "the memcached expirer's worker failed"),
        }
    }
}
