//! Outbox contract: claims, leases, stale claims, batch marks, retries, deferrals, per-load order.

use std::collections::HashSet;
use std::time::Duration;

use chrono::TimeDelta;
use load_agent_domain::Destination;
use load_agent_store::{
    ClaimError, ClaimedRow, DeferredMark, DispatchedMark, FailedMark, NextAttempt, Outbox, OutboxStatus,
    StoreError,
};

use crate::fixtures::{row, sms, step, t};
use crate::harness::StoreHarness;

fn ids(rows: &[ClaimedRow]) -> Vec<&str> {
    rows.iter().map(|r| r.id.as_str()).collect()
}

fn is_stale<T: std::fmt::Debug>(r: Result<T, ClaimError>) -> bool {
    matches!(r, Err(ClaimError::Stale(_)))
}

/// Defers one row, as a batch of one: the single mark's result.
async fn defer(
    outbox: &dyn Outbox,
    id: &str,
    token: uuid::Uuid,
    until: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), ClaimError> {
    let mark = DeferredMark { id: id.to_owned(), token, until };
    let mut results = outbox.mark_deferred_batch(&[mark], now).await?;
    Ok(results.remove(0)?)
}

pub async fn claims_hand_out_due_rows_once<H: StoreHarness>(h: &H) {
    let (events, outbox) = (&h.stores().events, &h.stores().outbox);
    let (entries, rows) = step("L1", 0);
    events.append("L1", &entries, 0, &rows).await.expect("append");
    assert!(outbox.pending(0, t(100)).await.expect("claim").is_empty());

    let now = t(100);
    let claimed = outbox.pending(10, now).await.expect("claim");
    assert_eq!(ids(&claimed), rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), "commit order");
    for (c, r) in claimed.iter().zip(&rows) {
        assert_eq!(
            (c.load_id.as_str(), c.destination, &c.action, c.load_version),
            ("L1", r.destination, &r.action, 2)
        );
        assert_eq!(c.lease_until, now + TimeDelta::seconds(90), "the default lease is 90 s");
        assert_eq!((c.attempts, c.first_attempt_at), (0, now));
        assert_eq!(c.created_at, entries[1].recorded_at(), "created_at is the decision's time, not a clock");
    }
    assert_ne!(claimed[0].claim_token, claimed[1].claim_token, "a fresh token per row");
    assert!(outbox.pending(10, now).await.expect("claim").is_empty(), "a row has at most one live claim");
    assert!(outbox.pending(10, now + TimeDelta::seconds(89)).await.expect("claim").is_empty());
    for c in &claimed {
        outbox.recheck_claim(&c.id, c.claim_token, now).await.expect("the claim holds");
        outbox.mark_dispatched(&c.id, c.claim_token, "rcpt-1", now).await.expect("mark");
    }
    assert!(
        outbox.pending(10, now + TimeDelta::hours(1)).await.expect("claim").is_empty(),
        "dispatched rows stay out"
    );
    let view = outbox.rows_for_load("L1").await.expect("rows");
    assert!(
        view.iter().all(|r| r.status == OutboxStatus::Dispatched && r.receipt.as_deref() == Some("rcpt-1"))
    );
    assert!(view.iter().all(|r| r.dispatched_at == Some(now) && r.lease_until.is_none()));
}

