//! Property tests: replaying any generated log gives an equal state, and incremental apply
//! equals the full fold. 1,000 cases each.

mod common;
use chrono::Duration;
use common::*;
use load_agent_domain::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Ping { stop: u32, band: RiskBand, minutes: i64 },
    Status { stop: u32, status: StopStatusKind },
    Message,
    Open { ask: u8, stop: Option<u32> },
    Step { ask: u8, escalation: bool, timer: bool },
    Resolve { ask: u8 },
    Cancel { ask: u8 },
    Block { contact: bool },
    Action { kind: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    let band = prop_oneof![Just(RiskBand::Low), Just(RiskBand::Medium), Just(RiskBand::High)];
    let status = prop_oneof![
        Just(StopStatusKind::Arrived),
        Just(StopStatusKind::Departed),
        Just(StopStatusKind::Delivered)
    ];
    prop_oneof![
        (1u32..=3, band, -30i64..120).prop_map(|(stop, band, minutes)| Op::Ping { stop, band, minutes }),
        (0u32..=3, status).prop_map(|(stop, status)| Op::Status { stop, status }),
        Just(Op::Message),
        (0u8..4, proptest::option::of(1u32..=2)).prop_map(|(ask, stop)| Op::Open { ask, stop }),
        (0u8..4, any::<bool>(), any::<bool>()).prop_map(|(ask, escalation, timer)| Op::Step {
            ask,
            escalation,
            timer
        }),
        (0u8..4).prop_map(|ask| Op::Resolve { ask }),
        (0u8..4).prop_map(|ask| Op::Cancel { ask }),
        any::<bool>().prop_map(|contact| Op::Block { contact }),
        (0u8..3).prop_map(|kind| Op::Action { kind }),
    ]
}

fn build_log(ops: &[Op]) -> Vec<LogEntry> {
    let start = at("2026-03-02T12:00:00Z");
    let mut log = vec![registered(start)];
    for (i, op) in ops.iter().enumerate() {
        let id = format!("e{i}");
        let when = start + Duration::minutes(i as i64);
        let ask_id = |a: &u8| ask_id_for(&format!("open{a}"), "eta_request");
        match op {
            Op::Ping { stop, band, minutes } => {
                log.push(ping(&id, start + Duration::minutes(*minutes), *stop, *band))
            }
            Op::Status { stop, status } => log.push(stop_status(&id, when, *stop, *status)),
            Op::Message => {
                log.push(event(&id, when, EventKind::Sms { from: "drv".into(), text: "ok".into() }))
            }
            Op::Open { ask, stop } => {
                let t = AskTransition::AskOpened {
                    ask_id: ask_id(ask),
                    ask_type: "eta_request".into(),
                    target_contact: "drv".into(),
                    sop: SopRef { id: "client_a".into(), version: 1 },
                    opened_at: when,
                    max_attempts: 2,
                    stop_sequence: *stop,
                };
                log.push(LogEntry::Decision(decision(&id, when, vec![t], vec![])));
            }
            Op::Step { ask, escalation, timer } => {
                let t = AskTransition::AskStepTaken {
                    ask_id: ask_id(ask),
                    step: 1,
                    step_kind: if *escalation { StepKind::Escalation } else { StepKind::Attempt },
                    timer: timer.then(|| TimerRef { timer_id: format!("tmr:{i}"), fire_at: when }),
                };
                log.push(LogEntry::Decision(decision(&id, when, vec![t], vec![])));
            }
            Op::Resolve { ask } => {
                let t = AskTransition::AskResolved {
                    ask_id: ask_id(ask),
                    resolved_by: id.clone(),
                    resolved_at: when,
                };
                log.push(LogEntry::Decision(decision(&id, when, vec![t], vec![])));
            }
            Op::Cancel { ask } => {
                let t = AskTransition::AskCancelled {
                    ask_id: ask_id(ask),
                    reason: "test".into(),
                    cancelled_at: when,
                };
                log.push(LogEntry::Decision(decision(&id, when, vec![t], vec![])));
            }
            Op::Block { contact } => {
                let mut d = decision(&id, when, vec![], vec![]);
                let contact_id = if *contact { "drv" } else { "disp" };
                d.contact_updates
                    .push(ContactUpdate::SmsBlocked { contact_id: contact_id.into(), reason: "x".into() });
                log.push(LogEntry::Decision(d));
            }
            Op::Action { kind } => {
                let mut keys = ActionKeys::new("481207", &id);
                match kind {
                    0 => keys.by_event(ActionBody::TmsNote { text: "n".into() }),
                    1 => keys.by_event(ActionBody::SendSms { to: "drv".into(), body: "b".into() }),
                    _ => keys.by_event(ActionBody::CancelTimer { timer_id: "t".into() }),
                };
                log.push(LogEntry::Decision(decision(&id, when, vec![], keys.into_actions())));
            }
        }
    }
    log
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn replaying_a_stored_log_gives_an_equal_state(ops in proptest::collection::vec(op(), 0..60)) {
        let log = build_log(&ops);
        let stored = serde_json::to_string(&log).expect("serialize");
        let replayed: Vec<LogEntry> = serde_json::from_str(&stored).expect("deserialize");
        prop_assert_eq!(project_state("481207", &log), project_state("481207", &replayed));
    }

    #[test]
    fn incremental_apply_equals_the_full_fold(ops in proptest::collection::vec(op(), 0..60), split in 0usize..61) {
        let log = build_log(&ops);
        let split = split.min(log.len());
        let mut incremental = project_state("481207", &log[..split]);
        incremental.apply_all(&log[split..]);
        let full = project_state("481207", &log);
        prop_assert_eq!(incremental.version, log.len() as u64);
        prop_assert_eq!(incremental, full);
    }

    #[test]
    fn tracking_stays_consistent(ops in proptest::collection::vec(op(), 0..60)) {
        let log = build_log(&ops);
        let s = project_state("481207", &log);
        let t = &s.tracking;
        prop_assert!((1..=2).contains(&t.current_stop));
        let kind = if t.current_stop == 1 { StopKind::Pickup } else { StopKind::Delivery };
        prop_assert!(t.stage == Stage::approaching(kind) || t.stage == Stage::at(kind)
            || (t.stage == Stage::Delivered && t.current_stop == 2));
        for a in &s.open_asks {
            prop_assert_eq!(a.status, AskStatus::Open);
        }
    }
}
