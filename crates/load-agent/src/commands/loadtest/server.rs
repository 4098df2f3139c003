//! What Postgres wrote for the service, minute by minute: the write-ahead log, its full-page
//! images and flushes, checkpoints and the store's size, sampled at each minute of the measured
//! window so that a rate that changes over a run can be read beside what each event cost the
//! server (docs/capacity.md, "Minute by minute"); where `pg_stat_statements` is installed in
//! the database, each minute also names the statements that took most of the server's time
//! ("Which statement grows").

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::probe::{Latency, Probe};

/// The server's cumulative counters at one instant.
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct ServerSample {
    /// Bytes of write-ahead log since the cluster began (`pg_current_wal_lsn`).
    pub wal_bytes: f64,
    /// `pg_stat_wal`: records, full-page images and flushes (`wal_sync`) so far.
    pub wal_records: i64,
    pub wal_fpi: i64,
    pub wal_sync: i64,
    /// `pg_stat_bgwriter`: checkpoints started, timed and requested; buffers a backend had to
    /// write out itself to make room (shared buffers too small for what is being written).
    pub checkpoints: i64,
    pub buffers_backend: i64,
    /// `pg_stat_database` of this database: blocks found in shared buffers and blocks read.
    pub blks_hit: i64,
    pub blks_read: i64,
    /// The store's tables and their indexes in the current schema, bytes.
    pub store_bytes: f64,
    /// CPU seconds used so far by the server's processes on this machine, when it runs here
    /// (`/proc/*/stat` of every `postgres` process; a process that ended takes its share with
    /// it, so long-lived connections are what this counts).
    #[sqlx(skip)]
    pub server_cpu_secs: Option<f64>,
    /// This database's statements in `pg_stat_statements`; `None` where the extension is not
    /// installed in it (or not preloaded).
    #[sqlx(skip)]
    pub statements: Option<Vec<StatementTotals>>,
}

/// One statement's cumulative counters in `pg_stat_statements`.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct StatementTotals {
    pub queryid: i64,
    /// The statement's text, whitespace folded, cut at 80 characters.
    pub query: String,
    pub calls: i64,
    pub exec_ms: f64,
    pub rows: i64,
}

/// Every statement of this database `pg_stat_statements` has seen (a few hundred rows at most).
const STATEMENTS: &str = r#"
SELECT queryid, left(regexp_replace(query, '\s+', ' ', 'g'), 80) AS query, calls,
       total_exec_time AS exec_ms, rows
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND queryid IS NOT NULL
"#;

/// How many statements each minute names.
const STATEMENTS_PER_MINUTE: usize = 3;

/// Postgres 15's statistics views; the store's tables as the autovacuum stand-in names them.
const SAMPLE: &str = concat!(
    r#"
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8 AS wal_bytes,
       w.wal_records, w.wal_fpi, w.wal_sync,
       b.checkpoints_timed + b.checkpoints_req AS checkpoints, b.buffers_backend,
       d.blks_hit, d.blks_read,
       (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::float8 FROM pg_class c WHERE "#,
    super::store_leaf_tables!(),
    r#") AS store_bytes
FROM pg_stat_wal w, pg_stat_bgwriter b, pg_stat_database d
WHERE d.datname = current_database()
"#
);

/// The server settings a commit-bound figure depends on, reported beside it: the buffer pool
/// the store's hot pages must fit in, how far apart checkpoints are (each first write of a page
/// after one logs the whole page), and how commits are flushed.
const SETTINGS: &str = "SELECT name, current_setting(name) FROM pg_settings WHERE name IN \
    ('shared_buffers', 'max_wal_size', 'checkpoint_timeout', 'wal_compression', 'synchronous_commit', \
     'autovacuum', 'full_page_writes', 'commit_delay', 'server_version')";

pub async fn settings(url: &str) -> BTreeMap<String, String> {
    let Ok(pool) = sqlx::PgPool::connect(url).await else { return BTreeMap::new() };
    let rows: Vec<(String, String)> = sqlx::query_as(SETTINGS).fetch_all(&pool).await.unwrap_or_default();
    pool.close().await;
    rows.into_iter().collect()
}

/// One minute (or the last part of one) of the measured window.
#[derive(Debug, Clone, Serialize)]
pub struct Minute {
    /// Seconds from the start of the measured window.
    pub from_secs: f64,
    pub seconds: f64,
    pub committed_events_per_sec: f64,
    pub event_to_commit_p99_ms: f64,
    /// Kafka mode: the same minute's broker floor p99 (the probe's records sent in it), and the
    /// `fetch` stage's and the generator's hand-over's p99, so that a drift over the run shows
    /// whether it is the broker's, the generator's or the service's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_floor_p99_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fetch_p99_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handover_p99_ms: Option<f64>,
    /// Postgres only.
    pub server: Option<ServerMinute>,
}

/// What the server did in one minute, per committed event where it is a cost.
#[derive(Debug, Clone, Serialize)]
pub struct ServerMinute {
    pub wal_bytes_per_event: f64,
    pub wal_records_per_event: f64,
    pub full_page_images_per_event: f64,
    pub wal_flushes_per_sec: f64,
    /// Committed events per WAL flush: how many events each commit flush carried.
    pub events_per_wal_flush: f64,
    pub checkpoints: i64,
    /// Buffers backends wrote out themselves, and blocks read into shared buffers, per event;
    /// the share of block lookups shared buffers answered.
    pub backend_writes_per_event: f64,
    pub blocks_read_per_event: f64,
    pub buffer_hit_ratio: f64,
    /// The store's size at the end of the minute.
    pub store_mib: f64,
    /// The server's CPU per committed event (µs) and the cores it used, when it runs on this
    /// machine.
    pub server_cpu_us_per_event: Option<f64>,
    pub server_cores: Option<f64>,
    /// The statements that took most of the server's execution time in the minute, most first
    /// (empty without `pg_stat_statements`).
    pub statements: Vec<StatementMinute>,
}

/// One statement's minute: its share of the execution time of every statement of the database,
/// and its cost per call and per row (a row: a load of a group-commit append, a claimed row).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatementMinute {
    pub query: String,
    pub calls: u64,
    pub share_of_exec: f64,
    pub ms_per_call: f64,
    pub us_per_row: Option<f64>,
}

