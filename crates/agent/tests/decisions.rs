//! Given/when/then tests, one per row of behavior.md, and the ADR 0001 table for load 481207.

use load_agent_agent::Processed;
use load_agent_domain::*;
use load_agent_llm::{FakeLlm, LlmMethod, LlmOutput, Plan, PlannedAction};
use load_agent_testkit::at;
use load_agent_testkit::decide::{Given, agent_load as load, kinds, summary, text_of};

fn s(x: &str) -> Option<String> {
    Some(x.to_string())
}

const ASK: &str = "ask:eta_request:ping_0700";

#[tokio::test]
async fn adr_0001_timeline_for_load_481207() {
    let mut g = Given::client_a().await;
    // 07:00 (13:00Z) late risk for the pickup: SMS the driver (attempt 1) + timer for +30 min.
    let d = g.ping("2026-03-02T13:00:00Z", "ping_0700", 1, RiskBand::High).await;
    assert_eq!(d.path, DecisionPath::Sop);
    assert_eq!(
        summary(&d),
        [("send_sms".into(), s("drv"), Some(1), None), ("set_timer".into(), None, Some(1), None)]
    );
    assert_eq!(
        d.effective_actions().map(|a| a.key.as_str()).collect::<Vec<_>>(),
        [format!("481207/{ASK}/1/send_sms"), format!("481207/{ASK}/1/set_timer")]
    );
    assert!(text_of(&d, ActionKind::SendSms).contains("Acme DC"), "the SMS names the stop");
    let fire_at = d.effective_actions().find_map(|a| match &a.body {
        ActionBody::SetTimer { fire_at, .. } => Some(*fire_at),
        _ => None,
    });
    assert_eq!(fire_at, Some(at("2026-03-02T13:30:00Z")));

    // 07:13: the driver asks for the PO: reply keyed by the event, the ask does not move.
    let d = g.sms("2026-03-02T13:13:00Z", "sms_0713", "drv", "whats the po# for this one").await;
    assert_eq!(summary(&d), [("send_sms".into(), s("drv"), None, None)]);
    assert_eq!(d.actions[0].key, "481207/evt:sms_0713/send_sms");
    assert!(text_of(&d, ActionKind::SendSms).contains("55821"));
    assert_eq!(g.state.open_ask(ASK).map(|a| a.step()), Some(1));

    // 07:30: the timer is current: SMS again (attempt 2) + timer.
    let d = g.fire("2026-03-02T13:30:00Z", ASK, 1).await;
    assert_eq!(
        summary(&d),
        [("send_sms".into(), s("drv"), Some(2), None), ("set_timer".into(), None, Some(2), None)]
    );

    // 08:00: attempts spent: email the dispatcher (3, main thread) + urgent Hero task (4).
    let d = g.fire("2026-03-02T14:00:00Z", ASK, 2).await;
    assert_eq!(
        summary(&d),
        [
            ("send_email".into(), s("disp"), Some(3), None),
            ("create_hero_task".into(), None, Some(4), Some(true))
        ]
    );
    assert!(matches!(d.actions[0].body, ActionBody::SendEmail { thread: EmailThread::Main, .. }));
    assert!(text_of(&d, ActionKind::CreateHeroTask).to_lowercase().contains("call the driver"));
    let ask = g.state.open_ask(ASK).expect("stays open until resolved");
    assert_eq!((ask.attempts, ask.escalations_done, ask.next_timer.clone()), (2, 2, None));

    // A late duplicate of the attempt-1 timer is stale.
    let stale = g
        .process(
            "2026-03-02T14:05:00Z",
            "late_copy",
            EventKind::TimerFired {
                timer_id: timer_id("481207", ASK, 1),
                ask_id: ASK.into(),
                attempt: 1,
                fire_at: at("2026-03-02T13:30:00Z"),
            },
        )
        .await;
    let Processed::Decided(stale) = stale else { panic!("decided") };
    assert!(stale.is_noop() && stale.path == DecisionPath::Filtered);
}

