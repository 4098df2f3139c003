//! Concurrency (ADR 0003), on SQLite and on Postgres, each process with its own store handle:
//!
//! 1. two workers (each with its own snapshot cache) race over the same events of one load:
//!    every event gets exactly one decision, the log's versions are contiguous;
//! 2. two relays claim from one outbox at once: no row is sent twice while its lease holds;
//! 3. a relay claims rows and dies; once the lease expires a second relay takes them over and
//!    sends each exactly once more; every row ends dispatched once.
//!
//! Every test gets a fresh store (a new SQLite file, a new Postgres schema on `DATABASE_URL`,
//! default `postgres://postgres@127.0.0.1:5432/test`) and unique load ids. The Postgres half
//! fails, never skips, when the server is unreachable.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::TimeDelta;
use load_agent_agent::Agent;
use load_agent_domain::{
    Action, ActionBody, Destination, EmailThread, EventKind, InboundEvent, LoadSummary, LogEntry, RiskBand,
    SlackTarget,
};
use load_agent_llm::{FakeLlm, LlmClient};
use load_agent_runtime::{
    CacheConfig, Clock, DeliveryCommand, DeliveryError, Destinations, FakeClock, InProcessQueue, LoadQueue,
    Receipt, Relay, RelayConfig, RelayReport, RunOutcome, SnapshotCache, SnapshotSource, Worker,
};
use load_agent_store::{
    AppendError, EventStore, NewOutboxRow, OutboxStatus, PgStore, SqliteStore, StoreOptions, Stores,
};
use tokio::sync::Barrier;

use load_agent_testkit::pg::database_url;
use load_agent_testkit::store::{Intercept, Intercepted};
use load_agent_testkit::t0;

fn unique(prefix: &str) -> String {
    format!("{prefix}{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

// ---------------------------------------------------------------------------------------------
// One database, opened as many times as there are "processes".

enum Db {
    Sqlite { path: std::path::PathBuf, options: StoreOptions, _dir: tempfile::TempDir },
    Postgres { url: String, schema: String, options: StoreOptions, first: PgStore },
}

impl Db {
    async fn sqlite(options: StoreOptions) -> Db {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("concurrency.db");
        // Creates the file and applies the migrations once, before any racing handle opens it.
        drop(SqliteStore::open_with(&path, &options).await.expect("create the SQLite store"));
        Db::Sqlite { path, options, _dir: dir }
    }

    async fn postgres(options: StoreOptions) -> Db {
        let url = database_url();
        let schema = unique("concurrency_");
        let first = match PgStore::connect_in_schema_with(&url, &schema, &options).await {
            Ok(store) => store,
            Err(e) => panic!(
                "the Postgres concurrency tests need a server at {url} (set DATABASE_URL, or start the \
                 local one with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`): {e}"
            ),
        };
        Db::Postgres { url, schema, options, first }
    }

    /// A new, independent handle on the database: another process's connections.
    async fn open(&self) -> Stores {
        match self {
            Db::Sqlite { path, options, .. } => {
                SqliteStore::open_with(path, options).await.expect("open the SQLite store").into_stores()
            }
            Db::Postgres { url, schema, options, .. } => {
                PgStore::connect_in_schema_with(url, schema, options)
                    .await
                    .expect("open the Postgres store")
                    .into_stores()
            }
        }
    }

    async fn cleanup(self) {
        if let Db::Postgres { first, .. } = self {
            first.drop_schema().await.expect("drop the test schema");
        }
    }
}

/// Instantiates each test for both backends: `sqlite::<test>` and `postgres::<test>`.
macro_rules! on_both_backends {
    ($($test:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::Db::sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::Db::postgres).await;
                }
            )*
        }
    };
}

on_both_backends!(
    two_workers_racing_over_one_load_give_one_decision_per_event,
    two_relays_never_send_a_row_twice_while_its_lease_holds,
    an_expired_lease_is_taken_over_and_each_row_is_sent_once_more,
    relay_loops_in_one_process_send_each_row_once_and_in_order,
);

// ---------------------------------------------------------------------------------------------
// Events and outbox rows.

fn registration(load_id: &str) -> InboundEvent {
    load_agent_testkit::events::registration(load_id, &format!("reg:{load_id}"), t0())
}

