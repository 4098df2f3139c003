//! `Lifecycle` on Postgres: partitions made ahead by the functions of migration 0004.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use sqlx::{Acquire, Executor};

use super::PgStore;
use crate::error::StoreError;
use crate::lifecycle::{Lifecycle, PartitionInfo, PartitionPlan};

/// One key for the advisory lock that serializes `ensure_partitions` across processes.
const ENSURE_LOCK: i64 = 0x6c_6f_61_64_70_61_72_74; // "loadpart"

/// How long `ensure_partitions` waits for a table lock before giving up until its next run: a
/// partition is made under a short lock, and traffic must not queue behind a wait for it.
const LOCK_TIMEOUT: &str = "SET LOCAL lock_timeout = '5s'";

const PARTITIONS: &str = r#"
SELECT p.relname::text, c.relname::text, pg_get_expr(c.relpartbound, c.oid), c.reltuples::int8,
       pg_total_relation_size(c.oid)
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid AND c.relkind = 'r'
JOIN pg_class p ON p.oid = i.inhparent
WHERE p.oid IN ('log_entries'::regclass, 'outbox'::regclass, 'timers'::regclass)
ORDER BY 1, 2
"#;

const ENSURE_MONTHS: &str = "SELECT * FROM load_agent_ensure_months($3, $1, $2)";
const ENSURE_DAYS: &str = "SELECT * FROM load_agent_ensure_days($1, $2)";

impl PgStore {
    /// Runs one parent's ensure in its own transaction under the advisory lock: the monthly
    /// partitions of `table`, or with `None` the outbox's days.
    async fn ensure_one(
        &self,
        table: Option<&str>,
        first: NaiveDate,
        last: NaiveDate,
    ) -> Result<Vec<String>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let mut tx = conn.begin().await?;
        tx.execute(LOCK_TIMEOUT).await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(ENSURE_LOCK).execute(&mut *tx).await?;
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
}
