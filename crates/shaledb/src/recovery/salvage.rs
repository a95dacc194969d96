//! Damage, as recovery meets it: in a normal open the first damage fails the open, naming it; in
//! a salvage (`Options::salvage`) every damage is noted, recovery goes on with what it can
//! read, and the report says what may be lost or may have come back.

use super::report::SalvageReport;
use crate::error::{Error, Result};
use crate::index::PartitionedIndex;
use std::collections::HashMap;
use std::path::Path;

pub struct Damage {
    salvage: Option<SalvageReport>,
    /// For each unreadable region, the seqno every record it held was below (`None`: any seqno
    /// up to the KVDB's newest).
    regions_below: Vec<Option<u64>>,
}

impl Damage {
    pub fn new(salvage: bool) -> Self {
        Damage {
            salvage: salvage.then(SalvageReport::default),
            regions_below: Vec::new(),
        }
    }

    pub fn is_salvage(&self) -> bool {
        self.salvage.is_some()
    }

    /// Damage: fails a normal open; a salvage notes it and goes on.
    pub fn found(&mut self, error: Error) -> Result<()> {
        match &mut self.salvage {
            None => Err(error),
            Some(report) => {
                tracing::error!(%error, "salvage: going on without what is damaged");
                report.problems.push(error.to_string());
                Ok(())
            }
        }
    }

    /// Notes that `file` could not be read from `start` to `end`.
    pub fn unreadable(&mut self, file: &Path, start: u64, end: u64, seqno_below: Option<u64>) {
        if let Some(report) = &mut self.salvage {
            report
                .unreadable_regions
                .push(format!("{} from {start} to {end}", file.display()));
            self.regions_below.push(seqno_below);
        }
    }

    /// Notes that the newest version of `key` in KVS `kvs` is in data that is gone.
    pub fn lost_key(&mut self, kvs: &str, key: &[u8]) {
        if let Some(report) = &mut self.salvage {
            report
                .lost_keys
                .push(format!("{kvs} {}", key.escape_ascii()));
        }
    }

    /// The salvage report, with the keys the unreadable regions make suspect: every version
    /// older than the newest seqno a region could have held. `names` gives each KVS's name.
    pub fn finish(
        self,
        indexes: &HashMap<u32, PartitionedIndex>,
        names: &HashMap<u32, String>,
        next_seqno: u64,
    ) -> Option<SalvageReport> {
        let mut report = self.salvage?;
        let newest_lost = self
            .regions_below
            .iter()
            .map(|below| below.unwrap_or(next_seqno))
            .max();
        if let Some(newest_lost) = newest_lost {
            for (kvs_id, index) in indexes {
                let name = names
                    .get(kvs_id)
                    .cloned()
                    .unwrap_or_else(|| format!("kvs-{kvs_id}"));
                index.for_each_version(|key, entry, _| {
                    if entry.seqno < newest_lost {
                        report.suspect_keys.push(format!(
                            "{name} {} {}",
                            key.escape_ascii(),
                            entry.seqno
                        ));
                    }
                });
            }
        }
        tracing::warn!(
            problems = report.problems.len(),
            unreadable_regions = self.regions_below.len(),
            lost_keys = report.lost_keys.len(),
            suspect_keys = report.suspect_keys.len(),
            "salvage done"
        );
        Some(report)
    }
}
