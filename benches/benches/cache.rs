//! The moka snapshot cache (`load_agent_runtime::SnapshotCache`, built without the Kafka crate,
//! so without librdkafka), over an in-memory event store so that only the cache and
//! the fold are measured, not a database. `Throughput::Elements(1)` per lookup.
//!
//! - `cached_get_hit`: `SnapshotCache::cached`, the bare moka lookup (an `Arc` clone).
//! - `snapshot_hit`: `SnapshotSource::snapshot` of a cached load: the lookup, an empty
//!   `read_since` and the clone of the cached state the worker gets.
//! - `snapshot_miss_insert`: a load not in the cache (every iteration a new one, so the cache is
//!   at its default 50,000-snapshot capacity after the first 50,000): the whole-log read (a
//!   clone of the 2-entry log of a registration), its projection and the insert (with moka's
//!   eviction). The key's `format!` is inside the timing.
//! - `no_cache_log_projection`: `LogProjection`, the runtime's default snapshot source, which
//!   reads and projects every time: the miss without the insert.
//!
//! With 1 and 100,000 snapshots resident; the 100,000 are visited in a scattered fixed order.
//! The cache's metrics counters are incremented without a recorder installed (no-ops).
//!
//! `cargo bench -p load-agent-benches --bench cache -- --warm-up-time 1 --measurement-time 3`

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use load_agent_agent::Agent;
use load_agent_domain::{LoadSummary, LogEntry};
use load_agent_runtime::{CacheConfig, SnapshotCache};
use load_agent_runtime::{LogProjection, SnapshotSource};
use load_agent_store::{AppendError, AppendRequest, EventStore, NewOutboxRow, StoreError};
use load_agent_testkit::LOAD;
use load_agent_testkit::decide::{BenchLlm, varied_log};

const RESIDENT: usize = 100_000;

/// A read-only event store in memory: the logs in `logs`, and `default` for every other load.
struct MemStore {
    logs: HashMap<String, Vec<LogEntry>>,
    default: Vec<LogEntry>,
}

impl MemStore {
    fn log(&self, load_id: &str) -> &[LogEntry] {
        self.logs.get(load_id).unwrap_or(&self.default)
    }
}

fn read_only() -> StoreError {
    StoreError::InvalidRequest("the bench store is read-only".into())
}

#[async_trait]
impl EventStore for MemStore {
    async fn read(&self, load_id: &str) -> Result<(Vec<LogEntry>, u64), StoreError> {
        let log = self.log(load_id);
        Ok((log.to_vec(), log.len() as u64))
    }

    async fn read_since(&self, load_id: &str, version: u64) -> Result<(Vec<LogEntry>, u64), StoreError> {
        let log = self.log(load_id);
        let from = usize::try_from(version).map_or(log.len(), |v| v.min(log.len()));
        Ok((log[from..].to_vec(), log.len() as u64))
    }

    async fn append_summarized(
        &self,
        _: &str,
        _: &[LogEntry],
        _: u64,
        _: &[NewOutboxRow],
        _: Option<&LoadSummary>,
    ) -> Result<u64, AppendError> {
        Err(read_only().into())
    }

    async fn append_batch(&self, requests: Vec<AppendRequest>) -> Vec<Result<u64, AppendError>> {
        requests.iter().map(|_| Err(read_only().into())).collect()
    }

    async fn llm_cost(&self, _: &str) -> Result<f64, StoreError> {
        Ok(0.0)
    }

    async fn load_ids(&self, _: usize) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().expect("a tokio runtime")
}

/// `n` load ids in a scattered order (a stride coprime with `n`), so consecutive lookups do not
/// touch neighbouring keys.
fn scattered_keys(n: usize) -> Vec<String> {
    let stride = 7_919; // a prime, coprime with the sizes used here
    (0..n).map(|i| format!("load-{}", (i * stride) % n)).collect()
}

fn cache(c: &mut Criterion) {
    let rt = runtime();
    let agent = Agent::embedded().expect("embedded SOPs");
    let llm = BenchLlm::new();
    // Every load's log is a registration ([event, decision]); LOAD has a 1,000-entry log.
    let registration = varied_log(&agent, &llm, 2).entries;
    assert_eq!(registration.len(), 2);
    let big = varied_log(&agent, &llm, 1_000).entries;
    let store: Arc<MemStore> =
        Arc::new(MemStore { logs: HashMap::from([(LOAD.to_owned(), big)]), default: registration });
    let config = CacheConfig { max_capacity: 2 * RESIDENT as u64, ..CacheConfig::default() };

    let mut group = c.benchmark_group("cache");
    group.throughput(Throughput::Elements(1));

    // One snapshot resident: a registered load, and the 1,000-entry LOAD.
    let one = &SnapshotCache::new(store.clone(), config);
    for (label, load) in [("1_resident", "load-0"), ("1_resident_1000_entries", LOAD)] {
        rt.block_on(async {
            one.invalidate("load-0").await;
            one.invalidate(LOAD).await;
            one.snapshot(load).await.expect("snapshot");
            assert_eq!(one.len().await, 1);
        });
        group.bench_function(BenchmarkId::new("cached_get_hit", label), |b| {
            b.to_async(&rt).iter(|| async move { one.cached(load).await.expect("a hit") })
        });
        group.bench_function(BenchmarkId::new("snapshot_hit", label), |b| {
            b.to_async(&rt).iter(|| async move { one.snapshot(load).await.expect("snapshot") })
        });
    }
    assert_eq!(one.stats().misses, 2);

    // 100,000 snapshots resident.
    let many = &SnapshotCache::new(store.clone(), config);
    let keys = &scattered_keys(RESIDENT);
    rt.block_on(async {
        for key in keys {
            many.snapshot(key).await.expect("snapshot");
        }
        assert_eq!(many.len().await, RESIDENT as u64);
    });
    let label = format!("{RESIDENT}_resident");
    // The position survives criterion's calls of the routine (one per sample).
    let mut next = 0usize;
    group.bench_function(BenchmarkId::new("cached_get_hit", &label), |b| {
        b.to_async(&rt).iter(|| {
            next = (next + 1) % keys.len();
            let key = keys[next].as_str();
            async move { many.cached(key).await.expect("a hit") }
        })
    });
    group.bench_function(BenchmarkId::new("snapshot_hit", &label), |b| {
        b.to_async(&rt).iter(|| {
            next = (next + 1) % keys.len();
            let key = keys[next].as_str();
            async move { many.snapshot(key).await.expect("snapshot") }
        })
    });
    assert_eq!(many.stats().misses, RESIDENT as u64, "every lookup after filling was a hit");

    // Misses: a new load every iteration, against the default 50,000-snapshot capacity.
    let bounded = &SnapshotCache::new(store.clone(), CacheConfig::default());
    let mut next = 0u64;
    group.bench_function(BenchmarkId::new("snapshot_miss_insert", "2_entry_log"), |b| {
        b.to_async(&rt).iter(|| {
            next += 1;
            let key = format!("miss-{next}");
            async move { bounded.snapshot(&key).await.expect("snapshot") }
        })
    });
    assert_eq!(bounded.stats().hits, 0, "every lookup was a miss");

    let projection = &LogProjection::new(store.clone());
    group.bench_function(BenchmarkId::new("no_cache_log_projection", "2_entry_log"), |b| {
        b.to_async(&rt).iter(|| async move { projection.snapshot("load-0").await.expect("snapshot") })
    });
    group.finish();
}

criterion_group!(benches, cache);
criterion_main!(benches);
