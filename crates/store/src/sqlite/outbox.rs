//! `Outbox` on SQLite: claims and marks run in the writer's transaction (one writer, so a
//! claim can never race another; a batch mark is one command, its rows' guarded updates in one
//! transaction), monitoring and `rows_for_load` on the reader pool.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::{SqliteConnection, SqliteRow};
use uuid::Uuid;

use super::SqliteStore;
use super::command::{MarkChange, WriteCmd};
use crate::codec::{
    age, decode_action, decode_destination, decode_status, limit_i64, parse_sqlite_time,
    parse_sqlite_time_opt, sqlite_time, to_u32, to_u64,
};
use crate::error::{ClaimError, StaleClaimError, StoreError};
use crate::outbox::{
    ClaimedRow, DUE_ROWS_EXAMINED, DeferredMark, DispatchedMark, FailedMark, NextAttempt, Outbox,
    OutboxRowView, check_distinct,
};

/// The due rows, in insertion order, under the same rules as the Postgres claim (see
/// `postgres/outbox.rs`): pending, past `retry_at`, no live lease, and no earlier pending row
/// of the same load and destination.
const CANDIDATES: &str = r#"
SELECT c.id FROM outbox AS c
WHERE c.status = 'pending'
  AND (c.retry_at IS NULL OR c.retry_at <= ?1)
  AND (c.lease_until IS NULL OR c.lease_until <= ?1)
  AND NOT EXISTS (
      SELECT 1 FROM outbox AS e
      WHERE e.load_id = c.load_id AND e.destination = c.destination AND e.status = 'pending'
        AND (e.load_version, e.position) < (c.load_version, c.position))
ORDER BY c.position
LIMIT ?2
"#;

/// The relay's lag ([`Outbox::relay_lag`]), by the Postgres store's rules (`postgres/outbox.rs`,
/// `RELAY_LAG`); times are stored as fixed-width text, so text order is time order. SQLite's
/// `max(a, b, ...)` is NULL when one argument is: each is given `created_at` in place of NULL.
const RELAY_LAG: &str = r#"
SELECT min(CASE WHEN d.attempts = 0 THEN max(d.created_at, coalesce(d.retry_at, d.created_at), coalesce((
                    SELECT CASE WHEN p.attempts = 0 THEN p.retry_at END FROM outbox AS p
                    WHERE p.load_id = d.load_id AND p.destination = d.destination AND p.status = 'dispatched'
                      AND (p.load_version, p.position) < (d.load_version, d.position)
                    ORDER BY p.load_version DESC, p.position DESC LIMIT 1),
                    d.created_at))
                ELSE d.created_at END) FROM (
    SELECT c.created_at, c.retry_at, c.attempts, c.load_id, c.destination, c.load_version, c.position
    FROM outbox AS c
    WHERE c.status = 'pending'
      AND (c.attempts > 0 OR c.retry_at IS NULL OR c.retry_at <= ?1)
      AND NOT EXISTS (
          SELECT 1 FROM outbox AS e
          WHERE e.load_id = c.load_id AND e.destination = c.destination AND e.status = 'pending'
            AND (e.load_version, e.position) < (c.load_version, c.position))
    ORDER BY c.position
    LIMIT ?2
) AS d
"#;

const CLAIM_ONE: &str = "UPDATE outbox SET claim_token = ?2, lease_until = ?3, \
     first_attempt_at = coalesce(first_attempt_at, ?4) WHERE id = ?1 \
     RETURNING id, load_id, destination, action, load_version, claim_token, lease_until, attempts, \
     first_attempt_at, created_at";

const HELD: &str = "id = ?1 AND claim_token = ?2 AND status = 'pending'";

fn claimed_row(row: &SqliteRow) -> Result<ClaimedRow, StoreError> {
    let id: String = row.try_get("id")?;
    let destination: String = row.try_get("destination")?;
    let action: String = row.try_get("action")?;
    let token: String = row.try_get("claim_token")?;
    let first: Option<String> = row.try_get("first_attempt_at")?;
    Ok(ClaimedRow {
        load_id: row.try_get("load_id")?,
        destination: decode_destination(&id, &destination)?,
        action: decode_action(&id, &action)?,
        load_version: to_u64(row.try_get("load_version")?),
        claim_token: Uuid::parse_str(&token)
            .map_err(|e| StoreError::Corrupt(format!("outbox row {id}: claim token {token:?}: {e}")))?,
        lease_until: parse_sqlite_time("outbox.lease_until", &row.try_get::<String, _>("lease_until")?)?,
        attempts: to_u32(row.try_get("attempts")?),
        first_attempt_at: parse_sqlite_time_opt("outbox.first_attempt_at", first)?.ok_or_else(|| {
            StoreError::Corrupt(format!("outbox row {id}: claimed without first_attempt_at"))
        })?,
        created_at: parse_sqlite_time("outbox.created_at", &row.try_get::<String, _>("created_at")?)?,
        id,
    })
}