#[tokio::test]
async fn dispatcher_email_with_an_eta_resolves_the_sms_ask_and_the_timer_becomes_stale() {
    let mut g = Given::client_a().await;
    g.ping("2026-03-02T13:00:00Z", "ping_0700", 1, RiskBand::High).await;
    let d = g
        .when(
            "2026-03-02T13:20:00Z",
            "email_0720",
            EventKind::Email {
                from: "dana@carrier.example".into(),
                subject: "Re: load 481207".into(),
                text: "Hi, driver says he will be at the shipper around 8:15. Thanks, Dana".into(),
                thread: None,
            },
        )
        .await;
    assert!(
        d.transitions.iter().any(|t| matches!(t, AskTransition::AskResolved { ask_id, .. } if ask_id == ASK))
    );
    assert_eq!(kinds(&d), ["cancel_timer", "tms_note"]);
    assert!(text_of(&d, ActionKind::TmsNote).contains("08:15"));
    let d = g.fire("2026-03-02T13:30:00Z", ASK, 1).await;
    assert!(d.is_noop());
    assert_eq!(d.path, DecisionPath::Filtered);
}

#[tokio::test]
async fn a_question_mark_restates_the_open_ask_keyed_by_the_event() {
    let mut g = Given::client_a().await;
    g.ping("2026-03-02T13:00:00Z", "ping_0700", 1, RiskBand::High).await;
    let d = g.sms("2026-03-02T13:20:00Z", "sms_0720", "drv", "?").await;
    assert_eq!(summary(&d), [("send_sms".into(), s("drv"), None, None)]);
    assert_eq!(d.actions[0].key, "481207/evt:sms_0720/send_sms");
    assert!(text_of(&d, ActionKind::SendSms).contains("ETA"));
    assert_eq!(g.state.open_ask(ASK).map(|a| a.step()), Some(1), "the ask does not advance");
}

#[tokio::test]
async fn ack_and_confusion_with_nothing_open_are_filtered_noops() {
    let mut g = Given::client_a().await;
    for (id, text) in [("a", "ok"), ("b", "👍"), ("c", "10-4"), ("d", "?")] {
        let d = g.sms("2026-03-02T13:00:00Z", id, "drv", text).await;
        assert!(d.is_noop(), "{text}");
        assert_eq!(d.path, DecisionPath::Filtered, "{text}");
        assert!(d.llm_usage.is_empty(), "no model call for {text}");
    }
}

#[tokio::test]
async fn an_acknowledgement_never_resolves_an_ask() {
    let mut g = Given::client_a().await;
    g.ping("2026-03-02T13:00:00Z", "ping_0700", 1, RiskBand::High).await;
    let d = g.sms("2026-03-02T13:05:00Z", "ok1", "drv", "ok").await;
    assert!(d.is_noop() && d.transitions.is_empty());
    assert!(g.state.open_ask(ASK).is_some());
}

#[tokio::test]
async fn a_second_high_for_a_stop_with_an_open_ask_is_a_noop_and_other_stops_are_separate() {
    let mut g = Given::client_a().await;
    g.ping("2026-03-02T13:00:00Z", "ping_0700", 1, RiskBand::High).await;
    let d = g.ping("2026-03-02T13:05:00Z", "p2", 1, RiskBand::Medium).await;
    assert!(d.is_noop());
    let d = g.ping("2026-03-02T13:06:00Z", "p3", 1, RiskBand::High).await;
    assert!(d.is_noop(), "an eta_request for stop 1 is already open");
    let d = g.ping("2026-03-02T13:07:00Z", "p4", 2, RiskBand::High).await;
    assert_eq!(kinds(&d), ["send_sms", "set_timer"]);
    assert_eq!(g.state.open_asks.len(), 2);
}

#[tokio::test]
async fn stale_pings_and_same_band_pings_are_filtered() {
    let mut g = Given::client_a().await;
    g.ping("2026-03-02T13:10:00Z", "p1", 1, RiskBand::Medium).await;
    let d = g
        .when(
            "2026-03-02T13:11:00Z",
            "p0",
            EventKind::Ping {
                stop: 1,
                delay_risk: RiskBand::High,
                recorded_at: at("2026-03-02T13:00:00Z"),
                lat: None,
                lon: None,
            },
        )
        .await;
    assert!(d.is_noop() && d.path == DecisionPath::Filtered);
    assert!(d.rationale.contains("stale"));
    let d = g.ping("2026-03-02T13:12:00Z", "p2", 1, RiskBand::Medium).await;
    assert!(d.is_noop() && d.path == DecisionPath::Filtered);
}

