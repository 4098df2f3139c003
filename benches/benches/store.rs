//! Store throughput (issue 3): append on SQLite and Postgres with 1 and 16 concurrent loads, the
//! batched append (several loads per transaction), read + project for logs of 10, 100 and 1,000
//! entries (and the read alone, `…_read_only`), outbox claims alone, and outbox claim + mark (per
//! row, or the batch in one statement as the relay marks it). Every group reports
//! `Throughput::Elements`: appends, entries or outbox rows.
//!
//! Every append has the agent's shape, as `../shared/bench/pglimit/append.sql`: one inbound
//! entry, one decision entry and two outbox rows (send_sms, set_timer), at an expected version.
//!
//! Postgres: `BENCH_DATABASE_URL`, else `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/bench`), one fresh schema per run, dropped at the end.
//! SQLite: a file in a temporary directory (WAL, synchronous=FULL). Run with
//! `cargo bench -p load-agent-benches --bench store`; see `docs/performance.md` for the figures
//! and the raw pgbench ceiling measured next to them, and `docs/capacity.md` for every bench.

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::TimeDelta;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use load_agent_domain::*;
use load_agent_store::{
    AppendRequest, DispatchedMark, FailedMark, NextAttempt, PgStore, SqliteStore, StoreOptions, Stores,
};
use load_agent_testkit::events::entry;
use load_agent_testkit::load::sample_load;
use load_agent_testkit::store::{agent_append, base_time, bench_postgres, bench_runtime, prepare_rows};
use sqlx::PgPool;

/// The backends under test; the Postgres schema is dropped by [`Backends::close`].
struct Backends {
    sqlite: Stores,
    postgres: Stores,
    pg_store: PgStore,
    _sqlite_dir: tempfile::TempDir,
}

/// The bench store's main pool (appends, reads): 24 connections, or `BENCH_PG_CONNECTIONS`. The
/// claims and marks run on the relay's pool (below): a pool lends its idle connections in turn, so
/// one mark at a time over 24 connections landed each time on a backend that had not run for 23
/// statements (docs/performance.md, "The marks' gap: the bench's pool", "The relay's pool").
fn pg_connections() -> u32 {
    count_from_env("BENCH_PG_CONNECTIONS", 24)
}

/// The relay's own pool in the bench store (the claims and marks run on it):
/// `StoreOptions::default().relay_connections`, or `BENCH_PG_RELAY_CONNECTIONS`.
fn pg_relay_connections() -> u32 {
    count_from_env("BENCH_PG_RELAY_CONNECTIONS", StoreOptions::default().relay_connections)
}

/// A positive count from the environment variable `name`, else `default`.
fn count_from_env(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(default)
}

impl Backends {
    async fn open() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let sqlite = SqliteStore::open(dir.path().join("bench.db")).await.expect("open SQLite").into_stores();
        let pg_store = bench_postgres(
            "store",
            &StoreOptions {
                max_connections: pg_connections(),
                relay_connections: pg_relay_connections(),
                ..StoreOptions::default()
            },
        )
        .await;
        Backends { sqlite, postgres: pg_store.clone().into_stores(), pg_store, _sqlite_dir: dir }
    }

    fn each(&self) -> [(&'static str, &Stores); 2] {
        [("sqlite", &self.sqlite), ("postgres", &self.postgres)]
    }

    async fn close(self) {
        let Backends { postgres, pg_store, .. } = self;
        drop(postgres);
        if let Err(e) = pg_store.drop_schema().await {
            eprintln!("could not drop the bench schema: {e}");
        }
    }
}

/// The registration of [`sample_load`] under `load`, on client_a's SOP version 1.
fn registered(load: &str) -> LogEntry {
    let load_registered = LoadRegistered { sop_version: Some(1), ..sample_load(load) };
    entry(load, &format!("reg_{load}"), base_time(), EventKind::LoadRegistered { load: load_registered })
}

