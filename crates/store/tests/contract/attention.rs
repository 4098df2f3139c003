//! The console's attention list (`LoadIndex`): the summary is written with the append and only
//! with it, a later version wins, and the list finds each reason through its index, filters,
//! counts, orders and pages the same on both backends.

use chrono::{DateTime, Duration, Utc};
use load_agent_domain::{Destination, LoadSummary, Stage};
use load_agent_store::{AppendError, AppendRequest, AttentionQuery, AttentionReason, NextAttempt, TimerRow};

use crate::fixtures::{row, step, t};
use crate::harness::StoreHarness;

fn summary(client: &str, stage: Stage, version: u64, at: DateTime<Utc>) -> LoadSummary {
    LoadSummary {
        client: Some(client.into()),
        stage,
        version,
        open_asks: 0,
        escalated_asks: 0,
        escalated_since: None,
        urgent_task_at: None,
        updated_at: at,
    }
}

fn query(now: DateTime<Utc>) -> AttentionQuery {
    AttentionQuery {
        now,
        window: Duration::hours(72),
        overdue_after: Duration::seconds(60),
        client: None,
        stage: None,
        reason: None,
        offset: 0,
        limit: 50,
    }
}

/// Appends a load's first event and decision with `summary`.
async fn append_with<H: StoreHarness>(h: &H, load: &str, s: &LoadSummary) {
    let (entries, _) = step(load, 0);
    h.stores()
        .events
        .append_summarized(load, &entries, 0, &[], Some(s))
        .await
        .unwrap_or_else(|e| panic!("append {load}: {e}"));
}

fn ids(page: &load_agent_store::AttentionPage) -> Vec<&str> {
    page.rows.iter().map(|r| r.load_id.as_str()).collect()
}

pub async fn the_summary_is_written_with_the_append_and_only_with_it<H: StoreHarness>(h: &H) {
    let events = &h.stores().events;
    let index = &h.stores().index;
    let s = LoadSummary { open_asks: 1, ..summary("client_a", Stage::AtPickup, 2, t(1)) };
    append_with(h, "A", &s).await;
    assert_eq!(index.summary("A").await.expect("read"), Some(s.clone()));

    // A refused append (a stale version) writes no summary.
    let (entries, _) = step("A", 1);
    let newer = summary("client_a", Stage::ToDelivery, 4, t(61));
    let refused = events.append_summarized("A", &entries, 0, &[], Some(&newer)).await;
    assert!(matches!(refused, Err(AppendError::Conflict { .. })), "{refused:?}");
    assert_eq!(index.summary("A").await.expect("read"), Some(s.clone()), "unchanged by the refusal");
    let (entries, _) = step("R", 0);
    let refused = events.append_summarized("R", &entries, 5, &[], Some(&newer)).await;
    assert!(refused.is_err());
    assert_eq!(index.summary("R").await.expect("read"), None);

    // An append without a summary leaves the row as it was; one with a summary replaces it.
    let (entries, _) = step("A", 1);
    events.append("A", &entries, 2, &[]).await.expect("append without a summary");
    assert_eq!(index.summary("A").await.expect("read").map(|s| s.version), Some(2));
    let (entries, _) = step("A", 2);
    let latest = summary("client_a", Stage::ToDelivery, 6, t(121));
    events.append_summarized("A", &entries, 4, &[], Some(&latest)).await.expect("append");
    assert_eq!(index.summary("A").await.expect("read"), Some(latest.clone()));

    // An older summary written outside an append is ignored; a newer one replaces it.
    index.put_summary("A", &s).await.expect("put");
    assert_eq!(index.summary("A").await.expect("read"), Some(latest.clone()), "version 2 < 6");
    let rebuilt = summary("client_a", Stage::AtDelivery, 6, t(130));
    index.put_summary("A", &rebuilt).await.expect("put");
    assert_eq!(index.summary("A").await.expect("read"), Some(rebuilt));

    // A batch writes each load's summary with its own append, and only the ones that went in.
    let (b_entries, _) = step("B", 0);
    let (c_entries, _) = step("C", 0);
    let b = summary("client_b", Stage::ToPickup, 2, t(1));
    let c = summary("client_b", Stage::ToPickup, 2, t(1));
    let results = events
        .append_batch(vec![
            AppendRequest {
                load_id: "B".into(),
                entries: b_entries,
                expected_version: 0,
                outbox: vec![],
                summary: Some(b.clone()),
            },
            AppendRequest {
                load_id: "C".into(),
                entries: c_entries,
                expected_version: 3, // stale
                outbox: vec![],
                summary: Some(c),
            },
        ])
        .await;
    assert!(results[0].is_ok() && results[1].is_err(), "{results:?}");
    assert_eq!(index.summary("B").await.expect("read"), Some(b));
    assert_eq!(index.summary("C").await.expect("read"), None);
}

