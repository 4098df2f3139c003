//! The ADR 0001 table for load 481207 under client_a: keys, attempts and steps.

mod common;
use common::*;
use load_agent_domain::*;

#[test]
fn adr_0001_table_keys_attempts_and_steps() {
    let ask_id = ask_id_for("ping_0700", "eta_request");
    assert_eq!(ask_id, "ask:eta_request:ping_0700");
    let mut log = vec![registered(at("2026-03-02T12:50:00Z"))];

    // 07:01 (13:01Z): SMS driver for ETA, timer for 07:31; attempt 1, ask attempts 1.
    log.push(ping("ping_0700", at("2026-03-02T13:00:00Z"), 1, RiskBand::High));
    let mut keys = ActionKeys::new("481207", "ping_0700");
    let mut tr = vec![AskTransition::AskOpened {
        ask_id: ask_id.clone(),
        ask_type: "eta_request".into(),
        target_contact: "drv".into(),
        sop: SopRef { id: "client_a".into(), version: 1 },
        opened_at: at("2026-03-02T13:01:00Z"),
        max_attempts: 2,
        stop_sequence: Some(1),
    }];
    sms_step(&mut keys, &mut tr, &ask_id, 1, at("2026-03-02T13:01:00Z"));
    let d1 = decision("ping_0700", at("2026-03-02T13:01:00Z"), tr, keys.into_actions());
    let keys1: Vec<_> = d1.effective_actions().map(|a| a.key.clone()).collect();
    assert_eq!(
        keys1,
        ["481207/ask:eta_request:ping_0700/1/send_sms", "481207/ask:eta_request:ping_0700/1/set_timer"]
    );
    log.push(LogEntry::Decision(d1));
    let s = project_state("481207", &log);
    let ask = s.open_ask(&ask_id).expect("open");
    assert_eq!((ask.attempts, ask.escalations_done, ask.step()), (1, 0, 1));
    assert_eq!(ask.next_timer.as_ref().map(|t| t.fire_at), Some(at("2026-03-02T13:31:00Z")));

    // 07:13: SMS with the PO, no ask: keyed by the triggering event, ask unchanged.
    log.push(event(
        "sms_0713",
        at("2026-03-02T13:13:00Z"),
        EventKind::Sms { from: "drv".into(), text: "whats the po# for this one".into() },
    ));
    let mut keys = ActionKeys::new("481207", "sms_0713");
    keys.by_event(ActionBody::SendSms { to: "drv".into(), body: "PO 55821".into() });
    let d2 = decision("sms_0713", at("2026-03-02T13:13:00Z"), vec![], keys.into_actions());
    assert_eq!(d2.actions[0].key, "481207/evt:sms_0713/send_sms");
    assert!(d2.actions[0].ask.is_none());
    log.push(LogEntry::Decision(d2));
    assert_eq!(project_state("481207", &log).open_ask(&ask_id).map(|a| a.step()), Some(1));

    // 07:31: the timer of attempt 1 is current; SMS again, timer for 08:01; attempt 2.
    let t1 = timer_id("481207", &ask_id, 1);
    assert_eq!(t1, "tmr:481207:ask:eta_request:ping_0700:1");
    let fired1 = timer_fired_event_id(&t1);
    log.push(event(
        &fired1,
        at("2026-03-02T13:31:00Z"),
        EventKind::TimerFired {
            timer_id: t1.clone(),
            ask_id: ask_id.clone(),
            attempt: 1,
            fire_at: at("2026-03-02T13:31:00Z"),
        },
    ));
    assert!(project_state("481207", &log).open_ask(&ask_id).expect("open").is_timer_current(1));
    let mut keys = ActionKeys::new("481207", &fired1);
    let mut tr = vec![];
    sms_step(&mut keys, &mut tr, &ask_id, 2, at("2026-03-02T13:31:00Z"));
    let d3 = decision(&fired1, at("2026-03-02T13:31:00Z"), tr, keys.into_actions());
    assert_eq!(d3.actions[0].key, "481207/ask:eta_request:ping_0700/2/send_sms");
    log.push(LogEntry::Decision(d3));
    let s = project_state("481207", &log);
    let ask = s.open_ask(&ask_id).expect("open");
    assert_eq!((ask.attempts, ask.escalations_done, ask.step()), (2, 0, 2));
    assert!(!ask.is_timer_current(1), "the attempt-1 timer is stale once step 2 is taken");

    // 08:01: email the dispatcher (step 3, escalation 1) and an urgent Hero task (step 4).
    let t2 = timer_id("481207", &ask_id, 2);
    let fired2 = timer_fired_event_id(&t2);
    let mut keys = ActionKeys::new("481207", &fired2);
    let step = |attempt| AskStepRef { ask_id: ask_id.clone(), ask_type: "eta_request".into(), attempt };
    keys.step(
        step(3),
        ActionBody::SendEmail {
            to: "disp".into(),
            subject: "ETA".into(),
            body: "ETA?".into(),
            thread: EmailThread::Main,
        },
    );
    keys.step(
        step(4),
        ActionBody::CreateHeroTask { title: "Call the driver".into(), body: "call".into(), urgent: true },
    );
    let esc = |s| AskTransition::AskStepTaken {
        ask_id: ask_id.clone(),
        step: s,
        step_kind: StepKind::Escalation,
        timer: None,
    };
    let d4 = decision(&fired2, at("2026-03-02T14:01:00Z"), vec![esc(3), esc(4)], keys.into_actions());
    let keys4: Vec<_> = d4.effective_actions().map(|a| a.key.clone()).collect();
    assert_eq!(
        keys4,
        [
            "481207/ask:eta_request:ping_0700/3/send_email",
            "481207/ask:eta_request:ping_0700/4/create_hero_task"
        ]
    );
    log.push(LogEntry::Decision(d4));
    let s = project_state("481207", &log);
    let ask = s.open_ask(&ask_id).expect("an escalated ask stays open until resolved");
    assert_eq!((ask.attempts, ask.escalations_done, ask.step()), (2, 2, 4));
    assert!(ask.next_timer.is_none());
    assert_eq!(s.committed_action_keys.len(), 7);
}
