//! The load worker (ADR 0001, ADR 0003): one run per event. Read the snapshot and its version,
//! validate the event, decide (`process_event`), and append the event, the decision and the
//! outbox rows of its effective actions in one transaction at the expected version.
//!
//! - `Conflict`: another run appended first. Re-read, re-project, re-decide, at most
//!   [`WorkerConfig::max_conflict_retries`] times; then the event goes back to the queue.
//! - `DuplicateEntry`: the event is already in the log: a redelivery of the same event is done;
//!   another event under a used id is invalid (`EventIdReused`, the consumer dead-letters it).
//! - `DuplicateActionKey`: the decision reused a committed key (a decision bug): re-decide into
//!   an urgent Hero task keyed by the event, so the inbound event is never lost.
//! - One run deadline (120 s) spans every re-decide; past it the run commits an urgent Hero task.
//!
//! [`Worker::process_one`] is the unit of work, callable from tests and evals without a loop;
//! [`Worker::run`] is the loop over a [`LoadQueue`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use load_agent_agent::{
    Agent, Deps, InvalidEvent, Processed, check_redelivery, hero_fallback_record, prepare_event_at,
    process_event,
};
use load_agent_domain::{DecisionRecord, InboundEvent, LoadState, LoadSummary, LogEntry};
use load_agent_llm::{LlmClient, LlmClientExt, RunDeadline};
use load_agent_store::{AppendError, EventStore, LoadLock, NewOutboxRow};
use tracing::{Instrument, error, info, info_span, warn};

use crate::clock::Clock;
use crate::metric_names as names;
use crate::queue::{Delivery, LoadQueue};
use crate::shutdown::Shutdown;
use crate::snapshot::SnapshotSource;
use crate::stages::{self, Stage};

/// Bounds of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerConfig {
    /// Re-decides after a version conflict before the event is given back to the queue.
    pub max_conflict_retries: u32,
    /// One deadline for the whole run, re-decides included (ADR 0001: 120 s).
    pub run_deadline: Duration,
    /// Pause before a given-back event is redelivered, times its delivery count (capped at 30 s).
    pub redelivery_backoff: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            max_conflict_retries: 5,
            run_deadline: Duration::from_secs(120),
            redelivery_backoff: Duration::from_millis(200),
        }
    }
}

/// What one run did.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// The event, its decision and the outbox rows were committed; the log is at `version`.
    Committed { decision: DecisionRecord, version: u64, conflicts: u32 },
    /// The event is already in the log: no new decision (behavior.md §9).
    AlreadyProcessed,
    /// The event is not valid for its load; it is not decided on (the consumer dead-letters it).
    Invalid(InvalidEvent),
    /// The run gave up for now (conflicts exhausted, the store failing): redeliver the event.
    GiveBack { reason: String },
}

impl RunOutcome {
    pub fn label(&self) -> &'static str {
        match self {
            RunOutcome::Committed { .. } => "committed",
            RunOutcome::AlreadyProcessed => "already_processed",
            RunOutcome::Invalid(_) => "invalid",
            RunOutcome::GiveBack { .. } => "give_back",
        }
    }
}

/// Where the worker loop sends events that are not valid for their load.
#[async_trait]
pub trait DeadLetters: Send + Sync {
    async fn dead_letter(&self, event: &InboundEvent, reason: &InvalidEvent);
}

/// Logs invalid events at `error` (the in-process default; Kafka sends them to the DLQ topic).
#[derive(Debug, Default, Clone, Copy)]
pub struct LogDeadLetters;

#[async_trait]
impl DeadLetters for LogDeadLetters {
    async fn dead_letter(&self, event: &InboundEvent, reason: &InvalidEvent) {
        metrics::counter!(names::INVALID_EVENTS_TOTAL).increment(1);
        error!(load_id = %event.load_id, event_id = %event.event_id, %reason, "invalid event dead-lettered");
    }
}

