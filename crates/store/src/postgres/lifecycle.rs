//! `Lifecycle` on Postgres: partitions made ahead by the functions of migration 0004, dropped by
//! those of 0005 (each checks under lock what it drops), and batched deletes of the default
//! partitions' expired rows.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use sqlx::Executor;

use super::PgStore;
use crate::error::StoreError;
use crate::lifecycle::{
    DeletedRows, DroppedDay, HeldLock, Lifecycle, PartitionInfo, PartitionPlan, RetentionWindows, RunLock,
    outbox_partition_day,
};

/// One key for the advisory lock that serializes `ensure_partitions` across processes.
const ENSURE_LOCK: i64 = 0x6c_6f_61_64_70_61_72_74; // "loadpart"
/// Takes [`ENSURE_LOCK`] until the transaction ends.
const TAKE_ENSURE_LOCK: &str = "SELECT pg_advisory_xact_lock($1)";

/// How long `ensure_partitions` waits for a table lock before giving up until its next run: a
/// partition is made under a short lock, and traffic must not queue behind a wait for it.
const LOCK_TIMEOUT: &str = "SET LOCAL lock_timeout = '5s'";

const PARTITIONS: &str = r#"
SELECT p.relname::text, c.relname::text, pg_get_expr(c.relpartbound, c.oid), c.reltuples::int8,
       pg_total_relation_size(c.oid)
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid AND c.relkind = 'r'
JOIN pg_class p ON p.oid = i.inhparent
WHERE p.oid IN ('log_entries'::regclass, 'outbox'::regclass, 'outbox_retired'::regclass, 'timers'::regclass)
ORDER BY 1, 2
"#;

const RETIRE_OUTBOX_DAY: &str = "SELECT load_agent_retire_outbox_day($1)";
const ANALYZE_FILLED_PARTITIONS: &str = "SELECT * FROM load_agent_analyze_filled_partitions()";
const DROP_LOG_MONTH: &str = "SELECT load_agent_drop_log_month($1, $2, $3)";
const DROP_OUTBOX_DAY: &str = "SELECT dropped, kept FROM load_agent_drop_outbox_day($1, $2)";
const DROP_TIMER_MONTH: &str = "SELECT load_agent_drop_timer_month($1)";

/// Rows deleted per statement: short transactions, so the relay and the pump never wait long.
const DELETE_BATCH: i64 = 5_000;

/// Delivered rows past `$1`, dead rows past `$2`, in the default partition only (the day
/// partitions are dropped whole).
const DELETE_OUTBOX_DEFAULT: &str = "DELETE FROM outbox_default WHERE ctid IN (
    SELECT ctid FROM outbox_default
    WHERE (status = 'dispatched' AND dispatched_at < $1) OR (status = 'dead' AND dead_at < $2)
    LIMIT $3)";
/// Fired timers and cancelled ones (and tombstones) past `$1`, in the default partition only.
const DELETE_TIMERS_DEFAULT: &str = "DELETE FROM timers_default WHERE ctid IN (
    SELECT ctid FROM timers_default
    WHERE (status = 'fired' AND fired_at < $1) OR (status = 'cancelled' AND cancelled_at < $1)
    LIMIT $2)";

/// A refusal raised by the 0005 functions (`object_not_in_prerequisite_state`, `undefined_table`)
/// is [`StoreError::Refused`] with its message; anything else stays a database error.
fn refusal(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &e
        && matches!(db.code().as_deref(), Some("55000" | "42P01"))
    {
        return StoreError::Refused(db.message().to_owned());
    }
    e.into()
}

