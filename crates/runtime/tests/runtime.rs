//! The worker, relay and pump, one unit of work at a time, on a fresh SQLite store each test.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use load_agent_agent::Agent;
use load_agent_domain::{
    Action, ActionBody, ActionKind, DecisionPath, Destination, EventKind, InboundEvent, LoadSummary,
    LogEntry, OutcomeStatus, action_outcome_event_id, timer_fired_event_id,
};
use load_agent_llm::{FakeLlm, LlmClient};
use load_agent_runtime::{
    CacheConfig, Clock, DeliveryCommand, DeliveryError, Destinations, EventPublisher, FailMode, FakeClock,
    FakeServices, FaultRule, InProcessQueue, InProcessRuntime, LoadQueue, LogProjection, PumpConfig, Receipt,
    Relay, RelayConfig, RetryPolicy, RunOutcome, RuntimeConfig, SnapshotCache, SnapshotSource, TimerPump,
    Worker,
};
use load_agent_store::{
    AppendError, ClaimError, ClaimedRow, DelegatingOutbox, DispatchedMark, EventStore, FailedMark,
    NewOutboxRow, NextAttempt, Outbox, OutboxStatus, SqliteStore, StaleClaimError, StoreError, StoreOptions,
    Stores, TimerRow,
};
use uuid::Uuid;

use load_agent_testkit::at as t;
use load_agent_testkit::events::{self, event, registration};
use load_agent_testkit::store::{Intercept, Intercepted};

fn sms(load_id: &str, id: &str, at: DateTime<Utc>, text: &str) -> InboundEvent {
    event(load_id, id, at, events::sms("drv", text))
}

fn ping_high(load_id: &str, id: &str, at: DateTime<Utc>) -> InboundEvent {
    event(load_id, id, at, events::ping(1, load_agent_domain::RiskBand::High, at))
}

struct Env {
    stores: Stores,
    clock: FakeClock,
    queue: Arc<InProcessQueue>,
    fakes: FakeServices,
    agent: Arc<Agent>,
    _store: SqliteStore,
}

impl Env {
    async fn new() -> Env {
        let store = SqliteStore::open_temporary(&StoreOptions::default()).await.expect("sqlite");
        Env {
            stores: store.clone().into_stores(),
            clock: FakeClock::new(t("2026-03-02T13:00:00Z")),
            queue: Arc::new(InProcessQueue::new(1000)),
            fakes: FakeServices::new(),
            agent: Arc::new(Agent::embedded().expect("agent")),
            _store: store,
        }
    }

    fn worker_on(&self, events: Arc<dyn EventStore>) -> Worker {
        let llm: Arc<dyn LlmClient> = Arc::new(FakeLlm::new());
        let snapshots: Arc<dyn SnapshotSource> = Arc::new(LogProjection::new(events.clone()));
        Worker::new(events, snapshots, self.agent.clone(), llm, Arc::new(self.clock.clone()))
    }

    fn worker(&self) -> Worker {
        self.worker_on(self.stores.events.clone())
    }

    fn relay_to(&self, destinations: Arc<dyn Destinations>) -> Relay {
        let queue: Arc<dyn LoadQueue> = self.queue.clone();
        Relay::new(
            self.stores.outbox.clone(),
            self.stores.timers.clone(),
            destinations,
            queue,
            Arc::new(self.clock.clone()),
        )
    }

    fn relay(&self) -> Relay {
        self.relay_to(Arc::new(self.fakes.clone()))
    }

    fn pump(&self) -> TimerPump {
        let queue: Arc<dyn LoadQueue> = self.queue.clone();
        TimerPump::new(self.stores.timers.clone(), queue, Arc::new(self.clock.clone()))
    }

    async fn register(&self, worker: &Worker, load_id: &str) {
        let reg = registration(load_id, &format!("reg:{load_id}"), self.clock.now());
        assert!(matches!(worker.process_one(reg).await, RunOutcome::Committed { .. }));
    }

    async fn drain(&self) -> Vec<InboundEvent> {
        let mut out = Vec::new();
        while let Some(d) = self.queue.try_receive().await {
            out.push(d.event.clone());
            self.queue.ack(&d).await;
        }
        out
    }
}