/// Samples the server at `from`, then every minute until `to` (and at `to`), while the test
/// runs. Errors (a server without the views) end the sampling: the report then has no server
/// figures.
pub async fn sample_minutes(url: String, from: Instant, to: Instant) -> Vec<(Instant, ServerSample)> {
    let mut out = Vec::new();
    let Ok(pool) = sqlx::PgPool::connect(&url).await else { return out };
    // The server's processes are counted only when it runs on this machine.
    let local = ["127.0.0.1", "localhost", "[::1]", "host=/"].iter().any(|h| url.contains(h));
    // Read at the first sample; where `pg_stat_statements` is not there then, it is not read again.
    let mut with_statements = true;
    for at in minute_bounds(from, to) {
        tokio::time::sleep_until(at.into()).await;
        match sqlx::query_as::<_, ServerSample>(SAMPLE).fetch_one(&pool).await {
            Ok(mut s) => {
                s.server_cpu_secs = local.then(postgres_cpu_secs).flatten();
                if with_statements {
                    s.statements =
                        sqlx::query_as::<_, StatementTotals>(STATEMENTS).fetch_all(&pool).await.ok();
                    with_statements = s.statements.is_some();
                }
                out.push((Instant::now(), s));
            }
            Err(e) => {
                eprintln!("loadtest: server statistics not sampled: {e}");
                break;
            }
        }
    }
    out
}

/// `from`, each minute after it, and `to`: the edges of the report's minutes, where the server
/// is sampled.
fn minute_bounds(from: Instant, to: Instant) -> Vec<Instant> {
    let mut bounds = vec![from];
    while let Some(&last) = bounds.last().filter(|&&last| last < to) {
        bounds.push((last + Duration::from_secs(60)).min(to));
    }
    bounds
}

/// The measured window cut into minutes: the service's rate from the probe, the broker floor's
/// samples sent in each minute (Kafka mode), and, when the server was sampled at the same
/// boundaries, its costs per event.
pub fn minutes(
    probe: &Probe,
    from: Instant,
    to: Instant,
    floor: &[(Instant, f64)],
    samples: &[(Instant, ServerSample)],
) -> Vec<Minute> {
    minute_bounds(from, to)
        .windows(2)
        .enumerate()
        .map(|(i, b)| {
            let w = probe.window(b[0], b[1]);
            let server = match (samples.get(i), samples.get(i + 1)) {
                (Some((t0, s0)), Some((t1, s1))) => Some(server_minute(w.events_committed, *t0, s0, *t1, s1)),
                _ => None,
            };
            let in_minute = floor.iter().filter(|(at, _)| *at >= b[0] && *at < b[1]).map(|(_, v)| *v);
            let floor = Latency::of(in_minute.collect());
            let kafka = floor.count > 0;
            Minute {
                from_secs: (b[0] - from).as_secs_f64(),
                seconds: w.seconds,
                committed_events_per_sec: w.events_per_sec,
                event_to_commit_p99_ms: w.event_to_commit_ms.p99,
                broker_floor_p99_ms: kafka.then_some(floor.p99),
                fetch_p99_ms: w.stages_ms.get("fetch").filter(|_| kafka).map(|l| l.p99),
                handover_p99_ms: kafka.then_some(w.handover_ms.p99),
                server,
            }
        })
        .collect()
}

