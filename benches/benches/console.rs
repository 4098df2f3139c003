//! The console's attention list (issue 17) on a large Postgres store: it must come from the
//! `load_summary` projection and small indexes, not a scan of every log, "measured with 100,000
//! loads".
//!
//! Each store is a fresh schema (dropped at the end) filled with plain SQL
//! (`INSERT ... SELECT ... FROM generate_series`): per load one `load_summary` row (5 clients, the
//! 5 stages), 3 outbox rows (dispatched; 0.5 % of loads with a dead action inside the window,
//! 1 % with one older than it, 0.1 % pending), 1 scheduled timer (due in the future; 0.5 % of
//! loads overdue, 0.5 % late by less than `overdue_after`), 2 fired timers and, for 10 % of the
//! loads, a cancelled one. 1 % of the loads have an escalated ask (half of them also the overdue
//! timer), 1 % an urgent Hero task inside the window and 5 % one older than it: 2.5 % of the
//! loads need attention. `log_entries` stays empty: the attention list never reads it.
//!
//! Benches: the first page (limit 50) of the default query (window 72 h, overdue after 60 s) on
//! 100,000 and on 10,000 loads, the same filtered by client on 100,000, and one `summary(load_id)`
//! lookup. `attention_first_page_100k_sparse` is a third store of 100,000 loads of which only
//! 0.25 % (250, as many as in the 10,000-load store) need attention: with the 10k bench it tells
//! whether the list grows with the store or with the attention set. Before timing, the bench
//! prints how many loads need attention (checked against a plain scan), the time of a full
//! `SELECT count(*) FROM load_summary`, the `EXPLAIN (ANALYZE, BUFFERS)` plan of the candidate
//! query on the large store, and warns when a plan scans `load_summary`, `outbox` or `timers`
//! sequentially.
//!
//! In criterion's test mode (`cargo test -p load-agent-benches --benches`, or `-- --test`) the
//! stores hold 2,000 and 500 loads, so the run stays quick; the bench names stay the same.
//!
//! Postgres: `BENCH_DATABASE_URL`, else `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/bench`).
//! `DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo bench -p load-agent-benches --bench console`;
//! figures in `docs/capacity.md`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use criterion::{Criterion, criterion_group, criterion_main};
use load_agent_store::{AttentionQuery, PgStore, StoreOptions, Stores};
use load_agent_testkit::store::{base_time, bench_postgres, bench_runtime};

/// Criterion's own rule: test mode unless run with `--bench` alone (`cargo bench` passes
/// `--bench`, `cargo test --benches` does not; `cargo bench -- --test` passes both).
fn test_mode() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--test") || !args.iter().any(|a| a == "--bench")
}

/// (large, small) store sizes in loads.
fn sizes() -> (u32, u32) {
    if test_mode() { (2_000, 500) } else { (100_000, 10_000) }
}

fn now() -> DateTime<Utc> {
    base_time()
}

/// The console's default query (as the store's contract tests: 72 h window, overdue after 60 s).
fn query() -> AttentionQuery {
    AttentionQuery {
        now: now(),
        window: TimeDelta::hours(72),
        overdue_after: TimeDelta::seconds(60),
        client: None,
        stage: None,
        reason: None,
        offset: 0,
        limit: 50,
    }
}

fn load_id(i: u32) -> String {
    format!("load-{i:06}")
}

/// $1: now, $2: the number of loads, $3: the rarity (1: 2.5 % of the loads need attention, 10:
/// 0.25 %). Load `i` is `load-{i:06}`.
const SUMMARIES: &str = r#"
INSERT INTO load_summary (load_id, client, stage, version, open_asks, escalated_asks, escalated_since,
                          urgent_task_at, updated_at)