#[tokio::test]
async fn arrival_cancels_only_the_eta_ask_about_that_stop() {
    let mut g = Given::client_a().await;
    g.ping("2026-03-02T13:00:00Z", "ping_0700", 1, RiskBand::High).await;
    g.ping("2026-03-02T13:01:00Z", "ping_del", 2, RiskBand::High).await;
    let d = g.status("2026-03-02T13:10:00Z", "arr1", 1, StopStatusKind::Arrived).await;
    assert_eq!(kinds(&d), ["update_stage", "cancel_timer"]);
    assert!(d.transitions.iter().any(|t| matches!(t, AskTransition::AskCancelled { ask_id, reason, .. }
        if ask_id == ASK && reason == "arrived at the stop")));
    assert_eq!(g.state.open_asks.len(), 1);
    assert_eq!(g.state.open_asks[0].stop_sequence, Some(2));
    assert_eq!(g.state.tracking.stage, Stage::AtPickup);
}

#[tokio::test]
async fn delivered_cancels_every_open_ask() {
    let mut g = Given::client_b().await;
    g.ping("2026-03-02T13:00:00Z", "p1", 2, RiskBand::High).await;
    g.status("2026-03-02T14:00:00Z", "arr1", 1, StopStatusKind::Arrived).await;
    g.status("2026-03-02T15:00:00Z", "dep1", 1, StopStatusKind::Departed).await;
    assert_eq!(g.state.open_asks.len(), 2, "eta for stop 2 and reefer_temp");
    let d = g.status("2026-03-02T21:00:00Z", "dlv", 2, StopStatusKind::Delivered).await;
    assert_eq!(kinds(&d), ["update_stage", "cancel_timer", "cancel_timer"]);
    assert!(d.actions[2].key.ends_with("/cancel_timer/2"));
    assert!(g.state.open_asks.is_empty());
    assert_eq!(g.state.tracking.stage, Stage::Delivered);
}

#[tokio::test]
async fn every_stage_change_mirrors_the_stage_and_stale_statuses_are_filtered() {
    let mut g = Given::client_a().await;
    let d = g.status("2026-03-02T14:00:00Z", "arr1", 1, StopStatusKind::Arrived).await;
    assert_eq!(kinds(&d), ["update_stage"]);
    assert_eq!(d.actions[0].key, "481207/evt:arr1/update_stage");
    let d = g.status("2026-03-02T14:01:00Z", "arr1b", 1, StopStatusKind::Arrived).await;
    assert!(d.is_noop() && d.path == DecisionPath::Filtered);
}

#[tokio::test]
async fn client_b_asks_for_a_reefer_reading_after_leaving_the_pickup() {
    let mut g = Given::client_b().await;
    g.status("2026-03-02T14:00:00Z", "arr1", 1, StopStatusKind::Arrived).await;
    let d = g.status("2026-03-02T15:00:00Z", "dep1", 1, StopStatusKind::Departed).await;
    assert_eq!(kinds(&d), ["update_stage", "send_sms", "set_timer"]);
    let ask = g.state.open_asks_of_type("reefer_temp").next().expect("opened");
    assert_eq!((ask.stop_sequence, ask.max_attempts), (Some(1), 2));
    let timer = ask.next_timer.clone().expect("timer");
    assert_eq!(timer.fire_at, at("2026-03-02T15:15:00Z"));
    // in range: resolves, cancels the timer, notes the reading
    let d = g.sms("2026-03-02T15:05:00Z", "t1", "drv", "34").await;
    assert_eq!(kinds(&d), ["cancel_timer", "tms_note"]);
    assert!(g.state.open_asks.is_empty());
}

#[tokio::test]
async fn client_b_out_of_range_reading_escalates_and_posts_to_the_broker() {
    let mut g = Given::client_b().await;
    g.status("2026-03-02T14:00:00Z", "arr1", 1, StopStatusKind::Arrived).await;
    g.status("2026-03-02T15:00:00Z", "dep1", 1, StopStatusKind::Departed).await;
    let d = g.sms("2026-03-02T15:05:00Z", "t1", "drv", "reefer reading 41").await;
    assert_eq!(
        summary(&d),
        [
            ("cancel_timer".into(), None, None, None),
            ("tms_note".into(), None, None, None),
            ("create_hero_task".into(), None, None, Some(true)),
            ("post_slack".into(), s("brk"), None, None),
        ]
    );
    assert!(text_of(&d, ActionKind::CreateHeroTask).contains("out of range"));
}