/// The registration, then `n` events of several kinds (pings changing band, questions that get
/// a reply, acknowledgements, ETAs, emails).
fn load_events(load_id: &str, n: usize) -> Vec<InboundEvent> {
    let mut events = vec![registration(load_id)];
    for i in 0..n {
        let at = t0() + TimeDelta::seconds(i as i64 + 1);
        let sms = |text: &str| EventKind::Sms { from: "drv".into(), text: text.into() };
        let kind = match i % 5 {
            0 => EventKind::Ping {
                stop: 1,
                delay_risk: [RiskBand::High, RiskBand::Low, RiskBand::Medium][(i / 5) % 3],
                recorded_at: at,
                lat: None,
                lon: None,
            },
            1 => sms("whats the po# for this one"),
            2 => sms("ok"),
            3 => sms("eta 2:30"),
            _ => EventKind::Email {
                from: "disp".into(),
                subject: format!("load {load_id}"),
                text: "driver is rolling, eta 3pm".into(),
                thread: None,
            },
        };
        events.push(InboundEvent {
            event_id: format!("{load_id}-e{i:03}"),
            load_id: load_id.into(),
            occurred_at: at,
            kind,
        });
    }
    events
}

/// The bodies of one row per destination a relay sends to a service.
fn bodies(tag: &str) -> Vec<ActionBody> {
    vec![
        ActionBody::SendSms { to: "drv".into(), body: format!("sms {tag}") },
        ActionBody::SendEmail {
            to: "disp".into(),
            subject: format!("email {tag}"),
            body: "body".into(),
            thread: EmailThread::Main,
        },
        ActionBody::PostSlack { target: SlackTarget::Broker { contact_id: "brk".into() }, text: tag.into() },
        ActionBody::TmsNote { text: format!("note {tag}") },
        ActionBody::CreateHeroTask { title: format!("task {tag}"), body: "b".into(), urgent: false },
    ]
}

/// Appends, for each load, `rounds` decisions each with one outbox row per destination; returns
/// every row id.
async fn seed_outbox(events: &dyn EventStore, loads: &[String], rounds: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for load in loads {
        for round in 0..rounds {
            let event_id = format!("{load}-seed{round}");
            let at = t0() + TimeDelta::seconds(round as i64);
            let event = InboundEvent {
                event_id: event_id.clone(),
                load_id: load.clone(),
                occurred_at: at,
                kind: EventKind::Sms { from: "drv".into(), text: "ok".into() },
            };
            let decision =
                load_agent_agent::hero_fallback_record(load, &event_id, "sms", at, None, "seed", vec![]);
            let expected = (round * 2) as u64;
            let rows: Vec<NewOutboxRow> = bodies(&event_id)
                .into_iter()
                .map(|body| {
                    let destination = body.destination().expect("a destination");
                    let id = format!("{load}/{event_id}/{}", destination.as_str());
                    NewOutboxRow {
                        id: id.clone(),
                        load_id: load.clone(),
                        destination,
                        action: Action { key: id, ask: None, body },
                        load_version: expected + 2,
                    }
                })
                .collect();
            ids.extend(rows.iter().map(|r| r.id.clone()));
            events
                .append(load, &[LogEntry::Event(event), LogEntry::Decision(decision)], expected, &rows)
                .await
                .expect("seed append");
        }
    }
    ids
}

// ---------------------------------------------------------------------------------------------
// Test doubles.

/// An event store hook that counts the appends it refused for a race: a version conflict, or an
/// entry already appended by the other worker.
struct CountingRefusals {
    refused: Arc<AtomicUsize>,
}

#[async_trait]
impl Intercept for CountingRefusals {
    async fn append_summarized(
        &self,
        inner: &dyn EventStore,
        load_id: &str,
        entries: &[LogEntry],
        expected_version: u64,
        outbox: &[NewOutboxRow],
        summary: Option<&LoadSummary>,
    ) -> Result<u64, AppendError> {
        let result = inner.append_summarized(load_id, entries, expected_version, outbox, summary).await;
        if matches!(result, Err(AppendError::Conflict { .. } | AppendError::DuplicateEntry { .. })) {
            self.refused.fetch_add(1, Ordering::SeqCst);
        }
        result
    }
}

