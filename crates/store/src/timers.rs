//! Durable timers (ADR 0003): scheduled and cancelled by the relay from `set_timer` /
//! `cancel_timer` outbox rows, fired by the timer pump. Every operation is idempotent.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::StoreError;

/// A timer: exactly `{load_id, ask_id, attempt}` and its fire time (ADR 0001).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerRow {
    pub timer_id: String,
    pub load_id: String,
    pub ask_id: String,
    pub attempt: u32,
    pub fire_at: DateTime<Utc>,
}

load_agent_domain::spelled_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum TimerStatus {
        Scheduled => "scheduled",
        Fired => "fired",
        Cancelled => "cancelled",
    }
}

/// A timer as `inspect` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerView {
    pub timer_id: String,
    pub load_id: String,
    pub ask_id: String,
    pub attempt: u32,
    pub fire_at: DateTime<Utc>,
    pub status: TimerStatus,
    pub fired_at: Option<DateTime<Utc>>,
    pub cancelled_at: Option<DateTime<Utc>>,
}

#[async_trait]
pub trait TimerStore: Send + Sync {
    /// Schedules a timer. Idempotent on `timer_id`: a second schedule changes nothing, and a
    /// timer cancelled before it was scheduled stays cancelled.
    async fn schedule(&self, timer: &TimerRow) -> Result<(), StoreError>;

    /// Cancels a timer of `load_id` that has not fired. Idempotent; cancelling an unknown id
    /// records a cancelled tombstone so that a later schedule of that id stays cancelled.
    /// `load_id` is the load the timer belongs to (Postgres keeps a load's timers in its
    /// month's partition, where the schedule of the same id looks).
    async fn cancel(&self, load_id: &str, timer_id: &str, now: DateTime<Utc>) -> Result<(), StoreError>;

    /// Records that the pump published these timers, in one statement. Idempotent; a fired,
    /// cancelled or unknown timer is left as it is.
    async fn mark_fired(&self, timer_ids: &[String], now: DateTime<Utc>) -> Result<(), StoreError>;

    /// Up to `limit` scheduled timers with `fire_at <= now`, oldest first.
    async fn due(&self, now: DateTime<Utc>, limit: usize) -> Result<Vec<TimerRow>, StoreError>;

    /// How late the most overdue scheduled timer is at `now` (the timer-lag metric), `None`
    /// when no timer is due.
    async fn oldest_due_lag(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError>;

    /// The earliest `fire_at` of any scheduled timer (due or not), `None` when none is
    /// scheduled: the pump sleeps until then rather than a whole poll interval.
    async fn next_fire_at(&self) -> Result<Option<DateTime<Utc>>, StoreError>;

    /// Every timer of a load, by fire time, for `inspect` (tombstones of unknown ids have no
    /// load and are not listed).
    async fn timers_for_load(&self, load_id: &str) -> Result<Vec<TimerView>, StoreError>;
}