#[tokio::test]
async fn client_b_eta_ladder_has_three_attempts_then_one_urgent_hero_task() {
    let mut g = Given::client_b().await;
    let d = g.ping("2026-03-02T13:00:00Z", "pb", 1, RiskBand::High).await;
    assert_eq!(kinds(&d), ["send_sms", "set_timer"]);
    let ask = "ask:eta_request:pb";
    assert_eq!(g.fire("2026-03-02T13:20:00Z", ask, 1).await.effective_actions().count(), 2);
    assert_eq!(g.fire("2026-03-02T13:40:00Z", ask, 2).await.effective_actions().count(), 2);
    let d = g.fire("2026-03-02T14:00:00Z", ask, 3).await;
    assert_eq!(summary(&d), [("create_hero_task".into(), None, Some(4), Some(true))]);
}

#[tokio::test]
async fn questions_are_answered_from_load_data_in_the_contacts_language() {
    let mut reg = load("client_a", false);
    reg.contacts[0].language = Language::Es;
    let mut g = Given::registered(reg).await;
    let d = g.sms("2026-03-02T13:00:00Z", "q1", "drv", "cual es la direccion de entrega").await;
    assert_eq!(kinds(&d), ["send_sms"]);
    let body = text_of(&d, ActionKind::SendSms);
    assert!(body.contains("88 Main St") && body.contains("dirección"), "{body}");
    let d = g.sms("2026-03-02T13:01:00Z", "q2", "drv", "what time is my appt at the receiver").await;
    assert!(text_of(&d, ActionKind::SendSms).contains("16:00"));
}

#[tokio::test]
async fn a_po_question_with_no_po_on_file_is_a_non_urgent_hero_task() {
    let mut g = Given::client_a().await;
    let d = g.sms("2026-03-02T13:00:00Z", "q1", "drv", "whats the po# for the receiver").await;
    assert_eq!(summary(&d), [("create_hero_task".into(), None, None, Some(false))]);
}

#[tokio::test]
async fn opt_out_blocks_sms_and_the_next_step_becomes_a_hero_task_keeping_the_step() {
    let mut g = Given::client_a().await;
    g.ping("2026-03-02T13:00:00Z", "ping_0700", 1, RiskBand::High).await;
    let d = g.sms("2026-03-02T13:10:00Z", "stop1", "drv", "STOP").await;
    assert_eq!(summary(&d), [("create_hero_task".into(), None, None, Some(false))]);
    assert!(g.state.sms_blocked.contains_key("drv"));
    let d = g.fire("2026-03-02T13:30:00Z", ASK, 1).await;
    assert_eq!(d.path, DecisionPath::Validation);
    assert_eq!(
        summary(&d),
        [("create_hero_task".into(), None, Some(2), Some(false)), ("set_timer".into(), None, Some(2), None)]
    );
    assert_eq!(g.state.open_ask(ASK).map(|a| a.attempts), Some(2), "the step is still taken");
}

#[tokio::test]
async fn wrong_number_blocks_sms() {
    let mut g = Given::client_a().await;
    let d = g.sms("2026-03-02T13:10:00Z", "w1", "drv", "wrong number, this isnt luis").await;
    assert_eq!(summary(&d), [("create_hero_task".into(), None, None, Some(false))]);
    assert!(g.state.sms_blocked.contains_key("drv"));
}

#[tokio::test]
async fn a_problem_report_is_an_urgent_hero_task_and_a_tms_note() {
    let mut g = Given::client_a().await;
    let d = g.sms("2026-03-02T13:10:00Z", "b1", "drv", "truck broke down on i80 waiting on tow").await;
    assert_eq!(kinds(&d), ["create_hero_task", "tms_note"]);
    assert_eq!(summary(&d)[0].3, Some(true));
}

