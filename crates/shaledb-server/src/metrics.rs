//! Prometheus metrics: the server's own (commands, latency, connections), and the engine's
//! counters read at each scrape.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;
use shaledb::Db;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CommandLabel {
    command: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MediaLabel {
    class: String,
    purpose: String,
}

/// Upper bounds of the command latency histogram: 10 us doubling to about 10 s, then +Inf.
const LATENCY_BOUNDS: usize = 21;
const LATENCY_FIRST_BOUND_NANOS: u64 = 10_000;

/// The latency bucket of a command that took `nanos`: the first whose bound is at least that.
fn latency_bucket(nanos: u64) -> usize {
    let multiples = nanos.saturating_sub(1) / LATENCY_FIRST_BOUND_NANOS;
    ((u64::BITS - multiples.leading_zeros()) as usize).min(LATENCY_BOUNDS)
}

/// One command-table entry's calls, failed calls, time and latency buckets, shared by all
/// clients: lock-free, and written once per pipeline run of the command (`CommandTally`).
#[derive(Debug)]
struct CommandStats {
    calls: AtomicU64,
    failures: AtomicU64,
    nanos: AtomicU64,
    /// Calls per latency bucket, not cumulative; the last is +Inf.
    buckets: [AtomicU64; LATENCY_BOUNDS + 1],
}

impl CommandStats {
    fn new() -> Self {
        CommandStats {
            calls: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            nanos: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The calls of one command that a pipeline run made, not yet added to the shared
/// [`Metrics`]. A run adds them when it moves to another command and when it ends, so a
/// pipeline of one command writes the shared counters once instead of once per request: with
/// two network threads, each write moved the counters' cache lines from one core to the other,
/// and the counters, a histogram lock and two clock reads took about a tenth of a pipelined
/// GET's CPU (docs/SERVER.md).
#[derive(Default)]
pub struct CommandTally {
    index: Option<usize>,
    calls: u64,
    failures: u64,
    nanos: u64,
    buckets: [u32; LATENCY_BOUNDS + 1],
}

impl CommandTally {
    /// Counts one call, of `nanos`, of the command `Metrics::begin` named.
    pub fn count(&mut self, nanos: u64, failed: bool) {
        self.calls += 1;
        self.failures += u64::from(failed);
        self.nanos += nanos;
        self.buckets[latency_bucket(nanos)] += 1;
    }
}

/// The server's command metrics, read at scrape time.
#[derive(Debug)]
struct CommandCollector {
    stats: Arc<[CommandStats]>,
    labels: Vec<CommandLabel>,
}

impl Collector for CommandCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use prometheus_client::metrics::MetricType;
        for (name, help, count) in [
            (
                "commands",
                "Commands executed, by command",
                (|stats| &stats.calls) as fn(&CommandStats) -> &AtomicU64,
            ),
            (
                "command_errors",
                "Commands answered with an error, by command",
                |stats| &stats.failures,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (stats, label) in self.stats.iter().zip(&self.labels) {
                ConstCounter::new(count(stats).load(Ordering::Relaxed))
                    .encode(family.encode_family(label)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "command_duration_seconds",
            "Time to execute a command, by command",
            None,
            MetricType::Histogram,
        )?;
        for (stats, label) in self.stats.iter().zip(&self.labels) {
            let buckets: Vec<(f64, u64)> = (0..=LATENCY_BOUNDS)
                .map(|bucket| {
                    let bound = if bucket == LATENCY_BOUNDS {
                        f64::MAX
                    } else {
                        (LATENCY_FIRST_BOUND_NANOS << bucket) as f64 / 1e9
                    };
                    (bound, stats.buckets[bucket].load(Ordering::Relaxed))
                })
                .collect();
            // The count is the buckets' sum, so the two agree even while calls are added.
            let count = buckets.iter().map(|(_, calls)| calls).sum();
            let seconds = stats.nanos.load(Ordering::Relaxed) as f64 / 1e9;
            family
                .encode_family(label)?
                .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    seconds, count, &buckets, None,
                )?;
        }
        Ok(())
    }
}

/// The handles commands update; cloned metrics share their values with the registry.
pub struct Metrics {
    registry: Registry,
    /// Per command-table entry.
    commands: Arc<[CommandStats]>,
    pub connections: Gauge,
    pub connections_total: Counter,
    pub connections_rejected: Counter,
    pub protocol_errors: Counter,
    pub clients_closed_by_limit: Counter,
    pub admin_connections_rejected: Counter,
}

impl Metrics {
    /// Metrics for the commands named in `command_names` (indexed like the command table).
    pub fn new(db: Arc<Db>, command_names: &[&str]) -> Metrics {
        let mut registry = Registry::with_prefix("shale");
        let commands: Arc<[CommandStats]> =
            command_names.iter().map(|_| CommandStats::new()).collect();
        registry.register_collector(Box::new(CommandCollector {
            stats: commands.clone(),
            labels: command_names
                .iter()
                .map(|name| CommandLabel {
                    command: name.to_ascii_lowercase(),
                })
                .collect(),
        }));
        let connections = Gauge::default();
        registry.register(
            "connected_clients",
            "Open client connections",
            connections.clone(),
        );
        let connections_total = Counter::default();
        registry.register(
            "connections_received",
            "Client connections accepted",
            connections_total.clone(),
        );
        let connections_rejected = Counter::default();
        registry.register(
            "connections_rejected",
            "Client connections refused because maxclients was reached",
            connections_rejected.clone(),
        );
        let protocol_errors = Counter::default();
        registry.register(
            "protocol_errors",
            "Connections closed for malformed or oversized requests",
            protocol_errors.clone(),
        );
        let clients_closed_by_limit = Counter::default();
        registry.register(
            "clients_closed_by_limit",
            "Clients disconnected for exceeding an output or buffer limit",
            clients_closed_by_limit.clone(),
        );
        let admin_connections_rejected = Counter::default();
        registry.register(
            "admin_connections_rejected",
            "Admin connections refused because admin_maxclients was reached",
            admin_connections_rejected.clone(),
        );
        registry.register_collector(Box::new(EngineCollector { db }));
        Metrics {
            registry,
            commands,
            connections,
            connections_total,
            connections_rejected,
            protocol_errors,
            clients_closed_by_limit,
            admin_connections_rejected,
        }
    }

    /// Makes `tally` count command-table entry `index`; what it counted of another command is
    /// added to the shared counters first, so a command (INFO) sees every call before it.
    pub fn begin(&self, tally: &mut CommandTally, index: usize) {
        if tally.index != Some(index) {
            self.add(tally);
            tally.index = Some(index);
        }
    }

    /// Adds what `tally` counted to the shared counters, and empties it.
    pub fn add(&self, tally: &mut CommandTally) {
        let Some(index) = tally.index else {
            return;
        };
        let stats = &self.commands[index];
        stats.calls.fetch_add(tally.calls, Ordering::Relaxed);
        if tally.failures > 0 {
            stats.failures.fetch_add(tally.failures, Ordering::Relaxed);
        }
        stats.nanos.fetch_add(tally.nanos, Ordering::Relaxed);
        for (shared, &calls) in stats.buckets.iter().zip(&tally.buckets) {
            if calls > 0 {
                shared.fetch_add(u64::from(calls), Ordering::Relaxed);
            }
        }
        *tally = CommandTally::default();
    }

    /// Calls, failed calls and microseconds of command-table entry `index`.
    pub fn command_stats(&self, index: usize) -> (u64, u64, u64) {
        let stats = &self.commands[index];
        (
            stats.calls.load(Ordering::Relaxed),
            stats.failures.load(Ordering::Relaxed),
            stats.nanos.load(Ordering::Relaxed) / 1000,
        )
    }

    /// Calls of every command (INFO's total_commands_processed).
    pub fn commands_processed(&self) -> u64 {
        self.commands
            .iter()
            .map(|stats| stats.calls.load(Ordering::Relaxed))
            .sum()
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// Reads the engine's counters at scrape time.
struct EngineCollector {
    db: Arc<Db>,
}

impl std::fmt::Debug for EngineCollector {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("EngineCollector")
    }
}

impl Collector for EngineCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = self.db.stats();
        encode_media_counters(
            &mut encoder,
            "media_written_bytes",
            "Bytes written to each media class, by purpose",
            &stats.media,
            |media| {
                [
                    ("clients", media.bytes_written_by_clients),
                    ("cleaning", media.bytes_written_by_cleaning),
                    ("checkpoints", media.bytes_written_by_checkpoints),
                ]
            },
        )?;
        encode_media_counters(
            &mut encoder,
            "media_read_bytes",
            "Bytes read from each media class, by purpose",
            &stats.media,
            |media| {
                [
                    ("gets", media.bytes_read_by_gets),
                    ("scans", media.bytes_read_by_scans),
                    ("cleaning", media.bytes_read_by_cleaning),
                    ("warming", media.bytes_read_by_warming),
                ]
            },
        )?;
        let mut segment_bytes = encoder.encode_descriptor(
            "media_segment_bytes",
            "Bytes of segment files on each media class",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for media in &stats.media {
            let label = MediaLabel {
                class: media.class.into(),
                purpose: "segments".into(),
            };
            ConstGauge::new(media.segment_bytes as i64)
                .encode(segment_bytes.encode_family(&label)?)?;
        }
        let hit_ratio = if stats.cache_hits + stats.cache_misses == 0 {
            0.0
        } else {
            stats.cache_hits as f64 / (stats.cache_hits + stats.cache_misses) as f64
        };
        for (name, help, value) in [
            (
                "write_amplification",
                "Media bytes written per byte written by clients",
                stats.write_amplification(),
            ),
            (
                "cache_hit_ratio",
                "Value cache hits per cache lookup",
                hit_ratio,
            ),
            (
                "space_amplification",
                "Segment bytes per live byte",
                stats.space_amplification(),
            ),
        ] {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        for (name, help, value) in [
            ("index_keys", "Keys in all indexes", stats.index_keys),
            (
                "index_bytes",
                "Estimated DRAM held by the indexes",
                stats.index_bytes,
            ),
            (
                "index_value_hits",
                "Reads answered from the short value a key's index entry keeps",
                stats.index_value_hits,
            ),
            ("live_bytes", "Bytes of live records", stats.live_bytes),
            (
                "cache_bytes",
                "Bytes of values in the cache",
                stats.cache_bytes,
            ),
            (
                "warm_values_read",
                "Values read into the cache at start from the keys it held at the last stop",
                stats.warm_values_read,
            ),
            (
                "warm_keys_files_rejected",
                "Warm-keys files ignored at start as damaged or unexpected (the log says why)",
                stats.warm_keys_files_rejected,
            ),
        ] {
            let gauge = ConstGauge::new(value as i64);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

/// One counter family labelled by media class and purpose.
fn encode_media_counters<const PURPOSES: usize>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    media: &[shaledb::MediaStats],
    by_purpose: impl Fn(&shaledb::MediaStats) -> [(&'static str, u64); PURPOSES],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(
        name,
        help,
        None,
        prometheus_client::metrics::MetricType::Counter,
    )?;
    for class in media {
        for (purpose, bytes) in by_purpose(class) {
            let label = MediaLabel {
                class: class.class.into(),
                purpose: purpose.into(),
            };
            ConstCounter::new(bytes).encode(family.encode_family(&label)?)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_falls_in_the_first_bucket_whose_bound_holds_it() {
        for (nanos, bucket) in [
            (0, 0),
            (10_000, 0),
            (10_001, 1),
            (20_000, 1),
            (20_001, 2),
            (40_000, 2),
            (40_001, 3),
            (
                (LATENCY_FIRST_BOUND_NANOS << (LATENCY_BOUNDS - 1)),
                LATENCY_BOUNDS - 1,
            ),
            (
                (LATENCY_FIRST_BOUND_NANOS << (LATENCY_BOUNDS - 1)) + 1,
                LATENCY_BOUNDS,
            ),
            (u64::MAX, LATENCY_BOUNDS),
        ] {
            assert_eq!(latency_bucket(nanos), bucket, "{nanos} ns");
        }
    }

    #[test]
    fn tallied_calls_reach_the_shared_counters_when_the_command_changes_or_the_run_ends() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Db::open(dir.path(), shaledb::Options::default()).unwrap());
        let metrics = Metrics::new(db, &["GET", "SET"]);
        let mut tally = CommandTally::default();
        metrics.begin(&mut tally, 0);
        tally.count(5_000, false);
        tally.count(30_000, true);
        assert_eq!(
            metrics.command_stats(0),
            (0, 0, 0),
            "not added before the run moves on"
        );
        metrics.begin(&mut tally, 1);
        assert_eq!(metrics.command_stats(0), (2, 1, 35));
        tally.count(1_000, false);
        metrics.add(&mut tally);
        assert_eq!(metrics.command_stats(1), (1, 0, 1));
        metrics.add(&mut tally);
        assert_eq!(
            metrics.commands_processed(),
            3,
            "an emptied tally adds nothing"
        );
        let text = metrics.render();
        for line in [
            "shale_commands_total{command=\"get\"} 2",
            "shale_command_errors_total{command=\"get\"} 1",
            "shale_command_duration_seconds_count{command=\"get\"} 2",
            "shale_command_duration_seconds_sum{command=\"get\"} 0.000035",
            "shale_command_duration_seconds_bucket{le=\"0.00001\",command=\"get\"} 1",
            "shale_command_duration_seconds_bucket{le=\"0.00004\",command=\"get\"} 2",
            "shale_command_duration_seconds_bucket{le=\"+Inf\",command=\"get\"} 2",
            "shale_commands_total{command=\"set\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