SELECT 'load-' || lpad(i::text, 6, '0'),
       'client_' || chr(97 + i % 5),
       (ARRAY['to_pickup', 'at_pickup', 'to_delivery', 'at_delivery', 'delivered'])[1 + (i / 5) % 5],
       8 + i % 60,
       CASE WHEN i % (100 * $3::int) = 7 THEN 2 ELSE i % 3 END,
       CASE WHEN i % (100 * $3::int) = 7 THEN 1 ELSE 0 END,
       CASE WHEN i % (100 * $3::int) = 7 THEN $1 - make_interval(mins => 30 + i % 600) END,
       CASE WHEN i % (100 * $3::int) = 13 THEN $1 - make_interval(mins => i % 4000)
            WHEN i % 20 = 3 THEN $1 - make_interval(days => 4, mins => i % 10000) END,
       $1 - make_interval(mins => i % 2880)
FROM generate_series(1, $2::int) AS i
"#;

/// Three actions per load: dead inside the window (0.5 % of loads), dead before it (1 %),
/// pending (0.1 %), dispatched otherwise.
const OUTBOX: &str = r#"
INSERT INTO outbox (id, load_id, load_version, destination, action, status, attempts, first_attempt_at,
                    last_failure, receipt, created_at, dispatched_at, dead_at)
SELECT 'act_' || l || '_' || k, l, 2 * k, (ARRAY['sms', 'timer', 'tms'])[k], '{"bench":true}', st,
       CASE WHEN st = 'pending' THEN 0 ELSE 1 END,
       CASE WHEN st = 'pending' THEN NULL ELSE created + interval '1 second' END,
       CASE WHEN st = 'dead' THEN 'permanent: bench' END,
       CASE WHEN st = 'dispatched' THEN 'receipt-' || k END,
       created,
       CASE WHEN st = 'dispatched' THEN created + interval '2 seconds' END,
       CASE WHEN st = 'dead' THEN created + interval '10 minutes' END
FROM (
    SELECT i, k, 'load-' || lpad(i::text, 6, '0') AS l, s.st,
           CASE WHEN s.st = 'dead' AND k = 1 THEN $1 - make_interval(mins => 10 + i % 4000)
                WHEN s.st = 'dead' THEN $1 - make_interval(days => 5, mins => i % 10000)
                ELSE $1 - make_interval(mins => i % 10000 + 10 * k) END AS created
    FROM generate_series(1, $2::int) AS i
    CROSS JOIN generate_series(1, 3) AS k
    CROSS JOIN LATERAL (
        SELECT CASE WHEN k = 1 AND i % (200 * $3::int) = 11 THEN 'dead'
                    WHEN k = 2 AND i % 100 = 57 THEN 'dead'
                    WHEN k = 3 AND i % 1000 = 1 THEN 'pending'
                    ELSE 'dispatched' END AS st
    ) s
) g
"#;

/// Per load: attempt 1 of an ask scheduled (in the future; overdue for 0.5 % of loads, late by
/// 30 s, under `overdue_after`, for 0.5 %), two fired, and a cancelled one for 10 %.
const TIMERS: &str = r#"
INSERT INTO timers (timer_id, load_id, ask_id, attempt, fire_at, status, fired_at, cancelled_at, load_month)
SELECT 'tmr_' || l || '_' || k, l, 'ask_' || l || '_' || k, 1, fire_at, st,
       CASE WHEN st = 'fired' THEN fire_at + interval '1 second' END,
       CASE WHEN st = 'cancelled' THEN $1 - interval '10 minutes' END,
       date_trunc('month', $1 AT TIME ZONE 'UTC')::date
FROM (
    SELECT i, k, 'load-' || lpad(i::text, 6, '0') AS l,
           CASE k WHEN 1 THEN 'scheduled' WHEN 4 THEN 'cancelled' ELSE 'fired' END AS st,
           CASE WHEN k = 1 AND i % (200 * $3::int) = 7 THEN $1 - make_interval(mins => 5 + i % 600)
                WHEN k = 1 AND i % 200 = 77 THEN $1 - interval '30 seconds'
                WHEN k = 1 THEN $1 + make_interval(mins => 1 + i % 240)
                WHEN k = 4 THEN $1 + interval '1 hour'
                ELSE $1 - make_interval(hours => 3 * k, mins => i % 600) END AS fire_at
    FROM generate_series(1, $2::int) AS i
    CROSS JOIN generate_series(1, 4) AS k
    WHERE k < 4 OR i % 10 = 0
) g
"#;

