//! The data lifecycle (issue 18, docs/operations.md "Partitions" and "Retention"): partitions
//! made ahead of time on Postgres, and retention, which drops whole partitions once their
//! window has passed (the log's only after an archive of the month was verified: the caller
//! passes what the archive holds and the store checks it under lock).
//!
//! Postgres partitions the log and the timers by the load's registration month and the outbox by
//! the day of creation (`migrations/postgres/0004_partitions.sql`); a row whose partition is
//! missing is kept in the parent's default partition, never refused, and moved into its
//! partition when that is made. [`Lifecycle::ensure_partitions`] makes the partitions of `now`
//! and of the days and months ahead; the service calls it at start and every hour, and
//! `load-agent partitions ensure` calls it by hand. SQLite stays unpartitioned: both calls
//! answer with nothing to do.

use async_trait::async_trait;
use chrono::{DateTime, Datelike, Months, NaiveDate, TimeDelta, Utc};

use crate::error::StoreError;

/// How far ahead partitions are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionPlan {
    /// Monthly partitions of the log and the timers after the current month.
    pub months_ahead: u32,
    /// Daily partitions of the outbox after the current day.
    pub days_ahead: u32,
}

impl Default for PartitionPlan {
    /// One month and one day. The service makes them at start and every hour, and only the
    /// service writes the store, so a service that was down makes its partitions before its
    /// first append; a row whose partition is missing anyway waits in the default partition,
    /// never refused. More partitions ahead cost the hot path: Postgres 15 locks every partition
    /// of a statement's generic plan (docs/performance.md, "Partitioned store").
    fn default() -> Self {
        PartitionPlan { months_ahead: 1, days_ahead: 1 }
    }
}

/// The ranges [`Lifecycle::ensure_partitions`] makes sure of at `now`: from the month (day)
/// before `now`'s, so that an entry recorded late still finds its partition, to the plan's
/// horizon, as first days of months and UTC days.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionSpan {
    pub first_month: NaiveDate,
    pub last_month: NaiveDate,
    pub first_day: NaiveDate,
    pub last_day: NaiveDate,
}

impl PartitionPlan {
    pub fn span(&self, now: DateTime<Utc>) -> Result<PartitionSpan, StoreError> {
        let today = now.date_naive();
        let this_month = today.with_day(1).unwrap_or(today);
        let out_of_range = || StoreError::InvalidRequest(format!("partitions around {now} are out of range"));
        Ok(PartitionSpan {
            first_month: this_month.checked_sub_months(Months::new(1)).ok_or_else(out_of_range)?,
            last_month: this_month
                .checked_add_months(Months::new(self.months_ahead))
                .ok_or_else(out_of_range)?,
            first_day: today.checked_sub_signed(TimeDelta::days(1)).ok_or_else(out_of_range)?,
            last_day: today
                .checked_add_signed(TimeDelta::days(i64::from(self.days_ahead)))
                .ok_or_else(out_of_range)?,
        })
    }
}

/// One partition of a partitioned table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// `log_entries`, `outbox`, `outbox_retired` (an outbox day retired, waiting for
    /// retention) or `timers`.
    pub table: String,
    /// `log_entries_p2026_12`, `outbox_p2026_12_03`, `timers_default`, ...
    pub name: String,
    /// The bounds as Postgres prints them (`FOR VALUES FROM ('2026-12-01') TO ('2027-01-01')`,
    /// `DEFAULT`).
    pub bounds: String,
    /// Rows as the planner's statistics estimate them (-1 before the first `ANALYZE`).
    pub rows_estimate: i64,
    /// Table, indexes and TOAST, in bytes.
    pub bytes: i64,
}

/// How long data is kept (docs/capacity.md): the log 13 months, delivered outbox rows 7 days,
/// dead outbox rows 90 days, fired and cancelled timers 30 days.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionWindows {
    pub log_months: u32,
    pub dispatched_days: u32,
    pub dead_days: u32,
    pub timer_days: u32,
}

impl Default for RetentionWindows {
    fn default() -> Self {
        RetentionWindows { log_months: 13, dispatched_days: 7, dead_days: 90, timer_days: 30 }
    }
}