/// Runs a batched `DELETE` (each `statement()` deletes at most [`DELETE_BATCH`] rows) until a
/// batch comes back short; returns the rows deleted.
async fn delete_in_batches<'q>(
    pool: &sqlx::PgPool,
    statement: impl Fn() -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
) -> Result<u64, sqlx::Error> {
    let mut deleted = 0;
    loop {
        let n = statement().execute(pool).await?.rows_affected();
        deleted += n;
        if n < DELETE_BATCH.unsigned_abs() {
            return Ok(deleted);
        }
    }
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

const ENSURE_MONTHS: &str = "SELECT * FROM load_agent_ensure_months($3, $1, $2)";
const ENSURE_DAYS: &str = "SELECT * FROM load_agent_ensure_days($1, $2)";

/// The retention run lock: a session advisory lock on the two-key space (apart from the loads'
/// leases, which use one 64-bit key) — a class and the schema the session works in, so stores
/// sharing a database stay apart whichever way they name their schema (`connect_in_schema` or a
/// `search_path` in the URL).
const TRY_LOCK_RETENTION: &str =
    "SELECT pg_try_advisory_lock(1919251566, hashtext(coalesce(current_schema(), '')))";
const UNLOCK_RETENTION: &str =
    "SELECT pg_advisory_unlock(1919251566, hashtext(coalesce(current_schema(), '')))";

impl PgStore {
    /// Runs one parent's ensure in its own transaction under the advisory lock: the monthly
    /// partitions of `table`, or with `None` the outbox's days.
    async fn ensure_one(
        &self,
        table: Option<&str>,
        first: NaiveDate,
        last: NaiveDate,
    ) -> Result<Vec<String>, StoreError> {
        let mut tx = self.pool.begin().await?;
        tx.execute(LOCK_TIMEOUT).await?;
        sqlx::query(TAKE_ENSURE_LOCK).bind(ENSURE_LOCK).execute(&mut *tx).await?;
        let made: Vec<String> = match table {
            Some(table) => {
                sqlx::query_scalar(ENSURE_MONTHS)
                    .bind(first)
                    .bind(last)
                    .bind(table)
                    .fetch_all(&mut *tx)
                    .await?
            }
            None => sqlx::query_scalar(ENSURE_DAYS).bind(first).bind(last).fetch_all(&mut *tx).await?,
        };
        tx.commit().await?;
        Ok(made)
    }
}

#[async_trait]
impl Lifecycle for PgStore {
    fn partitioned(&self) -> bool {
        true
    }

    async fn ensure_partitions(
        &self,
        now: DateTime<Utc>,
        plan: &PartitionPlan,
    ) -> Result<Vec<String>, StoreError> {
        let span = plan.span(now)?;
        let mut made = Vec::new();
        for table in ["log_entries", "timers"] {
            made.extend(self.ensure_one(Some(table), span.first_month, span.last_month).await?);
        }
        made.extend(self.ensure_one(None, span.first_day, span.last_day).await?);
        Ok(made)
    }

    async fn retire_outbox_days(&self, now: DateTime<Utc>) -> Result<Vec<String>, StoreError> {
        let yesterday = now.date_naive().pred_opt().unwrap_or(NaiveDate::MIN);
        // The live outbox's day partitions (its default partition has no day).
        let mut days: Vec<(NaiveDate, String)> = self
            .partitions()
            .await?
            .into_iter()
            .filter(|p| p.table == "outbox")
            .filter_map(|p| outbox_partition_day(&p.name).map(|day| (day, p.name)))
            .filter(|(day, _)| *day < yesterday)
            .collect();
        days.sort();
        let mut retired = Vec::new();
        for (day, name) in days {
            // One day per transaction: the outbox's lock is held for one day's detach at most.
            // Under `ensure`'s advisory lock: several services never retire one day at once.
            let mut tx = self.pool.begin().await?;
            tx.execute(LOCK_TIMEOUT).await?;
            sqlx::query(TAKE_ENSURE_LOCK).bind(ENSURE_LOCK).execute(&mut *tx).await?;
            let moved: bool =
                sqlx::query_scalar(RETIRE_OUTBOX_DAY).bind(day).fetch_one(&mut *tx).await.map_err(refusal)?;
            tx.commit().await?;
            if moved {
                retired.push(name);
            }
        }
        Ok(retired)
    }

    async fn partitions(&self) -> Result<Vec<PartitionInfo>, StoreError> {
        let rows: Vec<(String, String, String, i64, i64)> =
            sqlx::query_as(PARTITIONS).fetch_all(&self.pool).await?;
        Ok(rows
            .into_iter()
            .map(|(table, name, bounds, rows_estimate, bytes)| PartitionInfo {
                table,
                name,
                bounds,
                rows_estimate,
                bytes,
            })
            .collect())
    }

    async fn analyze_filled_partitions(&self) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(ANALYZE_FILLED_PARTITIONS).fetch_all(&self.pool).await?)
    }

    async fn drop_log_month(&self, month: NaiveDate, archived: &[(String, u64)]) -> Result<u64, StoreError> {
        let loads: Vec<&str> = archived.iter().map(|(id, _)| id.as_str()).collect();
        let versions = archived
            .iter()
            .map(|(id, v)| {
                i64::try_from(*v)
                    .map_err(|_| StoreError::InvalidRequest(format!("load {id}: version {v} exceeds i64")))
            })
            .collect::<Result<Vec<i64>, _>>()?;
        let mut tx = self.pool.begin().await?;
        tx.execute(LOCK_TIMEOUT).await?;
        let dropped: i64 = sqlx::query_scalar(DROP_LOG_MONTH)
            .bind(month)
            .bind(&loads)
            .bind(&versions)
            .fetch_one(&mut *tx)
            .await
            .map_err(refusal)?;
        tx.commit().await?;
        Ok(count(dropped))
    }

    async fn drop_outbox_day(
        &self,
        day: NaiveDate,
        keep_dead_since: DateTime<Utc>,
    ) -> Result<DroppedDay, StoreError> {
        let mut tx = self.pool.begin().await?;
        tx.execute(LOCK_TIMEOUT).await?;
        let (dropped, kept): (i64, i64) = sqlx::query_as(DROP_OUTBOX_DAY)
            .bind(day)
            .bind(keep_dead_since)
            .fetch_one(&mut *tx)
            .await
            .map_err(refusal)?;
        tx.commit().await?;
        Ok(DroppedDay { dropped: count(dropped), kept_dead: count(kept) })
    }

    async fn drop_timer_month(&self, month: NaiveDate) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await?;
        tx.execute(LOCK_TIMEOUT).await?;
        let dropped: i64 =
            sqlx::query_scalar(DROP_TIMER_MONTH).bind(month).fetch_one(&mut *tx).await.map_err(refusal)?;
        tx.commit().await?;
        Ok(count(dropped))
    }

    async fn delete_expired_rows(
        &self,
        now: DateTime<Utc>,
        windows: &RetentionWindows,
    ) -> Result<DeletedRows, StoreError> {
        let dispatched_before = now - chrono::TimeDelta::days(i64::from(windows.dispatched_days));
        let dead_before = now - chrono::TimeDelta::days(i64::from(windows.dead_days));
        let timers_before = now - chrono::TimeDelta::days(i64::from(windows.timer_days));
        let outbox = delete_in_batches(&self.pool, || {
            sqlx::query(DELETE_OUTBOX_DEFAULT).bind(dispatched_before).bind(dead_before).bind(DELETE_BATCH)
        })
        .await?;
        let timers = delete_in_batches(&self.pool, || {
            sqlx::query(DELETE_TIMERS_DEFAULT).bind(timers_before).bind(DELETE_BATCH)
        })
        .await?;
        Ok(DeletedRows { outbox, timers })
    }

    async fn try_lock_retention(&self) -> Result<Option<RunLock>, StoreError> {
        // A session lock on a connection of its own, taken out of the pool: a pooled connection
        // would go back with the lock still held. The pool opens another in its place.
        let mut conn = self.pool.acquire().await?.detach();
        let got: bool = sqlx::query_scalar(TRY_LOCK_RETENTION).fetch_one(&mut conn).await?;
        if got {
            Ok(Some(RunLock::held(Box::new(RetentionSession(conn)))))
        } else {
            let _ = sqlx::Connection::close(conn).await;
            Ok(None)
        }
    }
}

/// The session that holds the retention run lock.
struct RetentionSession(sqlx::PgConnection);

#[async_trait]
impl HeldLock for RetentionSession {
    async fn release(self: Box<Self>) {
        let RetentionSession(mut conn) = *self;
        let unlocked = sqlx::query_scalar::<_, bool>(UNLOCK_RETENTION).fetch_one(&mut conn).await;
        if let Err(e) = unlocked {
            tracing::warn!(error = %e, "retention lock: unlock failed; closing its connection releases it");
        }
        let _ = sqlx::Connection::close(conn).await;
    }
}
