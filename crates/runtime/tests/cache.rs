//! The snapshot cache over a real event store (SQLite): what a hit reads, what a commit keeps,
//! what a conflict drops, and its bounds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use load_agent_domain::{LogEntry, project_state};
use load_agent_runtime::{CacheConfig, CacheWeigher, SnapshotCache, SnapshotSource};
use load_agent_store::{EventStore, SqliteStore, StoreOptions};
use load_agent_testkit::events::{self, entry};
use load_agent_testkit::store::{Intercept, Intercepted};
use load_agent_testkit::t0;

fn sms(load: &str, id: &str) -> LogEntry {
    entry(load, id, t0(), events::sms("drv", id))
}

/// Counts whole-log reads and suffix reads.
#[derive(Default)]
struct Counting {
    reads: AtomicUsize,
    reads_since: AtomicUsize,
}

impl Intercept for Counting {
    fn on_read(&self, _: &str) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }
    fn on_read_since(&self, _: &str, _: u64) {
        self.reads_since.fetch_add(1, Ordering::Relaxed);
    }
}

async fn store() -> Arc<Intercepted<Counting>> {
    let stores = SqliteStore::open_temporary(&StoreOptions::default()).await.expect("sqlite").into_stores();
    Arc::new(Intercepted::new(stores.events, Counting::default()))
}

#[tokio::test]
async fn a_hit_reads_only_the_entries_after_the_cached_version() {
    let events = store().await;
    events.append("L1", &[sms("L1", "a"), sms("L1", "b")], 0, &[]).await.expect("append");
    let cache = SnapshotCache::new(events.clone(), CacheConfig::default());

    let first = cache.snapshot("L1").await.expect("miss");
    assert_eq!((first.version, events.hook.reads.load(Ordering::Relaxed)), (2, 1));
    // Another writer appends: the next hit reads the suffix only and applies it.
    events.append("L1", &[sms("L1", "c")], 2, &[]).await.expect("append");
    let second = cache.snapshot("L1").await.expect("hit");
    assert_eq!(second.version, 3);
    assert_eq!(events.hook.reads.load(Ordering::Relaxed), 1, "no whole-log read on a hit");
    assert_eq!(events.hook.reads_since.load(Ordering::Relaxed), 1);
    let (all, _) = events.inner.read("L1").await.expect("read");
    assert_eq!(second, project_state("L1", &all), "the same state as a projection from scratch");
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses), (1, 1));
    assert!((stats.hit_rate() - 0.5).abs() < 1e-9);
}

#[tokio::test]
async fn a_commit_is_applied_to_the_cached_state_and_a_conflict_drops_it() {
    let events = store().await;
    events.append("L1", &[sms("L1", "a")], 0, &[]).await.expect("append");
    let cache = SnapshotCache::new(events.clone(), CacheConfig::default());
    let before = cache.snapshot("L1").await.expect("miss");
    let appended = [sms("L1", "b"), sms("L1", "c")];
    let version = events.append("L1", &appended, before.version, &[]).await.expect("append");
    let mut after = before.clone();
    after.apply_all(&appended);
    cache.committed(&after, version).await;
    let cached = cache.cached("L1").await.expect("kept after the commit");
    assert_eq!(cached.version, 3);
    assert!(cached.event_ids.contains("c"));

    cache.invalidate("L1").await;
    assert!(cache.cached("L1").await.is_none(), "a conflict drops the snapshot");
    assert_eq!(cache.snapshot("L1").await.expect("miss").version, 3);
    assert_eq!(events.hook.reads.load(Ordering::Relaxed), 2, "read again after the invalidation");
}

#[tokio::test]
async fn unknown_loads_are_not_cached_and_the_cache_is_bounded() {
    let events = store().await;
    let config = CacheConfig {
        max_capacity: 3,
        time_to_idle: Duration::from_secs(60),
        weigher: CacheWeigher::Snapshots,
        trusted: false,
    };
    let cache = SnapshotCache::new(events.clone(), config);
    assert_eq!(cache.snapshot("nobody").await.expect("empty log").version, 0);
    assert!(cache.cached("nobody").await.is_none());
    for i in 0..20 {
        let load = format!("L{i}");
        events.append(&load, &[sms(&load, "a")], 0, &[]).await.expect("append");
        cache.snapshot(&load).await.expect("snapshot");
    }
    assert!(cache.len().await <= 3, "at most max_capacity snapshots: {}", cache.len().await);
}

#[tokio::test]
async fn idle_snapshots_expire() {
    let events = store().await;
    events.append("L1", &[sms("L1", "a")], 0, &[]).await.expect("append");
    let config = CacheConfig { time_to_idle: Duration::from_millis(50), ..CacheConfig::default() };
    let cache = SnapshotCache::new(events.clone(), config);
    cache.snapshot("L1").await.expect("miss");
    assert!(cache.cached("L1").await.is_some());
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(cache.cached("L1").await.is_none(), "dropped after time_to_idle");
}

#[tokio::test]
async fn a_trusting_cache_reads_nothing_on_a_hit_until_told_to_distrust() {
    let events = store().await;
    events.append("L1", &[sms("L1", "a")], 0, &[]).await.expect("append");
    let cache = SnapshotCache::new(events.clone(), CacheConfig { trusted: true, ..CacheConfig::default() });
    assert_eq!(cache.snapshot("L1").await.expect("miss").version, 1);
    // Another writer appends: the trusted hit does not see it (the worker's append would
    // conflict, and invalidate).
    events.append("L1", &[sms("L1", "b")], 1, &[]).await.expect("append");
    assert_eq!(cache.snapshot("L1").await.expect("trusted hit").version, 1);
    assert_eq!(events.hook.reads_since.load(Ordering::Relaxed), 0, "a trusted hit reads nothing");
    // A rebalance: the next hit reads the suffix, and is trusted again after it.
    cache.distrust();
    assert_eq!(cache.snapshot("L1").await.expect("verified hit").version, 2);
    assert_eq!(events.hook.reads_since.load(Ordering::Relaxed), 1);
    assert_eq!(cache.snapshot("L1").await.expect("trusted hit").version, 2);
    assert_eq!(events.hook.reads_since.load(Ordering::Relaxed), 1);
    // A conflict drops the snapshot: read whole again.
    cache.invalidate("L1").await;
    assert_eq!(cache.snapshot("L1").await.expect("miss").version, 2);
    assert_eq!(events.hook.reads.load(Ordering::Relaxed), 2);
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.trusted, stats.misses, stats.invalidations), (3, 2, 2, 1));
}