/// The table a partition belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PartitionedTable {
    LogEntries,
    Outbox,
    Timers,
}

/// A partition whose whole range is past its retention window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredPartition {
    pub table: PartitionedTable,
    pub name: String,
    /// The first day of its range (a month's first day, or the outbox's day).
    pub first_day: NaiveDate,
}

/// The partitions past their window at `now`, oldest first per table: a log month once the
/// month plus `log_months` months has passed; an outbox day `dispatched_days` after it ended
/// (its dead rows younger than `dead_days` are kept, moved to the default partition); a timers
/// month `timer_days` after it ended. Only partitions named as `ensure` names them
/// (`log_entries_p2026_03`, `outbox_p2026_03_02`, `timers_p2026_03`) are considered.
pub fn expired(
    partitions: &[PartitionInfo],
    now: DateTime<Utc>,
    windows: &RetentionWindows,
) -> Vec<ExpiredPartition> {
    let today = now.date_naive();
    let mut out: Vec<ExpiredPartition> = partitions
        .iter()
        .filter_map(|p| {
            let (table, first_day, end) = parse_partition_name(&p.name)?;
            let kept_until = match table {
                PartitionedTable::LogEntries => end.checked_add_months(Months::new(windows.log_months))?,
                PartitionedTable::Outbox => {
                    end.checked_add_signed(TimeDelta::days(i64::from(windows.dispatched_days)))?
                }
                PartitionedTable::Timers => {
                    end.checked_add_signed(TimeDelta::days(i64::from(windows.timer_days)))?
                }
            };
            (kept_until <= today).then(|| ExpiredPartition { table, name: p.name.clone(), first_day })
        })
        .collect();
    out.sort_by_key(|p| (p.table, p.first_day));
    out
}

/// A partition's table, first day and end (exclusive) from its name.
fn parse_partition_name(name: &str) -> Option<(PartitionedTable, NaiveDate, NaiveDate)> {
    let month = |rest: &str| {
        let (y, m) = rest.split_once('_')?;
        let first = NaiveDate::from_ymd_opt(y.parse().ok()?, m.parse().ok()?, 1)?;
        Some((first, first.checked_add_months(Months::new(1))?))
    };
    if let Some(rest) = name.strip_prefix("log_entries_p") {
        let (first, end) = month(rest)?;
        return Some((PartitionedTable::LogEntries, first, end));
    }
    if let Some(rest) = name.strip_prefix("timers_p") {
        let (first, end) = month(rest)?;
        return Some((PartitionedTable::Timers, first, end));
    }
    let rest = name.strip_prefix("outbox_p")?;
    let mut parts = rest.splitn(3, '_');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    let day = NaiveDate::from_ymd_opt(y.parse().ok()?, m.parse().ok()?, d.parse().ok()?)?;
    Some((PartitionedTable::Outbox, day, day.succ_opt()?))
}

impl PartitionInfo {
    /// The table this partition belongs to and the days it holds, `[first, end)`, read from its
    /// name as `ensure` names them (`log_entries_p2026_03`, `outbox_p2026_03_02`,
    /// `timers_p2026_03`; a day retired to `outbox_retired` keeps its outbox name); `None` for a
    /// default partition or a name of another shape.
    pub fn range(&self) -> Option<(PartitionedTable, NaiveDate, NaiveDate)> {
        parse_partition_name(&self.name)
    }
}

/// The day of an outbox partition named as `ensure` names them (`outbox_p2026_03_02`).
pub fn outbox_partition_day(name: &str) -> Option<NaiveDate> {
    match parse_partition_name(name)? {
        (PartitionedTable::Outbox, day, _) => Some(day),
        _ => None,
    }
}

/// What an outbox day's drop did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DroppedDay {
    pub dropped: u64,
    /// Dead rows still inside their window, moved to the default partition.
    pub kept_dead: u64,
}

/// Rows deleted by [`Lifecycle::delete_expired_rows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeletedRows {
    pub outbox: u64,
    pub timers: u64,
}

