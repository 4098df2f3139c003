//! `TimerStore` on SQLite: changes run in the writer's transaction, queries on the reader pool.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteConnection;

use super::SqliteStore;
use super::command::{TimerOp, WriteCmd};
use crate::codec::{
    age, decode_timer_status, limit_i64, parse_sqlite_time, parse_sqlite_time_opt, sqlite_time, to_u32,
};
use crate::error::StoreError;
use crate::timers::{TimerRow, TimerStore, TimerView};

/// Same statements as `postgres/timers.rs`.
pub(super) async fn timer_in(conn: &mut SqliteConnection, op: &TimerOp) -> Result<(), sqlx::Error> {
    match op {
        TimerOp::Schedule { timer_id, load_id, ask_id, attempt, fire_at } => {
            sqlx::query(
                "INSERT INTO timers (timer_id, load_id, ask_id, attempt, fire_at, status) \
                 VALUES (?1, ?2, ?3, ?4, ?5, 'scheduled') \
                 ON CONFLICT (timer_id) DO UPDATE SET load_id = excluded.load_id, ask_id = excluded.ask_id, \
                 attempt = excluded.attempt, fire_at = excluded.fire_at WHERE timers.load_id IS NULL",
            )
            .bind(timer_id)
            .bind(load_id)
            .bind(ask_id)
            .bind(attempt)
            .bind(fire_at)
            .execute(&mut *conn)
            .await?;
        }
        TimerOp::Cancel { timer_id, now } => {
            sqlx::query(
                "INSERT INTO timers (timer_id, status, cancelled_at) VALUES (?1, 'cancelled', ?2) \
                 ON CONFLICT (timer_id) DO UPDATE SET status = 'cancelled', cancelled_at = ?2 \
                 WHERE timers.status = 'scheduled'",
            )
            .bind(timer_id)
            .bind(now)
            .execute(&mut *conn)
            .await?;
        }
        TimerOp::Fired { timer_ids, now } => {
            sqlx::query(
                "UPDATE timers SET status = 'fired', fired_at = ?2 \
                 WHERE timer_id IN (SELECT value FROM json_each(?1)) AND status = 'scheduled'",
            )
            .bind(timer_ids)
            .bind(now)
            .execute(&mut *conn)
            .await?;
        }
        TimerOp::DeleteExpired { dispatched_before, dead_before, timers_before } => {
            sqlx::query(EXPIRED_OUTBOX_DELETE)
                .bind(dispatched_before)
                .bind(dead_before)
                .execute(&mut *conn)
                .await?;
            sqlx::query(EXPIRED_TIMERS_DELETE).bind(timers_before).execute(&mut *conn).await?;
        }
    }
    Ok(())
}

const EXPIRED_OUTBOX_DELETE: &str = "DELETE FROM outbox \
    WHERE (status = 'dispatched' AND dispatched_at < ?1) OR (status = 'dead' AND dead_at < ?2)";
const EXPIRED_OUTBOX_COUNT: &str = "SELECT count(*) FROM outbox \
    WHERE (status = 'dispatched' AND dispatched_at < ?1) OR (status = 'dead' AND dead_at < ?2)";
const EXPIRED_TIMERS_DELETE: &str = "DELETE FROM timers \
    WHERE (status = 'fired' AND fired_at < ?1) OR (status = 'cancelled' AND cancelled_at < ?1)";
const EXPIRED_TIMERS_COUNT: &str = "SELECT count(*) FROM timers \
    WHERE (status = 'fired' AND fired_at < ?1) OR (status = 'cancelled' AND cancelled_at < ?1)";

impl SqliteStore {
    /// Retention on SQLite: counts what is past its window, then deletes it in the writer's
    /// transaction (the counts are what was there when counted; rows expiring in between go too).
    pub(crate) async fn delete_expired(
        &self,
        now: DateTime<Utc>,
        windows: &crate::lifecycle::RetentionWindows,
    ) -> Result<crate::lifecycle::DeletedRows, StoreError> {
        let dispatched_before =
            sqlite_time(now - chrono::TimeDelta::days(i64::from(windows.dispatched_days)));
        let dead_before = sqlite_time(now - chrono::TimeDelta::days(i64::from(windows.dead_days)));
        let timers_before = sqlite_time(now - chrono::TimeDelta::days(i64::from(windows.timer_days)));
        let outbox: i64 = sqlx::query_scalar(EXPIRED_OUTBOX_COUNT)
            .bind(&dispatched_before)
            .bind(&dead_before)
            .fetch_one(&self.readers)
            .await?;
        let timers: i64 =
            sqlx::query_scalar(EXPIRED_TIMERS_COUNT).bind(&timers_before).fetch_one(&self.readers).await?;
        let op = TimerOp::DeleteExpired { dispatched_before, dead_before, timers_before };
        self.write(|reply| WriteCmd::Timer { op, reply }).await??;
        Ok(crate::lifecycle::DeletedRows {
            outbox: u64::try_from(outbox).unwrap_or(0),
            timers: u64::try_from(timers).unwrap_or(0),
        })
    }
}