/// A delivery service that counts the sends of each key and takes a little time per send,
/// so that concurrent relays overlap.
#[derive(Debug, Clone)]
struct CountingServices {
    name: &'static str,
    sends: Arc<Mutex<HashMap<String, u32>>>,
    delay: Duration,
}

impl CountingServices {
    fn new(name: &'static str, delay: Duration) -> Self {
        CountingServices { name, sends: Arc::default(), delay }
    }

    fn sends(&self) -> HashMap<String, u32> {
        self.sends.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[async_trait]
impl Destinations for CountingServices {
    async fn send(&self, _: Destination, command: &DeliveryCommand) -> Result<Receipt, DeliveryError> {
        *self
            .sends
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(command.idempotency_key.clone())
            .or_default() += 1;
        tokio::time::sleep(self.delay).await;
        Ok(Receipt { id: format!("{}:{}", self.name, command.idempotency_key) })
    }
}

fn relay(stores: &Stores, services: &CountingServices, clock: &FakeClock, batch: usize) -> Relay {
    let queue: Arc<dyn LoadQueue> = Arc::new(InProcessQueue::new(100_000));
    Relay::new(
        stores.outbox.clone(),
        stores.timers.clone(),
        Arc::new(services.clone()),
        queue,
        Arc::new(clock.clone()),
    )
    .with_config(RelayConfig { batch, ..RelayConfig::default() })
}

fn add(total: &mut RelayReport, r: &RelayReport) {
    total.claimed += r.claimed;
    total.delivered += r.delivered;
    total.stale += r.stale;
    total.retried += r.retried;
    total.dead += r.dead;
    total.mark_failures += r.mark_failures;
}

// ---------------------------------------------------------------------------------------------
// 1. Two workers, one load.

async fn two_workers_racing_over_one_load_give_one_decision_per_event<F, Fut>(db: F)
where
    F: FnOnce(StoreOptions) -> Fut,
    Fut: Future<Output = Db>,
{
    const EVENTS: usize = 60;
    let db = db(StoreOptions::default()).await;
    let load_id = unique("W");
    let events = Arc::new(load_events(&load_id, EVENTS));
    let clock = FakeClock::new(t0() + TimeDelta::minutes(5));
    let agent = Arc::new(Agent::embedded().expect("agent"));
    let start = Arc::new(Barrier::new(2));
    let refused = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        // Each worker is its own process: its own store handle and its own snapshot cache (the
        // one both modes run).
        let stores = db.open().await;
        let events_store: Arc<dyn EventStore> =
            Arc::new(Intercepted::new(stores.events.clone(), CountingRefusals { refused: refused.clone() }));
        let llm: Arc<dyn LlmClient> = Arc::new(FakeLlm::new());
        let snapshots: Arc<dyn SnapshotSource> =
            Arc::new(SnapshotCache::new(events_store.clone(), CacheConfig::default()));
        let worker = Worker::new(events_store, snapshots, agent.clone(), llm, Arc::new(clock.clone()));
        let (events, start) = (events.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            // Every event, in order; a given-back event is run again (the queue's nack).
            let mut outcomes = Vec::new();
            for event in events.iter() {
                let mut give_backs = 0;
                loop {
                    match worker.process_one(event.clone()).await {
                        RunOutcome::GiveBack { reason } => {
                            give_backs += 1;
                            assert!(
                                give_backs < 50,
                                "{}: given back {give_backs} times: {reason}",
                                event.event_id
                            );
                            tokio::task::yield_now().await;
                        }
                        outcome => {
                            outcomes.push((event.event_id.clone(), outcome));
                            break;
                        }
                    }
                }
            }
            drop(stores);
            outcomes
        }));
    }
    let mut committed: HashMap<String, usize> = HashMap::new();
    let mut already = 0;
    let mut conflicts = 0;
    for task in tasks {
        for (id, outcome) in task.await.expect("worker task") {
            match outcome {
                RunOutcome::Committed { conflicts: c, .. } => {
                    conflicts += c;
                    *committed.entry(id).or_default() += 1;
                }
                RunOutcome::AlreadyProcessed => already += 1,
                other => {
                    panic!("{id}: a racing redelivery must be committed or already processed, got {other:?}")
                }
            }
        }
    }
    let refused = refused.load(Ordering::SeqCst);
    eprintln!(
        "two workers: {} commits, {already} already processed, {conflicts} conflicts re-decided, \
         {refused} appends refused for a race",
        committed.len()
    );
    assert!(refused > 0, "the workers raced: some append lost to the other worker");
    assert_eq!(committed.len(), events.len(), "every event committed");
    assert!(committed.values().all(|n| *n == 1), "no event committed twice: {committed:?}");
    assert_eq!(already, events.len(), "the other worker found each event already processed");

    let stores = db.open().await;
    let (log, version) = stores.events.read(&load_id).await.expect("read the log");
    assert_eq!(version, log.len() as u64, "versions are contiguous: 1..={version}");
    assert_eq!(log.len(), 2 * events.len(), "one event and one decision per event");
    let mut decided = Vec::new();
    let mut action_keys = HashSet::new();
    for pair in log.chunks(2) {
        match pair {
            [LogEntry::Event(e), LogEntry::Decision(d)] => {
                assert_eq!(d.trigger_event_id, e.event_id, "each event is followed by its own decision");
                decided.push(e.event_id.clone());
                for a in d.effective_actions().filter(|a| a.body.destination().is_some()) {
                    assert!(action_keys.insert(a.key.clone()), "{} decided twice", a.key);
                }
            }
            other => panic!("expected an event and its decision, got {other:?}"),
        }
    }
    let want: Vec<String> = events.iter().map(|e| e.event_id.clone()).collect();
    assert_eq!(decided, want, "each event once, in the order both workers ran them");
    let rows: HashSet<String> =
        stores.outbox.rows_for_load(&load_id).await.expect("rows").into_iter().map(|r| r.id).collect();
    assert_eq!(rows, action_keys, "one outbox row per effective action of the decisions, no more");
    assert!(!rows.is_empty());
    drop(stores);
    db.cleanup().await;
}