#[async_trait]
pub trait Lifecycle: Send + Sync {
    /// Whether this store partitions its tables (Postgres) or not (SQLite).
    fn partitioned(&self) -> bool;

    /// Makes the partitions of [`PartitionPlan::span`] at `now` that do not exist yet (moving
    /// into each the rows its range left in the default partition); returns the names made, in
    /// order. Safe to run from several processes at once (one runs, the others wait).
    async fn ensure_partitions(
        &self,
        now: DateTime<Utc>,
        plan: &PartitionPlan,
    ) -> Result<Vec<String>, StoreError>;

    /// Retires the outbox's days before yesterday (at `now`) whose rows are all delivered or
    /// dead: each day's partition leaves the live outbox for `outbox_retired` (its dead rows stay
    /// in the live outbox's default partition), so that the append's key probe and the claim
    /// see only the live days (migrations/README.md, "Retired outbox days"). A day with a
    /// pending row stays live until a later run. Returns the partitions retired, oldest first.
    async fn retire_outbox_days(&self, now: DateTime<Utc>) -> Result<Vec<String>, StoreError>;

    /// Every partition, by table and name.
    async fn partitions(&self) -> Result<Vec<PartitionInfo>, StoreError>;

    /// Analyzes the partitions whose planner statistics say empty while rows were written to
    /// them since (a database-wide `ANALYZE` or `VACUUM` reached a partition made ahead before
    /// its first row did); returns their names. A generic plan made from such statistics reads
    /// the partition by a sequential scan once it fills (migrations/README.md, "Statistics of
    /// new partitions"); the `ANALYZE` makes every session plan again. The service runs it every
    /// minute; cheap when there is nothing to do (one catalog query).
    async fn analyze_filled_partitions(&self) -> Result<Vec<String>, StoreError>;

    /// Drops the log partition of `month` (its first day), with its loads' directory and
    /// `load_summary` rows, after checking under lock that it holds exactly `archived` (each
    /// load and its last seq, as a verified archive holds them). [`StoreError::Refused`], with
    /// nothing dropped, when it does not. Returns the log rows dropped.
    async fn drop_log_month(&self, month: NaiveDate, archived: &[(String, u64)]) -> Result<u64, StoreError>;

    /// Drops the outbox partition of `day` unless a row in it is pending
    /// ([`StoreError::Refused`]); dead rows that died at or after `keep_dead_since` are kept.
    async fn drop_outbox_day(
        &self,
        day: NaiveDate,
        keep_dead_since: DateTime<Utc>,
    ) -> Result<DroppedDay, StoreError>;

    /// Drops the timers partition of `month` unless a timer in it is still scheduled.
    async fn drop_timer_month(&self, month: NaiveDate) -> Result<u64, StoreError>;

    /// Deletes, in batches, the outbox rows and timers past their windows that are not in a
    /// partition retention drops: the default partitions on Postgres, the tables on SQLite.
    /// Never deletes a pending row, a scheduled timer or a log entry.
    async fn delete_expired_rows(
        &self,
        now: DateTime<Utc>,
        windows: &RetentionWindows,
    ) -> Result<DeletedRows, StoreError>;

    /// Takes the retention run lock: `None` when another retention run of this store (in this
    /// process or another) holds it. A run holds it from its first step to its last, so two
    /// workers' retention jobs, or a job and `load-agent retention run`, never archive the same
    /// month to the same place or race to drop the same partition. Released by
    /// [`RunLock::release`], or when the lock is dropped (the holder's connection closes).
    async fn try_lock_retention(&self) -> Result<Option<RunLock>, StoreError>;
}

/// A held retention run lock ([`Lifecycle::try_lock_retention`]).
#[must_use = "the lock is released when this is dropped"]
pub struct RunLock {
    /// Postgres: the session that holds the advisory lock. SQLite: nothing (its retention only
    /// deletes expired rows, which two runs may both do).
    held: Option<Box<dyn HeldLock>>,
}

/// A lock a backend holds for a [`RunLock`] and knows how to release (Postgres: its session),
/// so this module needs no backend's types or SQL.
#[async_trait::async_trait]
pub(crate) trait HeldLock: Send {
    /// Releases the lock now and ends what held it.
    async fn release(self: Box<Self>);
}

