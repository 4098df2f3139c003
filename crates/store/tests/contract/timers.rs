//! TimerStore contract: idempotent schedule, cancel and mark_fired (a batch in one call); due order
//! and lag.

use std::time::Duration;

use chrono::{DateTime, Utc};
use load_agent_store::{TimerRow, TimerStatus};

use crate::fixtures::t;
use crate::harness::StoreHarness;

fn timer(id: &str, fire_at: i64) -> TimerRow {
    TimerRow {
        timer_id: id.into(),
        load_id: "L1".into(),
        ask_id: "ask:eta_request:p".into(),
        attempt: 2,
        fire_at: t(fire_at),
    }
}

fn due_ids(rows: &[TimerRow]) -> Vec<&str> {
    rows.iter().map(|r| r.timer_id.as_str()).collect()
}

pub async fn schedule_is_idempotent<H: StoreHarness>(h: &H) {
    let timers = &h.stores().timers;
    timers.schedule(&timer("a", 100)).await.expect("schedule");
    timers.schedule(&timer("a", 500)).await.expect("schedule again");
    assert!(timers.due(t(99), 10).await.expect("due").is_empty());
    assert_eq!(
        timers.due(t(100), 10).await.expect("due"),
        vec![timer("a", 100)],
        "the second schedule changed nothing"
    );
}

pub async fn cancel_is_idempotent_and_sticks<H: StoreHarness>(h: &H) {
    let timers = &h.stores().timers;
    timers.schedule(&timer("a", 100)).await.expect("schedule");
    timers.cancel("L1", "a", t(50)).await.expect("cancel");
    timers.cancel("L1", "a", t(60)).await.expect("cancel again");
    assert!(timers.due(t(1000), 10).await.expect("due").is_empty());
    // Cancelled before it was scheduled (the relay applied the rows out of order): stays cancelled.
    timers.cancel("L1", "b", t(70)).await.expect("cancel unknown");
    timers.schedule(&timer("b", 100)).await.expect("schedule after cancel");
    assert!(timers.due(t(1000), 10).await.expect("due").is_empty(), "cancel-then-schedule stays cancelled");
    let view = timers.timers_for_load("L1").await.expect("timers");
    let status: Vec<_> = view.iter().map(|v| (v.timer_id.as_str(), v.status, v.cancelled_at)).collect();
    assert_eq!(
        status,
        [("a", TimerStatus::Cancelled, Some(t(50))), ("b", TimerStatus::Cancelled, Some(t(70)))]
    );
}

fn ids(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

/// The pump marks a whole batch in one call: every scheduled one is marked, a cancelled one,
/// an already fired one and an unknown id are left as they are.
pub async fn mark_fired_marks_a_batch_in_one_call<H: StoreHarness>(h: &H) {
    let timers = &h.stores().timers;
    for id in ["a", "b", "c", "d"] {
        timers.schedule(&timer(id, 100)).await.expect("schedule");
    }
    timers.cancel("L1", "c", t(100)).await.expect("cancel");
    timers.mark_fired(&ids(&["d"]), t(101)).await.expect("fired d");
    let batch: Vec<String> = ["a", "b", "c", "d", "zz"].iter().map(|s| (*s).to_owned()).collect();
    timers.mark_fired(&batch, t(102)).await.expect("fired the batch");
    assert!(timers.due(t(1000), 10).await.expect("due").is_empty());
    let view = timers.timers_for_load("L1").await.expect("timers");
    let got: Vec<(&str, TimerStatus, Option<DateTime<Utc>>)> =
        view.iter().map(|v| (v.timer_id.as_str(), v.status, v.fired_at)).collect();
    assert_eq!(
        got,
        [
            ("a", TimerStatus::Fired, Some(t(102))),
            ("b", TimerStatus::Fired, Some(t(102))),
            ("c", TimerStatus::Cancelled, None),
            ("d", TimerStatus::Fired, Some(t(101))),
        ]
    );
}

pub async fn mark_fired_is_idempotent<H: StoreHarness>(h: &H) {
    let timers = &h.stores().timers;
    timers.schedule(&timer("a", 100)).await.expect("schedule");
    assert_eq!(due_ids(&timers.due(t(100), 10).await.expect("due")), ["a"]);
    timers.mark_fired(&ids(&["a"]), t(101)).await.expect("fired");
    timers.mark_fired(&ids(&["a"]), t(102)).await.expect("fired again");
    timers.cancel("L1", "a", t(103)).await.expect("cancel after firing");
    timers.mark_fired(&ids(&["unknown"]), t(103)).await.expect("fired unknown");
    timers.mark_fired(&[], t(103)).await.expect("nothing to mark");
    assert!(timers.due(t(1000), 10).await.expect("due").is_empty());
    let view = timers.timers_for_load("L1").await.expect("timers");
    assert_eq!(view.len(), 1);
    assert_eq!(
        (view[0].status, view[0].fired_at, view[0].cancelled_at),
        (TimerStatus::Fired, Some(t(101)), None)
    );
    assert_eq!((view[0].attempt, view[0].fire_at), (2, t(100)));
}

pub async fn due_is_oldest_first_with_a_limit_and_lag<H: StoreHarness>(h: &H) {
    let timers = &h.stores().timers;
    assert_eq!(timers.oldest_due_lag(t(0)).await.expect("lag"), None);
    assert_eq!(timers.next_fire_at().await.expect("next"), None, "nothing scheduled");
    for (id, at) in [("c", 300), ("a", 100), ("d", 400), ("b", 200), ("b2", 200), ("e", 10_000)] {
        timers.schedule(&timer(id, at)).await.expect("schedule");
    }
    assert_eq!(due_ids(&timers.due(t(400), 10).await.expect("due")), ["a", "b", "b2", "c", "d"]);
    assert_eq!(due_ids(&timers.due(t(400), 2).await.expect("due")), ["a", "b"]);
    assert_eq!(due_ids(&timers.due(t(250), 10).await.expect("due")), ["a", "b", "b2"]);
    assert_eq!(timers.oldest_due_lag(t(160)).await.expect("lag"), Some(Duration::from_secs(60)));
    timers.mark_fired(&ids(&["a"]), t(160)).await.expect("fired");
    assert_eq!(timers.oldest_due_lag(t(160)).await.expect("lag"), None, "nothing else is due at 160");
    assert_eq!(timers.oldest_due_lag(t(230)).await.expect("lag"), Some(Duration::from_secs(30)));
    // The pump's wake-up: the earliest scheduled timer, due or not; fired and cancelled ones
    // do not count.
    assert_eq!(timers.next_fire_at().await.expect("next"), Some(t(200)));
    timers.mark_fired(&ids(&["b", "b2", "c", "d"]), t(400)).await.expect("fired");
    assert_eq!(timers.next_fire_at().await.expect("next"), Some(t(10_000)));
    timers.cancel("L1", "e", t(400)).await.expect("cancel");
    assert_eq!(timers.next_fire_at().await.expect("next"), None);
}
