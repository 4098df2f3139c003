//! The outbox relay, ADR 0003's dispatcher. One pass ([`Relay::relay_once`]) claims due rows,
//! re-checks each claim right before its send, sends it (timer rows are applied to the
//! [`TimerStore`]), marks it, and publishes its outcome to the load queue. [`Relay::run`] is
//! the loop.
//!
//! Failures:
//! - retryable: `mark_failed` with a retry time on a capped exponential curve;
//! - permanent, or retries spent: the row is dead, a failed `action_outcome` goes to the queue
//!   (the agent turns a failed external action into an urgent Hero task) and Hero-channel and
//!   internal actions raise an ops alert instead;
//! - a failure after the send (publishing the outcome, marking the row) counts as an attempt
//!   and backs off like any other; the service dedupes the re-send on the idempotency key.
//!
//! The retry budget (150 s) is measured from the row's `first_attempt_at`. The first retry is
//! always allowed; a later retry that would land after the budget kills the row.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use futures::StreamExt;
use load_agent_domain::{ActionBody, EventKind, InboundEvent, OutcomeStatus, action_outcome_event_id};
use load_agent_store::{ClaimedRow, NextAttempt, Outbox, StoreError, TimerRow, TimerStore};
use serde::Serialize;
use tracing::{Instrument, debug, error, info_span, warn};

use crate::alerts::{OpsAlert, OpsAlerts, class_label};
use crate::clock::Clock;
use crate::delivery::{ActionCommand, DeliveryError, Destinations, FakeServices, Receipt};
use crate::queue::LoadQueue;
use crate::shutdown::Shutdown;

/// Backoff and budget of failed sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Delay before the first retry.
    pub base: Duration,
    /// Each further retry waits `factor` times longer...
    pub factor: u32,
    /// ...up to this.
    pub cap: Duration,
    /// Retries must land within this much of the first attempt (the first retry excepted).
    pub budget: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            base: Duration::from_secs(5),
            factor: 2,
            cap: Duration::from_secs(60),
            budget: Duration::from_secs(150),
        }
    }
}

impl RetryPolicy {
    /// The delay after the `failures`-th failed attempt (1-based): `base * factor^(failures-1)`,
    /// capped.
    pub fn backoff(&self, failures: u32) -> Duration {
        let mut d = self.base;
        for _ in 1..failures.max(1) {
            d = d.saturating_mul(self.factor.max(1));
            if d >= self.cap {
                return self.cap;
            }
        }
        d.min(self.cap)
    }