fn row_view(row: &SqliteRow) -> Result<OutboxRowView, StoreError> {
    let id: String = row.try_get("id")?;
    let destination: String = row.try_get("destination")?;
    let action: String = row.try_get("action")?;
    let status: String = row.try_get("status")?;
    let time = |col: &str| -> Result<Option<DateTime<Utc>>, StoreError> {
        parse_sqlite_time_opt(col, row.try_get::<Option<String>, _>(col)?)
    };
    Ok(OutboxRowView {
        load_id: row.try_get("load_id")?,
        destination: decode_destination(&id, &destination)?,
        action: decode_action(&id, &action)?,
        load_version: to_u64(row.try_get("load_version")?),
        status: decode_status(&id, &status)?,
        attempts: to_u32(row.try_get("attempts")?),
        first_attempt_at: time("first_attempt_at")?,
        lease_until: time("lease_until")?,
        retry_at: time("retry_at")?,
        last_failure: row.try_get("last_failure")?,
        receipt: row.try_get("receipt")?,
        created_at: parse_sqlite_time("outbox.created_at", &row.try_get::<String, _>("created_at")?)?,
        dispatched_at: time("dispatched_at")?,
        dead_at: time("dead_at")?,
        id,
    })
}

/// Claims inside the writer's transaction, with a fresh token per row.
pub(super) async fn claim_in(
    conn: &mut SqliteConnection,
    limit: i64,
    now: &str,
    lease_until: &str,
) -> Result<Vec<ClaimedRow>, sqlx::Error> {
    let ids: Vec<String> = sqlx::query_scalar(CANDIDATES).bind(now).bind(limit).fetch_all(&mut *conn).await?;
    let mut claimed = Vec::with_capacity(ids.len());
    for id in ids {
        let token = Uuid::new_v4().to_string();
        let row = sqlx::query(CLAIM_ONE)
            .bind(&id)
            .bind(token)
            .bind(lease_until)
            .bind(now)
            .fetch_one(&mut *conn)
            .await?;
        // A row that does not read back is corrupt; the claim fails as a whole.
        claimed.push(claimed_row(&row).map_err(|e| sqlx::Error::Decode(Box::new(e)))?);
    }
    Ok(claimed)
}

/// Marks inside the writer's transaction; a row the token no longer holds is left unchanged.
pub(super) async fn mark_in(
    conn: &mut SqliteConnection,
    id: &str,
    token: Uuid,
    change: &MarkChange,
) -> Result<Result<(), StaleClaimError>, sqlx::Error> {
    let token = token.to_string();
    let done = match change {
        MarkChange::Dispatched { receipt, now } => {
            let sql = format!(
                "UPDATE outbox SET status = 'dispatched', receipt = ?3, dispatched_at = ?4, \
                 claim_token = NULL, lease_until = NULL WHERE {HELD}"
            );
            sqlx::query(&sql).bind(id).bind(&token).bind(receipt).bind(now).execute(&mut *conn).await?
        }
        MarkChange::Retry { failure, at } => {
            let sql = format!(
                "UPDATE outbox SET attempts = attempts + 1, last_failure = ?3, retry_at = ?4, \
                 claim_token = NULL, lease_until = NULL WHERE {HELD}"
            );
            sqlx::query(&sql).bind(id).bind(&token).bind(failure).bind(at).execute(&mut *conn).await?
        }
        MarkChange::Dead { failure, now } => {
            let sql = format!(
                "UPDATE outbox SET status = 'dead', attempts = attempts + 1, last_failure = ?3, dead_at = ?4, \
                 claim_token = NULL, lease_until = NULL WHERE {HELD}"
            );
            sqlx::query(&sql).bind(id).bind(&token).bind(failure).bind(now).execute(&mut *conn).await?
        }
        MarkChange::Deferred { until } => {
            let sql = format!(
                "UPDATE outbox SET retry_at = ?3, claim_token = NULL, lease_until = NULL, \
                 first_attempt_at = CASE WHEN attempts = 0 THEN NULL ELSE first_attempt_at END WHERE {HELD}"
            );
            sqlx::query(&sql).bind(id).bind(&token).bind(until).execute(&mut *conn).await?
        }
    };
    Ok(if done.rows_affected() == 1 { Ok(()) } else { Err(StaleClaimError { id: id.to_owned() }) })
}

/// A batch mark inside the writer's transaction: each row's guarded update (prepared statements,
/// no sync in between: the group commits once); a row its token no longer holds is reported
/// stale and left unchanged.
pub(super) async fn mark_batch_in(
    conn: &mut SqliteConnection,
    marks: &[(String, Uuid, MarkChange)],
) -> Result<Vec<Result<(), StaleClaimError>>, sqlx::Error> {
    let mut results = Vec::with_capacity(marks.len());
    for (id, token, change) in marks {
        results.push(mark_in(conn, id, *token, change).await?);
    }
    Ok(results)
}

