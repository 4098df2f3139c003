//! The operations console's attention list (issue 17): the loads that need a person now, most
//! urgent first. It reads the `load_summary` projection table, which the worker writes in the
//! append transaction ([`EventStore::append_summarized`](crate::EventStore::append_summarized)),
//! together with the outbox's dead rows and the timers that are overdue, each through an index
//! (docs/console.md): never a fold of every log.
//!
//! A load needs attention, in this order of urgency, when
//! - an urgent Hero task was decided for it within the window (`UrgentTask`),
//! - one of its actions went dead in the outbox within the window (`DeadAction`),
//! - one of its open asks has escalated (`EscalatedAsk`),
//! - one of its timers is overdue: scheduled, and due longer ago than `overdue_after`
//!   (`OverdueTimer`, the timer pump is behind or down).

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use load_agent_domain::{LoadSummary, Stage};
use serde::Serialize;

use crate::error::StoreError;

load_agent_domain::spelled_enum! {
    /// Why a load is on the attention list; the order of the variants is their urgency.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum AttentionReason {
        UrgentTask => "urgent_task",
        DeadAction => "dead_action",
        EscalatedAsk => "escalated_ask",
        OverdueTimer => "overdue_timer",
    }
}

impl AttentionReason {
    /// Its bit in the ordering mask: a more urgent reason has a higher bit, so ordering by the
    /// mask orders by the most urgent reason first.
    fn bit(self) -> i64 {
        match self {
            AttentionReason::UrgentTask => 8,
            AttentionReason::DeadAction => 4,
            AttentionReason::EscalatedAsk => 2,
            AttentionReason::OverdueTimer => 1,
        }
    }
}

/// What to list. Times are passed in: the store never reads the clock.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionQuery {
    pub now: DateTime<Utc>,
    /// Urgent Hero tasks and dead actions count for this long after they happen.
    pub window: TimeDelta,
    /// A scheduled timer counts as overdue once it is this late.
    pub overdue_after: TimeDelta,
    pub client: Option<String>,
    pub stage: Option<Stage>,
    pub reason: Option<AttentionReason>,
    pub offset: u64,
    pub limit: u64,
}

/// One load on the attention list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttentionRow {
    pub load_id: String,
    pub client: Option<String>,
    pub stage: Stage,
    /// Most urgent first; never empty.
    pub reasons: Vec<AttentionReason>,
    /// Since when the load has needed attention: the earliest time among its reasons.
    pub since: DateTime<Utc>,
    pub open_asks: u32,
    pub escalated_asks: u32,
    pub dead_actions: u32,
    pub overdue_timers: u32,
    pub urgent_task_at: Option<DateTime<Utc>>,
    /// The log version and the time of its last entries.
    pub version: u64,
    pub updated_at: DateTime<Utc>,
}

/// One page of the attention list, with the counts the filters need.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttentionPage {
    /// Ordered by the most urgent reason, then the oldest `since`, then the load id.
    pub rows: Vec<AttentionRow>,
    /// Loads matching every filter (all pages).
    pub total: u64,
    /// Per reason (in urgency order), the loads matching the client and stage filters that have it.
    pub by_reason: Vec<(AttentionReason, u64)>,
    /// Clients of the loads needing attention (any filter), for the filter menu.
    pub clients: Vec<String>,
}

/// The console's reads of the `load_summary` projection.
#[async_trait]
pub trait LoadIndex: Send + Sync {
    /// One page of the loads that need attention.
    async fn attention(&self, query: &AttentionQuery) -> Result<AttentionPage, StoreError>;

    /// The summary last written for a load.
    async fn summary(&self, load_id: &str) -> Result<Option<LoadSummary>, StoreError>;

    /// Writes a load's summary outside an append (`load-agent console rebuild`, for logs
    /// written before the table existed). A summary older than the one stored (a lower
    /// version) is ignored.
    async fn put_summary(&self, load_id: &str, summary: &LoadSummary) -> Result<(), StoreError>;
}

/// One load the backends found in the candidate indexes, with its counts; both backends answer
/// these and [`page`] does the rest, so the two agree by construction.
pub(crate) struct Candidate {
    pub load_id: String,
    pub client: Option<String>,
    pub stage: String,
    pub version: i64,
    pub open_asks: i64,
    pub escalated_asks: i64,
    pub escalated_since: Option<DateTime<Utc>>,
    pub urgent_task_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    pub dead: i64,
    pub dead_since: Option<DateTime<Utc>>,
    pub overdue: i64,
    pub overdue_since: Option<DateTime<Utc>>,
}