    /// What to do after the `failures`-th failed attempt of a row first tried at
    /// `first_attempt_at`.
    pub fn next_attempt(
        &self,
        failures: u32,
        first_attempt_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> NextAttempt {
        let retry_at = now + delta(self.backoff(failures));
        if failures <= 1 || retry_at <= first_attempt_at + delta(self.budget) {
            NextAttempt::RetryAt(retry_at)
        } else {
            NextAttempt::Dead
        }
    }
}

fn delta(d: Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayConfig {
    /// Rows claimed per pass.
    pub batch: usize,
    /// Pause of the loop after a pass that found nothing to do.
    pub idle_poll: Duration,
    pub retry: RetryPolicy,
    /// Rows of one claimed batch handled at once. A batch never holds two rows of one load and
    /// destination (the claim hands out a row only when no earlier row of its load and
    /// destination is pending), so per-load order holds at any value. 1 (the default) keeps
    /// evals and replays in one deterministic order; the service runs `relay.concurrency`.
    pub concurrency: usize,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            batch: 100,
            idle_poll: Duration::from_millis(500),
            retry: RetryPolicy::default(),
            concurrency: 1,
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RelayReport {
    pub claimed: usize,
    pub delivered: usize,
    /// Timer rows applied to the TimerStore (included in `delivered`).
    pub timers_applied: usize,
    pub retried: usize,
    pub dead: usize,
    /// Rows whose claim no longer held at the re-check or at the mark: left alone.
    pub stale: usize,
    /// Outcomes that could not be published.
    pub publish_failures: usize,
    /// Marks that failed for another reason than a stale claim.
    pub mark_failures: usize,
    pub ops_alerts: usize,
}

impl RelayReport {
    /// Adds the counts of `other` (one row's handling) to these.
    fn absorb(&mut self, other: RelayReport) {
        self.claimed += other.claimed;
        self.delivered += other.delivered;
        self.timers_applied += other.timers_applied;
        self.retried += other.retried;
        self.dead += other.dead;
        self.stale += other.stale;
        self.publish_failures += other.publish_failures;
        self.mark_failures += other.mark_failures;
        self.ops_alerts += other.ops_alerts;
    }

    /// Whether the pass touched anything.
    pub fn did_work(&self) -> bool {
        self.claimed > 0
    }
}

/// The relay.
pub struct Relay {
    outbox: Arc<dyn Outbox>,
    timers: Arc<dyn TimerStore>,
    destinations: Arc<dyn Destinations>,
    queue: Arc<dyn LoadQueue>,
    clock: Arc<dyn Clock>,
    alerts: OpsAlerts,
    config: RelayConfig,
    timer_faults: Option<FakeServices>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").field("config", &self.config).finish_non_exhaustive()
    }
}

enum Sent {
    Delivered(Receipt),
    Failed(DeliveryError),
}

impl Relay {
    pub fn new(
        outbox: Arc<dyn Outbox>,
        timers: Arc<dyn TimerStore>,
        destinations: Arc<dyn Destinations>,
        queue: Arc<dyn LoadQueue>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Relay {
            outbox,
            timers,
            destinations,
            queue,
            clock,
            alerts: OpsAlerts::new(),
            config: RelayConfig::default(),
            timer_faults: None,
        }
    }

    pub fn with_config(mut self, config: RelayConfig) -> Self {
        self.config = config;
        self
    }

    /// Shares an alert record (the evals and tests read it).
    pub fn with_alerts(mut self, alerts: OpsAlerts) -> Self {
        self.alerts = alerts;
        self
    }

    /// Lets the fakes' fault rules fail `set_timer` / `cancel_timer` rows too (evals, tests).
    pub fn with_timer_faults(mut self, fakes: FakeServices) -> Self {
        self.timer_faults = Some(fakes);
        self
    }

    pub fn alerts(&self) -> &OpsAlerts {
        &self.alerts
    }

    pub fn config(&self) -> RelayConfig {
        self.config
    }

    /// One pass at `now`: claims up to `batch` due rows and handles each.
    pub async fn relay_once(&self, now: DateTime<Utc>) -> Result<RelayReport, StoreError> {
        let rows = self.outbox.pending(self.config.batch, now).await?;
        let mut report = RelayReport { claimed: rows.len(), ..RelayReport::default() };
        let per_row = futures::stream::iter(rows)
            .map(|row| async move {
                let span = info_span!("relay", load_id = %row.load_id, key = %row.id, destination = row.destination.as_str());
                // Time moves during a pass (sends take time): each row reads the clock again, so
                // the re-check right before its send sees whether its lease still holds.
                let row_now = self.clock.now().max(now);
                let mut one = RelayReport::default();
                self.handle(row, row_now, &mut one).instrument(span).await;
                one
            })
            .buffered(self.config.concurrency.max(1))
            .collect::<Vec<_>>()
            .await;
        for one in per_row {
            report.absorb(one);
        }
        Ok(report)
    }

    async fn handle(&self, row: ClaimedRow, now: DateTime<Utc>, report: &mut RelayReport) {
        // The re-check right before the send: a claim that expired (or was taken over) is left
        // to its new holder.
        if let Err(e) = self.outbox.recheck_claim(&row.id, row.claim_token, now).await {
            if e.is_stale() {
                report.stale += 1;
            } else {
                report.mark_failures += 1;
                warn!(error = %e, "claim re-check failed; the lease will expire");
            }
            return;
        }
        let command = ActionCommand {
            idempotency_key: row.id.clone(),
            load_id: row.load_id.clone(),
            load_version: row.load_version,
            action: row.action.clone(),
        };
        let sent = if row.destination == load_agent_domain::Destination::Timer {
            match self.timer_faults.as_ref().and_then(|f| f.injected_failure(row.destination, &command)) {
                Some(e) => Sent::Failed(e),
                None => self.apply_timer(&row, now).await,
            }
        } else {
            match self.destinations.send(row.destination, &command).await {
                Ok(r) => {
                    crate::crash::crash_point("relay.after_send");
                    Sent::Delivered(r)
                }
                Err(e) => Sent::Failed(e),
            }
        };
        metrics::counter!(
            "load_agent_relay_sends_total",
            "destination" => row.destination.as_str(),
            "result" => match &sent {
                Sent::Delivered(_) => "delivered",
                Sent::Failed(DeliveryError::Retryable(_)) => "retryable",
                Sent::Failed(DeliveryError::Permanent(_)) => "permanent",
            }
        )
        .increment(1);
        let failures = row.attempts + 1;
        match sent {
            Sent::Delivered(receipt) => {
                if row.destination == load_agent_domain::Destination::Timer {
                    report.timers_applied += 1;
                }
                match self.queue.publish(self.outcome(&row, OutcomeStatus::Delivered, None, now)).await {
                    Ok(()) => {
                        match self.outbox.mark_dispatched(&row.id, row.claim_token, &receipt.id, now).await {
                            Ok(()) => report.delivered += 1,
                            Err(e) if e.is_stale() => report.stale += 1,
                            Err(e) => {
                                report.mark_failures += 1;
                                let why =
                                    format!("delivered (receipt {}) but marking it failed: {e}", receipt.id);
                                self.after_send_failure(&row, failures, &why, now, report).await;
                            }
                        }
                    }
                    Err(e) => {
                        report.publish_failures += 1;
                        let why = format!(
                            "delivered (receipt {}) but the outcome was not published: {e}",
                            receipt.id
                        );
                        self.after_send_failure(&row, failures, &why, now, report).await;
                    }
                }
            }
            Sent::Failed(DeliveryError::Retryable(reason)) => {
                match self.config.retry.next_attempt(failures, row.first_attempt_at, now) {
                    NextAttempt::RetryAt(at) => self.mark_retry(&row, &reason, at, now, report).await,
                    NextAttempt::Dead => {
                        let why = format!("retries spent after {failures} attempts: {reason}");
                        self.bury(&row, &why, failures, now, report).await
                    }
                }
            }
            Sent::Failed(DeliveryError::Permanent(reason)) => {
                self.bury(&row, &reason, failures, now, report).await
            }
        }
    }

    /// A failure after the send counts as an attempt and backs off on the normal curve; when
    /// the attempts are spent the row is buried.
    async fn after_send_failure(
        &self,
        row: &ClaimedRow,
        failures: u32,
        why: &str,
        now: DateTime<Utc>,
        report: &mut RelayReport,
    ) {
        match self.config.retry.next_attempt(failures, row.first_attempt_at, now) {
            NextAttempt::RetryAt(at) => self.mark_retry(row, why, at, now, report).await,
            NextAttempt::Dead => self.mark_dead(row, why, now, report, true).await,
        }
    }

    async fn mark_retry(
        &self,
        row: &ClaimedRow,
        why: &str,
        at: DateTime<Utc>,
        now: DateTime<Utc>,
        report: &mut RelayReport,
    ) {
        debug!(retry_at = %at, reason = %load_agent_domain::pii::scrub(why), "attempt failed: retry scheduled");
        match self.outbox.mark_failed(&row.id, row.claim_token, why, NextAttempt::RetryAt(at), now).await {
            Ok(()) => report.retried += 1,
            Err(e) if e.is_stale() => report.stale += 1,
            Err(e) => {
                report.mark_failures += 1;
                warn!(error = %e, "marking a failed attempt failed; the lease will expire");
            }
        }
    }

    /// The row cannot be delivered: publish its failed outcome, then bury it. When the
    /// publish fails and attempts remain, that failure is one more attempt.
    async fn bury(
        &self,
        row: &ClaimedRow,
        reason: &str,
        failures: u32,
        now: DateTime<Utc>,
        report: &mut RelayReport,
    ) {
        let outcome = self.outcome(row, OutcomeStatus::FailedPermanent, Some(reason), now);
        match self.queue.publish(outcome).await {
            Ok(()) => self.mark_dead(row, reason, now, report, false).await,
            Err(e) => {
                report.publish_failures += 1;
                let why = format!("{reason}; the failed outcome was not published: {e}");
                match self.config.retry.next_attempt(failures, row.first_attempt_at, now) {
                    NextAttempt::RetryAt(at) => self.mark_retry(row, &why, at, now, report).await,
                    // Spent: buried all the same, the outcome was published best effort.
                    NextAttempt::Dead => self.mark_dead(row, &why, now, report, true).await,
                }
            }
        }
    }

    async fn mark_dead(
        &self,
        row: &ClaimedRow,
        why: &str,
        now: DateTime<Utc>,
        report: &mut RelayReport,
        publish_again: bool,
    ) {
        if publish_again {
            // Best effort: the queue may be back.
            if self
                .queue
                .publish(self.outcome(row, OutcomeStatus::FailedPermanent, Some(why), now))
                .await
                .is_err()
            {
                report.publish_failures += 1;
            }
        }
        match self.outbox.mark_failed(&row.id, row.claim_token, why, NextAttempt::Dead, now).await {
            Ok(()) => {
                report.dead += 1;
                metrics::counter!("load_agent_dead_rows_total", "destination" => row.destination.as_str())
                    .increment(1);
                warn!(reason = %load_agent_domain::pii::scrub(why), "outbox row is dead");
                if let Some(class) = class_label(row.action.body.class()) {
                    report.ops_alerts += 1;
                    self.alerts.raise(OpsAlert {
                        load_id: row.load_id.clone(),
                        idempotency_key: row.id.clone(),
                        action_kind: row.action.kind(),
                        class,
                        reason: why.to_string(),
                        at: now,
                    });
                }
            }
            Err(e) if e.is_stale() => report.stale += 1,
            Err(e) => {
                report.mark_failures += 1;
                error!(error = %e, "burying an outbox row failed; the lease will expire");
            }
        }
    }

    /// `set_timer` / `cancel_timer` rows go to the TimerStore, not to a service.
    async fn apply_timer(&self, row: &ClaimedRow, now: DateTime<Utc>) -> Sent {
        let result = match &row.action.body {
            ActionBody::SetTimer { timer_id, ask_id, attempt, fire_at } => {
                let timer = TimerRow {
                    timer_id: timer_id.clone(),
                    load_id: row.load_id.clone(),
                    ask_id: ask_id.clone(),
                    attempt: *attempt,
                    fire_at: *fire_at,
                };
                self.timers.schedule(&timer).await.map(|()| format!("scheduled {timer_id}"))
            }
            ActionBody::CancelTimer { timer_id } => {
                self.timers.cancel(timer_id, now).await.map(|()| format!("cancelled {timer_id}"))
            }
            other => {
                return Sent::Failed(DeliveryError::Permanent(format!(
                    "{} is not a timer action",
                    other.kind().as_str()
                )));
            }
        };
        match result {
            Ok(id) => Sent::Delivered(Receipt { id }),
            Err(e) => Sent::Failed(DeliveryError::Retryable(format!("timer store: {e}"))),
        }
    }

    fn outcome(
        &self,
        row: &ClaimedRow,
        status: OutcomeStatus,
        reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> InboundEvent {
        InboundEvent {
            event_id: action_outcome_event_id(&row.id, status),
            load_id: row.load_id.clone(),
            occurred_at: now,
            kind: EventKind::ActionOutcome {
                idempotency_key: row.id.clone(),
                status,
                action_kind: row.action.kind(),
                contact_id: row.action.body.contact_id().map(str::to_string),
                hero_channel: row.action.body.class() == load_agent_domain::ActionClass::HeroChannel,
                reason: reason.map(str::to_string),
            },
        }
    }

    /// Relays until shutdown, pausing `idle_poll` after a pass that found nothing.
    pub async fn run(self: Arc<Self>, mut shutdown: Shutdown) {
        loop {
            if shutdown.is_shutdown() {
                return;
            }
            let now = self.clock.now();
            let busy = match self.relay_once(now).await {
                Ok(report) => report.did_work(),
                Err(e) => {
                    error!(error = %e, "relay pass failed");
                    false
                }
            };
            if !busy {
                tokio::select! {
                    _ = shutdown.recv() => return,
                    _ = tokio::time::sleep(self.config.idle_poll) => {}
                }
            }
        }
    }
}