// ---------------------------------------------------------------------------------------------
// 2. Two relays, one outbox, the lease holding.

async fn two_relays_never_send_a_row_twice_while_its_lease_holds<F, Fut>(db: F)
where
    F: FnOnce(StoreOptions) -> Fut,
    Fut: Future<Output = Db>,
{
    const LOADS: usize = 12;
    const ROUNDS: usize = 3;
    let db = db(StoreOptions::default()).await;
    let loads: Vec<String> = (0..LOADS).map(|_| unique("R")).collect();
    let seeding = db.open().await;
    let ids = seed_outbox(&*seeding.events, &loads, ROUNDS).await;
    drop(seeding);
    let total = ids.len();

    // The clock stands still: every claim's 90 s lease holds for the whole test.
    let clock = FakeClock::new(t0() + TimeDelta::minutes(1));
    let delivered = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(2));
    let mut tasks = Vec::new();
    let mut services = Vec::new();
    for name in ["a", "b"] {
        let stores = db.open().await;
        let counting = CountingServices::new(name, Duration::from_millis(2));
        services.push(counting.clone());
        let relay = relay(&stores, &counting, &clock, 16);
        let (clock, delivered, start) = (clock.clone(), delivered.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let mut report = RelayReport::default();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
            while delivered.load(Ordering::SeqCst) < total {
                assert!(tokio::time::Instant::now() < deadline, "the relays did not finish: {report:?}");
                let pass = relay.relay_once(clock.now()).await.expect("relay pass");
                delivered.fetch_add(pass.delivered, Ordering::SeqCst);
                add(&mut report, &pass);
                if pass.claimed == 0 {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            drop(stores);
            report
        }));
    }
    let mut reports = Vec::new();
    for task in tasks {
        reports.push(task.await.expect("relay task"));
    }
    eprintln!("two relays: {reports:?}");

    let (a, b) = (services[0].sends(), services[1].sends());
    let mut sent: HashMap<&String, u32> = HashMap::new();
    for (key, n) in a.iter().chain(b.iter()) {
        *sent.entry(key).or_default() += n;
    }
    let twice: Vec<_> = sent.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "rows sent twice while their lease held: {twice:?}");
    assert_eq!(sent.len(), total, "every row sent");
    assert!(!a.is_empty() && !b.is_empty(), "both relays sent rows ({} and {})", a.len(), b.len());
    for r in &reports {
        assert_eq!((r.stale, r.retried, r.dead, r.mark_failures), (0, 0, 0, 0), "{r:?}");
    }
    assert_eq!(reports.iter().map(|r| r.claimed).sum::<usize>(), total, "each row claimed once");

    let stores = db.open().await;
    for load in &loads {
        for row in stores.outbox.rows_for_load(load).await.expect("rows") {
            assert_eq!(row.status, OutboxStatus::Dispatched, "{}", row.id);
            let receipt = row.receipt.expect("a receipt");
            let sender = if a.contains_key(&row.id) { "a" } else { "b" };
            assert_eq!(receipt, format!("{sender}:{}", row.id), "marked by the relay that sent it");
        }
    }
    drop(stores);
    db.cleanup().await;
}