#[tokio::test]
async fn arrival_and_departure_reports_note_without_moving_the_stage() {
    let mut g = Given::client_a().await;
    g.ping("2026-03-02T13:00:00Z", "ping_0700", 1, RiskBand::High).await;
    let d = g.sms("2026-03-02T13:50:00Z", "here", "drv", "im here checked in at the dock").await;
    assert_eq!(kinds(&d), ["cancel_timer", "tms_note"]);
    assert!(g.state.open_asks.is_empty());
    assert_eq!(g.state.tracking.stage, Stage::ToPickup);
    let d = g.sms("2026-03-02T14:50:00Z", "out", "drv", "loaded and rolling").await;
    assert_eq!(kinds(&d), ["tms_note"]);
    assert_eq!(g.state.tracking.stage, Stage::ToPickup);
}

#[tokio::test]
async fn a_message_from_an_unknown_sender_gets_no_reply() {
    let mut g = Given::client_a().await;
    let d = g.sms("2026-03-02T13:00:00Z", "u1", "+19995550000", "eta 30 min").await;
    assert_eq!(summary(&d), [("create_hero_task".into(), None, None, Some(false))]);
    assert!(text_of(&d, ActionKind::CreateHeroTask).contains("unknown sender"));
}

/// Issue 10: a message from an unknown sender is valid input (not a dead letter) on every
/// channel, and is decided per behavior.md §6.
#[tokio::test]
async fn a_message_from_an_unknown_sender_is_valid_input_on_every_channel() {
    let mut g = Given::client_a().await;
    let now = at("2026-03-02T13:00:00Z");
    let kinds_from_strangers = [
        ("u_sms", EventKind::Sms { from: "+19995550000".into(), text: "eta 30 min".into() }),
        (
            "u_email",
            EventKind::Email {
                from: "someone@elsewhere.example".into(),
                subject: "load".into(),
                text: "eta 30 min".into(),
                thread: None,
            },
        ),
        ("u_slack", EventKind::Slack { from: "U999".into(), text: "eta 30 min".into() }),
    ];
    for (id, kind) in kinds_from_strangers {
        let event = InboundEvent {
            event_id: id.into(),
            load_id: "481207".into(),
            occurred_at: now,
            kind: kind.clone(),
        };
        load_agent_agent::prepare_event_at(&g.state, event, &g.agent, now)
            .expect("valid input, not a dead letter");
        let d = g.when("2026-03-02T13:00:00Z", id, kind).await;
        assert_eq!(summary(&d), [("create_hero_task".into(), None, None, Some(false))], "{id}");
        assert!(text_of(&d, ActionKind::CreateHeroTask).contains("unknown sender"), "{id}");
    }
}

/// Issue 10: the checks before deciding refuse oversized messages and times far from the clock
/// (the consumer dead-letters them), and leave the state untouched.
#[tokio::test]
async fn oversized_messages_and_far_off_times_are_refused_before_deciding() {
    let g = Given::client_a().await;
    let now = at("2026-03-02T13:00:00Z");
    let sms = |id: &str, text: String, occurred_at| InboundEvent {
        event_id: id.into(),
        load_id: "481207".into(),
        occurred_at,
        kind: EventKind::Sms { from: "drv".into(), text },
    };
    let long = "eta 2:30 ".repeat(2000);
    let err = load_agent_agent::prepare_event_at(&g.state, sms("big", long, now), &g.agent, now)
        .expect_err("oversized");
    assert!(matches!(err, load_agent_agent::InvalidEvent::Oversized { field: "payload.text", .. }), "{err}");
    for off in [chrono::Duration::days(2), chrono::Duration::days(-400)] {
        let err =
            load_agent_agent::prepare_event_at(&g.state, sms("t", "ok".into(), now + off), &g.agent, now)
                .expect_err("far off");
        assert!(
            matches!(err, load_agent_agent::InvalidEvent::BadTimestamp { field: "occurred_at", .. }),
            "{err}"
        );
    }
}