pub async fn two_relays_never_hold_the_same_row<H: StoreHarness>(h: &H) {
    const LOADS: u64 = 30;
    let events = &h.stores().events;
    let mut all = HashSet::new();
    for n in 0..LOADS {
        let load = format!("L{n}");
        let (entries, rows) = step(&load, 0);
        all.extend(rows.iter().map(|r| r.id.clone()));
        events.append(&load, &entries, 0, &rows).await.expect("append");
    }
    let second = h.reopen().await;
    let relay = |outbox: std::sync::Arc<dyn Outbox>| {
        tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let batch = outbox.pending(3, t(100)).await.expect("claim");
                if batch.is_empty() {
                    break got;
                }
                got.extend(batch.into_iter().map(|r| r.id));
            }
        })
    };
    let (a, b) = (relay(h.stores().outbox.clone()), relay(second.outbox.clone()));
    let (a, b) = (a.await.expect("relay a"), b.await.expect("relay b"));
    let (sa, sb): (HashSet<_>, HashSet<_>) = (a.iter().cloned().collect(), b.iter().cloned().collect());
    assert_eq!(sa.len() + sb.len(), a.len() + b.len(), "no relay got a row twice");
    assert!(
        sa.is_disjoint(&sb),
        "a row was held by both relays: {:?}",
        sa.intersection(&sb).collect::<Vec<_>>()
    );
    let union: HashSet<_> = sa.union(&sb).cloned().collect();
    assert_eq!(union, all, "every row was handed out");
}

pub async fn an_expired_lease_hands_the_row_over<H: StoreHarness>(h: &H) {
    let (events, outbox) = (&h.stores().events, &h.stores().outbox);
    events.append("L1", &[sms("L1", "e", t(0))], 0, &[]).await.expect("append");
    let (entries, _) = step("L1", 5);
    events.append("L1", &entries, 1, &[row("L1", "k1", Destination::Sms, 3)]).await.expect("append");

    let first = outbox.pending(10, t(100)).await.expect("claim");
    assert_eq!(ids(&first), ["k1"]);
    let old = first[0].claim_token;
    assert!(
        is_stale(outbox.recheck_claim("k1", old, t(190)).await),
        "a lease that ran out is stale at the re-check"
    );
    let second = outbox.pending(10, t(190)).await.expect("claim after the lease");
    assert_eq!(ids(&second), ["k1"], "the expired lease hands the row over");
    let new = second[0].claim_token;
    assert_ne!(new, old);
    assert_eq!(second[0].first_attempt_at, t(100), "first_attempt_at is set once");
    assert_eq!(second[0].attempts, 0, "a lost lease is not a counted attempt");

    assert!(is_stale(outbox.mark_dispatched("k1", old, "late", t(191)).await), "the old claimant is stale");
    assert!(is_stale(outbox.mark_failed("k1", old, "x", NextAttempt::Dead, t(191)).await));
    assert!(is_stale(defer(outbox.as_ref(), "k1", old, t(300), t(191)).await));
    assert!(is_stale(outbox.recheck_claim("k1", old, t(191)).await));
    outbox.recheck_claim("k1", new, t(191)).await.expect("the new claim holds");
    outbox.mark_dispatched("k1", new, "rcpt", t(192)).await.expect("the new claimant marks");
    assert!(
        is_stale(outbox.mark_dispatched("k1", new, "again", t(193)).await),
        "an already marked row is stale"
    );
    assert!(is_stale(outbox.recheck_claim("k1", new, t(193)).await));
    assert!(is_stale(outbox.mark_dispatched("unknown", new, "r", t(193)).await));
    let view = outbox.rows_for_load("L1").await.expect("rows");
    assert_eq!(view[0].receipt.as_deref(), Some("rcpt"), "the stale marks changed nothing");
}

