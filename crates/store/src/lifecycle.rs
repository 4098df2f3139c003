//! The data lifecycle (issue 18, docs/operations.md "Partitions and retention"): partitions made
//! ahead of time on Postgres.
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
    /// Two months and seven days: a service that is down over a weekend, or a month's end, still
    /// finds its partitions when it comes back.
    fn default() -> Self {
        PartitionPlan { months_ahead: 2, days_ahead: 7 }
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
    /// `log_entries`, `outbox` or `timers`.
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

    /// Every partition, by table and name.
    async fn partitions(&self) -> Result<Vec<PartitionInfo>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

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
                last_month: day(2027, 2, 1),
                first_day: day(2026, 12, 30),
                last_day: day(2027, 1, 7),
            }
        );
        let none = PartitionPlan { months_ahead: 0, days_ahead: 0 }.span(now).expect("span");
        assert_eq!((none.last_month, none.last_day), (day(2026, 12, 1), day(2026, 12, 31)));
    }
}
