//! The outbox relay, ADR 0003's dispatcher. One pass ([`Relay::relay_once`]) claims due rows
//! and handles the claimed batch in three steps, each over the whole batch:
//!
//! 1. **send** every row (timer rows are applied to the [`TimerStore`]), up to
//!    `relay.concurrency` at once, without waiting for one acknowledgement before the next send:
//!    the producer keeps many in flight;
//! 2. **settle**: publish the `action_outcome` of every delivered row to the load queue, together
//!    (concurrently, the same width); failed rows take their failure path (below) here too;
//! 3. **mark** every delivered row whose outcome was published in ONE statement,
//!    [`Outbox::mark_dispatched_batch`], which checks each row's claim token: a row whose claim
//!    was lost is reported stale, the others are marked; then every failed row (a retry, or a
//!    buried row) in one more, [`Outbox::mark_failed_batch`], under the same check. A service
//!    that is down fails the whole batch, and its rows cost one round trip, not one each.
//!
//! [`Relay::run`] is the loop.
//!
//! Order per load and destination: a claimed batch never holds two rows of one load and
//! destination. The claim (`Outbox::pending`, both backends) hands a row out only when no
//! earlier pending row of its load and destination exists, and a claimed but unmarked row is
//! still pending; so the next row of that load and destination cannot be claimed before this
//! batch's mark (or the lease's end), and sending a whole batch at once keeps order.
//!
//! What protects a send, now that there is no per-row re-check round trip:
//! - the claim's lease (90 s): no other relay can take a row before its `lease_until`. Right
//!   before each send the relay compares the claim's `lease_until` with its clock; a lease that
//!   already ran out (a slow batch, a paused process) is left alone and counted stale, without
//!   a send. That is the test the old `recheck_claim` made in the database, since the store
//!   hands a row over only once its lease has passed, by the clock of the claiming relay;
//! - the batch mark checks each token: a row taken over during its send (the send outlasted the
//!   lease) is reported stale, exactly as the per-row mark did, and the new holder's re-send
//!   is deduplicated by the service on the idempotency key (ADR 0003, "Late FAILED next to
//!   DELIVERED"). Sends of one batch run side by side, so a batch takes about one send's time,
//!   well inside the lease.
//!
//! Failures (the rules of ADR 0003, row by row, unchanged; marked together in step 3):
//! - retryable: a retry time on a capped exponential curve;
//! - permanent, or retries spent: the row is dead, a failed `action_outcome` goes to the queue
//!   (the agent turns a failed external action into an urgent Hero task) and Hero-channel and
//!   internal actions raise an ops alert instead;
//! - a failure after the send (publishing the outcome, or the batch mark failing with a store
//!   error) counts as an attempt and backs off like any other; the service dedupes the re-send
//!   on the idempotency key.
//!
//! The retry budget (150 s) is measured from the row's `first_attempt_at`. The first retry is
//! always allowed; a later retry that would land after the budget kills the row.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use futures::StreamExt;
use load_agent_domain::{
    Action, ActionBody, EventKind, InboundEvent, OutcomeStatus, action_outcome_event_id,
};
use load_agent_store::{
    ClaimedRow, DispatchedMark, FailedMark, NextAttempt, Outbox, StoreError, TimerRow, TimerStore,
};
use serde::Serialize;
use tracing::{Instrument, debug, error, info_span, warn};

use crate::alerts::{OpsAlert, OpsAlerts, class_label};
use crate::clock::Clock;
use crate::delivery::{DeliveryCommand, DeliveryError, Destinations, FakeServices, Receipt};
use crate::metric_names as names;
use crate::queue::EventPublisher;
use crate::shutdown::Shutdown;
use crate::stages::{self, Stage};

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
    /// Rows of one claimed batch in flight at once, in its send step and in its outcome step.
    /// A batch never holds two rows of one load and destination (the claim hands out a row only
    /// when no earlier row of its load and destination is pending), so per-load order holds at
    /// any value. 1 (the default) keeps evals and replays in one deterministic order; the
    /// service runs `relay.concurrency`.
    pub concurrency: usize,
    /// Passes running at once in [`Relay::run`] (each claims, sends, publishes and marks its own
    /// batch). The claim hands out a row only when no earlier row of its load and destination is
    /// pending, leased ones included, so two passes never hold rows that could reorder: several
    /// loops in one process are as safe as several relay processes. While one pass waits on the
    /// destinations' acknowledgements, the next claims and sends.
    pub loops: usize,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            batch: 100,
            idle_poll: Duration::from_millis(500),
            retry: RetryPolicy::default(),
            concurrency: 1,
            loops: 1,
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
    /// Rows whose claim no longer held: its lease ran out before the send (nothing sent), or
    /// the batch mark found it taken over or already marked. Left alone.
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
    queue: Arc<dyn EventPublisher>,
    clock: Arc<dyn Clock>,
    alerts: OpsAlerts,
    config: RelayConfig,
    timer_faults: Option<FakeServices>,
    /// Ends an idle wait early: a worker in the same process committed outbox rows.
    wakeup: Option<Arc<tokio::sync::Notify>>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").field("config", &self.config).finish_non_exhaustive()
    }
}