/// CPU seconds (user + system) of every process named `postgres` on this machine (the
/// postmaster, its backends and background workers), in the usual 100 ticks per second.
fn postgres_cpu_secs() -> Option<f64> {
    let mut total = 0.0;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        if !stat.rsplit_once(')').is_some_and(|(head, _)| head.ends_with("(postgres")) {
            continue;
        }
        if let Some(secs) = super::stat_cpu_secs(&stat) {
            total += secs;
            found = true;
        }
    }
    found.then_some(total)
}

/// What the minutes say about the server, in words: the two shortfalls that make a
/// commit-bound rate fall as the store grows (docs/operations.md, "Postgres server settings").
/// Judged on the second half of the window, once the store has grown.
pub fn shortfalls(minutes: &[Minute]) -> Vec<String> {
    let late: Vec<&ServerMinute> =
        minutes.iter().skip(minutes.len() / 2).filter_map(|m| m.server.as_ref()).collect();
    if late.is_empty() {
        return Vec::new();
    }
    // The median minute: one vacuum's ring-buffer writes (counted as a backend's) do not make a
    // shortfall.
    let median = |f: fn(&ServerMinute) -> f64| {
        let mut v: Vec<f64> = late.iter().map(|m| f(m)).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let fpi = median(|m| m.full_page_images_per_event);
    let checkpoints = median(|m| m.checkpoints as f64);
    let backend_writes = median(|m| m.backend_writes_per_event);
    let mut out = Vec::new();
    if checkpoints >= 1.0 && fpi >= 0.25 {
        out.push(format!(
            "checkpoints every {:.0} s: {fpi:.2} full-page images per event; raise max_wal_size \
             (docs/operations.md, \"Postgres server settings\")",
            60.0 / checkpoints
        ));
    }
    if backend_writes >= 0.25 {
        out.push(format!(
            "backends wrote {backend_writes:.2} buffers per event themselves: shared_buffers is smaller than \
             the pages the appends write; raise it (docs/operations.md, \"Postgres server settings\")"
        ));
    }
    out
}

fn server_minute(
    events: u64,
    t0: Instant,
    s0: &ServerSample,
    t1: Instant,
    s1: &ServerSample,
) -> ServerMinute {
    let ev = (events as f64).max(1.0);
    let secs = (t1 - t0).as_secs_f64().max(1e-9);
    let syncs = (s1.wal_sync - s0.wal_sync) as f64;
    let cpu = s1.server_cpu_secs.zip(s0.server_cpu_secs).map(|(b, a)| b - a);
    ServerMinute {
        wal_bytes_per_event: (s1.wal_bytes - s0.wal_bytes) / ev,
        wal_records_per_event: (s1.wal_records - s0.wal_records) as f64 / ev,
        full_page_images_per_event: (s1.wal_fpi - s0.wal_fpi) as f64 / ev,
        wal_flushes_per_sec: syncs / secs,
        events_per_wal_flush: events as f64 / syncs.max(1.0),
        checkpoints: s1.checkpoints - s0.checkpoints,
        backend_writes_per_event: (s1.buffers_backend - s0.buffers_backend) as f64 / ev,
        blocks_read_per_event: (s1.blks_read - s0.blks_read) as f64 / ev,
        buffer_hit_ratio: {
            let (hit, read) = ((s1.blks_hit - s0.blks_hit) as f64, (s1.blks_read - s0.blks_read) as f64);
            hit / (hit + read).max(1.0)
        },
        store_mib: s1.store_bytes / (1024.0 * 1024.0),
        server_cpu_us_per_event: cpu.map(|c| c * 1e6 / ev),
        server_cores: cpu.map(|c| c / secs),
        statements: match (&s0.statements, &s1.statements) {
            (Some(a), Some(b)) => top_statements(a, b, STATEMENTS_PER_MINUTE),
            _ => Vec::new(),
        },
    }
}

/// The `n` statements with the most execution time between two snapshots. A statement new in
/// the later one counts from zero, and so does one whose counters went down (reset, or evicted
/// and seen again).
fn top_statements(before: &[StatementTotals], after: &[StatementTotals], n: usize) -> Vec<StatementMinute> {
    let before: HashMap<i64, &StatementTotals> = before.iter().map(|s| (s.queryid, s)).collect();
    let mut deltas: Vec<(&StatementTotals, i64, f64, i64)> = after
        .iter()
        .map(|s| match before.get(&s.queryid).filter(|b| b.calls <= s.calls) {
            Some(b) => (s, s.calls - b.calls, s.exec_ms - b.exec_ms, s.rows - b.rows),
            None => (s, s.calls, s.exec_ms, s.rows),
        })
        .filter(|(_, calls, _, _)| *calls > 0)
        .collect();
    let total: f64 = deltas.iter().map(|d| d.2).sum();
    deltas.sort_by(|a, b| b.2.total_cmp(&a.2));
    deltas
        .into_iter()
        .take(n)
        .map(|(s, calls, ms, rows)| StatementMinute {
            query: s.query.clone(),
            calls: calls.unsigned_abs(),
            share_of_exec: ms / total.max(1e-9),
            ms_per_call: ms / calls as f64,
            us_per_row: (rows > 0).then(|| ms * 1000.0 / rows as f64),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minute(fpi: f64, checkpoints: i64, backend_writes: f64) -> Minute {
        Minute {
            from_secs: 0.0,
            seconds: 60.0,
            committed_events_per_sec: 4_000.0,
            event_to_commit_p99_ms: 100.0,
            broker_floor_p99_ms: None,
            fetch_p99_ms: None,
            handover_p99_ms: None,
            server: Some(ServerMinute {
                wal_bytes_per_event: 3_000.0,
                wal_records_per_event: 20.0,
                full_page_images_per_event: fpi,
                wal_flushes_per_sec: 300.0,
                events_per_wal_flush: 13.0,
                checkpoints,
                backend_writes_per_event: backend_writes,
                blocks_read_per_event: 0.2,
                buffer_hit_ratio: 0.99,
                store_mib: 1_000.0,
                server_cpu_us_per_event: None,
                server_cores: None,
                statements: Vec::new(),
            }),
        }
    }

    #[test]
    fn an_undersized_server_is_named_by_what_it_lacks() {
        let fine = vec![minute(0.0, 0, 0.0); 10];
        assert!(shortfalls(&fine).is_empty());
        // Frequent checkpoints late in the run: full-page images.
        let mut ckpt = vec![minute(0.1, 2, 0.0); 5];
        ckpt.extend(vec![minute(1.7, 5, 0.0); 5]);
        let s = shortfalls(&ckpt);
        assert_eq!(s.len(), 1);
        assert!(s[0].starts_with("checkpoints every 12 s:") && s[0].contains("max_wal_size"), "{s:?}");
        // A small buffer pool: backends write out pages themselves.
        let mut small = vec![minute(0.0, 0, 0.8); 5];
        small.extend(vec![minute(0.0, 0, 3.8); 5]);
        let s = shortfalls(&small);
        assert_eq!(s.len(), 1);
        assert!(s[0].contains("shared_buffers"), "{s:?}");
        // One minute's spike (a vacuum writing through its ring) is not a shortfall.
        let mut spike = vec![minute(0.0, 0, 0.0); 9];
        spike[6] = minute(0.0, 0, 1.6);
        assert!(shortfalls(&spike).is_empty());
        // The first half alone (registration, a cold cache) does not count.
        let mut early = vec![minute(2.0, 5, 3.0); 5];
        early.extend(vec![minute(0.0, 0, 0.0); 5]);
        assert!(shortfalls(&early).is_empty());
        // SQLite: no server figures.
        assert!(shortfalls(&[Minute { server: None, ..minute(0.0, 0, 0.0) }]).is_empty());
    }

    #[test]
    fn the_window_is_cut_at_each_minute_and_at_its_end() {
        let from = Instant::now();
        let secs = |b: Vec<Instant>| b.iter().map(|t| (*t - from).as_secs()).collect::<Vec<_>>();
        assert_eq!(secs(minute_bounds(from, from + Duration::from_secs(150))), [0, 60, 120, 150]);
        assert_eq!(secs(minute_bounds(from, from + Duration::from_secs(120))), [0, 60, 120]);
        assert_eq!(secs(minute_bounds(from, from)), [0]);
    }

    #[test]
    fn each_minute_has_the_broker_floor_of_its_own_samples() {
        let probe = Probe::new(1.0);
        let from = Instant::now();
        let at = |secs: u64| from + Duration::from_secs(secs);
        // A floor that slows in the second minute; a sample past the window is not counted.
        let floor: Vec<(Instant, f64)> = (0..60)
            .map(|s| (at(s), 40.0))
            .chain((60..120).map(|s| (at(s), 90.0)))
            .chain([(at(125), 500.0)])
            .collect();
        let minutes = minutes(&probe, from, at(120), &floor, &[]);
        let floors: Vec<Option<f64>> = minutes.iter().map(|m| m.broker_floor_p99_ms).collect();
        assert_eq!(floors, [Some(40.0), Some(90.0)]);
        assert!(minutes.iter().all(|m| m.handover_p99_ms.is_some()), "Kafka mode: the hand-over beside it");
        // Embedded mode (no floor probe): no broker figures.
        let embedded = super::minutes(&probe, from, at(120), &[], &[]);
        assert!(embedded.iter().all(|m| m.broker_floor_p99_ms.is_none() && m.handover_p99_ms.is_none()));
    }

    #[test]
    fn a_minute_costs_are_per_committed_event() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(60);
        let s0 = ServerSample {
            wal_bytes: 1_000.0,
            wal_records: 10,
            wal_fpi: 1,
            wal_sync: 5,
            checkpoints: 2,
            buffers_backend: 100,
            blks_hit: 1_000,
            blks_read: 0,
            store_bytes: 0.0,
            server_cpu_secs: Some(10.0),
            statements: None,
        };
        let s1 = ServerSample {
            wal_bytes: 1_000.0 + 600_000.0,
            wal_records: 10 + 3_000,
            wal_fpi: 1 + 120,
            wal_sync: 5 + 60,
            checkpoints: 3,
            buffers_backend: 100 + 300,
            blks_hit: 1_000 + 900,
            blks_read: 100,
            store_bytes: 2.0 * 1024.0 * 1024.0,
            server_cpu_secs: Some(10.0 + 0.6),
            statements: None,
        };
        let m = server_minute(600, t0, &s0, t1, &s1);
        assert_eq!(m.wal_bytes_per_event, 1_000.0);
        assert_eq!(m.wal_records_per_event, 5.0);
        assert_eq!(m.full_page_images_per_event, 0.2);
        assert_eq!(m.wal_flushes_per_sec, 1.0);
        assert_eq!(m.events_per_wal_flush, 10.0);
        assert_eq!(m.checkpoints, 1);
        assert_eq!(m.backend_writes_per_event, 0.5);
        assert_eq!(m.blocks_read_per_event, 100.0 / 600.0);
        assert_eq!(m.buffer_hit_ratio, 0.9);
        assert_eq!(m.store_mib, 2.0);
        assert!((m.server_cpu_us_per_event.unwrap_or_default() - 1_000.0).abs() < 1e-6);
        assert!((m.server_cores.unwrap_or_default() - 0.01).abs() < 1e-9);
        assert!(m.statements.is_empty(), "no pg_stat_statements, no statements");
    }

    fn totals(queryid: i64, calls: i64, exec_ms: f64, rows: i64) -> StatementTotals {
        StatementTotals { queryid, query: format!("q{queryid}"), calls, exec_ms, rows }
    }

    #[test]
    fn a_minute_names_the_statements_that_took_the_server_s_time() {
        let before = [totals(1, 100, 1_000.0, 1_000), totals(2, 50, 100.0, 0), totals(3, 10, 5.0, 10)];
        let after = [
            // The append: 600 calls, 1,200 ms, 6,000 loads in the minute.
            totals(1, 700, 2_200.0, 7_000),
            // Untouched in the minute: not named.
            totals(2, 50, 100.0, 0),
            // Reset since (fewer calls than before): counts from zero.
            totals(3, 4, 200.0, 8),
            // New: counts from zero.
            totals(4, 100, 600.0, 0),
        ];
        let top = top_statements(&before, &after, 2);
        assert_eq!(top.len(), 2);
        assert_eq!((top[0].query.as_str(), top[0].calls), ("q1", 600));
        assert!((top[0].share_of_exec - 1_200.0 / 2_000.0).abs() < 1e-9);
        assert!((top[0].ms_per_call - 2.0).abs() < 1e-9);
        assert_eq!(top[0].us_per_row, Some(200.0));
        assert_eq!((top[1].query.as_str(), top[1].calls, top[1].us_per_row), ("q4", 100, None));
        assert!((top[1].share_of_exec - 0.3).abs() < 1e-9);
        assert!(top_statements(&before, &before, 3).is_empty(), "an idle minute names nothing");
    }
}