#[async_trait]
impl TimerStore for SqliteStore {
    async fn schedule(&self, timer: &TimerRow) -> Result<(), StoreError> {
        let op = TimerOp::Schedule {
            timer_id: timer.timer_id.clone(),
            load_id: timer.load_id.clone(),
            ask_id: timer.ask_id.clone(),
            attempt: i64::from(timer.attempt),
            fire_at: sqlite_time(timer.fire_at),
        };
        self.write(|reply| WriteCmd::Timer { op, reply }).await?
    }

    async fn cancel(&self, _load_id: &str, timer_id: &str, now: DateTime<Utc>) -> Result<(), StoreError> {
        let op = TimerOp::Cancel { timer_id: timer_id.to_owned(), now: sqlite_time(now) };
        self.write(|reply| WriteCmd::Timer { op, reply }).await?
    }

    async fn mark_fired(&self, timer_ids: &[String], now: DateTime<Utc>) -> Result<(), StoreError> {
        if timer_ids.is_empty() {
            return Ok(());
        }
        let timer_ids =
            serde_json::to_string(timer_ids).map_err(|e| StoreError::InvalidRequest(e.to_string()))?;
        let op = TimerOp::Fired { timer_ids, now: sqlite_time(now) };
        self.write(|reply| WriteCmd::Timer { op, reply }).await?
    }

    async fn due(&self, now: DateTime<Utc>, limit: usize) -> Result<Vec<TimerRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT timer_id, load_id, ask_id, attempt, fire_at FROM timers \
             WHERE status = 'scheduled' AND fire_at <= ?1 ORDER BY fire_at, timer_id LIMIT ?2",
        )
        .bind(sqlite_time(now))
        .bind(limit_i64(limit))
        .fetch_all(&self.readers)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(TimerRow {
                    timer_id: r.try_get("timer_id")?,
                    load_id: r.try_get("load_id")?,
                    ask_id: r.try_get("ask_id")?,
                    attempt: to_u32(r.try_get("attempt")?),
                    fire_at: parse_sqlite_time("timers.fire_at", &r.try_get::<String, _>("fire_at")?)?,
                })
            })
            .collect()
    }

    async fn oldest_due_lag(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError> {
        let oldest: Option<String> = sqlx::query_scalar(
            "SELECT fire_at FROM timers WHERE status = 'scheduled' AND fire_at <= ?1 ORDER BY fire_at LIMIT 1",
        )
        .bind(sqlite_time(now))
        .fetch_optional(&self.readers)
        .await?;
        Ok(parse_sqlite_time_opt("timers.fire_at", oldest)?.map(|t| age(now, t)))
    }

    async fn next_fire_at(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let next: Option<String> = sqlx::query_scalar(
            "SELECT fire_at FROM timers WHERE status = 'scheduled' ORDER BY fire_at LIMIT 1",
        )
        .fetch_optional(&self.readers)
        .await?;
        parse_sqlite_time_opt("timers.fire_at", next)
    }

    async fn timers_for_load(&self, load_id: &str) -> Result<Vec<TimerView>, StoreError> {
        let rows = sqlx::query(
            "SELECT timer_id, load_id, ask_id, attempt, fire_at, status, fired_at, cancelled_at FROM timers \
             WHERE load_id = ?1 ORDER BY fire_at, timer_id",
        )
        .bind(load_id)
        .fetch_all(&self.readers)
        .await?;
        rows.iter()
            .map(|r| {
                let timer_id: String = r.try_get("timer_id")?;
                let status: String = r.try_get("status")?;
                Ok(TimerView {
                    load_id: r.try_get("load_id")?,
                    ask_id: r.try_get("ask_id")?,
                    attempt: to_u32(r.try_get("attempt")?),
                    fire_at: parse_sqlite_time("timers.fire_at", &r.try_get::<String, _>("fire_at")?)?,
                    status: decode_timer_status(&timer_id, &status)?,
                    fired_at: parse_sqlite_time_opt("timers.fired_at", r.try_get("fired_at")?)?,
                    cancelled_at: parse_sqlite_time_opt("timers.cancelled_at", r.try_get("cancelled_at")?)?,
                    timer_id,
                })
            })
            .collect()
    }
}