/// A delivery service that records the order of the keys it is sent.
#[derive(Debug, Clone, Default)]
struct OrderedServices {
    sent: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Destinations for OrderedServices {
    async fn send(&self, _: Destination, command: &DeliveryCommand) -> Result<Receipt, DeliveryError> {
        tokio::time::sleep(Duration::from_millis(2)).await;
        self.sent.lock().unwrap_or_else(|p| p.into_inner()).push(command.idempotency_key.clone());
        Ok(Receipt { id: command.idempotency_key.clone() })
    }
}

async fn relay_loops_in_one_process_send_each_row_once_and_in_order<F, Fut>(db: F)
where
    F: FnOnce(StoreOptions) -> Fut,
    Fut: Future<Output = Db>,
{
    let db = db(StoreOptions::default()).await;
    let loads: Vec<String> = (0..8).map(|_| unique("L")).collect();
    let stores = db.open().await;
    let ids = seed_outbox(&*stores.events, &loads, 3).await;
    let services = OrderedServices::default();
    let queue: Arc<dyn LoadQueue> = Arc::new(InProcessQueue::new(100_000));
    let clock = FakeClock::new(t0() + TimeDelta::minutes(1));
    let relay = Relay::new(
        stores.outbox.clone(),
        stores.timers.clone(),
        Arc::new(services.clone()),
        queue,
        Arc::new(clock.clone()),
    )
    .with_config(RelayConfig {
        batch: 6,
        concurrency: 4,
        loops: 3,
        idle_poll: Duration::from_millis(10),
        ..RelayConfig::default()
    });
    let (trigger, shutdown) = load_agent_runtime::shutdown_channel();
    let running = tokio::spawn(Arc::new(relay).run(shutdown));
    // Timer rows go to the TimerStore, not to the services.
    let expected: HashSet<&String> = ids.iter().filter(|id| !id.ends_with("/timer")).collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while services.sent.lock().unwrap_or_else(|p| p.into_inner()).len() < expected.len() {
        assert!(tokio::time::Instant::now() < deadline, "the relay loops did not send every row");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    trigger.shutdown();
    running.await.expect("the relay stops");
    let sent = services.sent.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let unique_sent: HashSet<&String> = sent.iter().collect();
    assert_eq!(sent.len(), unique_sent.len(), "a row sent twice: {sent:?}");
    assert_eq!(unique_sent, expected);
    // Per load and destination, rounds go out in commit order (`{load}/{load}-seed{round}/{dest}`).
    let mut last: HashMap<(String, String), String> = HashMap::new();
    for key in &sent {
        let mut parts = key.split('/');
        let (load, event, dest) = (parts.next(), parts.next(), parts.next());
        let (Some(load), Some(event), Some(dest)) = (load, event, dest) else { panic!("key {key}") };
        if let Some(previous) = last.insert((load.to_owned(), dest.to_owned()), event.to_owned()) {
            assert!(previous.as_str() < event, "{key} went out after {previous}");
        }
    }
    drop(stores);
    db.cleanup().await;
}

// ---------------------------------------------------------------------------------------------
// 3. An expired lease.

async fn an_expired_lease_is_taken_over_and_each_row_is_sent_once_more<F, Fut>(db: F)
where
    F: FnOnce(StoreOptions) -> Fut,
    Fut: Future<Output = Db>,
{
    const LEASE: Duration = Duration::from_secs(30);
    let db = db(StoreOptions { lease: LEASE, ..StoreOptions::default() }).await;
    let loads: Vec<String> = (0..4).map(|_| unique("X")).collect();
    let seeding = db.open().await;
    let ids = seed_outbox(&*seeding.events, &loads, 1).await;
    drop(seeding);
    let lease = TimeDelta::from_std(LEASE).expect("lease");
    let claimed_at = t0() + TimeDelta::minutes(1);
    let clock = FakeClock::new(claimed_at);

    // Relay A claims every row, sends the first three, and dies before marking anything.
    let stores_a = db.open().await;
    let services_a = CountingServices::new("a", Duration::ZERO);
    let claims = stores_a.outbox.pending(100, claimed_at).await.expect("claim");
    assert_eq!(claims.len(), ids.len(), "relay A holds every row");
    assert!(claims.iter().all(|c| c.lease_until == claimed_at + lease), "the store's lease from `now`");
    for claim in claims.iter().take(3) {
        services_a.send(claim.destination, &DeliveryCommand::from(claim)).await.expect("send");
    }

    // Relay B, another process: nothing to take while A's lease holds, even at its last second.
    let stores_b = db.open().await;
    let services_b = CountingServices::new("b", Duration::ZERO);
    let relay_b = relay(&stores_b, &services_b, &clock, 100);
    for at in [claimed_at + TimeDelta::seconds(10), claimed_at + lease - TimeDelta::seconds(1)] {
        clock.set(at);
        let pass = relay_b.relay_once(at).await.expect("pass");
        assert_eq!(pass.claimed, 0, "at {at}, A's lease holds: {pass:?}");
    }
    assert!(services_b.sends().is_empty());

    // The lease expired: B takes every row over and sends each once.
    let after = claimed_at + lease + TimeDelta::seconds(1);
    clock.set(after);
    let pass = relay_b.relay_once(after).await.expect("pass");
    assert_eq!((pass.claimed, pass.delivered, pass.stale), (ids.len(), ids.len(), 0), "{pass:?}");
    let sends_b = services_b.sends();
    assert_eq!(sends_b.len(), ids.len(), "B sent every row");
    assert!(sends_b.values().all(|n| *n == 1), "B sent each row once: {sends_b:?}");
    // At least once overall: the three A sent before dying are sent again (the service dedupes
    // on the key); none more than that.
    for claim in &claims {
        let by_a = services_a.sends().get(&claim.id).copied().unwrap_or(0);
        assert_eq!(by_a + sends_b[&claim.id], if by_a > 0 { 2 } else { 1 }, "{}", claim.id);
    }

    // A comes back: its claims are stale, its late marks are refused.
    for claim in &claims {
        let mark = stores_a.outbox.mark_dispatched(&claim.id, claim.claim_token, "a:late", after).await;
        assert!(mark.as_ref().is_err_and(|e| e.is_stale()), "{}: {mark:?}", claim.id);
        let recheck = stores_a.outbox.recheck_claim(&claim.id, claim.claim_token, after).await;
        assert!(recheck.is_err_and(|e| e.is_stale()));
    }

    // Dispatched once, by B; nothing is handed out again, however late.
    let later = after + TimeDelta::hours(1);
    clock.set(later);
    assert_eq!(relay_b.relay_once(later).await.expect("pass").claimed, 0);
    assert!(stores_a.outbox.pending(100, later).await.expect("claim").is_empty());
    for load in &loads {
        for row in stores_b.outbox.rows_for_load(load).await.expect("rows") {
            assert_eq!(row.status, OutboxStatus::Dispatched, "{}", row.id);
            assert_eq!(row.receipt, Some(format!("b:{}", row.id)), "B's receipt, not A's late mark");
            assert_eq!(row.dispatched_at, Some(after));
        }
    }
    assert_eq!(services_b.sends().values().sum::<u32>() as usize, ids.len(), "no further send");
    drop((stores_a, stores_b));
    db.cleanup().await;
}
