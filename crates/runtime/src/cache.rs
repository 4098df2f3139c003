//! [`SnapshotCache`]: a moka cache of projected `LoadState` snapshots keyed by `load_id`, the
//! worker's [`SnapshotSource`] in every mode (the Kafka consumer, the embedded in-process
//! runtime, replay).
//!
//! - A hit reads only the entries after the cached version (`read_since`) and applies them; a
//!   miss reads the whole log and projects it.
//! - A trusting cache ([`CacheConfig::trusted`], the worker's) serves a hit without reading the
//!   log at all: the worker is the only writer of the loads it owns, and the version check of its
//!   next append refuses a snapshot that another writer made stale (the conflict drops it, the
//!   run reads again and re-decides). [`SnapshotSource::distrust`] (a Kafka rebalance gave this
//!   process loads another may have written) makes every cached snapshot verified once more.
//! - After a commit the cache holds the state with the appended entries applied (no read back).
//! - A version conflict invalidates the load's entry.
//! - Bounded: at most `max_capacity` snapshots (or total log entries, with
//!   [`CacheWeigher::LogEntries`]); a snapshot idle for `time_to_idle` is dropped.
//! - Metrics: `load_agent_cache_hits_total`, `load_agent_cache_misses_total`,
//!   `load_agent_cache_invalidations_total`, `load_agent_cache_trusted_hits_total`;
//!   [`SnapshotCache::stats`] for the hit rate.
//!
//! The cache is an optimization only: the version check of every append is what keeps a stale
//! snapshot from committing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::metric_names as names;
use crate::snapshot::{LogProjection, SnapshotSource};
use async_trait::async_trait;
use load_agent_domain::LoadState;
use load_agent_store::{EventStore, StoreError};
use moka::future::Cache;
use tracing::warn;

/// What `max_capacity` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheWeigher {
    /// Snapshots: at most `max_capacity` loads.
    #[default]
    Snapshots,
    /// Log entries behind the snapshots (their versions): big logs weigh more.
    LogEntries,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    pub max_capacity: u64,
    /// A snapshot not read or written for this long is dropped.
    pub time_to_idle: Duration,
    pub weigher: CacheWeigher,
    /// Serve a hit without reading the log (see the module's notes). Only for a cache whose
    /// owner is the only writer of its loads and commits through [`SnapshotSource::committed`]:
    /// the worker's. Off by default.
    pub trusted: bool,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            max_capacity: 50_000,
            time_to_idle: Duration::from_secs(30 * 60),
            weigher: CacheWeigher::Snapshots,
            trusted: false,
        }
    }
}

/// Hits, misses and invalidations since the cache was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub invalidations: u64,
    /// Of the hits, those served without reading the log (a trusting cache).
    pub trusted: u64,
}

impl CacheStats {
    /// Hits over lookups, 0 when there was none.
    pub fn hit_rate(&self) -> f64 {
        let lookups = self.hits + self.misses;
        if lookups == 0 { 0.0 } else { self.hits as f64 / lookups as f64 }
    }
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    invalidations: AtomicU64,
    trusted: AtomicU64,
    /// Bumped by `distrust`: a snapshot kept under an older epoch is verified before it is
    /// trusted.
    epoch: AtomicU64,
}

/// A cached snapshot and the trust epoch it was kept (or last verified) in.
#[derive(Clone)]
struct Kept {
    state: Arc<LoadState>,
    epoch: u64,
}

/// The snapshot cache.
#[derive(Clone)]
pub struct SnapshotCache {
    events: Arc<dyn EventStore>,
    /// A miss reads and projects the whole log.
    projection: LogProjection,
    cache: Cache<String, Kept>,
    counters: Arc<Counters>,
    trusted: bool,
}

impl std::fmt::Debug for SnapshotCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotCache").field("entries", &self.cache.entry_count()).finish_non_exhaustive()
    }
}

