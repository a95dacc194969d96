//! Prometheus metrics: the server's own (commands, latency, connections), and the engine's
//! counters read at each scrape.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
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

/// The handles commands update; cloned metrics share their values with the registry.
pub struct Metrics {
    registry: Registry,
    /// Per command-table entry: calls, failed calls and latency in seconds.
    commands: Vec<(Counter, Counter, Histogram)>,
    /// Per command-table entry: microseconds spent (INFO commandstats).
    command_micros: Vec<AtomicU64>,
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
        let calls = Family::<CommandLabel, Counter>::default();
        let failures = Family::<CommandLabel, Counter>::default();
        let latency = Family::<CommandLabel, Histogram>::new_with_constructor(|| {
            // 10 us .. ~10 s
            Histogram::new(exponential_buckets(10e-6, 2.0, 21))
        });
        registry.register("commands", "Commands executed, by command", calls.clone());
        registry.register(
            "command_errors",
            "Commands answered with an error, by command",
            failures.clone(),
        );
        registry.register(
            "command_duration_seconds",
            "Time to execute a command, by command",
            latency.clone(),
        );
        let commands = command_names
            .iter()
            .map(|name| {
                let label = CommandLabel {
                    command: name.to_ascii_lowercase(),
                };
                (
                    calls.get_or_create(&label).clone(),
                    failures.get_or_create(&label).clone(),
                    latency.get_or_create(&label).clone(),
                )
            })
            .collect();
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
            command_micros: command_names.iter().map(|_| AtomicU64::new(0)).collect(),
            commands,
            connections,
            connections_total,
            connections_rejected,
            protocol_errors,
            clients_closed_by_limit,
            admin_connections_rejected,
        }
    }

    /// Records one execution of command-table entry `index`.
    pub fn observe(&self, index: usize, seconds: f64, failed: bool) {
        let (calls, failures, latency) = &self.commands[index];
        calls.inc();
        if failed {
            failures.inc();
        }
        latency.observe(seconds);
        self.command_micros[index].fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    }

    /// Calls, failed calls and microseconds of command-table entry `index`.
    pub fn command_stats(&self, index: usize) -> (u64, u64, u64) {
        let (calls, failures, _) = &self.commands[index];
        (
            calls.get(),
            failures.get(),
            self.command_micros[index].load(Ordering::Relaxed),
        )
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
