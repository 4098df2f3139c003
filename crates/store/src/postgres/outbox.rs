//! `Outbox` on Postgres: claims with `FOR UPDATE SKIP LOCKED`, marks guarded by the claim token
//! (one row at a time, or a relay's whole batch in one `UPDATE ... FROM unnest(...)`).

use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use super::PgStore;
use crate::codec::{age, decode_action, decode_destination, decode_status, limit_i64, to_u32, to_u64};
use crate::error::{ClaimError, StaleClaimError, StoreError};
use crate::outbox::{
    ClaimedRow, DUE_ROWS_EXAMINED, DeferredMark, DispatchedMark, FailedMark, NextAttempt, Outbox,
    OutboxRowView, check_distinct,
};

/// Claims the first due rows in insertion order. A row is due when pending, past its
/// `retry_at` and without a live lease, and only when no earlier pending row of its load and
/// destination exists (per-load order). Rows another relay is claiming right now are skipped.
///
/// The picked rows reach the `UPDATE` as arrays (`picked`, one row): the planner then counts on
/// a few of them and looks each one up by its key, in its own day's partition, where a join with
/// the picking subquery was planned (generic plan, `LIMIT $3` unknown) as a hash join over the
/// whole outbox, a claim that grew with the table (docs/performance.md, "Partitioned store").
/// `OFFSET 0` keeps the per-load order check a sub-plan run for each candidate (an index probe
/// per partition), never a join over every pending row, whatever the statistics say.
const CLAIM: &str = r#"
WITH picked AS (
    SELECT array_agg(s.id) AS ids, array_agg(s.created_at) AS created FROM (
        SELECT c.id, c.created_at FROM outbox AS c
        WHERE c.status = 'pending'
          AND (c.retry_at IS NULL OR c.retry_at <= $1)
          AND (c.lease_until IS NULL OR c.lease_until <= $1)
          AND NOT EXISTS (
              SELECT 1 FROM outbox AS e
              WHERE e.load_id = c.load_id AND e.destination = c.destination AND e.status = 'pending'
                AND (e.load_version, e.position) < (c.load_version, c.position)
              OFFSET 0)
        ORDER BY c.position
        LIMIT $3
        FOR UPDATE OF c SKIP LOCKED
    ) AS s
)
UPDATE outbox AS o
SET claim_token = gen_random_uuid(),
    lease_until = $2,
    first_attempt_at = coalesce(o.first_attempt_at, $1)
FROM picked, unnest(picked.ids, picked.created) AS k(id, created_at)
WHERE o.id = k.id AND o.created_at = k.created_at
RETURNING o.id, o.position, o.load_id, o.destination, o.action, o.load_version, o.claim_token,
          o.lease_until, o.attempts, o.first_attempt_at, o.created_at
"#;

/// Marks a batch of delivered rows in one statement: each row of the arrays is applied only
/// while its own token holds its row (the guard of the marks below, row by row: key and token).
/// The ids returned are the rows marked; a row not returned was stale and is unchanged. Each row
/// is looked up by its primary key in its own day's partition (`created_at`, run-time pruning
/// per row). `{outbox}`: the parent, or the day's partition when every row is of one day.
const MARK_DISPATCHED_BATCH: &str = r#"
UPDATE {outbox} AS o
SET status = 'dispatched', receipt = m.receipt, dispatched_at = $4, claim_token = NULL, lease_until = NULL
FROM unnest($1::text[], $2::uuid[], $3::text[], $5::timestamptz[]) AS m(id, token, receipt, created_at)
WHERE o.id = m.id AND o.created_at = m.created_at AND o.claim_token = m.token
RETURNING o.id
"#;