pub async fn failed_attempts_count_and_retry_at_is_respected<H: StoreHarness>(h: &H) {
    let (events, outbox) = (&h.stores().events, &h.stores().outbox);
    let (entries, _) = step("L1", 0);
    events.append("L1", &entries, 0, &[row("L1", "k1", Destination::Sms, 2)]).await.expect("append");

    let c = outbox.pending(10, t(100)).await.expect("claim").remove(0);
    outbox
        .mark_failed("k1", c.claim_token, "503 from sms", NextAttempt::RetryAt(t(160)), t(101))
        .await
        .expect("mark");
    assert!(outbox.pending(10, t(159)).await.expect("claim").is_empty(), "not before retry_at");
    let view = outbox.rows_for_load("L1").await.expect("rows");
    assert_eq!((view[0].status, view[0].attempts), (OutboxStatus::Pending, 1));
    assert_eq!((view[0].retry_at, view[0].last_failure.as_deref()), (Some(t(160)), Some("503 from sms")));

    let c = outbox.pending(10, t(160)).await.expect("claim").remove(0);
    assert_eq!((c.attempts, c.first_attempt_at), (1, t(100)), "first_attempt_at stays at the first claim");
    outbox
        .mark_failed("k1", c.claim_token, "400 bad number", NextAttempt::Dead, t(161))
        .await
        .expect("mark dead");
    assert!(outbox.pending(10, t(10_000)).await.expect("claim").is_empty(), "a dead row is never handed out");
    let view = outbox.rows_for_load("L1").await.expect("rows");
    assert_eq!((view[0].status, view[0].attempts, view[0].dead_at), (OutboxStatus::Dead, 2, Some(t(161))));
    assert_eq!(outbox.dead_since(t(161)).await.expect("dead"), 1);
    assert_eq!(outbox.dead_since(t(162)).await.expect("dead"), 0);
}

pub async fn deferral_does_not_count_an_attempt<H: StoreHarness>(h: &H) {
    let (events, outbox) = (&h.stores().events, &h.stores().outbox);
    let (entries, _) = step("L1", 0);
    events.append("L1", &entries, 0, &[row("L1", "k1", Destination::Sms, 2)]).await.expect("append");
    let c = outbox.pending(10, t(100)).await.expect("claim").remove(0);
    defer(outbox.as_ref(), "k1", c.claim_token, t(110), t(100)).await.expect("defer");
    assert!(
        is_stale(outbox.mark_dispatched("k1", c.claim_token, "r", t(101)).await),
        "deferral released the claim"
    );
    assert!(outbox.pending(10, t(109)).await.expect("claim").is_empty(), "deferred until 110");
    let c = outbox.pending(10, t(110)).await.expect("claim").remove(0);
    assert_eq!(c.attempts, 0, "a deferral is not an attempt");
    assert_eq!(outbox.rows_for_load("L1").await.expect("rows")[0].attempts, 0);
}

