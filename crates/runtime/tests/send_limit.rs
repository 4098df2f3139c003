//! The per-contact send limit in front of a real outbox (SQLite): the row over the limit waits in
//! the outbox, is never dropped, spends no attempt, and its retry budget starts at the claim
//! that finally sends it.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use load_agent_domain::{Action, ActionBody, Destination, EventKind, InboundEvent, LogEntry};
use load_agent_runtime::{Clock, ContactLimitedOutbox, FakeClock, SendLimits};
use load_agent_store::{NewOutboxRow, Outbox, OutboxStatus, PgStore, SqliteStore, StoreOptions, Stores};

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

async fn seventh_sms_waits(store: Stores) {
    let entry = LogEntry::Event(InboundEvent {
        event_id: "e0".into(),
        load_id: "L1".into(),
        occurred_at: t0(),
        kind: EventKind::Sms { from: "drv".into(), text: "hi".into() },
    });
    let rows: Vec<NewOutboxRow> = (1..=7).map(|n| sms_row("L1", n)).collect();
    store.events.append("L1", &[entry], 0, &rows).await.expect("append");

    let clock = FakeClock::new(t0());
    let outbox =
        ContactLimitedOutbox::new(store.outbox.clone(), &SendLimits::default(), Arc::new(clock.clone()));
    // One row per load and destination at a time: send them one after the other.
    for n in 1..=6 {
        let claimed = outbox.pending(10, clock.now()).await.expect("claim");
        assert_eq!(claimed.len(), 1, "sms {n}");
        outbox.mark_dispatched(&claimed[0].id, claimed[0].claim_token, "r", clock.now()).await.expect("mark");
    }
    assert!(outbox.pending(10, clock.now()).await.expect("claim").is_empty(), "the seventh waits");
    let views = store.outbox.rows_for_load("L1").await.expect("rows");
    let seventh = views.iter().find(|v| v.id == sms_row("L1", 7).id).expect("still there");
    assert_eq!(seventh.status, OutboxStatus::Pending, "never dropped");
    assert_eq!(seventh.attempts, 0, "the wait is not an attempt");
    assert_eq!(seventh.first_attempt_at, None, "the wait does not spend the retry budget");
    let until = seventh.retry_at.expect("deferred until the limiter allows it");
    assert!(until > t0() && until <= t0() + TimeDelta::minutes(10) + TimeDelta::milliseconds(1), "{until}");

    clock.set(until);
    let claimed = outbox.pending(10, clock.now()).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].first_attempt_at, until, "the budget starts at the claim that sends it");
}