/// Marks a batch of failed attempts in one statement, each as [`MARK_RETRY`] (a retry time in
/// `retry`) or [`MARK_DEAD`] (`retry` NULL) would, under the same per-row guard as
/// [`MARK_DISPATCHED_BATCH`]; returns the ids marked.
const MARK_FAILED_BATCH: &str = r#"
UPDATE {outbox} AS o
SET status = CASE WHEN m.retry IS NULL THEN 'dead' ELSE o.status END,
    attempts = o.attempts + 1, last_failure = m.failure,
    retry_at = coalesce(m.retry, o.retry_at),
    dead_at = CASE WHEN m.retry IS NULL THEN $4 ELSE o.dead_at END,
    claim_token = NULL, lease_until = NULL
FROM unnest($1::text[], $2::uuid[], $3::text[], $5::timestamptz[], $6::timestamptz[])
    AS m(id, token, failure, retry, created_at)
WHERE o.id = m.id AND o.created_at = m.created_at AND o.claim_token = m.token
RETURNING o.id
"#;

/// Releases a batch of claims until each row's `until` in one statement, as a send limit's
/// deferral does (no attempt counted; a row never tried forgets its `first_attempt_at`), under
/// the same per-row guard as [`MARK_DISPATCHED_BATCH`]; returns the ids marked.
const MARK_DEFERRED_BATCH: &str = r#"
UPDATE {outbox} AS o
SET retry_at = m.until,
    first_attempt_at = CASE WHEN o.attempts = 0 THEN NULL ELSE o.first_attempt_at END,
    claim_token = NULL, lease_until = NULL
FROM unnest($1::text[], $2::uuid[], $3::timestamptz[], $4::timestamptz[]) AS m(id, token, until, created_at)
WHERE o.id = m.id AND o.created_at = m.created_at AND o.claim_token = m.token
RETURNING o.id
"#;

/// The marks of one row and the lease check. Each is guarded by
/// `id = $1 AND claim_token = $2 AND created_at = $3`: the claim still holds the row.
/// `created_at` names the row's day, and `{outbox}` is that day's partition itself when the
/// store has seen it attached (`parts.rs`), else the parent, where `created_at = $3` is pruned
/// to when the plan starts: a mark opens one partition, not every day's primary key; named, its
/// plan holds no other day at all, so the plan is as cheap to make again (after an `ANALYZE` of
/// the outbox every connection plans its marks again) as an unpartitioned table's.
///
/// A claim token is only ever set on a pending row (the claim sets it; every mark that changes
/// the status clears it, as every version of this store did), so the token is the guard and the
/// marks do not repeat `status = 'pending'`. Written out, that condition matches the predicate of
/// `outbox_pending_idx`, and a generic plan made while few rows were pending (statistics taken
/// on a quiet outbox) read the whole partial index per mark, filtering on the id, instead of
/// probing the primary key: each mark then cost as much as the backlog was long, which slowed
/// the relay most when it was behind (docs/performance.md, "The marks' plan").
/// `$head` (a statement on `{outbox}`) under the marks' guard: the claim still holds the row.
macro_rules! guarded {
    ($head:expr) => {
        concat!($head, " WHERE id = $1 AND claim_token = $2 AND created_at = $3")
    };
}

/// `$set` (the columns a mark changes) with the claim released, under the marks' guard.
macro_rules! mark {
    ($set:literal) => {
        guarded!(concat!("UPDATE {outbox} SET ", $set, ", claim_token = NULL, lease_until = NULL"))
    };
}

const MARK_DISPATCHED: &str = mark!("status = 'dispatched', receipt = $4, dispatched_at = $5");
const MARK_RETRY: &str = mark!("attempts = attempts + 1, last_failure = $4, retry_at = $5");
const MARK_DEAD: &str = mark!("status = 'dead', attempts = attempts + 1, last_failure = $4, dead_at = $5");
const STILL_HELD: &str = concat!(guarded!("SELECT 1::int4 FROM {outbox}"), " AND lease_until > $4");

/// The live outbox's parent.
const OUTBOX_PARENT: &str = "outbox";

/// The outbox's partition of the UTC day of `at`, as `load_agent_ensure_days` (migration 0004)
/// names it.
fn outbox_partition(at: DateTime<Utc>) -> String {
    format!("outbox_p{}", at.format("%Y_%m_%d"))
}

