//! The per-contact send limit in front of a real outbox (SQLite): the row over the limit waits in
//! the outbox, is never dropped, spends no attempt, and its retry budget starts at the claim
//! that finally sends it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use load_agent_domain::{Action, ActionBody, Destination, EventKind, InboundEvent, LogEntry};
use load_agent_runtime::{Clock, ContactLimitedOutbox, FakeClock, SendLimits};
use load_agent_store::{
    DeferredMark, NewOutboxRow, Outbox, OutboxStatus, PgStore, SqliteStore, StaleClaimError, StoreError,
    StoreOptions, Stores,
};

/// The store's outbox, counting the deferral marks that reach it. (`DelegatingOutbox` is named,
/// not imported: in scope, its methods would be ambiguous with `Outbox`'s on the wrappers.)
struct CountingDeferrals {
    inner: Arc<dyn Outbox>,
    calls: AtomicUsize,
    rows: AtomicUsize,
}

#[async_trait]
impl load_agent_store::DelegatingOutbox for CountingDeferrals {
    fn inner(&self) -> &dyn Outbox {
        self.inner.as_ref()
    }

    async fn mark_deferred_batch(
        &self,
        marks: &[DeferredMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.rows.fetch_add(marks.len(), Ordering::Relaxed);
        self.inner.mark_deferred_batch(marks, now).await
    }
}

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 13, 0, 0).single().unwrap_or_default()
}

fn sms_row(load: &str, n: u32) -> NewOutboxRow {
    let key = format!("{load}/evt:e{n}/send_sms");
    NewOutboxRow {
        id: key.clone(),
        load_id: load.into(),
        destination: Destination::Sms,
        action: Action {
            key,
            ask: None,
            body: ActionBody::SendSms { to: "drv".into(), body: format!("message {n}") },
        },
        load_version: 1,
    }
}

#[tokio::test]
async fn on_sqlite_the_seventh_sms_in_an_hour_waits_in_the_outbox_without_spending_its_budget() {
    let store = SqliteStore::open_temporary(&StoreOptions::default()).await.expect("sqlite").into_stores();
    seventh_sms_waits(store).await;
}

#[tokio::test]
async fn on_postgres_the_seventh_sms_in_an_hour_waits_in_the_outbox_without_spending_its_budget() {
    let url = std::env::var("DATABASE_URL")
        .expect("DATABASE_URL is not set: run ./scripts/test.sh (it starts PostgreSQL and exports it)");
    let schema = format!("send_limit_{}", std::process::id());
    let pg = PgStore::connect_in_schema(&url, &schema).await.expect("postgres");
    seventh_sms_waits(pg.clone().into_stores()).await;
    pg.drop_schema().await.expect("drop the test schema");
}

/// Three loads, each with seven SMS to its driver: the seventh of each waits. The three are
/// over their limits in the same claim, so their deferrals are marked together.
async fn seventh_sms_waits(store: Stores) {
    let loads = ["L1", "L2", "L3"];
    for load in loads {
        let entry = LogEntry::Event(InboundEvent {
            event_id: "e0".into(),
            load_id: load.into(),
            occurred_at: t0(),
            kind: EventKind::Sms { from: "drv".into(), text: "hi".into() },
        });
        let rows: Vec<NewOutboxRow> = (1..=7).map(|n| sms_row(load, n)).collect();
        store.events.append(load, &[entry], 0, &rows).await.expect("append");
    }

    let clock = FakeClock::new(t0());
    let counted = Arc::new(CountingDeferrals {
        inner: store.outbox.clone(),
        calls: AtomicUsize::new(0),
        rows: AtomicUsize::new(0),
    });
    let outbox = ContactLimitedOutbox::new(counted.clone(), &SendLimits::default(), Arc::new(clock.clone()));
    // One row per load and destination at a time: each claim hands out one row of each load.
    for n in 1..=6 {
        let claimed = outbox.pending(10, clock.now()).await.expect("claim");
        assert_eq!(claimed.len(), loads.len(), "sms {n}");
        for row in &claimed {
            outbox.mark_dispatched(&row.id, row.claim_token, "r", clock.now()).await.expect("mark");
        }
    }
    assert!(outbox.pending(10, clock.now()).await.expect("claim").is_empty(), "the seventh waits");
    assert_eq!(
        (counted.calls.load(Ordering::Relaxed), counted.rows.load(Ordering::Relaxed)),
        (1, loads.len()),
        "the claim's three deferrals are one batch mark"
    );
    let mut untils = Vec::new();
    for load in loads {
        let views = store.outbox.rows_for_load(load).await.expect("rows");
        let seventh = views.iter().find(|v| v.id == sms_row(load, 7).id).expect("still there");
        assert_eq!(seventh.status, OutboxStatus::Pending, "{load}: never dropped");
        assert_eq!(seventh.attempts, 0, "{load}: the wait is not an attempt");
        assert_eq!(seventh.first_attempt_at, None, "{load}: the wait does not spend the retry budget");
        let until = seventh.retry_at.expect("deferred until the limiter allows it");
        assert!(
            until > t0() && until <= t0() + TimeDelta::minutes(10) + TimeDelta::milliseconds(1),
            "{until}"
        );
        untils.push(until);
    }

    clock.set(untils.iter().copied().max().unwrap_or_else(t0));
    let claimed = outbox.pending(10, clock.now()).await.expect("claim");
    assert_eq!(claimed.len(), loads.len(), "each load's seventh goes once its wait is over");
    for row in &claimed {
        assert_eq!(
            row.first_attempt_at,
            clock.now(),
            "{}: the budget starts at the claim that sends it",
            row.load_id
        );
    }
}
