//! Opening a store: recovery rebuilds the indexes from the newest checkpoint and the segments,
//! then the log heads start on fresh segments (invariant I10) and the space budget takes its
//! first reading.

use super::kvs_set::{KvsSet, KvsState};
use super::Store;
use crate::cache::ValueCache;
use crate::catalog::MediaDirs;
use crate::counters::Counters;
use crate::error::Result;
use crate::log::{Heads, HeadsConfig};
use crate::media::MediaClass;
use crate::options::{KvsOptions, Options};
use crate::poison::Poison;
use crate::recovery::{self, RecoveryReport};
use crate::segment::SegmentTable;
use crate::space::SpaceBudget;
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

impl Store {
    /// Opens the store of the KVDB in `home` on its `media`, holding the KVSs `kvs` lists as
    /// (id, name, options); returns it with what recovery did.
    pub fn open(
        home: &Path,
        media: &MediaDirs,
        options: &Options,
        kvs: Vec<(u32, String, KvsOptions)>,
    ) -> Result<(Store, RecoveryReport)> {
        let mut class_dirs = vec![(MediaClass::Capacity, media.capacity_dir.as_path())];
        if let Some(staging) = &media.staging_dir {
            class_dirs.push((MediaClass::Staging, staging.as_path()));
        }
        let counters = Counters::default();
        let kvs_ids: HashSet<u32> = kvs.iter().map(|(id, _, _)| *id).collect();
        let started = std::time::Instant::now();
        let recovered = recovery::recover(
            media.checkpoint_dir(),
            &class_dirs,
            &kvs_ids,
            options.direct_io,
            &counters,
        )?;
        tracing::info!(
            home = %home.display(),
            millis = started.elapsed().as_millis() as u64,
            report = ?recovered.report,
            "KVDB recovered"
        );
        let segments = Arc::new(SegmentTable::new(
            [
                media
                    .staging_dir
                    .clone()
                    .unwrap_or_else(|| home.join(MediaClass::Staging.name())),
                media.capacity_dir.clone(),
            ],
            recovered.next_segment_id,
        ));
        for segment in recovered.segments {
            segments.insert(segment);
        }
        let next_seqno = Arc::new(AtomicU64::new(recovered.next_seqno));
        let poison = Arc::new(Poison::default());
        let heads = Heads::open(
            &HeadsConfig {
                segment_bytes: options.segment_bytes,
                write_buffer_bytes: options.write_buffer_bytes,
                flush_chunk_bytes: options.flush_chunk_bytes,
                direct_io: options.direct_io,
                segments: segments.clone(),
                poison: poison.clone(),
                next_seqno: next_seqno.clone(),
            },
            media.staging_dir.is_some(),
            |class| counters.media(class).clone(),
        )?;
        let mut indexes = recovered.indexes;
        let kvs_set = KvsSet::default();
        for (id, name, options) in kvs {
            let index = indexes.remove(&id).unwrap_or_default();
            kvs_set.insert(Arc::new(KvsState::new(id, name, options, index)));
        }
        let space = SpaceBudget::new(
            options.space_bytes_max,
            options.reserve_segments * options.segment_bytes,
            // Without a cleaner nothing could bring usage back under a soft budget.
            if options.cleaner {
                options.space_target_live_ratio
            } else {
                0.0
            },
        );
        space.refresh(&segments, &media.capacity_dir)?;
        let store = Store {
            segments,
            heads,
            kvs: kvs_set,
            next_seqno,
            covered_seqno: AtomicU64::new(recovered.covered_seqno),
            space,
            cache: ValueCache::new(options.cache_bytes),
            counters,
            poison,
        };
        Ok((store, recovered.report))
    }
}