/// The load worker.
pub struct Worker {
    events: Arc<dyn EventStore>,
    snapshots: Arc<dyn SnapshotSource>,
    lock: Option<Arc<dyn LoadLock>>,
    agent: Arc<Agent>,
    llm: Arc<dyn LlmClient>,
    clock: Arc<dyn Clock>,
    config: WorkerConfig,
    /// Notified after each commit that wrote outbox rows: a relay in the same process waits on
    /// it instead of sleeping out its idle poll ([`crate::Relay::with_wakeup`]).
    committed_rows: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Worker {
    pub fn new(
        events: Arc<dyn EventStore>,
        snapshots: Arc<dyn SnapshotSource>,
        agent: Arc<Agent>,
        llm: Arc<dyn LlmClient>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Worker {
            events,
            snapshots,
            lock: None,
            agent,
            llm,
            clock,
            config: WorkerConfig::default(),
            committed_rows: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// Notified after each commit that wrote outbox rows (for a relay in the same process).
    pub fn commit_signal(&self) -> Arc<tokio::sync::Notify> {
        self.committed_rows.clone()
    }

    pub fn with_config(mut self, config: WorkerConfig) -> Self {
        self.config = config;
        self
    }

    /// Takes the optional per-load lease before deciding (ADR 0003: it saves the LLM calls a
    /// conflict would waste; the version check stays the correctness mechanism). A run that
    /// cannot take it gives the event back.
    pub fn with_load_lock(mut self, lock: Arc<dyn LoadLock>) -> Self {
        self.lock = Some(lock);
        self
    }

    /// This process was just given loads that another may have written (a Kafka rebalance
    /// assigned it partitions): snapshots kept so far are verified against the log before they
    /// are trusted again ([`SnapshotSource::distrust`]).
    pub fn distrust_snapshots(&self) {
        self.snapshots.distrust();
    }

    pub fn config(&self) -> WorkerConfig {
        self.config
    }

    /// One run for one event: the unit of work.
    pub async fn process_one(&self, event: InboundEvent) -> RunOutcome {
        let span =
            info_span!("run", load_id = %event.load_id, event_id = %event.event_id, kind = event.kind_str());
        let outcome = self.run_once(event).instrument(span.clone()).await;
        if let RunOutcome::Committed { decision, .. } = &outcome {
            record_decision_metrics(decision);
        }
        span.in_scope(|| match &outcome {
            RunOutcome::Committed { decision, version, conflicts } => info!(
                path = decision.path.as_str(),
                actions = decision.effective_actions().count(),
                version,
                conflicts,
                "decision committed"
            ),
            RunOutcome::AlreadyProcessed => info!("already processed"),
            RunOutcome::Invalid(reason) => warn!(%reason, "invalid event"),
            RunOutcome::GiveBack { reason } => warn!(%reason, "run gave the event back"),
        });
        metrics::counter!(names::RUNS_TOTAL, "outcome" => outcome.label()).increment(1);
        outcome
    }

    async fn run_once(&self, event: InboundEvent) -> RunOutcome {
        let deadline = RunDeadline::after(self.config.run_deadline);
        let load_id = event.load_id.clone();
        let _lease = match &self.lock {
            None => None,
            Some(lock) => match lock.try_lock(&load_id).await {
                Ok(Some(lease)) => Some(lease),
                Ok(None) => {
                    return RunOutcome::GiveBack { reason: "another worker holds the load's lease".into() };
                }
                Err(e) => return RunOutcome::GiveBack { reason: format!("load lease: {e}") },
            },
        };
        let mut conflicts = 0u32;
        let mut fallback: Option<String> = None;
        loop {
            let started = Instant::now();
            let state = match self.snapshots.snapshot(&load_id).await {
                Ok(s) => s,
                Err(e) => return RunOutcome::GiveBack { reason: format!("reading the log: {e}") },
            };
            stages::observe(Stage::Snapshot, started.elapsed());
            let started = Instant::now();
            if state.event_ids.contains(event.event_id.as_str()) {
                return self.already_logged(&event, None).await;
            }
            let prepared = match prepare_event_at(&state, event.clone(), &self.agent, self.clock.now()) {
                Ok(e) => e,
                Err(reason) => return RunOutcome::Invalid(reason),
            };
            let decision = match &fallback {
                Some(reason) => self.fallback(&state, &prepared, reason),
                None => match self.decide(&state, &prepared, deadline).await {
                    Some(d) => d,
                    None => return self.already_logged(&event, None).await,
                },
            };
            let new_version = state.version + 2;
            let rows = outbox_rows(&decision, new_version);
            let entries = [LogEntry::Event(prepared), LogEntry::Decision(decision.clone())];
            let expected = state.version;
            let mut after = state;
            after.apply_all(&entries);
            // The console's row for the load, written in the append's transaction.
            let summary = LoadSummary::of(&after, decision.decided_at);
            stages::observe(Stage::Decide, started.elapsed());
            let started = Instant::now();
            let appended =
                self.events.append_summarized(&load_id, &entries, expected, &rows, Some(&summary)).await;
            stages::observe(Stage::Append, started.elapsed());
            match appended {
                Ok(version) => {
                    if !rows.is_empty() {
                        self.committed_rows.notify_one();
                    }
                    self.snapshots.committed(&after, version).await;
                    return RunOutcome::Committed { decision, version, conflicts };
                }
                Err(AppendError::Conflict { expected, actual }) => {
                    conflicts += 1;
                    metrics::counter!(names::CONFLICTS_TOTAL).increment(1);
                    self.snapshots.invalidate(&load_id).await;
                    if conflicts > self.config.max_conflict_retries {
                        return RunOutcome::GiveBack {
                            reason: format!(
                                "{conflicts} version conflicts (last: expected {expected}, log at {actual})"
                            ),
                        };
                    }
                    info!(expected, actual, conflicts, "version conflict: re-deciding");
                }
                Err(AppendError::DuplicateEntry { entry_id }) => {
                    return self.already_logged(&event, Some(&entry_id)).await;
                }
                Err(AppendError::DuplicateActionKey { key }) => {
                    if fallback.is_some() {
                        return RunOutcome::GiveBack {
                            reason: format!("the Hero fallback's key {key} is already in the outbox"),
                        };
                    }
                    error!(%key, "decision reused a committed action key: re-deciding into a Hero task");
                    metrics::counter!(names::DUPLICATE_ACTION_KEYS_TOTAL).increment(1);
                    fallback = Some(format!("the decision reused the committed action key {key}"));
                }
                Err(AppendError::Store(e)) => return RunOutcome::GiveBack { reason: format!("append: {e}") },
            }
        }
    }

    /// The log already holds an entry under the event's id (or, `duplicate`, under the id of its
    /// decision): a redelivery of the same event is `AlreadyProcessed`; a different event under
    /// a used id is `Invalid(EventIdReused)`. Only this branch reads the logged entry, so the
    /// hot path pays nothing.
    async fn already_logged(&self, event: &InboundEvent, duplicate: Option<&str>) -> RunOutcome {
        let reused = |difference: String| {
            RunOutcome::Invalid(InvalidEvent::EventIdReused {
                event_id: event.event_id.clone(),
                load_id: event.load_id.clone(),
                difference,
            })
        };
        match self.events.read_entry(&event.load_id, &event.event_id).await {
            Ok(Some(LogEntry::Event(logged))) => match check_redelivery(&logged, event) {
                Ok(()) => RunOutcome::AlreadyProcessed,
                Err(reason) => RunOutcome::Invalid(reason),
            },
            Ok(Some(LogEntry::Decision(_))) => reused("it is the id of a decision entry".into()),
            Ok(None) => match duplicate {
                Some(id) if id != event.event_id => {
                    reused(format!("the id {id} of its decision is the id of an event in the log"))
                }
                _ => RunOutcome::AlreadyProcessed,
            },
            Err(e) => RunOutcome::GiveBack { reason: format!("reading the logged event: {e}") },
        }
    }

    /// Decides within the run deadline; `None` when the event turns out to be processed.
    async fn decide(
        &self,
        state: &LoadState,
        event: &InboundEvent,
        deadline: RunDeadline,
    ) -> Option<DecisionRecord> {
        if deadline.passed() {
            return Some(self.fallback(state, event, "the run deadline (120 s) passed"));
        }
        let llm = (*self.llm).with_deadline(deadline);
        let deps = Deps { agent: &self.agent, llm: &llm, now: self.clock.now() };
        match tokio::time::timeout(deadline.remaining(), process_event(state, event, &deps)).await {
            Ok(Processed::Decided(d)) => Some(d),
            Ok(Processed::AlreadyProcessed) => None,
            Err(_) => Some(self.fallback(state, event, "the run deadline (120 s) passed")),
        }
    }

    fn fallback(&self, state: &LoadState, event: &InboundEvent, reason: &str) -> DecisionRecord {
        hero_fallback_record(
            &event.load_id,
            &event.event_id,
            event.kind_str(),
            self.clock.now(),
            state.sop(),
            reason,
            Vec::new(),
        )
    }

    /// Consumes `queue` until shutdown: each delivery is one run; committed and already
    /// processed events are acked, invalid ones dead-lettered and acked, the rest given back.
    pub async fn run(
        self: Arc<Self>,
        queue: Arc<dyn LoadQueue>,
        dead_letters: Arc<dyn DeadLetters>,
        mut shutdown: Shutdown,
    ) {
        loop {
            let delivery = tokio::select! {
                _ = shutdown.recv() => return,
                d = queue.receive() => d,
            };
            let Some(delivery) = delivery else { return };
            self.handle(&*queue, &*dead_letters, delivery).await;
        }
    }

    /// Runs `concurrency` consumers of `queue` (different loads in parallel) until shutdown.
    pub async fn run_many(
        self: Arc<Self>,
        concurrency: usize,
        queue: Arc<dyn LoadQueue>,
        dead_letters: Arc<dyn DeadLetters>,
        shutdown: Shutdown,
    ) {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..concurrency.max(1) {
            tasks.spawn(self.clone().run(queue.clone(), dead_letters.clone(), shutdown.clone()));
        }
        while let Some(res) = tasks.join_next().await {
            if let Err(e) = res {
                error!(error = %e, "a worker task ended abnormally");
            }
        }
    }

    async fn handle(&self, queue: &dyn LoadQueue, dead_letters: &dyn DeadLetters, delivery: Delivery) {
        match self.process_one(delivery.event.clone()).await {
            RunOutcome::Committed { .. } | RunOutcome::AlreadyProcessed => queue.ack(&delivery).await,
            RunOutcome::Invalid(reason) => {
                dead_letters.dead_letter(&delivery.event, &reason).await;
                queue.ack(&delivery).await;
            }
            RunOutcome::GiveBack { .. } => {
                let pause = self.config.redelivery_backoff.saturating_mul(delivery.delivery_count);
                tokio::time::sleep(pause.min(Duration::from_secs(30))).await;
                queue.nack(delivery).await;
            }
        }
    }
}

/// One outbox row per effective action, at the version the decision commits at.
pub fn outbox_rows(decision: &DecisionRecord, load_version: u64) -> Vec<NewOutboxRow> {
    decision
        .effective_actions()
        .filter_map(|a| {
            Some(NewOutboxRow {
                id: a.key.clone(),
                load_id: decision.load_id.clone(),
                destination: a.body.destination()?,
                action: a.clone(),
                load_version,
            })
        })
        .collect()
}

/// Decisions by path, LLM calls by method and their cost (docs/operations.md).
fn record_decision_metrics(decision: &DecisionRecord) {
    metrics::counter!(names::DECISIONS_TOTAL, "path" => decision.path.as_str()).increment(1);
    for u in &decision.llm_usage {
        metrics::counter!(names::LLM_CALLS_TOTAL, "method" => u.method.clone()).increment(1);
        if u.cost_usd > 0.0 {
            // Counted in micro-dollars: counters are integers.
            metrics::counter!(names::LLM_COST_MICROUSD_TOTAL).increment((u.cost_usd * 1e6).round() as u64);
        }
    }
}