/// The store's candidate query, exactly as the store runs it.
const CANDIDATES: &str = load_agent_store::postgres::ATTENTION_CANDIDATES_SQL;

/// The loads needing attention counted by a plain scan, independently of the candidate query.
const EXPECTED: &str = r#"
SELECT count(*) FROM load_summary s
WHERE s.escalated_asks > 0
   OR s.urgent_task_at >= $1
   OR EXISTS (SELECT 1 FROM outbox o WHERE o.load_id = s.load_id AND o.status = 'dead' AND o.dead_at >= $1)
   OR EXISTS (SELECT 1 FROM timers x WHERE x.load_id = s.load_id AND x.status = 'scheduled' AND x.fire_at < $2)
"#;

/// A store of `loads` loads in a fresh schema; dropped by [`Fleet::close`].
struct Fleet {
    loads: u32,
    rarity: i32,
    stores: Stores,
    pg: PgStore,
}

impl Fleet {
    async fn build(loads: u32, rarity: i32) -> Self {
        let pg = bench_postgres("console", &StoreOptions::default()).await;
        let schema = pg.schema().unwrap_or_default().to_owned();
        let start = Instant::now();
        let n = i32::try_from(loads).expect("a load count that fits an int");
        for (table, sql) in [("load_summary", SUMMARIES), ("outbox", OUTBOX), ("timers", TIMERS)] {
            sqlx::query(sql)
                .bind(now())
                .bind(n)
                .bind(rarity)
                .execute(pg.pool())
                .await
                .unwrap_or_else(|e| panic!("fill {table}: {e}"));
        }
        // What autovacuum would have done on a store this size: statistics and the visibility map.
        sqlx::raw_sql("VACUUM (ANALYZE) load_summary, outbox, timers")
            .execute(pg.pool())
            .await
            .expect("vacuum analyze");
        let rows: (i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM load_summary), (SELECT count(*) FROM outbox), \
             (SELECT count(*) FROM timers)",
        )
        .fetch_one(pg.pool())
        .await
        .expect("count rows");
        eprintln!(
            "console bench: {loads} loads in schema {schema}, filled in {:.1?}: load_summary {}, outbox {}, \
             timers {} rows",
            start.elapsed(),
            rows.0,
            rows.1,
            rows.2
        );
        Fleet { loads, rarity, stores: pg.clone().into_stores(), pg }
    }

    /// Prints how many loads need attention (and checks it against a plain scan) and returns it.
    async fn report(&self) -> u64 {
        let q = query();
        let (window_start, overdue_before) = (q.now - q.window, q.now - q.overdue_after);
        let page = self.stores.index.attention(&q).await.expect("attention");
        let (expected,): (i64,) = sqlx::query_as(EXPECTED)
            .bind(window_start)
            .bind(overdue_before)
            .fetch_one(self.pg.pool())
            .await
            .expect("count by scan");
        assert_eq!(page.total, u64::try_from(expected).expect("a count"), "the attention list's total");
        assert_eq!(page.rows.len() as u64, page.total.min(q.limit), "a full first page");
        eprintln!(
            "console bench: {} loads (rarity {}): {} need attention ({:.2} %), by reason {:?}",
            self.loads,
            self.rarity,
            page.total,
            100.0 * page.total as f64 / f64::from(self.loads),
            page.by_reason
        );
        page.total
    }

    /// EXPLAIN (ANALYZE, BUFFERS) of the candidate query (printed with `print_plan`, not in test
    /// mode); warns on a sequential scan of the tables the candidates come from.
    async fn explain(&self, print_plan: bool) {
        let q = query();
        let (window_start, overdue_before) = (q.now - q.window, q.now - q.overdue_after);
        let lines: Vec<(String,)> = sqlx::query_as(&format!("EXPLAIN (ANALYZE, BUFFERS) {CANDIDATES}"))
            .bind(window_start)
            .bind(overdue_before)
            .fetch_all(self.pg.pool())
            .await
            .expect("explain the candidate query");
        let plan: Vec<String> = lines.into_iter().map(|(l,)| l).collect();
        if print_plan && !test_mode() {
            eprintln!("console bench: candidate query on {} loads:\n{}", self.loads, plan.join("\n"));
        }
        let seq: Vec<&String> = plan
            .iter()
            .filter(|l| {
                ["load_summary", "outbox", "timers"].iter().any(|t| l.contains(&format!("Seq Scan on {t}")))
            })
            .collect();
        // For comparison: what a scan of the whole projection costs (best of 5).
        let mut best = Duration::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            let _: (i64,) = sqlx::query_as("SELECT count(*) FROM load_summary")
                .fetch_one(self.pg.pool())
                .await
                .expect("count load_summary");
            best = best.min(start.elapsed());
        }
        eprintln!("console bench: SELECT count(*) FROM load_summary on {} loads: {best:.2?}", self.loads);
        if seq.is_empty() {
            eprintln!("console bench: no sequential scan of load_summary, outbox or timers");
        } else {
            eprintln!("console bench: WARNING: sequential scans in the attention query's plan: {seq:?}");
        }
    }

    async fn close(self) {
        let Fleet { stores, pg, .. } = self;
        drop(stores);
        if let Err(e) = pg.drop_schema().await {
            eprintln!("could not drop the bench schema: {e}");
        }
    }
}

