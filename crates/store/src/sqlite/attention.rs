//! `LoadIndex` on SQLite: the same candidates as on Postgres (`postgres/attention.rs`), their
//! counts by correlated lookups on the outbox's and the timers' load indexes; the summary write
//! runs in the writer's transaction.

use async_trait::async_trait;
use load_agent_domain::{LoadSummary, Stage};
use sqlx::Row;
use sqlx::sqlite::{SqliteConnection, SqliteRow};

use super::SqliteStore;
use super::command::WriteCmd;
use super::log::{SUMMARY_UPSERT, SummaryTimes};
use crate::attention::{AttentionPage, AttentionQuery, Candidate, LoadIndex, bounds, page};
use crate::codec::{EncodedSummary, encode_summary, parse_sqlite_time, sqlite_time, to_u64};
use crate::error::StoreError;

/// ?1: the start of the window (urgent tasks, dead actions); ?2: timers due before this are
/// overdue.
const CANDIDATES: &str = r#"
WITH cand AS (
    SELECT load_id FROM load_summary WHERE escalated_asks > 0
    UNION SELECT load_id FROM load_summary WHERE urgent_task_at IS NOT NULL AND urgent_task_at >= ?1
    UNION SELECT load_id FROM outbox WHERE status = 'dead' AND dead_at >= ?1
    UNION SELECT load_id FROM timers WHERE status = 'scheduled' AND fire_at < ?2
)
SELECT s.load_id, s.client, s.stage, s.version, s.open_asks, s.escalated_asks, s.escalated_since,
       s.urgent_task_at, s.updated_at,
       (SELECT count(*) FROM outbox o WHERE o.load_id = s.load_id AND o.status = 'dead' AND o.dead_at >= ?1),
       (SELECT min(o.dead_at) FROM outbox o WHERE o.load_id = s.load_id AND o.status = 'dead' AND o.dead_at >= ?1),
       (SELECT count(*) FROM timers x WHERE x.load_id = s.load_id AND x.status = 'scheduled' AND x.fire_at < ?2),
       (SELECT min(x.fire_at) FROM timers x WHERE x.load_id = s.load_id AND x.status = 'scheduled' AND x.fire_at < ?2)
FROM load_summary s
WHERE s.load_id IN (SELECT load_id FROM cand)
"#;

fn time(row: &SqliteRow, i: usize, what: &str) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
    row.try_get::<Option<String>, _>(i)?.map(|t| parse_sqlite_time(what, &t)).transpose()
}

fn candidate(row: &SqliteRow) -> Result<Candidate, StoreError> {
    let load_id: String = row.try_get(0)?;
    let updated_at: String = row.try_get(8)?;
    Ok(Candidate {
        client: row.try_get(1)?,
        stage: row.try_get(2)?,
        version: row.try_get(3)?,
        open_asks: row.try_get(4)?,
        escalated_asks: row.try_get(5)?,
        escalated_since: time(row, 6, "load_summary.escalated_since")?,
        urgent_task_at: time(row, 7, "load_summary.urgent_task_at")?,
        updated_at: parse_sqlite_time("load_summary.updated_at", &updated_at)?,
        dead: row.try_get(9)?,
        dead_since: time(row, 10, "outbox.dead_at")?,
        overdue: row.try_get(11)?,
        overdue_since: time(row, 12, "timers.fire_at")?,
        load_id,
    })
}

/// Writes a summary outside an append (in the writer's transaction).
pub(super) async fn put_summary_in(
    conn: &mut SqliteConnection,
    load_id: &str,
    s: &EncodedSummary,
) -> Result<(), sqlx::Error> {
    let times = SummaryTimes::of(Some(s));
    let sql = format!(
        "INSERT INTO load_summary (load_id, client, stage, version, open_asks, escalated_asks, \
         escalated_since, urgent_task_at, updated_at) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9 WHERE true \
         {SUMMARY_UPSERT}"
    );
    sqlx::query(&sql)
        .bind(load_id)
        .bind(s.client.as_deref())
        .bind(s.stage)
        .bind(s.version)
        .bind(s.open_asks)
        .bind(s.escalated_asks)
        .bind(times.escalated_since)
        .bind(times.urgent_task_at)
        .bind(times.updated_at)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

#[async_trait]
impl LoadIndex for SqliteStore {
    async fn attention(&self, query: &AttentionQuery) -> Result<AttentionPage, StoreError> {
        let (window_start, overdue_before) = bounds(query);
        let rows = sqlx::query(CANDIDATES)
            .bind(sqlite_time(window_start))
            .bind(sqlite_time(overdue_before))
            .fetch_all(&self.readers)
            .await?;
        let candidates = rows.iter().map(candidate).collect::<Result<Vec<_>, _>>()?;
        page(candidates, query)
    }

    async fn summary(&self, load_id: &str) -> Result<Option<LoadSummary>, StoreError> {
        let row = sqlx::query(
            "SELECT client, stage, version, open_asks, escalated_asks, escalated_since, urgent_task_at, \
             updated_at FROM load_summary WHERE load_id = ?1",
        )
        .bind(load_id)
        .fetch_optional(&self.readers)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let stage: String = row.try_get(1)?;
        let updated_at: String = row.try_get(7)?;
        let count = |n: i64| u32::try_from(n).unwrap_or(0);
        Ok(Some(LoadSummary {
            client: row.try_get(0)?,
            stage: Stage::parse(&stage)
                .ok_or_else(|| StoreError::Corrupt(format!("load_summary {load_id}: stage {stage:?}")))?,
            version: to_u64(row.try_get(2)?),
            open_asks: count(row.try_get(3)?),
            escalated_asks: count(row.try_get(4)?),
            escalated_since: time(&row, 5, "load_summary.escalated_since")?,
            urgent_task_at: time(&row, 6, "load_summary.urgent_task_at")?,
            updated_at: parse_sqlite_time("load_summary.updated_at", &updated_at)?,
        }))
    }

    async fn put_summary(&self, load_id: &str, summary: &LoadSummary) -> Result<(), StoreError> {
        let summary = Box::new(encode_summary(load_id, summary)?);
        let load_id = load_id.to_owned();
        self.write(|reply| WriteCmd::PutSummary { load_id, summary, reply }).await?
    }
}