pub async fn rows_of_a_load_go_out_in_commit_order_per_destination<H: StoreHarness>(h: &H) {
    let (events, outbox) = (&h.stores().events, &h.stores().outbox);
    let append = |load: &'static str, n: u64, version: u64, rows: Vec<load_agent_store::NewOutboxRow>| async move {
        let (entries, _) = step(load, n);
        events.append(load, &entries, version, &rows).await.expect("append")
    };
    // Load A: two decisions, each with an SMS and a timer row; the second decision has two SMS.
    append(
        "A",
        0,
        0,
        vec![row("A", "a1_sms", Destination::Sms, 2), row("A", "a1_tmr", Destination::Timer, 2)],
    )
    .await;
    append(
        "A",
        1,
        2,
        vec![
            row("A", "a2_sms", Destination::Sms, 4),
            row("A", "a2_tmr", Destination::Timer, 4),
            row("A", "a2_sms_b", Destination::Sms, 4),
        ],
    )
    .await;
    // Load B is independent of A.
    append("B", 0, 0, vec![row("B", "b1_sms", Destination::Sms, 2)]).await;

    let now = t(100);
    let first = outbox.pending(10, now).await.expect("claim");
    assert_eq!(ids(&first), ["a1_sms", "a1_tmr", "b1_sms"], "one head per load and destination");
    let token =
        |rows: &[ClaimedRow], id: &str| rows.iter().find(|r| r.id == id).expect("claimed").claim_token;
    outbox.mark_dispatched("b1_sms", token(&first, "b1_sms"), "r", now).await.expect("mark");

    // The SMS head is dispatched: the next SMS of A goes out; the timer queue still waits.
    outbox.mark_dispatched("a1_sms", token(&first, "a1_sms"), "r", now).await.expect("mark");
    let second = outbox.pending(10, now).await.expect("claim");
    assert_eq!(ids(&second), ["a2_sms"]);
    // A retry keeps its place: a2_tmr waits while a1_tmr waits for its retry.
    outbox
        .mark_failed("a1_tmr", token(&first, "a1_tmr"), "x", NextAttempt::RetryAt(t(200)), now)
        .await
        .expect("mark");
    assert!(
        outbox.pending(10, t(150)).await.expect("claim").is_empty(),
        "a2_tmr waits behind a1_tmr's retry"
    );
    // A claimed head with a live lease blocks too, and so does a deferred one.
    defer(outbox.as_ref(), "a2_sms", token(&second, "a2_sms"), t(300), now).await.expect("defer");
    let third = outbox.pending(10, t(200)).await.expect("claim");
    assert_eq!(ids(&third), ["a1_tmr"], "a2_sms_b waits behind the deferred a2_sms");
    // A dead head does not block.
    outbox
        .mark_failed("a1_tmr", token(&third, "a1_tmr"), "gone", NextAttempt::Dead, t(200))
        .await
        .expect("dead");
    let fourth = outbox.pending(10, t(200)).await.expect("claim");
    assert_eq!(ids(&fourth), ["a2_tmr"]);
    outbox.mark_dispatched("a2_tmr", token(&fourth, "a2_tmr"), "r", t(200)).await.expect("mark");
    let fifth = outbox.pending(10, t(300)).await.expect("claim");
    assert_eq!(ids(&fifth), ["a2_sms"]);
    outbox.mark_dispatched("a2_sms", token(&fifth, "a2_sms"), "r", t(300)).await.expect("mark");
    assert_eq!(ids(&outbox.pending(10, t(300)).await.expect("claim")), ["a2_sms_b"]);
}