/// The change a failed attempt makes ([`Outbox::mark_failed`]).
fn failed_change(failure: &str, next: NextAttempt, now: DateTime<Utc>) -> MarkChange {
    let failure = failure.to_owned();
    match next {
        NextAttempt::RetryAt(at) => MarkChange::Retry { failure, at: sqlite_time(at) },
        NextAttempt::Dead => MarkChange::Dead { failure, now: sqlite_time(now) },
    }
}

impl SqliteStore {
    async fn mark(&self, id: &str, token: Uuid, change: MarkChange) -> Result<(), ClaimError> {
        self.write(|reply| WriteCmd::Mark { id: id.to_owned(), token, change, reply }).await?
    }

    async fn mark_batch(
        &self,
        marks: Vec<(String, Uuid, MarkChange)>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        if marks.is_empty() {
            return Ok(Vec::new());
        }
        check_distinct(marks.iter().map(|(id, _, _)| id.as_str()))?;
        self.write(|reply| WriteCmd::MarkBatch { marks, reply }).await?
    }
}

#[async_trait]
impl Outbox for SqliteStore {
    async fn pending(&self, limit: usize, now: DateTime<Utc>) -> Result<Vec<ClaimedRow>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let (limit, lease_until, now) = (limit_i64(limit), sqlite_time(now + self.lease), sqlite_time(now));
        self.write(|reply| WriteCmd::Claim { limit, now, lease_until, reply }).await?
    }

    async fn mark_dispatched(
        &self,
        id: &str,
        token: Uuid,
        receipt: &str,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError> {
        self.mark(id, token, MarkChange::Dispatched { receipt: receipt.to_owned(), now: sqlite_time(now) })
            .await
    }

    async fn mark_dispatched_batch(
        &self,
        marks: &[DispatchedMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        let now = sqlite_time(now);
        let changes = marks
            .iter()
            .map(|m| {
                (
                    m.id.clone(),
                    m.token,
                    MarkChange::Dispatched { receipt: m.receipt.clone(), now: now.clone() },
                )
            })
            .collect();
        self.mark_batch(changes).await
    }

    async fn mark_failed(
        &self,
        id: &str,
        token: Uuid,
        failure: &str,
        next: NextAttempt,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError> {
        self.mark(id, token, failed_change(failure, next, now)).await
    }

    async fn mark_failed_batch(
        &self,
        marks: &[FailedMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        let changes =
            marks.iter().map(|m| (m.id.clone(), m.token, failed_change(&m.failure, m.next, now))).collect();
        self.mark_batch(changes).await
    }

    async fn mark_deferred_batch(
        &self,
        marks: &[DeferredMark],
        _now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        let changes = marks
            .iter()
            .map(|m| (m.id.clone(), m.token, MarkChange::Deferred { until: sqlite_time(m.until) }))
            .collect();
        self.mark_batch(changes).await
    }

    async fn recheck_claim(&self, id: &str, token: Uuid, now: DateTime<Utc>) -> Result<(), ClaimError> {
        let sql = format!("SELECT 1 FROM outbox WHERE {HELD} AND lease_until > ?3");
        let held: Option<i64> = sqlx::query_scalar(&sql)
            .bind(id)
            .bind(token.to_string())
            .bind(sqlite_time(now))
            .fetch_optional(&self.readers)
            .await?;
        match held {
            Some(_) => Ok(()),
            None => Err(StaleClaimError { id: id.to_owned() }.into()),
        }
    }

    async fn oldest_pending_age(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError> {
        let oldest: Option<String> = sqlx::query_scalar(
            "SELECT created_at FROM outbox WHERE status = 'pending' ORDER BY position LIMIT 1",
        )
        .fetch_optional(&self.readers)
        .await?;
        Ok(parse_sqlite_time_opt("outbox.created_at", oldest)?.map(|t| age(now, t)))
    }

    async fn relay_lag(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError> {
        let since: Option<String> = sqlx::query_scalar(RELAY_LAG)
            .bind(sqlite_time(now))
            .bind(i64::from(DUE_ROWS_EXAMINED))
            .fetch_one(&self.readers)
            .await?;
        Ok(parse_sqlite_time_opt("outbox.retry_at", since)?.map(|t| age(now, t)))
    }

    async fn dead_since(&self, since: DateTime<Utc>) -> Result<u64, StoreError> {
        let n: i64 =
            sqlx::query_scalar("SELECT count(*) FROM outbox WHERE status = 'dead' AND dead_at >= ?1")
                .bind(sqlite_time(since))
                .fetch_one(&self.readers)
                .await?;
        Ok(to_u64(n))
    }

    async fn rows_for_load(&self, load_id: &str) -> Result<Vec<OutboxRowView>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, load_id, destination, action, load_version, status, attempts, first_attempt_at, \
             lease_until, retry_at, last_failure, receipt, created_at, dispatched_at, dead_at \
             FROM outbox WHERE load_id = ?1 ORDER BY load_version, position",
        )
        .bind(load_id)
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(row_view).collect()
    }
}
