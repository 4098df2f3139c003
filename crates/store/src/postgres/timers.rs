//! `TimerStore` on Postgres.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;

use super::PgStore;
use crate::codec::{age, attempt_i32, decode_timer_status, limit_i64, to_u32};
use crate::error::StoreError;
use crate::timers::{TimerRow, TimerStatus, TimerStore, TimerView};

/// A timer's partition is its load's month in the directory, or 1970-01 (the default partition)
/// for a load without a log. `schedule` and `cancel` of one timer id name the same load, so they
/// meet in the same partition and `(timer_id, load_month)` stays the idempotency key it was.
const SCHEDULE: &str = "INSERT INTO timers (timer_id, load_id, ask_id, attempt, fire_at, status, load_month) \
    VALUES ($1, $2, $3, $4, $5, 'scheduled', \
            coalesce((SELECT load_month FROM load_months WHERE load_id = $2), DATE '1970-01-01')) \
    ON CONFLICT (timer_id, load_month) DO UPDATE SET load_id = EXCLUDED.load_id, ask_id = EXCLUDED.ask_id, \
    attempt = EXCLUDED.attempt, fire_at = EXCLUDED.fire_at WHERE timers.load_id IS NULL";
const CANCEL: &str = "INSERT INTO timers (timer_id, status, cancelled_at, load_month) \
    VALUES ($1, 'cancelled', $2, coalesce((SELECT load_month FROM load_months WHERE load_id = $3), DATE '1970-01-01')) \
    ON CONFLICT (timer_id, load_month) DO UPDATE SET status = 'cancelled', cancelled_at = $2 \
    WHERE timers.status = 'scheduled'";

#[async_trait]
impl TimerStore for PgStore {
    async fn schedule(&self, timer: &TimerRow) -> Result<(), StoreError> {
        // A tombstone (cancelled before it was scheduled) gets the timer's details but stays
        // cancelled; a known timer is left as it is.
        sqlx::query(SCHEDULE)
            .bind(&timer.timer_id)
            .bind(&timer.load_id)
            .bind(&timer.ask_id)
            .bind(attempt_i32(timer.attempt)?)
            .bind(timer.fire_at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn cancel(&self, load_id: &str, timer_id: &str, now: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query(CANCEL).bind(timer_id).bind(now).bind(load_id).execute(&self.pool).await?;
        Ok(())
    }

    async fn mark_fired(&self, timer_ids: &[String], now: DateTime<Utc>) -> Result<(), StoreError> {
        if timer_ids.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE timers SET status = 'fired', fired_at = $2 WHERE timer_id = ANY($1) AND status = 'scheduled'",
        )
        .bind(timer_ids)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn due(&self, now: DateTime<Utc>, limit: usize) -> Result<Vec<TimerRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT timer_id, load_id, ask_id, attempt, fire_at FROM timers \
             WHERE status = 'scheduled' AND fire_at <= $1 ORDER BY fire_at, timer_id LIMIT $2",
        )
        .bind(now)
        .bind(limit_i64(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(TimerRow {
                    timer_id: r.try_get("timer_id")?,
                    load_id: r.try_get("load_id")?,
                    ask_id: r.try_get("ask_id")?,
                    attempt: to_u32(i64::from(r.try_get::<i32, _>("attempt")?)),
                    fire_at: r.try_get("fire_at")?,
                })
            })
            .collect()
    }

    async fn oldest_due_lag(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError> {
        let oldest: Option<DateTime<Utc>> = sqlx::query_scalar(
            "SELECT fire_at FROM timers WHERE status = 'scheduled' AND fire_at <= $1 ORDER BY fire_at LIMIT 1",
        )
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        Ok(oldest.map(|t| age(now, t)))
    }

    async fn next_fire_at(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        // `timers_due_idx (fire_at, timer_id) WHERE status = 'scheduled'`: the first entry of
        // each partition's index, merged.
        let next: Option<DateTime<Utc>> = sqlx::query_scalar(
            "SELECT fire_at FROM timers WHERE status = 'scheduled' ORDER BY fire_at LIMIT 1",
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(next)
    }

    async fn timers_for_load(&self, load_id: &str) -> Result<Vec<TimerView>, StoreError> {
        let rows = sqlx::query(
            "SELECT timer_id, load_id, ask_id, attempt, fire_at, status, fired_at, cancelled_at FROM timers \
             WHERE load_id = $1 ORDER BY fire_at, timer_id",
        )
        .bind(load_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let timer_id: String = r.try_get("timer_id")?;
                let status: String = r.try_get("status")?;
                let status: TimerStatus = decode_timer_status(&timer_id, &status)?;
                Ok(TimerView {
                    load_id: r.try_get("load_id")?,
                    ask_id: r.try_get("ask_id")?,
                    attempt: to_u32(i64::from(r.try_get::<i32, _>("attempt")?)),
                    fire_at: r.try_get("fire_at")?,
                    status,
                    fired_at: r.try_get("fired_at")?,
                    cancelled_at: r.try_get("cancelled_at")?,
                    timer_id,
                })
            })
            .collect()
    }
}