#[tokio::test]
async fn other_goes_to_the_planner_and_falls_back_to_an_urgent_hero_task() {
    let mut g = Given::client_a().await;
    let text = "can you guys send me the rate con again, lost it";
    let d = g.sms("2026-03-02T13:00:00Z", "o1", "drv", text).await;
    assert_eq!(d.path, DecisionPath::HeroFallback);
    assert_eq!(summary(&d), [("create_hero_task".into(), None, None, Some(true))]);

    // A planner that answers, at a cost, so its usage is recorded.
    g.llm.script_plan(Ok(LlmOutput {
        value: Plan {
            actions: vec![PlannedAction::TmsNote { text: "driver asked for the rate con".into() }],
            rationale: "internal follow-up".into(),
        },
        usage: LlmUsage { cost_usd: 0.01, ..FakeLlm::usage(LlmMethod::Plan) },
    }));
    let d = g.sms("2026-03-02T13:01:00Z", "o2", "drv", text).await;
    assert_eq!(d.path, DecisionPath::Planner);
    assert_eq!(kinds(&d), ["tms_note"]);
    assert!(d.total_cost_usd() > 0.0, "planner usage is recorded");
}

#[tokio::test]
async fn attachments_are_read_and_a_signed_clean_pod_needs_no_human() {
    let mut g = Given::client_a().await;
    let att = |extracted| EventKind::Attachment {
        from: "drv".into(),
        channel: MessageChannel::Sms,
        filename: "pod.jpg".into(),
        content_type: "image/jpeg".into(),
        content_ref: None,
        extracted,
    };
    let clean = DocumentFields { document_type: DocumentType::Pod, signed: Some(true), ..Default::default() };
    let d = g.when("2026-03-02T20:00:00Z", "doc1", att(Some(clean))).await;
    assert_eq!(kinds(&d), ["tms_note"]);
    let unsigned =
        DocumentFields { document_type: DocumentType::Pod, signed: Some(false), ..Default::default() };
    let d = g.when("2026-03-02T20:01:00Z", "doc2", att(Some(unsigned))).await;
    assert_eq!(summary(&d)[1], ("create_hero_task".into(), None, None, Some(false)));
    let d = g.when("2026-03-02T20:02:00Z", "doc3", att(None)).await;
    assert_eq!(d.path, DecisionPath::HeroFallback);
    assert_eq!(summary(&d), [("create_hero_task".into(), None, None, Some(true))]);
}

#[tokio::test]
async fn fields_extracted_upstream_are_used_and_the_reader_is_called_only_without_them() {
    // No reader at all (the `local` provider): the upstream fields decide, as in a replay.
    let mut g = Given::client_a().await;
    let att = |id: &str, extracted| EventKind::Attachment {
        from: "drv".into(),
        channel: MessageChannel::Sms,
        filename: format!("{id}.jpg"),
        content_type: "image/jpeg".into(),
        content_ref: None,
        extracted,
    };
    let clean = DocumentFields { document_type: DocumentType::Pod, signed: Some(true), ..Default::default() };
    let d = g.when("2026-03-02T20:00:00Z", "doc1", att("doc1", Some(clean.clone()))).await;
    assert_eq!(kinds(&d), ["tms_note"], "{}", d.rationale);
    assert!(d.llm_usage.is_empty(), "no model was called");
    assert!(d.rationale.contains("extracted upstream"), "{}", d.rationale);
    // Upstream fields are checked like a reader's output: an empty PO is invalid.
    let invalid = DocumentFields { po_numbers: vec![" ".into()], ..clean.clone() };
    let d = g.when("2026-03-02T20:01:00Z", "doc2", att("doc2", Some(invalid))).await;
    assert_eq!(d.path, DecisionPath::HeroFallback);
    assert_eq!(summary(&d), [("create_hero_task".into(), None, None, Some(true))]);

    // A reader that would say otherwise is not asked when the fields came with the event...
    let exceptions = DocumentFields { exceptions_noted: Some(true), ..clean.clone() };
    g.llm.script_extract_document(FakeLlm::answer(LlmMethod::ExtractDocument, exceptions));
    let d = g.when("2026-03-02T20:02:00Z", "doc3", att("doc3", Some(clean))).await;
    assert_eq!(kinds(&d), ["tms_note"]);
    // ...and is, when they did not.
    let d = g.when("2026-03-02T20:03:00Z", "doc4", att("doc4", None)).await;
    assert_eq!(kinds(&d), ["tms_note", "create_hero_task"]);
    assert!(d.rationale.contains("document read"), "{}", d.rationale);
}

