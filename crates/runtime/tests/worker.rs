//! The worker's checks around a decision (behavior.md §1): a redelivered event is already
//! processed, an id reused for another event is invalid (also when a stale snapshot lets it past,
//! caught at the append), event times are judged against the worker's clock, and a trusted
//! snapshot cache that another writer made stale costs a re-decision, never a wrong commit.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use load_agent_agent::{Agent, InvalidEvent};
use load_agent_domain::{EventKind, InboundEvent, LoadState, decision_id_for};
use load_agent_llm::FakeLlm;
use load_agent_runtime::{
    CacheConfig, FakeClock, LogProjection, RunOutcome, SnapshotCache, SnapshotSource, Worker,
};
use load_agent_store::{EventStore, SqliteStore, StoreOptions};
use load_agent_testkit::load::sample_load;
use load_agent_testkit::t0;

fn registration() -> InboundEvent {
    InboundEvent {
        event_id: "reg".into(),
        load_id: "L1".into(),
        occurred_at: t0(),
        kind: EventKind::LoadRegistered { load: sample_load("L1") },
    }
}

fn sms(id: &str, text: &str, at: DateTime<Utc>) -> InboundEvent {
    InboundEvent {
        event_id: id.into(),
        load_id: "L1".into(),
        occurred_at: at,
        kind: EventKind::Sms { from: "drv".into(), text: text.into() },
    }
}

async fn worker(clock: &FakeClock) -> (Worker, SqliteStore) {
    let store = SqliteStore::open_temporary(&StoreOptions::default()).await.expect("sqlite");
    let events: Arc<dyn EventStore> = Arc::new(store.clone());
    let worker = Worker::new(
        events.clone(),
        Arc::new(LogProjection::new(events)),
        Arc::new(Agent::embedded().expect("agent")),
        Arc::new(FakeLlm::new()),
        Arc::new(clock.clone()),
    );
    assert!(matches!(worker.process_one(registration()).await, RunOutcome::Committed { .. }));
    (worker, store)
}