/// The relay's lag leaves out the waits the agent chose: a row deferred by a send limit (no
/// failed attempt) and the rows queued behind it are backlog, not lag, until its `retry_at`,
/// also once it is delivered; a claimed row still counts; a failing row waiting out its backoff
/// counts from its creation.
pub async fn the_relay_lag_leaves_out_chosen_waits<H: StoreHarness>(h: &H) {
    let (events, outbox) = (&h.stores().events, &h.stores().outbox);
    assert_eq!(outbox.relay_lag(t(0)).await.expect("lag"), None);
    let (entries, _) = step("L1", 0); // the decision, so created_at, is at t(1)
    let rows = [
        row("L1", "s1", Destination::Sms, 2),
        row("L1", "s2", Destination::Sms, 2),
        row("L1", "e1", Destination::Email, 2),
    ];
    events.append("L1", &entries, 0, &rows).await.expect("append");
    assert_eq!(outbox.relay_lag(t(11)).await.expect("lag"), Some(Duration::from_secs(10)));
    assert_eq!(outbox.relay_lag(t(0)).await.expect("lag"), Some(Duration::ZERO), "clamped at zero");

    let claimed = outbox.pending(10, t(11)).await.expect("claim");
    assert_eq!(ids(&claimed), ["s1", "e1"]);
    assert_eq!(
        outbox.relay_lag(t(21)).await.expect("lag"),
        Some(Duration::from_secs(20)),
        "claimed, not delivered"
    );
    let token = |id: &str| claimed.iter().find(|c| c.id == id).map(|c| c.claim_token).expect("claimed");
    outbox.mark_dispatched("e1", token("e1"), "r", t(21)).await.expect("mark");
    defer(outbox.as_ref(), "s1", token("s1"), t(600), t(21)).await.expect("defer");
    // s1 waits out its send limit and s2 waits behind it: nothing is late, all is backlog.
    assert_eq!(outbox.relay_lag(t(31)).await.expect("lag"), None);
    assert_eq!(outbox.oldest_pending_age(t(31)).await.expect("age"), Some(Duration::from_secs(30)));

    let (entries, rows2) = step("L2", 2); // at t(121)
    events.append("L2", &entries, 0, &rows2).await.expect("append");
    assert_eq!(outbox.relay_lag(t(131)).await.expect("lag"), Some(Duration::from_secs(10)));
    let claimed = outbox.pending(10, t(131)).await.expect("claim");
    assert!(claimed.iter().all(|c| c.load_id == "L2"), "L1's rows are deferred or behind a deferred one");
    let (failing, rest) = claimed.split_first().expect("L2's rows");
    outbox
        .mark_failed(&failing.id, failing.claim_token, "503", NextAttempt::RetryAt(t(900)), t(131))
        .await
        .expect("fail");
    for c in rest {
        outbox.mark_dispatched(&c.id, c.claim_token, "r", t(131)).await.expect("mark");
    }
    assert_eq!(
        outbox.relay_lag(t(141)).await.expect("lag"),
        Some(Duration::from_secs(20)),
        "failing: from creation"
    );
    let again = outbox.pending(10, t(900)).await.expect("claim");
    let retried = again.iter().find(|c| c.id == failing.id).expect("the failed row is due again");
    outbox.mark_dispatched(&retried.id, retried.claim_token, "r", t(900)).await.expect("mark");
    for c in again.iter().filter(|c| c.id != failing.id) {
        defer(outbox.as_ref(), &c.id, c.claim_token, t(1000), t(900)).await.expect("defer again");
    }
    assert_eq!(outbox.relay_lag(t(999)).await.expect("lag"), None);
    assert_eq!(outbox.relay_lag(t(1010)).await.expect("lag"), Some(Duration::from_secs(10)), "from retry_at");
    // s1 is delivered at last; s2, created at t(1), queued behind its send limit until t(1000):
    // a chosen wait, so s2 waits from there, not from its creation.
    let last = outbox.pending(10, t(1010)).await.expect("claim");
    assert_eq!(ids(&last), ["s1"]);
    outbox.mark_dispatched("s1", last[0].claim_token, "r", t(1010)).await.expect("mark");
    assert_eq!(
        outbox.relay_lag(t(1011)).await.expect("lag"),
        Some(Duration::from_secs(11)),
        "behind a deferred row: from its retry_at"
    );
}

pub async fn monitoring_queries_and_rows_for_load<H: StoreHarness>(h: &H) {
    let (events, outbox) = (&h.stores().events, &h.stores().outbox);
    assert_eq!(outbox.oldest_pending_age(t(0)).await.expect("age"), None);
    let (entries, rows) = step("L1", 0); // the decision is at t(1)
    events.append("L1", &entries, 0, &rows).await.expect("append");
    let (entries, rows2) = step("L2", 2); // at t(121)
    events.append("L2", &entries, 0, &rows2).await.expect("append");
    assert_eq!(outbox.oldest_pending_age(t(31)).await.expect("age"), Some(Duration::from_secs(30)));
    assert_eq!(outbox.oldest_pending_age(t(0)).await.expect("age"), Some(Duration::ZERO), "clamped at zero");
    for c in outbox.pending(10, t(130)).await.expect("claim").into_iter().filter(|c| c.load_id == "L1") {
        outbox.mark_dispatched(&c.id, c.claim_token, "r", t(130)).await.expect("mark");
    }
    assert_eq!(outbox.oldest_pending_age(t(131)).await.expect("age"), Some(Duration::from_secs(10)));
    let view = outbox.rows_for_load("L2").await.expect("rows");
    assert_eq!(
        view.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        rows2.iter().map(|r| r.id.as_str()).collect::<Vec<_>>()
    );
    assert!(
        view.iter()
            .all(|r| r.status == OutboxStatus::Pending
                && r.lease_until == Some(t(130) + TimeDelta::seconds(90)))
    );
    assert!(view.iter().all(|r| r.load_version == 6 && r.first_attempt_at == Some(t(130))));
    assert!(outbox.rows_for_load("none").await.expect("rows").is_empty());
    assert_eq!(outbox.dead_since(t(0)).await.expect("dead"), 0);
}