enum Sent {
    Delivered(Receipt),
    Failed(DeliveryError),
    /// The claim's lease ran out before the send: nothing was sent.
    LeaseLost,
}

/// A row after step 1: what its send did, at the time it was sent.
struct Handled {
    row: ClaimedRow,
    now: DateTime<Utc>,
    sent: Sent,
}

/// A delivered row whose outcome was published: step 3 marks it dispatched.
struct ToMark {
    row: ClaimedRow,
    now: DateTime<Utc>,
    receipt: Receipt,
}

/// A row whose attempt failed, after its failure path ran (its failed outcome published when it
/// is to be buried): step 3 marks it for a retry or dead.
struct ToFail {
    row: ClaimedRow,
    why: String,
    next: NextAttempt,
    now: DateTime<Utc>,
}

impl ToFail {
    fn retry(row: ClaimedRow, why: String, at: DateTime<Utc>, now: DateTime<Utc>) -> ToFail {
        ToFail { row, why, next: NextAttempt::RetryAt(at), now }
    }
}

/// What step 2 made of a row.
enum Settled {
    Delivered(ToMark),
    Failed(ToFail),
    /// Nothing to mark: the lease ran out before the send.
    Left,
}

/// Delivered rows whose batch mark failed with a store error (nothing of it was marked).
struct Unmarked {
    rows: Vec<ToMark>,
    error: StoreError,
}

fn span(row: &ClaimedRow) -> tracing::Span {
    info_span!("relay", load_id = %row.load_id, key = %row.id, destination = row.destination.as_str())
}

