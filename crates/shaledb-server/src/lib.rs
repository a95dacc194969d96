//! `shale serve`: a Redis-protocol server over one ShaleDB KVDB.
//!
//! Modules: [`resp`] parses requests and encodes replies (RESP2 and RESP3); [`keyspace`] maps
//! Redis types onto ordered engine records; [`commands`] holds the command table; `connection`
//! runs one client; `admin` serves `/metrics`, `/livez` and `/readyz`; [`config`] merges the
//! config file, environment and flags. See docs/SERVER.md.

mod admin;
mod buffers;
mod clients;
mod combiner;
pub mod commands;
pub mod config;
mod connection;
mod cpu_idle;
pub mod glob;
pub mod keyspace;
mod memcached;
mod metrics;
mod network_threads;
pub mod resp;
mod stripes;
mod syncer;

use anyhow::{Context, Result};
use clients::ClientSlots;
use commands::Shared;
pub use config::{Config, KvdbArgs, ServeArgs};
use network_threads::NetworkThreads;
use shaledb::{Db, Options};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// How long a drain waits for in-flight requests before it syncs and exits anyway.
const DRAIN_WAIT: Duration = Duration::from_secs(30);

/// Logs JSON, one event per line, to standard output.
pub fn init_logging(level: &str) {
    let filter = tracing_subscriber_filter(level);
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_writer(std::io::stdout)
        .with_env_filter(filter)
        .init();
}

fn tracing_subscriber_filter(level: &str) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_new(level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
}

/// Opens the KVDB and serves clients until SIGTERM or SIGINT, then drains and syncs.
pub fn serve(config: Config) -> Result<()> {
    return_freed_buffers_to_the_system();
    // The main thread accepts clients and runs the background jobs; the clients are served
    // on the network threads.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let network = Arc::new(NetworkThreads::start(config.network_threads)?);
    runtime.block_on(run(config, network))
}

/// Client buffers of 1 MiB or more come from their own mappings, given back to the system when
/// freed. By default glibc raises that threshold after each such free (up to 32 MiB), so the
/// buffers of clients closed at `max_client_buffers_bytes` stay in the heap and the process keeps
/// memory the budget no longer counts (measured: 104 MiB resident over a 64 MiB budget).
fn return_freed_buffers_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it is called before the runtime starts
    // any thread, and a failure (0) leaves the default policy, which is correct too.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// Whether the server takes traffic; `/readyz` reports it.
pub(crate) struct Readiness(AtomicBool);

impl Readiness {
    pub(crate) fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

async fn run(config: Config, network: Arc<NetworkThreads>) -> Result<()> {
    let options = Options {
        durability: config.durability,
        cache_bytes: config.cache_bytes,
        capacity_dir: config.capacity.clone(),
        staging_dir: config.staging.clone(),
        staging_bytes_max: config
            .staging_bytes_max
            .unwrap_or(Options::default().staging_bytes_max),
        space_bytes_max: config.space_bytes_max,
        cleaner_deferred_segments: config
            .cleaner_deferred_segments
            .unwrap_or(Options::default().cleaner_deferred_segments),
        warm_reads_per_sec: config.warm_reads_per_sec,
        index_value_bytes_max: config.index_value_bytes_max,
        ..Options::default()
    };
    let path = config.db.clone();
    let db = tokio::task::spawn_blocking(move || Db::open(&path, options))
        .await?
        .with_context(|| format!("opening KVDB {}", config.db.display()))?;
    let db = Arc::new(db);
    let listener = TcpListener::bind(&config.bind)
        .await
        .with_context(|| format!("listening on {}", config.bind))?;
    let shared = {
        let (db, config, balance) = (db.clone(), config.clone(), network.balance());
        tokio::task::spawn_blocking(move || Shared::new(db, config, balance))
            .await?
            .map_err(|failure| {
                anyhow::anyhow!("opening the Redis databases: {}", failure_text(failure))
            })?
    };
    let shared = Arc::new(shared);
    tokio::spawn(expire_keys(shared.clone()));
    {
        let shared = shared.clone();
        tokio::spawn(network.clone().run_balancer(
            {
                let shared = shared.clone();
                move || shared.metrics.commands_processed()
            },
            move || shared.connections_received.load(Ordering::Relaxed),
        ));
    }
    let readiness = Arc::new(Readiness(AtomicBool::new(false)));
    if let Some(admin_bind) = &config.admin_bind {
        let admin_listener = TcpListener::bind(admin_bind)
            .await
            .with_context(|| format!("listening on admin address {admin_bind}"))?;
        tracing::info!(address = %admin_listener.local_addr()?, "admin listening");
        tokio::spawn(admin::serve(
            admin_listener,
            shared.clone(),
            readiness.clone(),
        ));
    }
    let mut terminate = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    let (shutdown_sender, shutdown) = watch::channel(false);
    let memcached_slots = match &config.memcached {
        Some(address) => {
            let slots = ClientSlots::new(config.memcached_maxclients);
            start_memcached(
                &config,
                address,
                &db,
                &shared,
                slots.clone(),
                network.clone(),
                shutdown.clone(),
            )
            .await?;
            Some(slots)
        }
        None => None,
    };
    readiness.0.store(true, Ordering::Release);
    tracing::info!(
        address = %listener.local_addr()?,
        kvdb = %config.db.display(),
        durability = ?config.durability,
        maxclients = config.maxclients,
        auth = config.password.is_some(),
        "listening"
    );
    let signal_name = loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    shared.connections_received.fetch_add(1, Ordering::Relaxed);
                    shared.metrics.connections_total.inc();
                    match shared.client_slots.try_admit() {
                        Some(slot) => {
                            let (shared, shutdown) = (shared.clone(), shutdown.clone());
                            let threads = network.clone();
                            network.serve(stream, move |stream, placement| {
                                connection::serve_client(
                                    shared, threads, stream, placement, peer, slot, shutdown,
                                )
                            });
                        }
                        None => {
                            shared.metrics.connections_rejected.inc();
                            tracing::warn!(%peer, "refusing client: maxclients reached");
                            tokio::spawn(refuse(stream));
                        }
                    }
                }
                Err(error) => {
                    // Out of file descriptors and the like: wait, don't spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = terminate.recv() => break "SIGTERM",
            _ = interrupt.recv() => break "SIGINT",
        }
    };
    readiness.0.store(false, Ordering::Release);
    drop(listener);
    tracing::info!(signal = signal_name, "draining");
    let _ = shutdown_sender.send(true);
    shared.input_waits.wake_all();
    let memcached_left = async {
        if let Some(slots) = &memcached_slots {
            slots.all_left().await;
        }
    };
    let all_left = async { tokio::join!(shared.client_slots.all_left(), memcached_left) };
    if tokio::time::timeout(DRAIN_WAIT, all_left).await.is_err() {
        tracing::warn!("clients still busy after the drain wait; syncing anyway");
    }
    // Everything acknowledged is durable after this; the KVDB closes when the last handle drops.
    tokio::task::spawn_blocking(move || db.sync().context("syncing the KVDB")).await??;
    tracing::info!("stopped");
    Ok(())
}