/// Appends on `concurrency` loads at once, each load by its own task, `iters` appends per load;
/// returns the time of the appends only (the entries are built before).
async fn appends(stores: &Stores, concurrency: usize, iters: u64) -> Duration {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let work: Vec<_> = (0..concurrency)
        .map(|task| {
            let load = format!("append-{run}-{task}");
            let appends: Vec<_> = (0..iters).map(|n| agent_append(&load, n, 2 * n)).collect();
            (load, appends)
        })
        .collect();
    let start = Instant::now();
    let tasks: Vec<_> = work
        .into_iter()
        .map(|(load, appends)| {
            let events = stores.events.clone();
            tokio::spawn(async move {
                let mut version = 0;
                for (entries, rows) in appends {
                    version = events.append(&load, &entries, version, &rows).await.expect("append");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("append task");
    }
    start.elapsed()
}

/// `tasks` tasks, each committing `per_batch` loads per transaction, `iters` batches each.
async fn batched_appends(stores: &Stores, tasks: usize, per_batch: usize, iters: u64) -> Duration {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let work: Vec<Vec<Vec<AppendRequest>>> = (0..tasks)
        .map(|task| {
            (0..iters)
                .map(|n| {
                    (0..per_batch)
                        .map(|i| {
                            let load = format!("batch-{run}-{task}-{i}");
                            let (entries, outbox) = agent_append(&load, n, 2 * n);
                            AppendRequest {
                                load_id: load,
                                entries,
                                expected_version: 2 * n,
                                outbox,
                                summary: None,
                            }
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let start = Instant::now();
    let handles: Vec<_> = work
        .into_iter()
        .map(|batches| {
            let events = stores.events.clone();
            tokio::spawn(async move {
                for batch in batches {
                    for result in events.append_batch(batch).await {
                        result.expect("batched append");
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.expect("batch task");
    }
    start.elapsed()
}

fn append(c: &mut Criterion) {
    let rt = bench_runtime();
    let backends = rt.block_on(Backends::open());
    let mut group = c.benchmark_group("store_append");
    group.sample_size(10).measurement_time(Duration::from_secs(15)).warm_up_time(Duration::from_secs(3));
    for (name, stores) in backends.each() {
        for concurrency in [1usize, 16] {
            group.throughput(Throughput::Elements(concurrency as u64));
            group.bench_function(BenchmarkId::new(name, format!("{concurrency}_loads")), |b| {
                b.to_async(&rt).iter_custom(|iters| appends(stores, concurrency, iters));
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("store_append_batch");
    group.sample_size(10).measurement_time(Duration::from_secs(15)).warm_up_time(Duration::from_secs(3));
    let (tasks, per_batch) = (4usize, 10usize);
    group.throughput(Throughput::Elements((tasks * per_batch) as u64));
    for (name, stores) in backends.each() {
        group.bench_function(BenchmarkId::new(name, format!("{tasks}x{per_batch}_loads_per_tx")), |b| {
            b.to_async(&rt).iter_custom(|iters| batched_appends(stores, tasks, per_batch, iters));
        });
    }
    group.finish();
    rt.block_on(backends.close());
}

fn read_project(c: &mut Criterion) {
    let rt = bench_runtime();
    let backends = rt.block_on(Backends::open());
    let mut group = c.benchmark_group("store_read_project");
    group.sample_size(20);
    for (name, stores) in backends.each() {
        for entries in [10u64, 100, 1000] {
            let load = format!("read-{entries}");
            rt.block_on(async {
                let events = &stores.events;
                let mut version = events.append(&load, &[registered(&load)], 0, &[]).await.expect("register");
                for n in 0..(entries - 1) / 2 {
                    let (log, rows) = agent_append(&load, n, version);
                    version = events.append(&load, &log, version, &rows).await.expect("append");
                }
                while version < entries {
                    let filler = LogEntry::Event(InboundEvent {
                        event_id: format!("ping_{version}"),
                        load_id: load.clone(),
                        occurred_at: base_time() + TimeDelta::hours(20),
                        kind: EventKind::Ping {
                            stop: 1,
                            delay_risk: RiskBand::Low,
                            recorded_at: base_time() + TimeDelta::hours(20),
                            lat: None,
                            lon: None,
                        },
                    });
                    version = events.append(&load, &[filler], version, &[]).await.expect("append");
                }
                assert_eq!(events.read(&load).await.expect("read").1, entries);
            });
            group.throughput(Throughput::Elements(entries));
            group.bench_function(BenchmarkId::new(name, format!("{entries}_entries")), |b| {
                b.to_async(&rt).iter(|| async {
                    let (log, version) = stores.events.read(&load).await.expect("read");
                    let state = project_state(&load, &log);
                    assert_eq!(state.version, version);
                    black_box(state)
                });
            });
            // The store's part alone (the statement, the rows, their Avro decoding): when read +
            // project slows and this does not, the time went to the projection, not the store.
            group.bench_function(BenchmarkId::new(name, format!("{entries}_entries_read_only")), |b| {
                b.to_async(&rt).iter(|| async {
                    let (log, version) = stores.events.read(&load).await.expect("read");
                    assert_eq!(log.len() as u64, version);
                    black_box(log)
                });
            });
        }
    }
    group.finish();
    rt.block_on(backends.close());
}

/// How the claimed rows of a batch are marked dispatched.
#[derive(Clone, Copy)]
enum Marks {
    /// Each row by its own statement, all at once (the relay before the pipelined one).
    Concurrent,
    /// Each row by its own statement, one after another.
    Sequential,
    /// The whole batch in one statement (`mark_dispatched_batch`, the relay's success path).
    Batch,
    /// The whole batch failed in one statement (`mark_failed_batch`, the relay's path when a
    /// service is down), buried so that the rows leave the pending ones as delivered rows do.
    FailedBatch,
}

/// Claims batches of 64 and marks every row dispatched.
async fn claim_and_mark(stores: &Stores, pg: Option<&PgPool>, iters: u64, marks: Marks) -> Duration {
    prepare_rows(stores, iters, "claim").await;
    analyze(pg).await;
    let now = base_time() + TimeDelta::days(1);
    let outbox = stores.outbox.clone();
    let start = Instant::now();
    let mut done = 0u64;
    while done < iters {
        let rows = outbox.pending(64, now).await.expect("claim");
        if rows.is_empty() {
            break;
        }
        done += rows.len() as u64;
        match marks {
            Marks::Concurrent => {
                let marks =
                    rows.iter().map(|r| outbox.mark_dispatched(&r.id, r.claim_token, "receipt-1", now));
                for result in futures::future::join_all(marks).await {
                    result.expect("mark");
                }
            }
            Marks::Sequential => {
                for r in &rows {
                    outbox.mark_dispatched(&r.id, r.claim_token, "receipt-1", now).await.expect("mark");
                }
            }
            Marks::Batch => {
                let batch: Vec<DispatchedMark> = rows
                    .iter()
                    .map(|r| DispatchedMark {
                        id: r.id.clone(),
                        token: r.claim_token,
                        receipt: "receipt-1".into(),
                    })
                    .collect();
                let marked = outbox.mark_dispatched_batch(&batch, now).await.expect("batch mark");
                assert!(marked.iter().all(Result::is_ok), "every claimed row is marked");
            }
            Marks::FailedBatch => {
                let batch: Vec<FailedMark> = rows
                    .iter()
                    .map(|r| FailedMark {
                        id: r.id.clone(),
                        token: r.claim_token,
                        failure: "503 from the service".into(),
                        next: NextAttempt::Dead,
                    })
                    .collect();
                let marked = outbox.mark_failed_batch(&batch, now).await.expect("failed batch mark");
                assert!(marked.iter().all(Result::is_ok), "every claimed row is marked");
            }
        }
    }
    start.elapsed()
}

/// Claims batches of 64 (timed), then marks every claimed row dispatched (untimed), so that
/// claimed rows do not pile up under their leases between samples.
async fn claim_only(stores: &Stores, pg: Option<&PgPool>, iters: u64) -> Duration {
    prepare_rows(stores, iters, "claim").await;
    analyze(pg).await;
    let now = base_time() + TimeDelta::days(1);
    let outbox = stores.outbox.clone();
    let mut claimed = Vec::new();
    let start = Instant::now();
    while (claimed.len() as u64) < iters {
        let rows = outbox.pending(64, now).await.expect("claim");
        if rows.is_empty() {
            break;
        }
        claimed.extend(rows);
    }
    let elapsed = start.elapsed();
    for chunk in claimed.chunks(64) {
        let marks = chunk.iter().map(|r| outbox.mark_dispatched(&r.id, r.claim_token, "receipt-1", now));
        for result in futures::future::join_all(marks).await {
            result.expect("mark");
        }
    }
    elapsed
}

/// Brings the bench schema's statistics up to date after its rows were written (untimed), as
/// autovacuum keeps a running database's: a fresh schema has none, and the store's generic plans
/// chosen without them scan whole partitions (docs/performance.md, "Partitioned store"). With
/// `BENCH_VACUUM` set it also vacuums, as autovacuum would between the samples: the rows earlier
/// samples delivered then leave the pending rows' index ("The marks' plan").
async fn analyze(pg: Option<&PgPool>) {
    let statement =
        if std::env::var_os("BENCH_VACUUM").is_some() { "VACUUM (ANALYZE) outbox" } else { "ANALYZE outbox" };
    if let Some(pool) = pg {
        sqlx::query(statement).execute(pool).await.expect("analyze the bench schema");
    }
}

fn claim_mark(c: &mut Criterion) {
    let rt = bench_runtime();
    let backends = rt.block_on(Backends::open());
    let mut group = c.benchmark_group("store_outbox_claim");
    group.sample_size(10).measurement_time(Duration::from_secs(10)).warm_up_time(Duration::from_secs(2));
    group.throughput(Throughput::Elements(1));
    let pg = backends.pg_store.pool().clone();
    let pool_of = |name: &str| (name == "postgres").then_some(&pg);
    for (name, stores) in backends.each() {
        group.bench_function(BenchmarkId::new(name, "batch64"), |b| {
            b.to_async(&rt).iter_custom(|iters| claim_only(stores, pool_of(name), iters));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("store_outbox_claim_mark");
    group.sample_size(10).measurement_time(Duration::from_secs(10)).warm_up_time(Duration::from_secs(2));
    group.throughput(Throughput::Elements(1));
    for (name, stores) in backends.each() {
        for (label, marks) in [
            ("batch64_concurrent_marks", Marks::Concurrent),
            ("batch64_sequential_marks", Marks::Sequential),
            ("batch64_batch_mark", Marks::Batch),
            ("batch64_failed_batch_mark", Marks::FailedBatch),
        ] {
            group.bench_function(BenchmarkId::new(name, label), |b| {
                b.to_async(&rt).iter_custom(|iters| claim_and_mark(stores, pool_of(name), iters, marks));
            });
        }
    }
    group.finish();
    rt.block_on(backends.close());
}

criterion_group!(benches, append, read_project, claim_mark);
criterion_main!(benches);