/// `sql` through `table` (the parent or one day's partition).
fn in_outbox(sql: &str, table: &str) -> String {
    sql.replace("{outbox}", table)
}

/// The values of a mark after its guard's (`$4`, `$5`).
#[derive(Clone, Copy)]
enum MarkArgs<'a> {
    Dispatched { receipt: &'a str, now: DateTime<Utc> },
    Failed { failure: &'a str, at: DateTime<Utc> },
    Held { now: DateTime<Utc> },
}

impl<'a> MarkArgs<'a> {
    fn bind<'q>(
        self,
        query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>
    where
        'a: 'q,
    {
        match self {
            MarkArgs::Dispatched { receipt, now } => query.bind(receipt).bind(now),
            MarkArgs::Failed { failure, at } => query.bind(failure).bind(at),
            MarkArgs::Held { now } => query.bind(now),
        }
    }
}

/// The relay's lag ([`Outbox::relay_lag`]): among the first waiting rows in insertion order (the
/// claim's per-load order, no lease test: a claimed row is not delivered yet; a row deferred
/// without a failure is not waiting until its `retry_at`), the earliest start of a wait. A row
/// never failed waits from the latest of its `created_at`, its own `retry_at` and, when the last
/// delivered row ahead of it in its load and destination was deferred and never failed, that
/// row's `retry_at` (it queued behind that row's send limit: a wait the agent chose; a send
/// limit's deferrals of one contact end in order, so the last row ahead has the latest). A
/// failing row waits from `created_at`. The row ahead is one backward probe of
/// `outbox_load_idx` per row examined: its latest row, not every delivered row of the load,
/// whose number grows with the load's life (reading them all made the query ten times dearer
/// and, run every second, starved a saturated server; docs/capacity.md). `$2` is
/// [`DUE_ROWS_EXAMINED`].
const RELAY_LAG: &str = r#"
SELECT min(CASE WHEN d.attempts = 0 THEN greatest(d.created_at, d.retry_at, (
                    SELECT CASE WHEN p.attempts = 0 THEN p.retry_at END FROM outbox AS p
                    WHERE p.load_id = d.load_id AND p.destination = d.destination AND p.status = 'dispatched'
                      AND (p.load_version, p.position) < (d.load_version, d.position)
                    ORDER BY p.load_version DESC, p.position DESC LIMIT 1))
                ELSE d.created_at END) FROM (
    SELECT c.created_at, c.retry_at, c.attempts, c.load_id, c.destination, c.load_version, c.position
    FROM outbox AS c
    WHERE c.status = 'pending'
      AND (c.attempts > 0 OR c.retry_at IS NULL OR c.retry_at <= $1)
      AND NOT EXISTS (
          SELECT 1 FROM outbox AS e
          WHERE e.load_id = c.load_id AND e.destination = c.destination AND e.status = 'pending'
            AND (e.load_version, e.position) < (c.load_version, c.position)
          OFFSET 0)
    ORDER BY c.position
    LIMIT $2
) AS d
"#;

/// A claimed row's `created_at`, for a claim this store did not make (or no longer remembers).
/// Key and token, as the marks' guard (no status condition: it would let a generic plan scan the pending
/// rows' index instead of probing the primary key).
const CLAIMED_AT: &str = "SELECT created_at FROM outbox WHERE id = $1 AND claim_token = $2";

/// How many live claims' `created_at` a store remembers (its relay's batches under their leases).
const CLAIMS_REMEMBERED: u64 = 100_000;

fn claimed_row(row: &PgRow) -> Result<(i64, ClaimedRow), StoreError> {
    let id: String = row.try_get("id")?;
    let destination: String = row.try_get("destination")?;
    let action: String = row.try_get("action")?;
    let claimed = ClaimedRow {
        load_id: row.try_get("load_id")?,
        destination: decode_destination(&id, &destination)?,
        action: decode_action(&id, &action)?,
        load_version: to_u64(row.try_get("load_version")?),
        claim_token: row.try_get("claim_token")?,
        lease_until: row.try_get("lease_until")?,
        attempts: to_u32(i64::from(row.try_get::<i32, _>("attempts")?)),
        first_attempt_at: row.try_get("first_attempt_at")?,
        created_at: row.try_get("created_at")?,
        id,
    };
    Ok((row.try_get("position")?, claimed))
}

fn row_view(row: &PgRow) -> Result<OutboxRowView, StoreError> {
    let id: String = row.try_get("id")?;
    let destination: String = row.try_get("destination")?;
    let action: String = row.try_get("action")?;
    let status: String = row.try_get("status")?;
    Ok(OutboxRowView {
        load_id: row.try_get("load_id")?,
        destination: decode_destination(&id, &destination)?,
        action: decode_action(&id, &action)?,
        load_version: to_u64(row.try_get("load_version")?),
        status: decode_status(&id, &status)?,
        attempts: to_u32(i64::from(row.try_get::<i32, _>("attempts")?)),
        first_attempt_at: row.try_get("first_attempt_at")?,
        lease_until: row.try_get("lease_until")?,
        retry_at: row.try_get("retry_at")?,
        last_failure: row.try_get("last_failure")?,
        receipt: row.try_get("receipt")?,
        created_at: row.try_get("created_at")?,
        dispatched_at: row.try_get("dispatched_at")?,
        dead_at: row.try_get("dead_at")?,
        id,
    })
}

/// The `created_at` of the rows this store's claims hold, by claim token: a mark names its row's
/// partition without asking Postgres first. Only a hint: the mark's guard still checks the token.
#[derive(Clone)]
pub(crate) struct ClaimDays(moka::sync::Cache<Uuid, DateTime<Utc>>);

impl ClaimDays {
    pub(crate) fn new() -> Self {
        ClaimDays(moka::sync::Cache::builder().max_capacity(CLAIMS_REMEMBERED).build())
    }
}

impl PgStore {
    /// The row's `created_at` under claim `token`: remembered from this store's claim, else read
    /// (every partition, a claim made before a restart). `Err` when the claim no longer holds it.
    async fn claimed_at(&self, id: &str, token: Uuid) -> Result<DateTime<Utc>, ClaimError> {
        if let Some(at) = self.claim_days.0.get(&token) {
            return Ok(at);
        }
        let at: Option<DateTime<Utc>> =
            sqlx::query_scalar(CLAIMED_AT).bind(id).bind(token).fetch_optional(&self.relay_pool).await?;
        at.ok_or_else(|| StaleClaimError { id: id.to_owned() }.into())
    }

    /// Runs `sql` (a statement guarded by key, token and `created_at`, then `args`) on the
    /// row's day: through its partition, or the parent when the partition is not attached or
    /// was dropped since the store saw it. Returns how many rows it applied to (0: stale).
    async fn run_guarded(
        &self,
        sql: &str,
        id: &str,
        token: Uuid,
        created: DateTime<Utc>,
        args: MarkArgs<'_>,
    ) -> Result<u64, sqlx::Error> {
        let day = Some(outbox_partition(created));
        self.parts
            .through(&self.relay_pool, OUTBOX_PARENT, day, |table| {
                let sql = in_outbox(sql, &table);
                async move {
                    let query = args.bind(sqlx::query(&sql).bind(id).bind(token).bind(created));
                    query.execute(&self.relay_pool).await.map(|done| done.rows_affected())
                }
            })
            .await
    }

    /// Runs a mark; the claim ends with it whether it applied or was stale.
    async fn mark(&self, sql: &str, id: &str, token: Uuid, args: MarkArgs<'_>) -> Result<(), ClaimError> {
        let created = self.claimed_at(id, token).await?;
        let applied = self.run_guarded(sql, id, token, created, args).await?;
        self.claim_days.0.invalidate(&token);
        if applied == 1 { Ok(()) } else { Err(StaleClaimError { id: id.to_owned() }.into()) }
    }

    /// Runs a batch mark of the rows `ids`, each under its claim `tokens` (in the same order):
    /// `run` is given the table to name (the rows' day's partition when
    /// they are all of one day, a relay's batch claimed together; else the parent) and each
    /// row's `created_at`, and returns the ids it marked. The claims end with it, applied or
    /// stale. A row whose claim no longer holds it has no `created_at` to look up; it stays in
    /// the arrays with any time, matches nothing, and is reported stale like any other.
    async fn mark_batch<F, Fut>(
        &self,
        ids: &[&str],
        tokens: &[Uuid],
        now: DateTime<Utc>,
        run: F,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError>
    where
        F: Fn(String, Vec<DateTime<Utc>>) -> Fut,
        Fut: Future<Output = Result<Vec<String>, sqlx::Error>>,
    {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        check_distinct(ids.iter().copied())?;
        let mut created = Vec::with_capacity(ids.len());
        for (id, token) in ids.iter().zip(tokens) {
            created.push(match self.claimed_at(id, *token).await {
                Ok(at) => at,
                Err(ClaimError::Stale(_)) => now,
                Err(ClaimError::Store(e)) => return Err(e),
            });
        }
        let first = created[0];
        let day =
            created.iter().all(|at| at.date_naive() == first.date_naive()).then(|| outbox_partition(first));
        let result = self
            .parts
            .through(&self.relay_pool, OUTBOX_PARENT, day, |table| run(table, created.clone()))
            .await;
        for token in tokens {
            self.claim_days.0.invalidate(token);
        }
        let marked: HashSet<String> = result?.into_iter().collect();
        Ok(ids
            .iter()
            .map(
                |id| {
                    if marked.contains(*id) { Ok(()) } else { Err(StaleClaimError { id: (*id).to_owned() }) }
                },
            )
            .collect())
    }
}

#[async_trait]
impl Outbox for PgStore {
    async fn pending(&self, limit: usize, now: DateTime<Utc>) -> Result<Vec<ClaimedRow>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(CLAIM)
            .bind(now)
            .bind(now + self.lease)
            .bind(limit_i64(limit))
            .fetch_all(&self.relay_pool)
            .await?;
        let mut claimed = rows.iter().map(claimed_row).collect::<Result<Vec<_>, _>>()?;
        for (_, row) in &claimed {
            self.claim_days.0.insert(row.claim_token, row.created_at);
        }
        claimed.sort_by_key(|(position, _)| *position);
        Ok(claimed.into_iter().map(|(_, row)| row).collect())
    }

    async fn mark_dispatched(
        &self,
        id: &str,
        token: Uuid,
        receipt: &str,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError> {
        self.mark(MARK_DISPATCHED, id, token, MarkArgs::Dispatched { receipt, now }).await
    }

    async fn mark_dispatched_batch(
        &self,
        marks: &[DispatchedMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        let tokens: Vec<Uuid> = marks.iter().map(|m| m.token).collect();
        let ids: Vec<&str> = marks.iter().map(|m| m.id.as_str()).collect();
        let receipts: Vec<&str> = marks.iter().map(|m| m.receipt.as_str()).collect();
        self.mark_batch(&ids, &tokens, now, |table, created| {
            let sql = in_outbox(MARK_DISPATCHED_BATCH, &table);
            let (ids, tokens, receipts) = (&ids, &tokens, &receipts);
            async move {
                sqlx::query_scalar(&sql)
                    .bind(ids)
                    .bind(tokens)
                    .bind(receipts)
                    .bind(now)
                    .bind(&created)
                    .fetch_all(&self.relay_pool)
                    .await
            }
        })
        .await
    }

    async fn mark_failed(
        &self,
        id: &str,
        token: Uuid,
        failure: &str,
        next: NextAttempt,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError> {
        match next {
            NextAttempt::RetryAt(at) => {
                self.mark(MARK_RETRY, id, token, MarkArgs::Failed { failure, at }).await
            }
            NextAttempt::Dead => self.mark(MARK_DEAD, id, token, MarkArgs::Failed { failure, at: now }).await,
        }
    }

    async fn mark_failed_batch(
        &self,
        marks: &[FailedMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        let tokens: Vec<Uuid> = marks.iter().map(|m| m.token).collect();
        let ids: Vec<&str> = marks.iter().map(|m| m.id.as_str()).collect();
        let failures: Vec<&str> = marks.iter().map(|m| m.failure.as_str()).collect();
        let retries: Vec<Option<DateTime<Utc>>> = marks
            .iter()
            .map(|m| match m.next {
                NextAttempt::RetryAt(at) => Some(at),
                NextAttempt::Dead => None,
            })
            .collect();
        self.mark_batch(&ids, &tokens, now, |table, created| {
            let sql = in_outbox(MARK_FAILED_BATCH, &table);
            let (ids, tokens, failures, retries) = (&ids, &tokens, &failures, &retries);
            async move {
                sqlx::query_scalar(&sql)
                    .bind(ids)
                    .bind(tokens)
                    .bind(failures)
                    .bind(now)
                    .bind(retries)
                    .bind(&created)
                    .fetch_all(&self.relay_pool)
                    .await
            }
        })
        .await
    }

    async fn mark_deferred_batch(
        &self,
        marks: &[DeferredMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        let tokens: Vec<Uuid> = marks.iter().map(|m| m.token).collect();
        let ids: Vec<&str> = marks.iter().map(|m| m.id.as_str()).collect();
        let untils: Vec<DateTime<Utc>> = marks.iter().map(|m| m.until).collect();
        self.mark_batch(&ids, &tokens, now, |table, created| {
            let sql = in_outbox(MARK_DEFERRED_BATCH, &table);
            let (ids, tokens, untils) = (&ids, &tokens, &untils);
            async move {
                sqlx::query_scalar(&sql)
                    .bind(ids)
                    .bind(tokens)
                    .bind(untils)
                    .bind(&created)
                    .fetch_all(&self.relay_pool)
                    .await
            }
        })
        .await
    }

    async fn recheck_claim(&self, id: &str, token: Uuid, now: DateTime<Utc>) -> Result<(), ClaimError> {
        let created = self.claimed_at(id, token).await?;
        match self.run_guarded(STILL_HELD, id, token, created, MarkArgs::Held { now }).await? {
            0 => Err(StaleClaimError { id: id.to_owned() }.into()),
            _ => Ok(()),
        }
    }

    async fn oldest_pending_age(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError> {
        let oldest: Option<DateTime<Utc>> = sqlx::query_scalar(
            "SELECT created_at FROM outbox WHERE status = 'pending' ORDER BY position LIMIT 1",
        )
        .fetch_optional(&self.relay_pool)
        .await?;
        Ok(oldest.map(|t| age(now, t)))
    }

    async fn relay_lag(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError> {
        let since: Option<DateTime<Utc>> = sqlx::query_scalar(RELAY_LAG)
            .bind(now)
            .bind(i64::from(DUE_ROWS_EXAMINED))
            .fetch_one(&self.relay_pool)
            .await?;
        Ok(since.map(|t| age(now, t)))
    }

    async fn dead_since(&self, since: DateTime<Utc>) -> Result<u64, StoreError> {
        let n: i64 =
            sqlx::query_scalar("SELECT count(*) FROM outbox WHERE status = 'dead' AND dead_at >= $1")
                .bind(since)
                .fetch_one(&self.relay_pool)
                .await?;
        Ok(to_u64(n))
    }

    /// The live outbox's rows and the retired days' (migration 0006, `outbox_retired` has the
    /// outbox's columns in its order), in the load's order.
    async fn rows_for_load(&self, load_id: &str) -> Result<Vec<OutboxRowView>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, load_id, destination, action, load_version, status, attempts, first_attempt_at, \
             lease_until, retry_at, last_failure, receipt, created_at, dispatched_at, dead_at \
             FROM (SELECT * FROM outbox WHERE load_id = $1 \
                   UNION ALL SELECT * FROM outbox_retired WHERE load_id = $1) AS o \
             ORDER BY load_version, position",
        )
        .bind(load_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(row_view).collect()
    }
}