/// One decision with one SMS row `key` for `load`.
async fn one_row<H: StoreHarness>(h: &H, load: &str, key: &str) {
    let (entries, _) = step(load, 0);
    h.stores()
        .events
        .append(load, &entries, 0, &[row(load, key, Destination::Sms, 2)])
        .await
        .expect("append");
}

/// Rows k1..k3 of loads L1..L3: k2 is claimed first and its lease runs out; a second claim
/// takes it over with k1 and k3. Returns k2's first claim and the second claim's rows.
async fn k2_taken_over<H: StoreHarness>(h: &H) -> (ClaimedRow, Vec<ClaimedRow>) {
    let outbox = &h.stores().outbox;
    one_row(h, "L2", "k2").await;
    let old = outbox.pending(10, t(10)).await.expect("claim").remove(0);
    one_row(h, "L1", "k1").await;
    one_row(h, "L3", "k3").await;
    let claimed = outbox.pending(10, t(101)).await.expect("claim after k2's lease");
    assert_eq!(ids(&claimed), ["k2", "k1", "k3"]);
    (old, claimed)
}

fn mark(c: &ClaimedRow, token: uuid::Uuid) -> DispatchedMark {
    DispatchedMark { id: c.id.clone(), token, receipt: format!("rcpt-{}", c.id) }
}

pub async fn a_batch_mark_marks_the_held_rows_and_reports_a_lost_claim_stale<H: StoreHarness>(h: &H) {
    let outbox = &h.stores().outbox;
    let (old, claimed) = k2_taken_over(h).await;
    let by_id = |id: &str| claimed.iter().find(|c| c.id == id).expect("claimed");

    // The relay that lost k2 marks its whole batch: the lost claim sits in the middle.
    let batch = [mark(by_id("k1"), by_id("k1").claim_token), mark(&old, old.claim_token), {
        let k3 = by_id("k3");
        mark(k3, k3.claim_token)
    }];
    let results = outbox.mark_dispatched_batch(&batch, t(102)).await.expect("batch mark");
    assert_eq!(results.len(), 3, "one result per mark, in order");
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    assert_eq!(results[1].as_ref().map_err(|e| e.id.as_str()), Err("k2"), "the lost claim is stale");

    let view = |load: &'static str| async move { outbox.rows_for_load(load).await.expect("rows").remove(0) };
    for (load, key) in [("L1", "k1"), ("L3", "k3")] {
        let r = view(load).await;
        assert_eq!(
            (r.status, r.receipt.as_deref()),
            (OutboxStatus::Dispatched, Some(format!("rcpt-{key}").as_str()))
        );
        assert_eq!((r.dispatched_at, r.lease_until), (Some(t(102)), None));
    }
    let k2 = view("L2").await;
    assert_eq!(
        (k2.status, k2.receipt, k2.lease_until),
        (OutboxStatus::Pending, None, Some(t(191))),
        "unchanged"
    );
    // The new holder of k2 still marks it; the rows already marked are stale to a second batch.
    let again = [mark(by_id("k2"), by_id("k2").claim_token), mark(by_id("k1"), by_id("k1").claim_token)];
    let results = outbox.mark_dispatched_batch(&again, t(103)).await.expect("batch mark");
    assert!(results[0].is_ok(), "{results:?}");
    assert!(results[1].is_err(), "an already marked row is stale: {results:?}");
    assert_eq!(view("L2").await.receipt.as_deref(), Some("rcpt-k2"));
    assert_eq!(view("L1").await.dispatched_at, Some(t(102)), "the stale re-mark changed nothing");
    // A mark of a row that does not exist is stale too.
    let unknown = DispatchedMark { id: "unknown".into(), token: old.claim_token, receipt: "r".into() };
    let results = outbox.mark_dispatched_batch(&[unknown], t(104)).await.expect("batch mark");
    assert!(results[0].is_err());
}

