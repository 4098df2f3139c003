//! `LoadIndex` on Postgres: the attention list's candidates from four small indexes, their
//! counts by `LATERAL` lookups on the outbox's and the timers' load indexes.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use load_agent_domain::{LoadSummary, Stage};
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::PgStore;
use crate::attention::{AttentionPage, AttentionQuery, Candidate, LoadIndex, bounds, page};
use crate::codec::{encode_summary, to_u64};
use crate::error::StoreError;

/// $1: the start of the window (urgent tasks, dead actions); $2: timers due before this are
/// overdue.
///
/// The candidates are gathered into an array before `load_summary` is read: joined as a set,
/// the planner misjudges how many there are (it takes a fired timer's old `fire_at` and a
/// scheduled status as independent), scans the whole table and JIT-compiles the plan, which
/// made the list grow with the store (docs/capacity.md). As an array, each candidate is a
/// primary-key lookup and the cost follows the number of loads that need attention.
pub const CANDIDATES: &str = r#"
WITH cand AS (
    SELECT load_id FROM load_summary WHERE escalated_asks > 0
    UNION SELECT load_id FROM load_summary WHERE urgent_task_at IS NOT NULL AND urgent_task_at >= $1
    UNION SELECT load_id FROM outbox WHERE status = 'dead' AND dead_at >= $1
    UNION SELECT load_id FROM timers WHERE status = 'scheduled' AND fire_at < $2
)
SELECT s.load_id, s.client, s.stage, s.version, s.open_asks::int8, s.escalated_asks::int8, s.escalated_since,
       s.urgent_task_at, s.updated_at, d.n, d.since, t.n, t.since
FROM load_summary s
CROSS JOIN LATERAL (
    SELECT count(*) AS n, min(o.dead_at) AS since FROM outbox o
    WHERE o.load_id = s.load_id AND o.status = 'dead' AND o.dead_at >= $1
) d
CROSS JOIN LATERAL (
    SELECT count(*) AS n, min(x.fire_at) AS since FROM timers x
    WHERE x.load_id = s.load_id AND x.status = 'scheduled' AND x.fire_at < $2
) t
WHERE s.load_id = ANY (ARRAY(SELECT load_id FROM cand))
"#;

const UPSERT: &str = r#"
INSERT INTO load_summary (load_id, client, stage, version, open_asks, escalated_asks, escalated_since,
                          urgent_task_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (load_id) DO UPDATE SET
    client = excluded.client, stage = excluded.stage, version = excluded.version,
    open_asks = excluded.open_asks, escalated_asks = excluded.escalated_asks,
    escalated_since = excluded.escalated_since, urgent_task_at = excluded.urgent_task_at,
    updated_at = excluded.updated_at
WHERE load_summary.version <= excluded.version
"#;

fn candidate(row: &PgRow) -> Result<Candidate, sqlx::Error> {
    Ok(Candidate {
        load_id: row.try_get(0)?,
        client: row.try_get(1)?,
        stage: row.try_get(2)?,
        version: row.try_get(3)?,
        open_asks: row.try_get(4)?,
        escalated_asks: row.try_get(5)?,
        escalated_since: row.try_get(6)?,
        urgent_task_at: row.try_get(7)?,
        updated_at: row.try_get(8)?,
        dead: row.try_get(9)?,
        dead_since: row.try_get(10)?,
        overdue: row.try_get(11)?,
        overdue_since: row.try_get(12)?,
    })
}

#[async_trait]
impl LoadIndex for PgStore {
    async fn attention(&self, query: &AttentionQuery) -> Result<AttentionPage, StoreError> {
        let (window_start, overdue_before) = bounds(query);
        let rows =
            sqlx::query(CANDIDATES).bind(window_start).bind(overdue_before).fetch_all(&self.pool).await?;
        let candidates = rows.iter().map(candidate).collect::<Result<Vec<_>, _>>()?;
        page(candidates, query)
    }

    async fn summary(&self, load_id: &str) -> Result<Option<LoadSummary>, StoreError> {
        let row = sqlx::query(
            "SELECT client, stage, version, open_asks, escalated_asks, escalated_since, urgent_task_at, \
             updated_at FROM load_summary WHERE load_id = $1",
        )
        .bind(load_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let stage: String = row.try_get(1)?;
        let count = |n: i32| u32::try_from(n).unwrap_or(0);
        Ok(Some(LoadSummary {
            client: row.try_get(0)?,
            stage: Stage::parse(&stage)
                .ok_or_else(|| StoreError::Corrupt(format!("load_summary {load_id}: stage {stage:?}")))?,
            version: to_u64(row.try_get(2)?),
            open_asks: count(row.try_get(3)?),
            escalated_asks: count(row.try_get(4)?),
            escalated_since: row.try_get::<Option<DateTime<Utc>>, _>(5)?,
            urgent_task_at: row.try_get::<Option<DateTime<Utc>>, _>(6)?,
            updated_at: row.try_get(7)?,
        }))
    }

    async fn put_summary(&self, load_id: &str, summary: &LoadSummary) -> Result<(), StoreError> {
        let s = encode_summary(load_id, summary)?;
        sqlx::query(UPSERT)
            .bind(load_id)
            .bind(s.client.as_deref())
            .bind(s.stage)
            .bind(s.version)
            .bind(s.open_asks)
            .bind(s.escalated_asks)
            .bind(s.escalated_since)
            .bind(s.urgent_task_at)
            .bind(s.updated_at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