impl std::fmt::Debug for RunLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLock").field("held", &self.held.is_some()).finish()
    }
}

impl RunLock {
    /// A lock that excludes nothing.
    pub(crate) fn unshared() -> Self {
        RunLock { held: None }
    }

    /// A lock a backend holds (Postgres: a session advisory lock on a connection of its own).
    pub(crate) fn held(lock: Box<dyn HeldLock>) -> Self {
        RunLock { held: Some(lock) }
    }

    /// Releases the lock now. (Dropping it ends the holder without waiting: on Postgres the
    /// connection closes, and the server releases the lock when it sees the session end.)
    pub async fn release(mut self) {
        if let Some(lock) = self.held.take() {
            lock.release().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn info(name: &str) -> PartitionInfo {
        PartitionInfo {
            table: String::new(),
            name: name.into(),
            bounds: String::new(),
            rows_estimate: 0,
            bytes: 0,
        }
    }

    #[test]
    fn a_partition_s_range_is_read_from_its_name() {
        let d = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).expect("a valid day");
        assert_eq!(
            info("log_entries_p2026_12").range(),
            Some((PartitionedTable::LogEntries, d(2026, 12, 1), d(2027, 1, 1)))
        );
        assert_eq!(
            info("outbox_p2026_12_31").range(),
            Some((PartitionedTable::Outbox, d(2026, 12, 31), d(2027, 1, 1)))
        );
        assert_eq!(
            info("timers_p2026_03").range(),
            Some((PartitionedTable::Timers, d(2026, 3, 1), d(2026, 4, 1)))
        );
        for name in
            ["outbox_default", "log_entries_default", "outbox_p2026_13_01", "outbox_retired", "load_months"]
        {
            assert_eq!(info(name).range(), None, "{name}");
        }
    }

    #[test]
    fn partitions_expire_after_their_whole_range_and_window_have_passed() {
        let parts: Vec<PartitionInfo> = [
            "log_entries_p2025_10",
            "log_entries_p2025_11",
            "log_entries_default",
            "outbox_p2026_12_23",
            "outbox_p2026_12_24",
            "outbox_default",
            "timers_p2026_10",
            "timers_p2026_11",
            "log_entries_pbogus",
            "outbox_p2026_02_30",
        ]
        .iter()
        .map(|n| info(n))
        .collect();
        // 2026-12-31: October 2025 ended 2025-11-01, + 13 months = 2026-12-01 (gone); November
        // 2025 is kept until 2027-01-01. 23 December ended on the 24th, + 7 days = the 31st
        // (gone); the 24th is kept until 2027-01-01. November's timers: 1 December + 30 days.
        let now = Utc.with_ymd_and_hms(2026, 12, 31, 12, 0, 0).single().expect("a time");
        let names: Vec<String> =
            expired(&parts, now, &RetentionWindows::default()).into_iter().map(|e| e.name).collect();
        assert_eq!(
            names,
            ["log_entries_p2025_10", "outbox_p2026_12_23", "timers_p2026_10", "timers_p2026_11"]
        );
        let first = expired(&parts, now, &RetentionWindows::default());
        assert_eq!(first[0].first_day, day(2025, 10, 1));
        assert_eq!(first[0].table, PartitionedTable::LogEntries);
    }

    fn day(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).expect("a date")
    }

    #[test]
    fn the_span_reaches_back_one_step_and_ahead_by_the_plan_across_a_year_end() {
        let now = Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 59).single().expect("a time");
        let span = PartitionPlan::default().span(now).expect("span");
        assert_eq!(
            span,
            PartitionSpan {
                first_month: day(2026, 11, 1),
                last_month: day(2027, 1, 1),
                first_day: day(2026, 12, 30),
                last_day: day(2027, 1, 1),
            }
        );
        let none = PartitionPlan { months_ahead: 0, days_ahead: 0 }.span(now).expect("span");
        assert_eq!((none.last_month, none.last_day), (day(2026, 12, 1), day(2026, 12, 31)));
    }
}