pub async fn an_empty_or_repeating_batch_mark_marks_nothing<H: StoreHarness>(h: &H) {
    let outbox = &h.stores().outbox;
    one_row(h, "L1", "k1").await;
    one_row(h, "L2", "k2").await;
    let claimed = outbox.pending(10, t(100)).await.expect("claim");
    assert!(outbox.mark_dispatched_batch(&[], t(101)).await.expect("empty batch").is_empty());
    // A row named twice is a caller bug: refused as a whole, nothing marked.
    let twice = [
        mark(&claimed[0], claimed[0].claim_token),
        mark(&claimed[1], claimed[1].claim_token),
        mark(&claimed[0], claimed[0].claim_token),
    ];
    let refused = outbox.mark_dispatched_batch(&twice, t(101)).await;
    assert!(matches!(refused, Err(StoreError::InvalidRequest(_))), "{refused:?}");
    for load in ["L1", "L2"] {
        let r = outbox.rows_for_load(load).await.expect("rows").remove(0);
        assert_eq!((r.status, r.lease_until), (OutboxStatus::Pending, Some(t(190))), "{load} still claimed");
    }
    // The claims still hold: the batch goes through once it names each row once.
    let results = outbox.mark_dispatched_batch(&twice[..2], t(102)).await.expect("batch mark");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert!(outbox.pending(10, t(10_000)).await.expect("claim").is_empty(), "both dispatched");
}

fn failed(c: &ClaimedRow, token: uuid::Uuid, next: NextAttempt) -> FailedMark {
    FailedMark { id: c.id.clone(), token, failure: format!("503 for {}", c.id), next }
}

/// A batch of failures (a service down fails the relay's whole batch) is marked as the single
/// marks would mark each row: a retry counts the attempt and waits for its time, a dead row is
/// buried, a lost claim is stale and its row unchanged, and a row named twice refuses it all.
pub async fn a_failed_batch_mark_retries_buries_and_reports_a_lost_claim_stale<H: StoreHarness>(h: &H) {
    let outbox = &h.stores().outbox;
    let (old, claimed) = k2_taken_over(h).await;
    let by_id = |id: &str| claimed.iter().find(|c| c.id == id).expect("claimed");
    let (k1, k3) = (by_id("k1"), by_id("k3"));

    let twice =
        [failed(k1, k1.claim_token, NextAttempt::Dead), failed(k1, k1.claim_token, NextAttempt::Dead)];
    let refused = outbox.mark_failed_batch(&twice, t(102)).await;
    assert!(matches!(refused, Err(StoreError::InvalidRequest(_))), "{refused:?}");
    assert!(outbox.mark_failed_batch(&[], t(102)).await.expect("empty batch").is_empty());

    let batch = [
        failed(k1, k1.claim_token, NextAttempt::RetryAt(t(160))),
        failed(&old, old.claim_token, NextAttempt::Dead),
        failed(k3, k3.claim_token, NextAttempt::Dead),
    ];
    let results = outbox.mark_failed_batch(&batch, t(102)).await.expect("batch mark");
    assert_eq!(results.len(), 3, "one result per mark, in order");
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    assert_eq!(results[1].as_ref().map_err(|e| e.id.as_str()), Err("k2"), "the lost claim is stale");

    let view = |load: &'static str| async move { outbox.rows_for_load(load).await.expect("rows").remove(0) };
    let r1 = view("L1").await;
    assert_eq!(
        (r1.status, r1.attempts, r1.retry_at, r1.lease_until),
        (OutboxStatus::Pending, 1, Some(t(160)), None)
    );
    assert_eq!((r1.last_failure.as_deref(), r1.dead_at), (Some("503 for k1"), None));
    let r3 = view("L3").await;
    assert_eq!(
        (r3.status, r3.attempts, r3.dead_at, r3.lease_until),
        (OutboxStatus::Dead, 1, Some(t(102)), None)
    );
    assert_eq!((r3.last_failure.as_deref(), r3.retry_at), (Some("503 for k3"), None));
    let r2 = view("L2").await;
    assert_eq!((r2.status, r2.attempts, r2.last_failure), (OutboxStatus::Pending, 0, None), "unchanged");
    assert_eq!(outbox.dead_since(t(102)).await.expect("dead"), 1);

    // The retried row waits for its time; the dead one never comes back; k2's holder marks it.
    let due = outbox.pending(10, t(159)).await.expect("claim");
    assert!(due.is_empty(), "k2 still held, k1 not due, k3 dead: {:?}", ids(&due));
    let k2 = by_id("k2");
    let results = outbox.mark_failed_batch(&[failed(k2, k2.claim_token, NextAttempt::Dead)], t(103)).await;
    assert!(results.expect("batch mark")[0].is_ok());
    assert_eq!(ids(&outbox.pending(10, t(160)).await.expect("claim")), ["k1"]);
}

