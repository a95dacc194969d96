//! Opening a store: recovery checks the segments against the manifest and rebuilds the
//! indexes, the open finishes what a crash left half done (unless read-only), then the log
//! heads start on fresh segments (invariant I10) and the space budget takes its first reading.

use super::kvs_set::{KvsSet, KvsState};
use super::scattered::ScatteredRanges;
use super::Store;
use crate::cache::ValueCache;
use crate::counters::Counters;
use crate::error::Result;
use crate::home::Home;
use crate::index::PartitionedIndex;
use crate::log::{Heads, HeadsConfig, Lifecycle};
use crate::manifest::Edit;
use crate::media::{remove_file_durably, set_file_aside, MediaClass};
use crate::options::{KvsOptions, Options};
use crate::pacer::WritePacer;
use crate::poison::Poison;
use crate::recovery::{self, Cleanup, RecoveryInput, RecoveryReport};
use crate::segment::{SegmentId, SegmentTable};
use crate::space::SpaceBudget;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

impl Store {
    /// Opens the store of the KVDB whose home is `home`; returns it with what recovery did and,
    /// in a salvage, the damaged segments whose readable records are still to be rescued.
    pub fn open(
        home: &Home,
        options: &Options,
        poison: Arc<Poison>,
    ) -> Result<(Store, RecoveryReport, Vec<SegmentId>)> {
        let state = home.manifest.state().clone();
        let storage = options.storage();
        let counters = Counters::default();
        let started = std::time::Instant::now();
        let recovered = recovery::recover(&RecoveryInput {
            state: &state,
            media: &home.media,
            checkpoint_dir: home.checkpoint_dir(),
            storage: &*storage,
            direct_io: options.direct_io,
            counters: &counters,
            salvage: options.salvage,
            read_only: options.read_only,
            index_value_bytes_max: options.index_value_bytes_max,
        })?;
        let mut report = recovered.report;
        let segments = Arc::new(SegmentTable::new(
            [
                home.staging_dir()
                    .map_or_else(|| home.path.join(MediaClass::Staging.name()), Into::into),
                home.capacity_dir().to_path_buf(),
            ],
            SegmentId(state.next_segment_id),
        ));
        for segment in recovered.segments {
            segments.insert(segment);
        }
        let lifecycle = Arc::new(Lifecycle::new(
            segments.clone(),
            home.manifest.clone(),
            storage.clone(),
        ));
        let mut to_rescue = Vec::new();
        if options.read_only {
            report.leftovers_pending = recovered
                .cleanup
                .iter()
                .filter_map(|step| match step {
                    Cleanup::RemoveUnrecorded(path) | Cleanup::FinishFree(_, Some(path)) => {
                        Some(path.display().to_string())
                    }
                    _ => None,
                })
                .collect();
        } else {
            to_rescue = finish_cleanup(&lifecycle, recovered.cleanup, &mut report)?;
        }
        // A salvage may have created KVSs whose records it found.
        let state = home.manifest.state().clone();
        tracing::info!(
            home = %home.path.display(),
            millis = started.elapsed().as_millis() as u64,
            report = ?report,
            "KVDB recovered"
        );
        let next_seqno = Arc::new(AtomicU64::new(recovered.next_seqno));
        let heads = if options.read_only {
            Heads::none()
        } else {
            Heads::open(
                &HeadsConfig {
                    segment_bytes: options.segment_bytes,
                    write_buffer_bytes: options.write_buffer_bytes,
                    flush_chunk_bytes: options.flush_chunk_bytes,
                    direct_io: options.direct_io,
                    lifecycle: lifecycle.clone(),
                    poison: poison.clone(),
                    next_seqno: next_seqno.clone(),
                },
                home.staging_dir().is_some(),
                |class| counters.media(class).clone(),
            )?
        };
        let mut indexes = recovered.indexes;
        let kvs = KvsSet::default();
        for (&id, entry) in &state.kvs {
            let options = entry.options.clone();
            let index = indexes
                .remove(&id)
                .unwrap_or_else(|| PartitionedIndex::new(options.key_groups));
            kvs.insert(Arc::new(KvsState::new(
                id,
                entry.name.clone(),
                options,
                index,
            )));
        }
        let space = SpaceBudget::new(
            options.space_bytes_max,
            options.reserve_segments * options.segment_bytes,
            options.space_delete_headroom_bytes,
            // Without a cleaner nothing could bring usage back under a soft budget.
            if options.cleaner {
                options.space_target_live_ratio
            } else {
                0.0
            },
        );
        space.refresh(&segments, home.capacity_dir())?;
        let store = Store {
            segments,
            lifecycle,
            heads,
            kvs,
            next_seqno,
            covered_seqno: AtomicU64::new(recovered.covered_seqno),
            space,
            cache: ValueCache::new(options.cache_bytes),
            pacer: WritePacer::new(options.read_latency_target, options.write_rate_floor),
            // Nothing drains the queue where the sorter does not run.
            scattered: ScatteredRanges::new(
                if options.read_only || options.sort_bytes_per_sec == 0 {
                    0
                } else {
                    options.sort_queue_ranges
                },
            ),
            counters,
            poison,
            corruption: Default::default(),
        };
        Ok((store, report, to_rescue))
    }
}

/// Records the seals of the segments a crash left active, frees the empty ones, and removes
/// the files a crash left behind; in a salvage, sets damaged and unexpected files aside,
/// forgets segments that are gone, and creates the KVSs found. Returns the damaged segments
/// to rescue.
fn finish_cleanup(
    lifecycle: &Lifecycle,
    cleanup: Vec<Cleanup>,
    report: &mut RecoveryReport,
) -> Result<Vec<SegmentId>> {
    let mut to_rescue = Vec::new();
    for step in cleanup {
        match step {
            Cleanup::Seal(id, seal) => lifecycle
                .manifest
                .record(&Edit::SegmentSealed { id, seal })?,
            Cleanup::FreeEmpty(id, path) => {
                lifecycle.manifest.record(&Edit::SegmentFreed { id })?;
                lifecycle.finish_free(id, Some(&path))?;
            }
            Cleanup::FinishFree(id, path) => {
                if let Some(path) = &path {
                    report.leftovers_removed.push(path.display().to_string());
                }
                lifecycle.finish_free(id, path.as_deref())?;
            }
            Cleanup::RemoveUnrecorded(path) => {
                report.leftovers_removed.push(path.display().to_string());
                remove_file_durably(&path)?;
            }
            Cleanup::SetAside(path) => {
                let aside = set_file_aside(&path)?;
                if let Some(salvage) = &mut report.salvage {
                    salvage.set_aside.push(aside.display().to_string());
                }
            }
            Cleanup::Forget(id) => {
                lifecycle.manifest.record(&Edit::SegmentFreed { id })?;
                lifecycle.finish_free(id, None)?;
            }
            Cleanup::Rescue(id) => to_rescue.push(id),
            Cleanup::CreateKvs(id, name) => {
                let taken = lifecycle.manifest.state().kvs_named(&name).is_some();
                let name = if taken { format!("{name}-{id}") } else { name };
                lifecycle.manifest.record(&Edit::KvsCreated {
                    id,
                    name,
                    options: KvsOptions::default(),
                })?;
            }
        }
    }
    Ok(to_rescue)
}