/// The start of the window and the overdue bound of a query.
pub(crate) fn bounds(q: &AttentionQuery) -> (DateTime<Utc>, DateTime<Utc>) {
    (q.now - q.window, q.now - q.overdue_after)
}

fn count(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

impl Candidate {
    /// The row it is on the list as; `None` when none of its reasons holds any more.
    fn row(self, window_start: DateTime<Utc>) -> Result<Option<AttentionRow>, StoreError> {
        let stage = Stage::parse(&self.stage).ok_or_else(|| {
            StoreError::Corrupt(format!("load_summary {}: stage {:?}", self.load_id, self.stage))
        })?;
        let urgent = self.urgent_task_at.filter(|t| *t >= window_start);
        let escalated = self.escalated_since.filter(|_| self.escalated_asks > 0);
        let mut reasons = Vec::new();
        let mut since: Option<DateTime<Utc>> = None;
        for (reason, holds, at) in [
            (AttentionReason::UrgentTask, urgent.is_some(), urgent),
            (AttentionReason::DeadAction, self.dead > 0, self.dead_since),
            (AttentionReason::EscalatedAsk, self.escalated_asks > 0, escalated),
            (AttentionReason::OverdueTimer, self.overdue > 0, self.overdue_since),
        ] {
            if holds {
                reasons.push(reason);
                since = match (since, at) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        if reasons.is_empty() {
            return Ok(None);
        }
        Ok(Some(AttentionRow {
            load_id: self.load_id,
            client: self.client,
            stage,
            reasons,
            since: since.unwrap_or(self.updated_at),
            open_asks: count(self.open_asks),
            escalated_asks: count(self.escalated_asks),
            dead_actions: count(self.dead),
            overdue_timers: count(self.overdue),
            urgent_task_at: self.urgent_task_at,
            version: u64::try_from(self.version).unwrap_or(0),
            updated_at: self.updated_at,
        }))
    }
}

/// Filters, counts, orders and pages the candidates.
pub(crate) fn page(candidates: Vec<Candidate>, q: &AttentionQuery) -> Result<AttentionPage, StoreError> {
    let (window_start, _) = bounds(q);
    let mut rows = Vec::with_capacity(candidates.len());
    for c in candidates {
        if let Some(row) = c.row(window_start)? {
            rows.push(row);
        }
    }
    let mut clients: Vec<String> = rows.iter().filter_map(|r| r.client.clone()).collect();
    clients.sort();
    clients.dedup();
    rows.retain(|r| {
        q.client.as_ref().is_none_or(|c| r.client.as_ref() == Some(c)) && q.stage.is_none_or(|s| r.stage == s)
    });
    let by_reason = AttentionReason::ALL
        .into_iter()
        .map(|reason| (reason, rows.iter().filter(|r| r.reasons.contains(&reason)).count() as u64))
        .collect();
    if let Some(reason) = q.reason {
        rows.retain(|r| r.reasons.contains(&reason));
    }
    let total = rows.len() as u64;
    // Most urgent reason first (a higher bit is more urgent, so a higher mask has a more urgent
    // reason, or the same and more), then the longest waiting.
    let mask = |r: &AttentionRow| r.reasons.iter().map(|x| x.bit()).sum::<i64>();
    rows.sort_by(|a, b| {
        mask(b).cmp(&mask(a)).then(a.since.cmp(&b.since)).then_with(|| a.load_id.cmp(&b.load_id))
    });
    let offset = usize::try_from(q.offset).unwrap_or(usize::MAX);
    let limit = usize::try_from(q.limit).unwrap_or(usize::MAX);
    let rows = rows.into_iter().skip(offset).take(limit).collect();
    Ok(AttentionPage { rows, total, by_reason, clients })
}

#[cfg(test)]
mod spelling_tests {
    use super::*;

    /// serde (the JSON formats) and `as_str` (SQL, query strings, metric labels) agree.
    #[test]
    fn serde_spells_every_variant_as_as_str_does() {
        for r in AttentionReason::ALL {
            assert_eq!(serde_json::to_value(r).ok(), Some(serde_json::json!(r.as_str())));
        }
    }
}