fn deferred(c: &ClaimedRow, token: uuid::Uuid, until: chrono::DateTime<chrono::Utc>) -> DeferredMark {
    DeferredMark { id: c.id.clone(), token, until }
}

/// A send limit's deferrals of one claim are one batch mark: each held row is released until its
/// own time without counting an attempt, a lost claim is stale and its row unchanged, and a row
/// named twice refuses it all.
pub async fn a_deferred_batch_mark_releases_the_held_rows_and_reports_a_lost_claim_stale<H: StoreHarness>(
    h: &H,
) {
    let outbox = &h.stores().outbox;
    let (old, claimed) = k2_taken_over(h).await;
    let by_id = |id: &str| claimed.iter().find(|c| c.id == id).expect("claimed");
    let (k1, k3) = (by_id("k1"), by_id("k3"));

    let twice = [deferred(k1, k1.claim_token, t(150)), deferred(k1, k1.claim_token, t(160))];
    let refused = outbox.mark_deferred_batch(&twice, t(102)).await;
    assert!(matches!(refused, Err(StoreError::InvalidRequest(_))), "{refused:?}");
    assert!(outbox.mark_deferred_batch(&[], t(102)).await.expect("empty batch").is_empty());

    let batch = [
        deferred(k1, k1.claim_token, t(150)),
        deferred(&old, old.claim_token, t(500)),
        deferred(k3, k3.claim_token, t(170)),
    ];
    let results = outbox.mark_deferred_batch(&batch, t(102)).await.expect("batch mark");
    assert_eq!(results.len(), 3, "one result per mark, in order");
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    assert_eq!(results[1].as_ref().map_err(|e| e.id.as_str()), Err("k2"), "the lost claim is stale");

    let view = |load: &'static str| async move { outbox.rows_for_load(load).await.expect("rows").remove(0) };
    for (load, until) in [("L1", t(150)), ("L3", t(170))] {
        let r = view(load).await;
        assert_eq!(
            (r.status, r.attempts, r.retry_at, r.lease_until, r.first_attempt_at),
            (OutboxStatus::Pending, 0, Some(until), None, None),
            "{load}: released until its own time, no attempt counted, its budget not started"
        );
    }
    let k2 = view("L2").await;
    assert_eq!((k2.retry_at, k2.lease_until), (None, Some(t(191))), "unchanged");

    // Each row comes back at its own time; k2's holder still marks it.
    let k2 = by_id("k2");
    let results = outbox.mark_deferred_batch(&[deferred(k2, k2.claim_token, t(160))], t(103)).await;
    assert!(results.expect("batch mark")[0].is_ok());
    assert_eq!(ids(&outbox.pending(10, t(150)).await.expect("claim")), ["k1"]);
    assert_eq!(ids(&outbox.pending(10, t(170)).await.expect("claim")), ["k2", "k3"]);
}