fn console(c: &mut Criterion) {
    let rt = bench_runtime();
    let (large, small) = sizes();
    let (big, sparse, little) = rt.block_on(async {
        let big = Fleet::build(large, 1).await;
        big.report().await;
        big.explain(true).await;
        // As many loads as `big`, as few needing attention as `little`: what the list grows with.
        let sparse = Fleet::build(large, 10).await;
        sparse.report().await;
        sparse.explain(false).await;
        let little = Fleet::build(small, 1).await;
        little.report().await;
        (big, sparse, little)
    });

    let mut group = c.benchmark_group("console");
    group.sample_size(20).measurement_time(Duration::from_secs(10));
    let first_page = |b: &mut criterion::Bencher<'_>, fleet: &Fleet| {
        let q = query();
        b.to_async(&rt)
            .iter(|| async { black_box(fleet.stores.index.attention(&q).await.expect("attention")) });
    };
    group.bench_function("attention_first_page_100k", |b| first_page(b, &big));
    group.bench_function("attention_filtered_client_100k", |b| {
        let q = AttentionQuery { client: Some("client_c".into()), ..query() };
        b.to_async(&rt).iter(|| async {
            let page = big.stores.index.attention(&q).await.expect("attention");
            assert!(page.rows.iter().all(|r| r.client.as_deref() == Some("client_c")));
            black_box(page)
        });
    });
    group.bench_function("summary_lookup_100k", |b| {
        let mut n: u32 = 0;
        b.to_async(&rt).iter(|| {
            // A different load each time, spread over the store.
            n = n.wrapping_add(1);
            let id = load_id(1 + n.wrapping_mul(7_919) % big.loads);
            let index = big.stores.index.clone();
            async move { black_box(index.summary(&id).await.expect("summary").expect("a summary")) }
        });
    });
    group.bench_function("attention_first_page_10k", |b| first_page(b, &little));
    group.bench_function("attention_first_page_100k_sparse", |b| first_page(b, &sparse));
    group.finish();

    rt.block_on(async {
        big.close().await;
        sparse.close().await;
        little.close().await;
    });
}

criterion_group!(benches, console);
criterion_main!(benches);