fn outcome(key: &str, kind: ActionKind, status: OutcomeStatus, hero_channel: bool) -> EventKind {
    EventKind::ActionOutcome {
        idempotency_key: key.into(),
        status,
        action_kind: kind,
        contact_id: Some("drv".into()),
        hero_channel,
        reason: Some("carrier rejected the number".into()),
    }
}

#[tokio::test]
async fn action_outcomes_follow_behavior_section_7() {
    let mut g = Given::client_a().await;
    let key = format!("481207/{ASK}/1/send_sms");
    let d = g
        .when(
            "2026-03-02T13:00:30Z",
            "o0",
            outcome(&key, ActionKind::SendSms, OutcomeStatus::Published, false),
        )
        .await;
    assert!(d.is_noop() && d.path == DecisionPath::Filtered, "published: the SOP waits for its timer");
    assert!(d.rationale.starts_with("published:"), "{}", d.rationale);
    let d = g
        .when(
            "2026-03-02T13:01:00Z",
            "o1",
            outcome(&key, ActionKind::SendSms, OutcomeStatus::Delivered, false),
        )
        .await;
    assert!(d.is_noop() && d.path == DecisionPath::Filtered);
    assert!(d.rationale.starts_with("delivered:"), "{}", d.rationale);
    let d = g
        .when(
            "2026-03-02T13:02:00Z",
            "o2",
            outcome(&key, ActionKind::SendSms, OutcomeStatus::FailedPermanent, false),
        )
        .await;
    assert_eq!(summary(&d), [("create_hero_task".into(), None, None, Some(true))]);
    assert_eq!(d.actions[0].key, "481207/evt:o2/create_hero_task");
    assert!(text_of(&d, ActionKind::CreateHeroTask).contains("SMS to driver"));
    let d = g
        .when(
            "2026-03-02T13:03:00Z",
            "o3",
            outcome(
                "481207/evt:x/create_hero_task",
                ActionKind::CreateHeroTask,
                OutcomeStatus::FailedPermanent,
                true,
            ),
        )
        .await;
    assert!(d.is_noop() && d.path == DecisionPath::Filtered, "never another Hero task");
    let d = g
        .when(
            "2026-03-02T13:04:00Z",
            "o4",
            outcome("k", ActionKind::SetTimer, OutcomeStatus::FailedPermanent, false),
        )
        .await;
    assert!(d.is_noop());
}

#[tokio::test]
async fn a_redelivered_event_gets_no_decision() {
    let mut g = Given::client_a().await;
    g.ping("2026-03-02T13:00:00Z", "ping_0700", 1, RiskBand::High).await;
    let again = g
        .process(
            "2026-03-02T13:01:00Z",
            "ping_0700",
            EventKind::Ping {
                stop: 1,
                delay_risk: RiskBand::High,
                recorded_at: at("2026-03-02T13:00:00Z"),
                lat: None,
                lon: None,
            },
        )
        .await;
    assert_eq!(again, Processed::AlreadyProcessed);
}

#[tokio::test]
async fn a_late_timer_takes_exactly_one_step_anchored_at_the_decision() {
    let mut g = Given::client_a().await;
    g.ping("2026-03-02T13:00:00Z", "ping_0700", 1, RiskBand::High).await;
    let d = g.fire("2026-03-02T15:00:00Z", ASK, 1).await;
    assert_eq!(kinds(&d), ["send_sms", "set_timer"]);
    let fire_at = d.effective_actions().find_map(|a| match &a.body {
        ActionBody::SetTimer { fire_at, .. } => Some(*fire_at),
        _ => None,
    });
    assert_eq!(fire_at, Some(at("2026-03-02T15:30:00Z")));
}

#[tokio::test]
async fn a_load_pinned_to_an_sop_version_keeps_it() {
    let g = Given::client_a().await;
    assert_eq!(g.state.sop(), Some(SopRef { id: "client_a".into(), version: 1 }));
    let reg = g.log.iter().find_map(|e| match e {
        LogEntry::Event(InboundEvent { kind: EventKind::LoadRegistered { load }, .. }) => {
            Some(load.sop_version)
        }
        _ => None,
    });
    assert_eq!(reg, Some(Some(1)), "the pinned version is written into the log");
}