impl SnapshotCache {
    pub fn new(events: Arc<dyn EventStore>, config: CacheConfig) -> Self {
        let builder = Cache::builder().max_capacity(config.max_capacity).time_to_idle(config.time_to_idle);
        let cache = match config.weigher {
            CacheWeigher::Snapshots => builder.build(),
            CacheWeigher::LogEntries => builder
                .weigher(|_: &String, kept: &Kept| {
                    u32::try_from(kept.state.version.max(1)).unwrap_or(u32::MAX)
                })
                .build(),
        };
        SnapshotCache {
            projection: LogProjection::new(events.clone()),
            events,
            cache,
            counters: Arc::new(Counters::default()),
            trusted: config.trusted,
        }
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.counters.hits.load(Ordering::Relaxed),
            misses: self.counters.misses.load(Ordering::Relaxed),
            invalidations: self.counters.invalidations.load(Ordering::Relaxed),
            trusted: self.counters.trusted.load(Ordering::Relaxed),
        }
    }

    /// Snapshots held now (moka counts lazily; for tests and gauges).
    pub async fn len(&self) -> u64 {
        self.cache.run_pending_tasks().await;
        self.cache.entry_count()
    }

    pub async fn is_empty(&self) -> bool {
        self.len().await == 0
    }

    /// The cached snapshot of a load, without reading the store.
    pub async fn cached(&self, load_id: &str) -> Option<Arc<LoadState>> {
        self.cache.get(load_id).await.map(|kept| kept.state)
    }

    fn epoch(&self) -> u64 {
        self.counters.epoch.load(Ordering::Acquire)
    }

    /// Keeps `state`, trusted under `epoch` (the epoch when the log was last read for it, or now
    /// for a committed state: its append's version check just proved it current).
    async fn keep(&self, state: Arc<LoadState>, epoch: u64) {
        // An unknown load (nothing logged) is not worth a slot: junk keys would evict real loads.
        if state.version > 0 {
            self.cache.insert(state.load_id.clone(), Kept { state, epoch }).await;
        }
    }

    fn count(&self, counter: &AtomicU64, metric: &'static str) {
        counter.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(metric).increment(1);
    }
}

#[async_trait]
impl SnapshotSource for SnapshotCache {
    async fn snapshot(&self, load_id: &str) -> Result<LoadState, StoreError> {
        let now = self.epoch();
        if let Some(Kept { state: cached, epoch }) = self.cache.get(load_id).await {
            self.count(&self.counters.hits, names::CACHE_HITS_TOTAL);
            if self.trusted && epoch == now {
                self.count(&self.counters.trusted, names::CACHE_TRUSTED_HITS_TOTAL);
                return Ok((*cached).clone());
            }
            let (entries, version) = self.events.read_since(load_id, cached.version).await?;
            if entries.is_empty() && version == cached.version {
                if self.trusted {
                    // Verified: trusted again.
                    self.keep(cached.clone(), now).await;
                }
                return Ok((*cached).clone());
            }
            let mut state = (*cached).clone();
            state.apply_all(&entries);
            if state.version == version {
                self.keep(Arc::new(state.clone()), now).await;
                return Ok(state);
            }
            // The suffix does not line up with the snapshot: start over from the log.
            warn!(
                load_id,
                cached = cached.version,
                log = version,
                "cached snapshot out of line with the log: reprojecting"
            );
            self.invalidate(load_id).await;
        } else {
            self.count(&self.counters.misses, names::CACHE_MISSES_TOTAL);
        }
        let state = self.projection.snapshot(load_id).await?;
        self.keep(Arc::new(state.clone()), now).await;
        Ok(state)
    }

    async fn committed(&self, after: &LoadState, new_version: u64) {
        if after.version == new_version {
            self.keep(Arc::new(after.clone()), self.epoch()).await;
        } else {
            self.invalidate(&after.load_id).await;
        }
    }

    async fn invalidate(&self, load_id: &str) {
        self.count(&self.counters.invalidations, names::CACHE_INVALIDATIONS_TOTAL);
        self.cache.invalidate(load_id).await;
    }

    fn distrust(&self) {
        self.counters.epoch.fetch_add(1, Ordering::AcqRel);
    }
}