fn assert_reused(outcome: &RunOutcome, id: &str) {
    match outcome {
        RunOutcome::Invalid(InvalidEvent::EventIdReused { event_id, .. }) => assert_eq!(event_id, id),
        other => panic!("expected event_id_reused for {id}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_redelivery_is_already_processed_and_a_reused_id_is_invalid() {
    let clock = FakeClock::new(t0());
    let (worker, store) = worker(&clock).await;
    let first = sms("s1", "eta 2:30", t0());
    assert!(matches!(worker.process_one(first.clone()).await, RunOutcome::Committed { .. }));
    let (_, before) = store.read("L1").await.expect("read");
    assert_eq!(worker.process_one(first.clone()).await, RunOutcome::AlreadyProcessed);
    // The registration, logged with its SOP version pinned, redelivered as it was sent.
    assert_eq!(worker.process_one(registration()).await, RunOutcome::AlreadyProcessed);
    let outcome = worker.process_one(sms("s1", "running 2 hours late", t0())).await;
    assert_reused(&outcome, "s1");
    let RunOutcome::Invalid(reason) = outcome else { unreachable!() };
    assert!(reason.to_string().contains("a different sms payload"), "{reason}");
    // An event under the id of a decision entry.
    assert_reused(&worker.process_one(sms(&decision_id_for("s1"), "ok", t0())).await, "dec:s1");
    let (_, after) = store.read("L1").await.expect("read");
    assert_eq!(before, after, "nothing written");
}

#[tokio::test]
async fn a_reused_id_that_races_past_a_stale_snapshot_is_caught_at_the_append() {
    // A snapshot that does not know the logged events (a stale cache): the store refuses
    // the entry, and the logged event is compared then.
    struct Forgetful(LogProjection);
    #[async_trait]
    impl SnapshotSource for Forgetful {
        async fn snapshot(&self, load_id: &str) -> Result<LoadState, load_agent_store::StoreError> {
            let mut s = self.0.snapshot(load_id).await?;
            s.event_ids = Default::default();
            Ok(s)
        }
    }
    let clock = FakeClock::new(t0());
    let (worker, store) = worker(&clock).await;
    assert!(matches!(worker.process_one(sms("s1", "ok", t0())).await, RunOutcome::Committed { .. }));
    let events: Arc<dyn EventStore> = Arc::new(store.clone());
    let forgetful = Worker::new(
        events.clone(),
        Arc::new(Forgetful(LogProjection::new(events))),
        Arc::new(Agent::embedded().expect("agent")),
        Arc::new(FakeLlm::new()),
        Arc::new(clock.clone()),
    );
    assert_eq!(forgetful.process_one(sms("s1", "ok", t0())).await, RunOutcome::AlreadyProcessed);
    assert_reused(&forgetful.process_one(sms("s1", "whats the po#", t0())).await, "s1");
}

#[tokio::test]
async fn event_times_are_judged_against_the_workers_clock() {
    let clock = FakeClock::new(t0());
    let (worker, _store) = worker(&clock).await;
    let ahead = sms("s2", "ok", t0() + TimeDelta::days(2));
    let outcome = worker.process_one(ahead.clone()).await;
    assert!(
        matches!(outcome, RunOutcome::Invalid(InvalidEvent::BadTimestamp { field: "occurred_at", .. })),
        "{outcome:?}"
    );
    // Later, by the same clock, the same event is on time.
    clock.set(t0() + TimeDelta::days(2));
    assert!(matches!(worker.process_one(ahead).await, RunOutcome::Committed { .. }));
    // A redelivery much later is still a redelivery, not a stale event.
    clock.set(t0() + TimeDelta::days(800));
    assert_eq!(
        worker.process_one(sms("s2", "ok", t0() + TimeDelta::days(2))).await,
        RunOutcome::AlreadyProcessed
    );
}

#[tokio::test]
async fn a_trusted_cache_made_stale_by_another_writer_conflicts_and_re_decides() {
    // Two workers over one log, each with a trusting cache (as two processes would be while a
    // rebalance moves a load between them): each commits on a state the other made stale.
    let clock = FakeClock::new(t0());
    let store = SqliteStore::open_temporary(&StoreOptions::default()).await.expect("sqlite");
    let events: Arc<dyn EventStore> = Arc::new(store.clone());
    let trusting = || {
        let cache =
            SnapshotCache::new(events.clone(), CacheConfig { trusted: true, ..CacheConfig::default() });
        let worker = Worker::new(
            events.clone(),
            Arc::new(cache.clone()),
            Arc::new(Agent::embedded().expect("agent")),
            Arc::new(FakeLlm::new()),
            Arc::new(clock.clone()),
        );
        (worker, cache)
    };
    let (a, a_cache) = trusting();
    let (b, _) = trusting();
    assert!(matches!(a.process_one(registration()).await, RunOutcome::Committed { version: 2, .. }));
    assert!(matches!(
        a.process_one(sms("s1", "eta 2:30", t0())).await,
        RunOutcome::Committed { version: 4, .. }
    ));
    assert_eq!(a_cache.stats().trusted, 1, "a's second run read nothing");
    // b reads the log (a miss) and commits behind a's back.
    assert!(matches!(
        b.process_one(sms("s2", "loaded", t0())).await,
        RunOutcome::Committed { version: 6, .. }
    ));
    // a's trusted snapshot is at 4: its append conflicts, it reads the log and re-decides.
    match a.process_one(sms("s3", "running late", t0())).await {
        RunOutcome::Committed { version, conflicts, .. } => assert_eq!((version, conflicts), (8, 1)),
        other => panic!("expected a commit after one conflict, got {other:?}"),
    }
    // b's snapshot is stale too, and the event it is given again is already in the log.
    assert_eq!(b.process_one(sms("s3", "running late", t0())).await, RunOutcome::AlreadyProcessed);
    let (entries, version) = store.read("L1").await.expect("read");
    assert_eq!((entries.len(), version), (8, 8), "every event and decision once, in order");
    // Told that others may have written (a rebalance), a verifies once before trusting again.
    let trusted = a_cache.stats().trusted;
    a.distrust_snapshots();
    assert!(matches!(a.process_one(sms("s4", "ok", t0())).await, RunOutcome::Committed { conflicts: 0, .. }));
    assert_eq!(a_cache.stats().trusted, trusted, "verified against the log, not trusted");
    assert!(matches!(a.process_one(sms("s5", "ok", t0())).await, RunOutcome::Committed { conflicts: 0, .. }));
    assert_eq!(a_cache.stats().trusted, trusted + 1, "trusted again after the verification");
}