fn committed(outcome: RunOutcome) -> (load_agent_domain::DecisionRecord, u32) {
    match outcome {
        RunOutcome::Committed { decision, conflicts, .. } => (decision, conflicts),
        other => panic!("expected a commit, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Worker

/// An event store hook that lets another "run" append first, once: the worker's first append
/// conflicts for real.
struct Racing {
    raced: AtomicBool,
    appends: AtomicUsize,
}

#[async_trait]
impl Intercept for Racing {
    async fn append_summarized(
        &self,
        inner: &dyn EventStore,
        load_id: &str,
        entries: &[LogEntry],
        expected_version: u64,
        outbox: &[NewOutboxRow],
        summary: Option<&LoadSummary>,
    ) -> Result<u64, AppendError> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        if !self.raced.swap(true, Ordering::SeqCst) {
            // The concurrent run: an "ok" from the driver and its noop decision.
            let other = sms(load_id, "sms_concurrent", t("2026-03-02T13:00:00Z"), "ok");
            let (entries_before, version) = inner.read(load_id).await?;
            let state = load_agent_domain::project_state(load_id, &entries_before);
            let decision = load_agent_agent::hero_fallback_record(
                load_id,
                "sms_concurrent",
                "sms",
                other.occurred_at,
                state.sop(),
                "concurrent run",
                vec![],
            );
            inner
                .append(load_id, &[LogEntry::Event(other), LogEntry::Decision(decision)], version, &[])
                .await?;
        }
        inner.append_summarized(load_id, entries, expected_version, outbox, summary).await
    }
}

#[tokio::test]
async fn a_version_conflict_re_reads_and_re_decides() {
    let env = Env::new().await;
    env.register(&env.worker(), "L1").await;
    let racing = Arc::new(Intercepted::new(
        env.stores.events.clone(),
        Racing { raced: AtomicBool::new(false), appends: AtomicUsize::new(0) },
    ));
    let worker = env.worker_on(racing.clone());
    let (decision, conflicts) =
        committed(worker.process_one(ping_high("L1", "ping_1", env.clock.now())).await);
    assert_eq!(conflicts, 1);
    assert_eq!(
        racing.hook.appends.load(Ordering::SeqCst),
        2,
        "one conflicting append, one re-decided append"
    );
    assert_eq!(decision.path, DecisionPath::Sop);
    let (entries, version) = env.stores.events.read("L1").await.expect("read");
    assert_eq!(version, 6, "registration (2), the concurrent run (2), the re-decided ping (2)");
    assert!(matches!(&entries[5], LogEntry::Decision(d) if d.trigger_event_id == "ping_1"));
}

#[tokio::test]
async fn conflicts_are_bounded_then_the_event_is_given_back() {
    struct AlwaysConflict;
    #[async_trait]
    impl Intercept for AlwaysConflict {
        async fn append_summarized(
            &self,
            _: &dyn EventStore,
            _: &str,
            _: &[LogEntry],
            e: u64,
            _: &[NewOutboxRow],
            _: Option<&LoadSummary>,
        ) -> Result<u64, AppendError> {
            Err(AppendError::Conflict { expected: e, actual: e + 1 })
        }
    }
    let env = Env::new().await;
    env.register(&env.worker(), "L1").await;
    let worker = env.worker_on(Arc::new(Intercepted::new(env.stores.events.clone(), AlwaysConflict)));
    let outcome = worker.process_one(ping_high("L1", "ping_1", env.clock.now())).await;
    assert!(
        matches!(outcome, RunOutcome::GiveBack { ref reason } if reason.contains("6 version conflicts")),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_redelivered_event_is_already_processed_and_writes_nothing() {
    let env = Env::new().await;
    let worker = env.worker();
    env.register(&worker, "L1").await;
    committed(worker.process_one(ping_high("L1", "ping_1", env.clock.now())).await);
    let (_, before) = env.stores.events.read("L1").await.expect("read");
    assert_eq!(
        worker.process_one(ping_high("L1", "ping_1", env.clock.now())).await,
        RunOutcome::AlreadyProcessed
    );
    let (_, after) = env.stores.events.read("L1").await.expect("read");
    assert_eq!(before, after);
}

#[tokio::test]
async fn a_duplicate_entry_at_append_means_done() {
    // A snapshot that does not know the event yet (a stale cache) still ends in "done": the
    // store refuses the entry id.
    struct Forgetful(LogProjection);
    #[async_trait]
    impl SnapshotSource for Forgetful {
        async fn snapshot(&self, load_id: &str) -> Result<load_agent_domain::LoadState, StoreError> {
            let mut s = self.0.snapshot(load_id).await?;
            s.event_ids = Default::default();
            Ok(s)
        }
    }
    let env = Env::new().await;
    let worker = env.worker();
    env.register(&worker, "L1").await;
    committed(worker.process_one(sms("L1", "sms_1", env.clock.now(), "ok")).await);
    let llm: Arc<dyn LlmClient> = Arc::new(FakeLlm::new());
    let forgetful = Worker::new(
        env.stores.events.clone(),
        Arc::new(Forgetful(LogProjection::new(env.stores.events.clone()))),
        env.agent.clone(),
        llm,
        Arc::new(env.clock.clone()),
    );
    assert_eq!(
        forgetful.process_one(sms("L1", "sms_1", env.clock.now(), "ok")).await,
        RunOutcome::AlreadyProcessed
    );
}

#[tokio::test]
async fn a_duplicate_action_key_re_decides_into_a_hero_task_keyed_by_the_event() {
    let env = Env::new().await;
    let worker = env.worker();
    env.register(&worker, "L1").await;
    env.register(&worker, "L2").await;
    // Another load's outbox already holds the key L1's reply will use (keys are unique across
    // the outbox): the append of the reply fails with DuplicateActionKey.
    let key = "L1/evt:sms_po/send_sms";
    let (_, v2) = env.stores.events.read("L2").await.expect("read");
    let filler = sms("L2", "sms_filler", env.clock.now(), "ok");
    let decision =
        load_agent_agent::hero_fallback_record("L2", "sms_filler", "sms", env.clock.now(), None, "x", vec![]);
    let row = NewOutboxRow {
        id: key.into(),
        load_id: "L2".into(),
        destination: Destination::Sms,
        action: Action {
            key: key.into(),
            ask: None,
            body: ActionBody::SendSms { to: "drv".into(), body: "x".into() },
        },
        load_version: v2 + 2,
    };
    env.stores
        .events
        .append("L2", &[LogEntry::Event(filler), LogEntry::Decision(decision)], v2, &[row])
        .await
        .expect("filler append");

    let (decision, _) = committed(
        worker.process_one(sms("L1", "sms_po", env.clock.now(), "whats the po# for this one")).await,
    );
    assert_eq!(decision.path, DecisionPath::HeroFallback);
    let actions: Vec<_> = decision.effective_actions().collect();
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0].key, "L1/evt:sms_po/create_hero_task");
    assert!(matches!(actions[0].body, ActionBody::CreateHeroTask { urgent: true, .. }));
    let (entries, _) = env.stores.events.read("L1").await.expect("read");
    assert!(entries.iter().any(|e| e.entry_id() == "sms_po"), "the inbound event is never lost");
}

#[tokio::test]
async fn an_event_for_an_unknown_load_is_invalid() {
    let env = Env::new().await;
    let outcome = env.worker().process_one(sms("nope", "sms_1", env.clock.now(), "ok")).await;
    assert!(matches!(outcome, RunOutcome::Invalid(_)), "{outcome:?}");
}

// ---------------------------------------------------------------------------------------------
// Relay

/// Registers L1 and decides a late-risk ping: an SMS and a set_timer in the outbox.
async fn ping_committed(env: &Env) -> load_agent_domain::DecisionRecord {
    let worker = env.worker();
    env.register(&worker, "L1").await;
    committed(worker.process_one(ping_high("L1", "ping_1", env.clock.now())).await).0
}

#[test]
fn backoff_is_capped_exponential_and_the_budget_spares_the_first_retry() {
    let p = RetryPolicy::default();
    let secs: Vec<u64> = (1..=7).map(|n| p.backoff(n).as_secs()).collect();
    assert_eq!(secs, [5, 10, 20, 40, 60, 60, 60]);
    let first = t("2026-03-02T13:00:00Z");
    // The first retry is allowed even when it lands after the budget.
    let late = first + Duration::seconds(400);
    assert_eq!(p.next_attempt(1, first, late), NextAttempt::RetryAt(late + Duration::seconds(5)));
    // Later retries must land within 150 s of the first attempt.
    let at = first + Duration::seconds(100);
    assert_eq!(p.next_attempt(3, first, at), NextAttempt::RetryAt(at + Duration::seconds(20)));
    assert_eq!(p.next_attempt(3, first, first + Duration::seconds(131)), NextAttempt::Dead);
}

#[tokio::test]
async fn delivered_rows_are_marked_and_publish_a_delivered_outcome_and_timers_go_to_the_timer_store() {
    let env = Env::new().await;
    let decision = ping_committed(&env).await;
    let report = env.relay().relay_once(env.clock.now()).await.expect("relay");
    assert_eq!((report.claimed, report.delivered, report.timers_applied), (2, 2, 1));
    let sms_key = &decision.actions[0].key;
    let published = env.drain().await;
    let ids: Vec<_> = published.iter().map(|e| e.event_id.clone()).collect();
    assert!(ids.contains(&action_outcome_event_id(sms_key, OutcomeStatus::Delivered)), "{ids:?}");
    assert_eq!(env.fakes.delivered_to(Destination::Sms).len(), 1);
    let timers = env.stores.timers.timers_for_load("L1").await.expect("timers");
    assert_eq!(timers.len(), 1);
    assert_eq!(timers[0].fire_at, env.clock.now() + Duration::minutes(30));
    // Nothing left to claim.
    assert_eq!(env.relay().relay_once(env.clock.now()).await.expect("relay").claimed, 0);
}

#[tokio::test]
async fn a_retryable_failure_backs_off_then_a_spent_budget_kills_the_row() {
    let env = Env::new().await;
    ping_committed(&env).await;
    env.fakes.add_fault(FaultRule { action: Some(ActionKind::SendSms), to: None, fail: FailMode::Retryable });
    let relay = env.relay();
    let t0 = env.clock.now();
    let r = relay.relay_once(t0).await.expect("relay");
    assert_eq!((r.retried, r.dead), (1, 0));
    let rows = env.stores.outbox.rows_for_load("L1").await.expect("rows");
    let sms_row = rows.iter().find(|r| r.destination == Destination::Sms).expect("sms row");
    assert_eq!(sms_row.retry_at, Some(t0 + Duration::seconds(5)));
    // Not due yet.
    assert_eq!(relay.relay_once(t0 + Duration::seconds(4)).await.expect("relay").claimed, 0);
    // Second failure at +5 s: retry at +15 s, inside the budget.
    env.clock.set(t0 + Duration::seconds(5));
    assert_eq!(relay.relay_once(env.clock.now()).await.expect("relay").retried, 1);
    // Third failure at +140 s: the next retry would land after +150 s: dead, failed outcome.
    env.clock.set(t0 + Duration::seconds(140));
    env.drain().await;
    let r = relay.relay_once(env.clock.now()).await.expect("relay");
    assert_eq!(r.dead, 1);
    assert_eq!(r.ops_alerts, 0, "an external action's failure is the agent's to handle");
    let published = env.drain().await;
    assert_eq!(published.len(), 1);
    assert!(published[0].event_id.starts_with("out:failed_permanent:L1/"));
}

#[tokio::test]
async fn a_permanent_failure_publishes_a_failed_outcome_with_what_failed() {
    let env = Env::new().await;
    let decision = ping_committed(&env).await;
    env.fakes.add_fault(FaultRule {
        action: Some(ActionKind::SendSms),
        to: Some("drv".into()),
        fail: FailMode::Permanent,
    });
    let r = env.relay().relay_once(env.clock.now()).await.expect("relay");
    assert_eq!((r.dead, r.delivered), (1, 1));
    let key = &decision.actions[0].key;
    let failed = env
        .drain()
        .await
        .into_iter()
        .find(|e| e.event_id == action_outcome_event_id(key, OutcomeStatus::FailedPermanent))
        .expect("failed outcome published");
    match failed.kind {
        EventKind::ActionOutcome { status, action_kind, contact_id, hero_channel, .. } => {
            assert_eq!(status, OutcomeStatus::FailedPermanent);
            assert_eq!(action_kind, ActionKind::SendSms);
            assert_eq!(contact_id.as_deref(), Some("drv"));
            assert!(!hero_channel);
        }
        other => panic!("not an outcome: {other:?}"),
    }
}

#[tokio::test]
async fn a_hero_channel_failure_raises_an_ops_alert_and_no_hero_task() {
    let env = Env::new().await;
    let worker = env.worker();
    env.register(&worker, "L1").await;
    // A message from an unknown sender: a Hero task.
    let unknown = event(
        "L1",
        "sms_x",
        env.clock.now(),
        EventKind::Sms { from: "+19995550000".into(), text: "hi".into() },
    );
    committed(worker.process_one(unknown).await);
    env.fakes.add_fault(FaultRule {
        action: Some(ActionKind::CreateHeroTask),
        to: None,
        fail: FailMode::Permanent,
    });
    let relay = env.relay();
    let r = relay.relay_once(env.clock.now()).await.expect("relay");
    assert_eq!((r.dead, r.ops_alerts), (1, 1));
    let alerts = relay.alerts().raised();
    assert_eq!(alerts.len(), 1);
    assert_eq!((alerts[0].class, alerts[0].action_kind), ("hero_channel", ActionKind::CreateHeroTask));
    let outcome = env.drain().await.pop().expect("failed outcome");
    assert!(matches!(outcome.kind, EventKind::ActionOutcome { hero_channel: true, .. }));
    let (decision, _) = committed(worker.process_one(outcome).await);
    assert!(decision.is_noop(), "never another Hero task: {decision:?}");
    assert_eq!(decision.path, DecisionPath::Filtered);
}

/// A service that takes 100 s per send (longer than the 90 s lease), moving the fake clock.
#[derive(Debug)]
struct SlowService {
    clock: FakeClock,
    sends: AtomicUsize,
}

#[async_trait]
impl Destinations for SlowService {
    async fn send(&self, _: Destination, command: &DeliveryCommand) -> Result<Receipt, DeliveryError> {
        self.sends.fetch_add(1, Ordering::SeqCst);
        self.clock.advance(Duration::seconds(100));
        Ok(Receipt { id: command.idempotency_key.clone() })
    }
}

#[tokio::test]
async fn a_row_whose_lease_ran_out_before_its_send_is_left_unsent_for_its_next_claim() {
    let env = Env::new().await;
    let worker = env.worker();
    env.register(&worker, "L1").await;
    // Two messages: two SMS rows of the same load would be handed out one at a time, so use an
    // SMS and a TMS note (one decision: a problem report).
    committed(worker.process_one(sms("L1", "sms_1", env.clock.now(), "truck broke down on I-80")).await);
    let slow = Arc::new(SlowService { clock: env.clock.clone(), sends: AtomicUsize::new(0) });
    // One send at a time: the first takes 100 s, past the second row's 90 s lease.
    let relay = env.relay_to(slow.clone());
    let r = relay.relay_once(env.clock.now()).await.expect("relay");
    assert_eq!((r.claimed, r.delivered, r.stale), (2, 1, 1), "{r:?}");
    assert_eq!(slow.sends.load(Ordering::SeqCst), 1, "the second row's lease expired during the first send");
    let rows = env.stores.outbox.rows_for_load("L1").await.expect("rows");
    let pending: Vec<_> = rows.iter().filter(|r| r.status == OutboxStatus::Pending).collect();
    assert_eq!(pending.len(), 1, "the unsent row waits for its next claim: {rows:?}");
    assert_eq!(pending[0].attempts, 0, "a lost lease is not an attempt");
    // Its next claim sends it.
    let r = relay.relay_once(env.clock.now()).await.expect("relay");
    assert_eq!((r.claimed, r.delivered, r.stale), (1, 1, 0), "{r:?}");
    assert_eq!(slow.sends.load(Ordering::SeqCst), 2);
}

/// The outbox as the relay sees it, counting its round trips; the batch mark can be made to
/// fail as a database outage would.
struct CountingOutbox {
    inner: Arc<dyn Outbox>,
    queue: Arc<InProcessQueue>,
    rechecks: AtomicUsize,
    single_marks: AtomicUsize,
    /// (rows in the batch mark, outcomes on the queue when it was called)
    batch_marks: Mutex<Vec<(usize, usize)>>,
    fail_batch_mark: AtomicBool,
    single_failed_marks: AtomicUsize,
    /// Rows in each batch mark of failed attempts.
    failed_batch_marks: Mutex<Vec<usize>>,
}

impl CountingOutbox {
    fn new(env: &Env) -> Arc<CountingOutbox> {
        Arc::new(CountingOutbox {
            inner: env.stores.outbox.clone(),
            queue: env.queue.clone(),
            rechecks: AtomicUsize::new(0),
            single_marks: AtomicUsize::new(0),
            batch_marks: Mutex::new(Vec::new()),
            fail_batch_mark: AtomicBool::new(false),
            single_failed_marks: AtomicUsize::new(0),
            failed_batch_marks: Mutex::new(Vec::new()),
        })
    }

    /// A relay to the fake services through this outbox.
    fn relay(self: &Arc<Self>, env: &Env) -> Relay {
        let queue: Arc<dyn LoadQueue> = env.queue.clone();
        Relay::new(
            self.clone(),
            env.stores.timers.clone(),
            Arc::new(env.fakes.clone()),
            queue,
            Arc::new(env.clock.clone()),
        )
    }

    fn failed_batch_marks(&self) -> Vec<usize> {
        self.failed_batch_marks.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn batch_marks(&self) -> Vec<(usize, usize)> {
        self.batch_marks.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[async_trait]
impl DelegatingOutbox for CountingOutbox {
    fn inner(&self) -> &dyn Outbox {
        self.inner.as_ref()
    }

    async fn mark_dispatched(
        &self,
        id: &str,
        token: Uuid,
        receipt: &str,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError> {
        self.single_marks.fetch_add(1, Ordering::SeqCst);
        self.inner.mark_dispatched(id, token, receipt, now).await
    }
    async fn mark_dispatched_batch(
        &self,
        marks: &[DispatchedMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        self.batch_marks.lock().unwrap_or_else(|p| p.into_inner()).push((marks.len(), self.queue.len()));
        if self.fail_batch_mark.load(Ordering::SeqCst) {
            return Err(StoreError::Commit("the database went away".into()));
        }
        self.inner.mark_dispatched_batch(marks, now).await
    }
    async fn mark_failed(
        &self,
        id: &str,
        token: Uuid,
        failure: &str,
        next: NextAttempt,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError> {
        self.single_failed_marks.fetch_add(1, Ordering::SeqCst);
        self.inner.mark_failed(id, token, failure, next, now).await
    }
    async fn mark_failed_batch(
        &self,
        marks: &[FailedMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        self.failed_batch_marks.lock().unwrap_or_else(|p| p.into_inner()).push(marks.len());
        self.inner.mark_failed_batch(marks, now).await
    }
    async fn recheck_claim(&self, id: &str, token: Uuid, now: DateTime<Utc>) -> Result<(), ClaimError> {
        self.rechecks.fetch_add(1, Ordering::SeqCst);
        self.inner.recheck_claim(id, token, now).await
    }
}

/// A service whose sends all wait until `together` of them are in flight at once, and which
/// notes how many outcomes were already on the queue when each send returned.
struct GatedService {
    gate: tokio::sync::Barrier,
    queue: Arc<InProcessQueue>,
    outcomes_seen: Mutex<Vec<usize>>,
}

impl std::fmt::Debug for GatedService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatedService").finish_non_exhaustive()
    }
}

#[async_trait]
impl Destinations for GatedService {
    async fn send(&self, _: Destination, command: &DeliveryCommand) -> Result<Receipt, DeliveryError> {
        self.gate.wait().await;
        self.outcomes_seen.lock().unwrap_or_else(|p| p.into_inner()).push(self.queue.len());
        Ok(Receipt { id: format!("rcpt:{}", command.idempotency_key) })
    }
}

async fn pinged_loads(env: &Env, loads: usize) {
    let worker = env.worker();
    for n in 0..loads {
        let load = format!("L{n}");
        env.register(&worker, &load).await;
        committed(worker.process_one(ping_high(&load, &format!("ping_{n}"), env.clock.now())).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_sent_all_at_once_then_its_outcomes_published_then_marked_in_one_statement() {
    const LOADS: usize = 4;
    let env = Env::new().await;
    // Each load: a send_sms and a set_timer row.
    pinged_loads(&env, LOADS).await;
    let outbox = CountingOutbox::new(&env);
    let service = Arc::new(GatedService {
        gate: tokio::sync::Barrier::new(LOADS),
        queue: env.queue.clone(),
        outcomes_seen: Mutex::new(Vec::new()),
    });
    let queue: Arc<dyn LoadQueue> = env.queue.clone();
    let relay = Relay::new(
        outbox.clone(),
        env.stores.timers.clone(),
        service.clone(),
        queue,
        Arc::new(env.clock.clone()),
    )
    .with_config(RelayConfig { concurrency: 64, ..RelayConfig::default() });
    // The gate opens only when the four SMS are in flight together; a relay that waited for
    // one acknowledgement before the next send would never open it (the guard ends the test).
    let pass = tokio::time::timeout(std::time::Duration::from_secs(60), relay.relay_once(env.clock.now()))
        .await
        .expect("the batch's sends were not in flight together")
        .expect("relay");
    assert_eq!((pass.claimed, pass.delivered, pass.timers_applied, pass.stale), (8, 8, 4, 0), "{pass:?}");
    let seen = service.outcomes_seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(seen, [0; LOADS], "no outcome is published before every send of the batch returned");
    assert_eq!(outbox.batch_marks(), [(8, 8)], "one mark for the batch, after its 8 outcomes");
    assert_eq!(outbox.rechecks.load(Ordering::SeqCst), 0, "no re-check round trip per row");
    assert_eq!(outbox.single_marks.load(Ordering::SeqCst), 0, "no mark round trip per row");
    for n in 0..LOADS {
        let load = format!("L{n}");
        let rows = env.stores.outbox.rows_for_load(&load).await.expect("rows");
        assert!(rows.iter().all(|r| r.status == OutboxStatus::Dispatched), "{rows:?}");
        let sms = rows.iter().find(|r| r.destination == Destination::Sms).expect("sms row");
        assert_eq!(sms.receipt, Some(format!("rcpt:{}", sms.id)));
        assert_eq!(
            env.stores.timers.timers_for_load(&load).await.expect("timers").len(),
            1,
            "{load}'s timer"
        );
    }
    let ids: HashSet<String> = env.drain().await.into_iter().map(|e| e.event_id).collect();
    assert_eq!(ids.len(), 2 * LOADS, "one delivered outcome per row");
}

#[tokio::test]
async fn a_failed_batch_mark_counts_an_attempt_for_every_row_and_the_retry_delivers_them() {
    let env = Env::new().await;
    pinged_loads(&env, 2).await;
    let outbox = CountingOutbox::new(&env);
    outbox.fail_batch_mark.store(true, Ordering::SeqCst);
    let relay = outbox.relay(&env);
    let t0 = env.clock.now();
    let r = relay.relay_once(t0).await.expect("relay");
    assert_eq!((r.claimed, r.delivered, r.mark_failures, r.retried, r.dead), (4, 0, 4, 4, 0), "{r:?}");
    assert_eq!(outbox.failed_batch_marks(), [4], "the four retries marked in one call");
    assert_eq!(outbox.single_failed_marks.load(Ordering::SeqCst), 0);
    for load in ["L0", "L1"] {
        for row in env.stores.outbox.rows_for_load(load).await.expect("rows") {
            assert_eq!((row.status, row.attempts), (OutboxStatus::Pending, 1), "{}", row.id);
            assert_eq!(row.retry_at, Some(t0 + Duration::seconds(5)), "the normal backoff");
            assert!(row.last_failure.as_deref().is_some_and(|f| f.contains("marking it failed")), "{row:?}");
        }
    }
    // The database is back: the re-sends (deduplicated by key at the services) are marked.
    outbox.fail_batch_mark.store(false, Ordering::SeqCst);
    env.clock.set(t0 + Duration::seconds(5));
    let r = relay.relay_once(env.clock.now()).await.expect("relay");
    assert_eq!((r.claimed, r.delivered, r.mark_failures), (4, 4, 0), "{r:?}");
    assert_eq!(env.fakes.delivered_to(Destination::Sms).len(), 2, "one SMS per key at the service");
    assert_eq!(env.fakes.total_duplicate_sends(), 2, "each SMS was sent again under its key");
}

/// A service that is down fails the relay's whole batch: the failed attempts are marked in one
/// call, as the delivered rows are, each row retried (or buried) exactly as a single mark would.
#[tokio::test]
async fn a_batch_that_a_service_outage_fails_is_marked_in_one_call() {
    let env = Env::new().await;
    pinged_loads(&env, 3).await;
    // The SMS service is down: every SMS fails (the timer rows go to the TimerStore).
    env.fakes.add_fault(FaultRule { action: Some(ActionKind::SendSms), to: None, fail: FailMode::Retryable });
    let outbox = CountingOutbox::new(&env);
    let relay = outbox.relay(&env);
    let t0 = env.clock.now();
    let r = relay.relay_once(t0).await.expect("relay");
    assert_eq!((r.claimed, r.delivered, r.retried, r.dead, r.stale), (6, 3, 3, 0, 0), "{r:?}");
    assert_eq!(outbox.failed_batch_marks(), [3], "the three failed SMS marked in one call");
    assert_eq!(outbox.batch_marks().iter().map(|(rows, _)| *rows).collect::<Vec<_>>(), [3], "the timers");
    assert_eq!(outbox.single_failed_marks.load(Ordering::SeqCst), 0, "no mark round trip per failed row");
    for n in 0..3 {
        let rows = env.stores.outbox.rows_for_load(&format!("L{n}")).await.expect("rows");
        let sms = rows.iter().find(|r| r.destination == Destination::Sms).expect("sms row");
        assert_eq!(
            (sms.status, sms.attempts, sms.retry_at),
            (OutboxStatus::Pending, 1, Some(t0 + Duration::seconds(5)))
        );
        assert!(sms.last_failure.is_some(), "{sms:?}");
    }
    // Still down when the budget is spent: buried together, each with its failed outcome.
    env.drain().await;
    env.clock.set(t0 + Duration::seconds(5));
    assert_eq!(relay.relay_once(env.clock.now()).await.expect("relay").retried, 3);
    env.clock.set(t0 + Duration::seconds(140));
    let r = relay.relay_once(env.clock.now()).await.expect("relay");
    assert_eq!((r.claimed, r.dead, r.ops_alerts), (3, 3, 0), "{r:?}");
    assert_eq!(outbox.failed_batch_marks(), [3, 3, 3]);
    assert_eq!(outbox.single_failed_marks.load(Ordering::SeqCst), 0);
    let failed: Vec<_> =
        env.drain().await.into_iter().filter(|e| e.event_id.starts_with("out:failed_permanent:")).collect();
    assert_eq!(failed.len(), 3, "one failed outcome per buried row");
    for n in 0..3 {
        let rows = env.stores.outbox.rows_for_load(&format!("L{n}")).await.expect("rows");
        let sms = rows.iter().find(|r| r.destination == Destination::Sms).expect("sms row");
        assert_eq!(
            (sms.status, sms.attempts, sms.dead_at),
            (OutboxStatus::Dead, 3, Some(t0 + Duration::seconds(140)))
        );
    }
}

/// A service during whose first send the lease runs out and another relay takes the batch
/// over.
struct TakenOverDuringTheSend {
    clock: FakeClock,
    other_relay: Arc<dyn Outbox>,
    taken: Mutex<Vec<ClaimedRow>>,
    sends: AtomicUsize,
}

impl std::fmt::Debug for TakenOverDuringTheSend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TakenOverDuringTheSend").finish_non_exhaustive()
    }
}

#[async_trait]
impl Destinations for TakenOverDuringTheSend {
    async fn send(&self, _: Destination, command: &DeliveryCommand) -> Result<Receipt, DeliveryError> {
        if self.sends.fetch_add(1, Ordering::SeqCst) == 0 {
            self.clock.advance(Duration::seconds(100));
            let taken = self.other_relay.pending(100, self.clock.now()).await.expect("take over");
            self.taken.lock().unwrap_or_else(|p| p.into_inner()).extend(taken);
        }
        Ok(Receipt { id: command.idempotency_key.clone() })
    }
}

#[tokio::test]
async fn a_claim_taken_over_during_the_send_is_stale_at_the_batch_mark_and_stays_with_its_new_holder() {
    let env = Env::new().await;
    let worker = env.worker();
    env.register(&worker, "L1").await;
    committed(worker.process_one(sms("L1", "sms_1", env.clock.now(), "truck broke down on I-80")).await);
    let service = Arc::new(TakenOverDuringTheSend {
        clock: env.clock.clone(),
        other_relay: env.stores.outbox.clone(),
        taken: Mutex::new(Vec::new()),
        sends: AtomicUsize::new(0),
    });
    let r = env.relay_to(service.clone()).relay_once(env.clock.now()).await.expect("relay");
    // The first row was sent and then lost at the mark; the second's lease had run out before
    // its send, so it was not sent.
    assert_eq!((r.claimed, r.delivered, r.stale, r.retried), (2, 0, 2, 0), "{r:?}");
    assert_eq!(service.sends.load(Ordering::SeqCst), 1);
    let taken = service.taken.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(taken.len(), 2, "the other relay holds both rows");
    for row in env.stores.outbox.rows_for_load("L1").await.expect("rows") {
        assert_eq!((row.status, row.attempts), (OutboxStatus::Pending, 0), "unchanged by the stale mark");
        assert_eq!(row.lease_until, Some(env.clock.now() + Duration::seconds(90)), "the new holder's lease");
    }
    // The new holder marks them with its own tokens.
    let marks: Vec<DispatchedMark> = taken
        .iter()
        .map(|c| DispatchedMark { id: c.id.clone(), token: c.claim_token, receipt: "b".into() })
        .collect();
    let results = env.stores.outbox.mark_dispatched_batch(&marks, env.clock.now()).await.expect("mark");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
}

// ---------------------------------------------------------------------------------------------
// Timer pump

#[tokio::test]
async fn the_pump_publishes_due_timers_once_with_their_deterministic_event_id() {
    let env = Env::new().await;
    let fire_at = t("2026-03-02T13:30:00Z");
    let timer = TimerRow {
        timer_id: "tmr:L1:ask:eta_request:p:1".into(),
        load_id: "L1".into(),
        ask_id: "ask:eta_request:p".into(),
        attempt: 1,
        fire_at,
    };
    env.stores.timers.schedule(&timer).await.expect("schedule");
    let pump = env.pump();
    assert_eq!(pump.pump_once(fire_at - Duration::seconds(1)).await.expect("pump").fired, 0);
    assert_eq!(pump.pump_once(fire_at).await.expect("pump").fired, 1);
    let published = env.drain().await;
    assert_eq!(published.len(), 1);
    assert_eq!(published[0].event_id, timer_fired_event_id(&timer.timer_id));
    assert!(matches!(
        &published[0].kind,
        EventKind::TimerFired { ask_id, attempt: 1, .. } if ask_id == "ask:eta_request:p"
    ));
    assert_eq!(pump.pump_once(fire_at + Duration::minutes(5)).await.expect("pump").fired, 0, "marked fired");
}

#[tokio::test]
async fn between_passes_the_pump_sleeps_until_the_next_timer_is_due_at_most_its_interval() {
    let env = Env::new().await;
    let now = env.clock.now();
    let queue: Arc<dyn LoadQueue> = env.queue.clone();
    let pump = TimerPump::new(env.stores.timers.clone(), queue, Arc::new(env.clock.clone()))
        .with_config(PumpConfig { batch: 10, poll_interval: std::time::Duration::from_secs(10) });
    let schedule = |id: &str, fire_at| TimerRow {
        timer_id: id.into(),
        load_id: "L1".into(),
        ask_id: "a".into(),
        attempt: 1,
        fire_at,
    };
    assert_eq!(pump.pause().await, std::time::Duration::from_secs(10), "nothing scheduled: the interval");
    env.stores.timers.schedule(&schedule("late", now + Duration::hours(1))).await.expect("schedule");
    assert_eq!(pump.pause().await, std::time::Duration::from_secs(10), "not due within the interval");
    env.stores.timers.schedule(&schedule("soon", now + Duration::seconds(3))).await.expect("schedule");
    assert_eq!(pump.pause().await, std::time::Duration::from_secs(3), "wakes when the next one is due");
    env.stores.timers.schedule(&schedule("due", now - Duration::seconds(1))).await.expect("schedule");
    assert_eq!(
        pump.pause().await,
        load_agent_runtime::pump::MIN_PAUSE,
        "one already due: the shortest pause"
    );
    assert_eq!(pump.pump_once(now).await.expect("pump").fired, 1);
    assert_eq!(pump.pause().await, std::time::Duration::from_secs(3), "fired ones do not count");
}

#[tokio::test]
async fn a_pass_fires_every_due_timer_batch_by_batch_each_load_in_fire_order() {
    let env = Env::new().await;
    let base = t("2026-03-02T13:30:00Z");
    // Three loads, three timers each, due a minute apart; batches of four.
    for load in ["L1", "L2", "L3"] {
        for attempt in 1..=3u32 {
            let timer = TimerRow {
                timer_id: format!("tmr:{load}:a:{attempt}"),
                load_id: load.into(),
                ask_id: "a".into(),
                attempt,
                fire_at: base + Duration::minutes(i64::from(attempt)),
            };
            env.stores.timers.schedule(&timer).await.expect("schedule");
        }
    }
    let queue: Arc<dyn LoadQueue> = env.queue.clone();
    let pump = TimerPump::new(env.stores.timers.clone(), queue, Arc::new(env.clock.clone()))
        .with_config(PumpConfig { batch: 4, ..PumpConfig::default() });
    let r = pump.pump_once(base + Duration::minutes(5)).await.expect("pump");
    assert_eq!((r.fired, r.publish_failures, r.mark_failures), (9, 0, 0));
    let published = env.drain().await;
    assert_eq!(published.len(), 9, "each timer published once");
    for load in ["L1", "L2", "L3"] {
        let attempts: Vec<u32> = published
            .iter()
            .filter(|e| e.load_id == load)
            .map(|e| match &e.kind {
                EventKind::TimerFired { attempt, .. } => *attempt,
                other => panic!("not a timer: {other:?}"),
            })
            .collect();
        assert_eq!(attempts, [1, 2, 3], "{load}'s timers in fire order");
    }
    assert_eq!(pump.pump_once(base + Duration::minutes(6)).await.expect("pump").fired, 0, "all marked");
}

#[tokio::test]
async fn a_cancelled_timer_never_fires() {
    let env = Env::new().await;
    let fire_at = t("2026-03-02T13:30:00Z");
    let timer = TimerRow {
        timer_id: "tmr:L1:a:1".into(),
        load_id: "L1".into(),
        ask_id: "a".into(),
        attempt: 1,
        fire_at,
    };
    env.stores.timers.schedule(&timer).await.expect("schedule");
    env.stores
        .timers
        .cancel(&timer.load_id, &timer.timer_id, fire_at - Duration::minutes(1))
        .await
        .expect("cancel");
    assert_eq!(env.pump().pump_once(fire_at).await.expect("pump").fired, 0);
}

#[tokio::test]
async fn a_full_queue_leaves_the_timer_scheduled_for_the_next_pass() {
    let env = Env::new().await;
    let full: Arc<InProcessQueue> = Arc::new(InProcessQueue::new(1));
    full.publish(sms("X", "blocker", env.clock.now(), "ok")).await.expect("room");
    let fire_at = t("2026-03-02T13:30:00Z");
    let timer = TimerRow {
        timer_id: "tmr:L1:a:1".into(),
        load_id: "L1".into(),
        ask_id: "a".into(),
        attempt: 1,
        fire_at,
    };
    env.stores.timers.schedule(&timer).await.expect("schedule");
    let dyn_full: Arc<dyn LoadQueue> = full.clone();
    let pump = TimerPump::new(env.stores.timers.clone(), dyn_full, Arc::new(env.clock.clone()));
    let r = pump.pump_once(fire_at).await.expect("pump");
    assert_eq!((r.fired, r.publish_failures), (0, 1));
    let d = full.try_receive().await.expect("blocker");
    full.ack(&d).await;
    assert_eq!(pump.pump_once(fire_at).await.expect("pump").fired, 1);
}

// ---------------------------------------------------------------------------------------------
// The embedded runtime's snapshot cache

/// The in-process runtime keeps projected snapshots as the Kafka consumer does: a load's later
/// events read only the entries after the cached version. Without a cache every run projects
/// the whole log, and the decisions are the same.
#[tokio::test]
async fn the_embedded_runtime_keeps_snapshots_as_the_kafka_consumer_does() {
    let mut decisions = Vec::new();
    for cached in [true, false] {
        let store = SqliteStore::open_temporary(&StoreOptions::default()).await.expect("sqlite");
        let clock = FakeClock::new(t("2026-03-02T13:00:00Z"));
        let config = RuntimeConfig { cache: cached.then(CacheConfig::default), ..RuntimeConfig::default() };
        let runtime = InProcessRuntime::new(
            store.into_stores(),
            Arc::new(Agent::embedded().expect("agent")),
            Arc::new(FakeLlm::new()),
            Arc::new(clock.clone()),
            FakeServices::new(),
            config,
        );
        let at = t("2026-03-02T13:00:00Z");
        let events = [
            registration("L1", "reg:L1", at),
            ping_high("L1", "p1", at),
            sms("L1", "s1", at, "running late, there by 3pm"),
            sms("L1", "s2", at, "10-4"),
        ];
        for e in events {
            runtime.publish(e).await.expect("publish");
            runtime.settle(at).await.expect("settle");
        }
        let (log, _) = runtime.events.read("L1").await.expect("log");
        decisions.push(
            log.into_iter()
                .filter_map(|e| match e {
                    LogEntry::Decision(d) => Some((d.trigger_event_id, d.path, d.actions)),
                    LogEntry::Event(_) => None,
                })
                .collect::<Vec<_>>(),
        );
        match runtime.cache.as_ref().map(SnapshotCache::stats) {
            Some(stats) => {
                assert!(cached);
                assert_eq!(stats.misses, 1, "only the registration read the whole log: {stats:?}");
                assert!(stats.hits >= 3, "every later run started from the cached snapshot: {stats:?}");
            }
            None => assert!(!cached),
        }
    }
    assert_eq!(decisions[0], decisions[1], "the cache changes no decision");
}

/// A relay in the worker's process does not sleep out its idle poll after a commit: the
/// worker's commit signal wakes it. With a one-hour poll, the ping's SMS still goes out.
#[tokio::test]
async fn a_commit_wakes_the_idle_relay_of_its_process() {
    let env = Env::new().await;
    let worker = env.worker();
    env.register(&worker, "L1").await;
    let relay = env
        .relay()
        .with_config(RelayConfig {
            idle_poll: std::time::Duration::from_secs(3600),
            ..RelayConfig::default()
        })
        .with_wakeup(worker.commit_signal());
    let (trigger, shutdown) = load_agent_runtime::shutdown_channel();
    let running = tokio::spawn(Arc::new(relay).run(shutdown));
    // Let the relay find nothing and fall asleep on its poll.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(env.fakes.delivered().is_empty() && !running.is_finished());
    committed(worker.process_one(ping_high("L1", "ping_1", env.clock.now())).await);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while env.fakes.delivered().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the relay slept on: the commit did not wake it");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    trigger.shutdown();
    let _ = running.await;
}