pub async fn the_attention_list_finds_orders_filters_and_pages<H: StoreHarness>(h: &H) {
    let stores = h.stores();
    let now = t(3600);
    // An urgent Hero task an hour ago, and one four days ago (outside the 72 h window).
    let urgent = LoadSummary { urgent_task_at: Some(t(0)), ..summary("client_a", Stage::ToPickup, 2, t(0)) };
    append_with(h, "U", &urgent).await;
    let old = LoadSummary {
        urgent_task_at: Some(now - Duration::hours(96)),
        ..summary("client_a", Stage::ToPickup, 2, t(0))
    };
    append_with(h, "OLD", &old).await;
    // An escalated ask.
    let escalated = LoadSummary {
        open_asks: 2,
        escalated_asks: 1,
        escalated_since: Some(t(-600)),
        ..summary("client_b", Stage::ToDelivery, 2, t(0))
    };
    append_with(h, "E", &escalated).await;
    // A quiet load: never listed.
    append_with(h, "Q", &summary("client_b", Stage::ToDelivery, 2, t(0))).await;
    // A dead action.
    let (entries, _) = step("D", 0);
    let d = summary("client_a", Stage::AtDelivery, 2, t(0));
    stores
        .events
        .append_summarized("D", &entries, 0, &[row("D", "d1", Destination::Sms, 2)], Some(&d))
        .await
        .expect("append D");
    let claimed = stores.outbox.pending(10, t(100)).await.expect("claim");
    let dead = claimed.iter().find(|r| r.id == "d1").expect("d1 claimed");
    stores
        .outbox
        .mark_failed("d1", dead.claim_token, "554 rejected", NextAttempt::Dead, t(200))
        .await
        .expect("mark dead");
    // An overdue timer (due 59 min ago), and one due 30 s ago (not overdue yet).
    append_with(h, "T", &summary("client_a", Stage::ToPickup, 2, t(0))).await;
    let timer = |id: &str, load: &str, fire_at| TimerRow {
        timer_id: id.into(),
        load_id: load.into(),
        ask_id: "ask".into(),
        attempt: 1,
        fire_at,
    };
    stores.timers.schedule(&timer("t1", "T", t(60))).await.expect("schedule");
    stores.timers.schedule(&timer("t2", "Q", now - Duration::seconds(30))).await.expect("schedule");
    // The urgent load also has an escalated ask: two reasons.
    let both = LoadSummary { escalated_asks: 1, escalated_since: Some(t(-30)), ..urgent.clone() };
    stores.index.put_summary("U", &LoadSummary { version: 3, ..both }).await.expect("put");

    let page = stores.index.attention(&query(now)).await.expect("attention");
    assert_eq!(ids(&page), ["U", "D", "E", "T"], "most urgent first");
    assert_eq!(page.total, 4);
    let u = &page.rows[0];
    assert_eq!(u.reasons, [AttentionReason::UrgentTask, AttentionReason::EscalatedAsk]);
    assert_eq!((u.since, u.version, u.client.as_deref()), (t(-30), 3, Some("client_a")));
    let d = &page.rows[1];
    assert_eq!(
        (d.reasons.as_slice(), d.dead_actions, d.since),
        ([AttentionReason::DeadAction].as_slice(), 1, t(200))
    );
    let e = &page.rows[2];
    assert_eq!((e.escalated_asks, e.open_asks, e.stage, e.since), (1, 2, Stage::ToDelivery, t(-600)));
    let tt = &page.rows[3];
    assert_eq!(
        (tt.reasons.as_slice(), tt.overdue_timers, tt.since),
        ([AttentionReason::OverdueTimer].as_slice(), 1, t(60))
    );
    assert_eq!(
        page.by_reason,
        [
            (AttentionReason::UrgentTask, 1),
            (AttentionReason::DeadAction, 1),
            (AttentionReason::EscalatedAsk, 2),
            (AttentionReason::OverdueTimer, 1)
        ]
    );
    assert_eq!(page.clients, ["client_a", "client_b"]);

    // Filters: client, stage, reason; counts follow the client and stage filters.
    let by_client = stores
        .index
        .attention(&AttentionQuery { client: Some("client_b".into()), ..query(now) })
        .await
        .expect("attention");
    assert_eq!(ids(&by_client), ["E"]);
    assert_eq!(by_client.by_reason[2], (AttentionReason::EscalatedAsk, 1));
    assert_eq!(by_client.clients, ["client_a", "client_b"], "the menu keeps every client");
    let by_stage = stores
        .index
        .attention(&AttentionQuery { stage: Some(Stage::AtDelivery), ..query(now) })
        .await
        .expect("a");
    assert_eq!(ids(&by_stage), ["D"]);
    let by_reason = stores
        .index
        .attention(&AttentionQuery { reason: Some(AttentionReason::EscalatedAsk), ..query(now) })
        .await
        .expect("attention");
    assert_eq!((ids(&by_reason), by_reason.total), (vec!["U", "E"], 2));

    // Paging keeps the order and the total.
    let second =
        stores.index.attention(&AttentionQuery { offset: 1, limit: 2, ..query(now) }).await.expect("a");
    assert_eq!((ids(&second), second.total), (vec!["D", "E"], 4));

    // Later: the dead action leaves the window, the timer fires.
    stores.timers.mark_fired(&["t1".to_string(), "t2".to_string()], now).await.expect("fired");
    let later = now + Duration::hours(71);
    let page = stores.index.attention(&query(later)).await.expect("attention");
    assert_eq!(ids(&page), ["U", "D", "E"], "71 h later: the task and the dead row are still in the window");
    let page = stores.index.attention(&query(now + Duration::hours(73))).await.expect("attention");
    assert_eq!(ids(&page), ["E", "U"], "the task and the dead row left the window; U stays escalated");
    assert_eq!(page.rows[1].reasons, [AttentionReason::EscalatedAsk]);
}
