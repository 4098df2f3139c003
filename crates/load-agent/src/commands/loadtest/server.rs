//! What Postgres wrote for the service, minute by minute: the write-ahead log, its full-page
//! images and flushes, checkpoints and the store's size, sampled at each minute of the measured
//! window so that a rate that changes over a run can be read beside what each event cost the
//! server (docs/capacity.md, "Minute by minute").

use std::time::{Duration, Instant};

use serde::Serialize;

use super::probe::Probe;

/// The server's cumulative counters at one instant.
#[derive(Debug, Clone, Copy, Default, sqlx::FromRow)]
pub struct ServerSample {
    /// Bytes of write-ahead log since the cluster began (`pg_current_wal_lsn`).
    pub wal_bytes: f64,
    /// `pg_stat_wal`: records, full-page images and flushes (`wal_sync`) so far.
    pub wal_records: i64,
    pub wal_fpi: i64,
    pub wal_sync: i64,
    /// `pg_stat_bgwriter`: checkpoints started, timed and requested.
    pub checkpoints: i64,
    /// The store's tables and their indexes in the current schema, bytes.
    pub store_bytes: f64,
}

/// Postgres 15's statistics views; the store's tables as the autovacuum stand-in names them.
const SAMPLE: &str = r#"
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8 AS wal_bytes,
       w.wal_records, w.wal_fpi, w.wal_sync,
       b.checkpoints_timed + b.checkpoints_req AS checkpoints,
       (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::float8
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = current_schema() AND c.relkind = 'r'
           AND (c.relname IN ('load_summary', 'load_months') OR c.relname LIKE 'log\_entries%'
                OR c.relname LIKE 'outbox%' OR c.relname LIKE 'timers%')) AS store_bytes
FROM pg_stat_wal w, pg_stat_bgwriter b
"#;

/// One minute (or the last part of one) of the measured window.
#[derive(Debug, Clone, Serialize)]
pub struct Minute {
    /// Seconds from the start of the measured window.
    pub from_secs: f64,
    pub seconds: f64,
    pub committed_events_per_sec: f64,
    pub event_to_commit_p99_ms: f64,
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
    /// The store's size at the end of the minute.
    pub store_mib: f64,
}

/// Samples the server at `from`, then every minute until `to` (and at `to`), while the test
/// runs. Errors (a server without the views) end the sampling: the report then has no server
/// figures.
pub async fn sample_minutes(url: String, from: Instant, to: Instant) -> Vec<(Instant, ServerSample)> {
    let mut out = Vec::new();
    let Ok(pool) = sqlx::PgPool::connect(&url).await else { return out };
    let mut at = from;
    loop {
        tokio::time::sleep_until(at.into()).await;
        match sqlx::query_as::<_, ServerSample>(SAMPLE).fetch_one(&pool).await {
            Ok(s) => out.push((Instant::now(), s)),
            Err(e) => {
                eprintln!("loadtest: server statistics not sampled: {e}");
                return out;
            }
        }
        if at >= to {
            return out;
        }
        at = (at + Duration::from_secs(60)).min(to);
    }
}

/// The measured window cut into minutes: the service's rate from the probe, and, when the
/// server was sampled at the same boundaries, its costs per event.
pub fn minutes(
    probe: &Probe,
    from: Instant,
    to: Instant,
    samples: &[(Instant, ServerSample)],
) -> Vec<Minute> {
    let mut bounds = vec![from];
    while let Some(&last) = bounds.last() {
        if last >= to {
            break;
        }
        bounds.push((last + Duration::from_secs(60)).min(to));
    }
    bounds
        .windows(2)
        .enumerate()
        .map(|(i, b)| {
            let w = probe.window(b[0], b[1]);
            let server = match (samples.get(i), samples.get(i + 1)) {
                (Some((t0, s0)), Some((t1, s1))) => Some(server_minute(w.events_committed, *t0, s0, *t1, s1)),
                _ => None,
            };
            Minute {
                from_secs: (b[0] - from).as_secs_f64(),
                seconds: w.seconds,
                committed_events_per_sec: w.events_per_sec,
                event_to_commit_p99_ms: w.event_to_commit_ms.p99,
                server,
            }
        })
        .collect()
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
    ServerMinute {
        wal_bytes_per_event: (s1.wal_bytes - s0.wal_bytes) / ev,
        wal_records_per_event: (s1.wal_records - s0.wal_records) as f64 / ev,
        full_page_images_per_event: (s1.wal_fpi - s0.wal_fpi) as f64 / ev,
        wal_flushes_per_sec: syncs / secs,
        events_per_wal_flush: events as f64 / syncs.max(1.0),
        checkpoints: s1.checkpoints - s0.checkpoints,
        store_mib: s1.store_bytes / (1024.0 * 1024.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            store_bytes: 0.0,
        };
        let s1 = ServerSample {
            wal_bytes: 1_000.0 + 600_000.0,
            wal_records: 10 + 3_000,
            wal_fpi: 1 + 120,
            wal_sync: 5 + 60,
            checkpoints: 3,
            store_bytes: 2.0 * 1024.0 * 1024.0,
        };
        let m = server_minute(600, t0, &s0, t1, &s1);
        assert_eq!(m.wal_bytes_per_event, 1_000.0);
        assert_eq!(m.wal_records_per_event, 5.0);
        assert_eq!(m.full_page_images_per_event, 0.2);
        assert_eq!(m.wal_flushes_per_sec, 1.0);
        assert_eq!(m.events_per_wal_flush, 10.0);
        assert_eq!(m.checkpoints, 1);
        assert_eq!(m.store_mib, 2.0);
    }
}