impl Relay {
    pub fn new(
        outbox: Arc<dyn Outbox>,
        timers: Arc<dyn TimerStore>,
        destinations: Arc<dyn Destinations>,
        queue: Arc<dyn EventPublisher>,
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
            wakeup: None,
        }
    }

    pub fn with_config(mut self, config: RelayConfig) -> Self {
        self.config = config;
        self
    }

    /// Wakes the idle relay when `signal` is notified (`Worker::commit_signal` of a worker in
    /// the same process), so a commit's rows go out without waiting for the next poll; the poll
    /// stays for rows committed elsewhere.
    pub fn with_wakeup(mut self, signal: Arc<tokio::sync::Notify>) -> Self {
        self.wakeup = Some(signal);
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

    /// One pass at `now`: claims up to `batch` due rows, sends them all, publishes their
    /// outcomes, then marks the delivered ones in one statement (see the module doc).
    pub async fn relay_once(&self, now: DateTime<Utc>) -> Result<RelayReport, StoreError> {
        let started = Instant::now();
        let rows = self.outbox.pending(self.config.batch, now).await?;
        let mut report = RelayReport { claimed: rows.len(), ..RelayReport::default() };
        if rows.is_empty() {
            return Ok(report);
        }
        stages::observe(Stage::Claim, started.elapsed());
        let width = self.config.concurrency.max(1);
        // 1. Send. `buffered` keeps the batch's order in what it returns (and, at width 1, in the
        // sends themselves: evals and replays stay deterministic).
        let sent = futures::stream::iter(rows)
            .map(|row| async move {
                // Time moves during a pass (sends take time): each row reads the clock again, so
                // the lease check right before its send sees whether its lease still holds.
                let row_now = self.clock.now().max(now);
                let started = Instant::now();
                let sent = self.send(&row, row_now).instrument(span(&row)).await;
                stages::observe(Stage::Send, started.elapsed());
                Handled { row, now: row_now, sent }
            })
            .buffered(width)
            .collect::<Vec<_>>()
            .await;
        crate::crash::crash_point("relay.after_send_batch");
        // 2. Settle: publish the outcomes (and take the failure paths) of the batch together.
        let started = Instant::now();
        let settled = futures::stream::iter(sent)
            .map(|handled| async move {
                let span = span(&handled.row);
                let mut one = RelayReport::default();
                let settled = self.settle(handled, &mut one).instrument(span).await;
                (one, settled)
            })
            .buffered(width)
            .collect::<Vec<_>>()
            .await;
        stages::observe(Stage::Outcome, started.elapsed());
        let mut to_mark = Vec::with_capacity(settled.len());
        for (one, settled) in settled {
            report.absorb(one);
            to_mark.push(settled);
        }
        // 3. Mark the delivered rows in one statement, the failed ones in another.
        let started = Instant::now();
        self.mark(to_mark, now, &mut report).await;
        stages::observe(Stage::Mark, started.elapsed());
        Ok(report)
    }

    /// Step 1 for one row: the lease check, then the send (or the TimerStore).
    async fn send(&self, row: &ClaimedRow, now: DateTime<Utc>) -> Sent {
        // The claim's lease ran out before the send (a slow batch, a paused process): another
        // relay may hold the row now. Left alone, no send.
        if now >= row.lease_until {
            return Sent::LeaseLost;
        }
        let command = DeliveryCommand::from(row);
        let sent = if row.destination == load_agent_domain::Destination::Timer {
            match self.timer_faults.as_ref().and_then(|f| f.injected_failure(row.destination, &command)) {
                Some(e) => Sent::Failed(e),
                None => self.apply_timer(row, now).await,
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
        let result = match &sent {
            Sent::Delivered(_) => "delivered",
            Sent::Failed(DeliveryError::Retryable(_)) => "retryable",
            Sent::Failed(DeliveryError::Permanent(_)) => "permanent",
            Sent::LeaseLost => return sent,
        };
        metrics::counter!(
            names::RELAY_SENDS_TOTAL,
            "destination" => row.destination.as_str(),
            "result" => result
        )
        .increment(1);
        sent
    }

    /// Step 2 for one row: a delivered row publishes its delivered outcome and is returned to be
    /// marked dispatched; a failed row takes its failure path (a retry, or burying it with a
    /// failed outcome) and is returned to be marked failed.
    async fn settle(&self, handled: Handled, report: &mut RelayReport) -> Settled {
        let Handled { row, now, sent } = handled;
        let failures = row.attempts + 1;
        match sent {
            Sent::LeaseLost => {
                report.stale += 1;
                debug!("the claim's lease ran out before the send: left to its next holder");
                Settled::Left
            }
            Sent::Delivered(receipt) => {
                // A timer row is applied here, by the relay itself; anything else is as done as
                // its destination can say (`published` on Kafka, `delivered` in-process).
                let status = if row.destination == load_agent_domain::Destination::Timer {
                    report.timers_applied += 1;
                    OutcomeStatus::Delivered
                } else {
                    self.destinations.sent_status()
                };
                match self.queue.publish(self.outcome(&row, status, None, now)).await {
                    Ok(()) => Settled::Delivered(ToMark { row, now, receipt }),
                    Err(e) => {
                        report.publish_failures += 1;
                        let why = format!(
                            "delivered (receipt {}) but the outcome was not published: {e}",
                            receipt.id
                        );
                        Settled::Failed(self.after_send_failure(row, failures, why, now, report).await)
                    }
                }
            }
            Sent::Failed(DeliveryError::Retryable(reason)) => {
                Settled::Failed(match self.config.retry.next_attempt(failures, row.first_attempt_at, now) {
                    NextAttempt::RetryAt(at) => ToFail::retry(row, reason, at, now),
                    NextAttempt::Dead => {
                        let why = format!("retries spent after {failures} attempts: {reason}");
                        self.bury(row, why, failures, now, report).await
                    }
                })
            }
            Sent::Failed(DeliveryError::Permanent(reason)) => {
                Settled::Failed(self.bury(row, reason, failures, now, report).await)
            }
        }
    }

    /// Step 3: one batch mark of the delivered rows, then one of the failed ones. A row whose
    /// claim was lost is stale. When the delivered rows' mark fails (a store error), each takes
    /// the after-send failure path and joins the failed rows' mark.
    async fn mark(&self, settled: Vec<Settled>, now: DateTime<Utc>, report: &mut RelayReport) {
        let mut delivered = Vec::new();
        let mut failed = Vec::new();
        for one in settled {
            match one {
                Settled::Delivered(m) => delivered.push(m),
                Settled::Failed(f) => failed.push(f),
                Settled::Left => {}
            }
        }
        if let Some(unmarked) = self.mark_delivered(delivered, now, report).await {
            let e = &unmarked.error;
            let retried = futures::stream::iter(unmarked.rows)
                .map(|m| async move {
                    let mut one = RelayReport { mark_failures: 1, ..RelayReport::default() };
                    let why = format!("delivered (receipt {}) but marking it failed: {e}", m.receipt.id);
                    let span = span(&m.row);
                    let failures = m.row.attempts + 1;
                    let to_fail =
                        self.after_send_failure(m.row, failures, why, m.now, &mut one).instrument(span).await;
                    (one, to_fail)
                })
                .buffered(self.config.concurrency.max(1))
                .collect::<Vec<_>>()
                .await;
            for (one, to_fail) in retried {
                report.absorb(one);
                failed.push(to_fail);
            }
        }
        self.mark_failed_rows(failed, now, report).await;
    }

    /// Marks the delivered rows in one statement. `Some` when the mark itself failed (a store
    /// error): nothing was marked, and the rows are handed back.
    async fn mark_delivered(
        &self,
        rows: Vec<ToMark>,
        now: DateTime<Utc>,
        report: &mut RelayReport,
    ) -> Option<Unmarked> {
        if rows.is_empty() {
            return None;
        }
        let marks: Vec<DispatchedMark> = rows
            .iter()
            .map(|m| DispatchedMark {
                id: m.row.id.clone(),
                token: m.row.claim_token,
                receipt: m.receipt.id.clone(),
            })
            .collect();
        match self.outbox.mark_dispatched_batch(&marks, self.clock.now().max(now)).await {
            Ok(results) => {
                for (m, result) in rows.iter().zip(results) {
                    match result {
                        Ok(()) => report.delivered += 1,
                        Err(_) => {
                            report.stale += 1;
                            debug!(key = %m.row.id, load_id = %m.row.load_id, "delivered, but the claim was lost: stale");
                        }
                    }
                }
                None
            }
            Err(error) => {
                warn!(error = %error, rows = rows.len(), "marking a delivered batch failed");
                Some(Unmarked { rows, error })
            }
        }
    }

    /// Marks the failed rows in one statement: retries scheduled, dead rows buried (with their
    /// metric and, for Hero-channel and internal actions, an ops alert). When the mark itself
    /// fails, the rows' leases will expire and a later claim tries them again.
    async fn mark_failed_rows(&self, rows: Vec<ToFail>, now: DateTime<Utc>, report: &mut RelayReport) {
        if rows.is_empty() {
            return;
        }
        let marks: Vec<FailedMark> = rows
            .iter()
            .map(|f| FailedMark {
                id: f.row.id.clone(),
                token: f.row.claim_token,
                failure: f.why.clone(),
                next: f.next,
            })
            .collect();
        let results = match self.outbox.mark_failed_batch(&marks, self.clock.now().max(now)).await {
            Ok(results) => results,
            Err(e) => {
                report.mark_failures += rows.len();
                error!(error = %e, rows = rows.len(), "marking failed attempts failed; their leases will expire");
                return;
            }
        };
        for (f, result) in rows.into_iter().zip(results) {
            let _span = span(&f.row).entered();
            match (result, f.next) {
                (Err(_), _) => report.stale += 1,
                (Ok(()), NextAttempt::RetryAt(at)) => {
                    report.retried += 1;
                    debug!(retry_at = %at, reason = %load_agent_domain::pii::scrub(&f.why), "attempt failed: retry scheduled");
                }
                (Ok(()), NextAttempt::Dead) => {
                    report.dead += 1;
                    metrics::counter!(names::DEAD_ROWS_TOTAL, "destination" => f.row.destination.as_str())
                        .increment(1);
                    warn!(reason = %load_agent_domain::pii::scrub(&f.why), "outbox row is dead");
                    if let Some(class) = class_label(f.row.action.body.class()) {
                        report.ops_alerts += 1;
                        self.alerts.raise(OpsAlert {
                            load_id: f.row.load_id.clone(),
                            idempotency_key: f.row.id.clone(),
                            action_kind: f.row.action.kind(),
                            class,
                            reason: f.why,
                            at: f.now,
                        });
                    }
                }
            }
        }
    }

    /// A failure after the send counts as an attempt and backs off on the normal curve; when
    /// the attempts are spent the row is buried (its failed outcome published again, best
    /// effort: the queue may be back).
    async fn after_send_failure(
        &self,
        row: ClaimedRow,
        failures: u32,
        why: String,
        now: DateTime<Utc>,
        report: &mut RelayReport,
    ) -> ToFail {
        if let NextAttempt::RetryAt(at) = self.config.retry.next_attempt(failures, row.first_attempt_at, now)
        {
            return ToFail::retry(row, why, at, now);
        }
        let outcome = self.outcome(&row, OutcomeStatus::FailedPermanent, Some(&why), now);
        if self.queue.publish(outcome).await.is_err() {
            report.publish_failures += 1;
        }
        ToFail { row, why, next: NextAttempt::Dead, now }
    }

    /// The row cannot be delivered: publish its failed outcome, then it is to be buried. When
    /// the publish fails and attempts remain, that failure is one more attempt.
    async fn bury(
        &self,
        row: ClaimedRow,
        reason: String,
        failures: u32,
        now: DateTime<Utc>,
        report: &mut RelayReport,
    ) -> ToFail {
        let outcome = self.outcome(&row, OutcomeStatus::FailedPermanent, Some(&reason), now);
        match self.queue.publish(outcome).await {
            Ok(()) => ToFail { row, why: reason, next: NextAttempt::Dead, now },
            Err(e) => {
                report.publish_failures += 1;
                let why = format!("{reason}; the failed outcome was not published: {e}");
                // One more attempt, or spent: buried all the same, the outcome published again.
                self.after_send_failure(row, failures, why, now, report).await
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
            ActionBody::CancelTimer { timer_id } => self
                .timers
                .cancel(&row.load_id, timer_id, now)
                .await
                .map(|()| format!("cancelled {timer_id}")),
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
        outcome_event(&row.id, &row.load_id, &row.action, status, reason, now)
    }

    /// Relays until shutdown with `loops` loops of passes, each pausing `idle_poll` after a pass
    /// that found nothing.
    pub async fn run(self: Arc<Self>, shutdown: Shutdown) {
        let loops = self.config.loops.max(1);
        if loops == 1 {
            return self.run_loop(shutdown).await;
        }
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..loops {
            tasks.spawn(self.clone().run_loop(shutdown.clone()));
        }
        while let Some(res) = tasks.join_next().await {
            if let Err(e) = res {
                error!(error = %e, "a relay loop ended abnormally");
            }
        }
    }

    /// One loop of passes until shutdown.
    async fn run_loop(self: Arc<Self>, mut shutdown: Shutdown) {
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
                let woken = async {
                    match &self.wakeup {
                        Some(signal) => signal.notified().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = shutdown.recv() => return,
                    _ = tokio::time::sleep(self.config.idle_poll) => {}
                    _ = woken => {}
                }
            }
        }
    }
}

/// The `action_outcome` event the relay publishes for the outbox row `idempotency_key` of
/// `load_id` (its event id from [`action_outcome_event_id`], one per status).
pub fn outcome_event(
    idempotency_key: &str,
    load_id: &str,
    action: &Action,
    status: OutcomeStatus,
    reason: Option<&str>,
    at: DateTime<Utc>,
) -> InboundEvent {
    InboundEvent {
        event_id: action_outcome_event_id(idempotency_key, status),
        load_id: load_id.to_owned(),
        occurred_at: at,
        kind: EventKind::ActionOutcome {
            idempotency_key: idempotency_key.to_owned(),
            status,
            action_kind: action.kind(),
            contact_id: action.body.contact_id().map(str::to_string),
            hero_channel: action.body.class() == load_agent_domain::ActionClass::HeroChannel,
            reason: reason.map(str::to_string),
        },
    }
}