/// Opens memcached's KVS and serves its protocol on `address`.
async fn start_memcached(
    config: &Config,
    address: &str,
    db: &Arc<Db>,
    shared: &Arc<Shared>,
    slots: Arc<ClientSlots>,
    network: Arc<NetworkThreads>,
    shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let listener = TcpListener::bind(address)
        .await
        .with_context(|| format!("listening for memcached on {address}"))?;
    let local = listener.local_addr()?;
    if config.password.is_some() && !local.ip().is_loopback() {
        anyhow::bail!(
            "memcached's protocol has no AUTH: with a password set, --memcached must be a \
             loopback address, not {local}"
        );
    }
    let kvs = db
        .kvs(&config.memcached_kvs)
        .with_context(|| format!("opening memcached's KVS {:?}", config.memcached_kvs))?;
    let memcached = Arc::new(memcached::Memcached {
        items: memcached::Items::new(db.clone(), kvs),
        syncer: shared.syncer.clone(),
        slots,
        buffer_budget: shared.buffer_budget.clone(),
        max_output_bytes: config.max_output_bytes,
        output_stall_timeout: config.output_stall_timeout,
        started: std::time::Instant::now(),
        stats: memcached::Stats::default(),
    });
    tracing::info!(address = %local, kvs = %config.memcached_kvs, "memcached listening");
    tokio::spawn(memcached::serve(listener, memcached, network, shutdown));
    Ok(())
}

fn failure_text(failure: keyspace::Failure) -> String {
    match resp::Reply::from(failure) {
        resp::Reply::Error(text) => text,
        other => format!("{other:?}"),
    }
}

/// How often the background expirer looks for keys past their expiry time, and how many it
/// removes per database per look (it looks again at once while it finds that many).
const EXPIRE_PERIOD: Duration = Duration::from_millis(100);
const EXPIRE_BATCH_KEYS: usize = 200;

/// Removes keys past their expiry time, off the network threads, in bounded batches.
async fn expire_keys(shared: Arc<Shared>) {
    let mut ticker = tokio::time::interval(EXPIRE_PERIOD);
    loop {
        ticker.tick().await;
        loop {
            let worker = shared.clone();
            let removed =
                tokio::task::spawn_blocking(move || worker.expire_keys(EXPIRE_BATCH_KEYS)).await;
            match removed {
                Ok(Ok(removed)) if removed >= EXPIRE_BATCH_KEYS => continue,
                Ok(Ok(_)) => break,
                Ok(Err(failure)) => {
                    tracing::error!(error = %failure_text(failure), "expiring keys failed");
                    break;
                }
                Err(error) => {
                    tracing::error!(%error, "the expirer's worker failed");
                    break;
                }
            }
        }
    }
}

async fn refuse(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let _ = stream
        .write_all(b"-ERR max number of clients reached\r\n")
        .await;
    let _ = stream.shutdown().await;
}
