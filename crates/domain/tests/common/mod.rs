//! Builders shared by the domain tests.
#![allow(dead_code)]

use chrono::{DateTime, Duration, Utc};
use load_agent_domain::*;

pub fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).expect("test time").with_timezone(&Utc)
}

pub fn load_481207() -> LoadRegistered {
    let t = |s: &str| DateTime::parse_from_rfc3339(s).expect("test time");
    LoadRegistered {
        load_id: "481207".into(),
        client: "client_a".into(),
        sop_version: Some(1),
        contacts: vec![
            Contact {
                id: "drv".into(),
                role: Role::Driver,
                name: "Luis".into(),
                phone: Some("+13125550111".into()),
                email: None,
                slack: None,
                language: Language::En,
            },
            Contact {
                id: "disp".into(),
                role: Role::CarrierDispatcher,
                name: "Dana".into(),
                phone: None,
                email: Some("dana@carrier.example".into()),
                slack: None,
                language: Language::En,
            },
        ],
        stops: vec![
            Stop {
                sequence: 1,
                kind: StopKind::Pickup,
                name: "Acme DC".into(),
                address: "1 Dock Rd, Joliet, IL".into(),
                appointment: t("2026-03-02T08:00:00-06:00"),
                po_numbers: vec!["55821".into()],
                reference: None,
            },
            Stop {
                sequence: 2,
                kind: StopKind::Delivery,
                name: "Store 88".into(),
                address: "88 Main St, Dayton, OH".into(),
                appointment: t("2026-03-02T16:00:00-05:00"),
                po_numbers: vec![],
                reference: None,
            },
        ],
        reefer: None,
    }
}

pub fn event(id: &str, when: DateTime<Utc>, kind: EventKind) -> LogEntry {
    LogEntry::Event(InboundEvent { event_id: id.into(), load_id: "481207".into(), occurred_at: when, kind })
}

pub fn registered(when: DateTime<Utc>) -> LogEntry {
    event("reg_481207", when, EventKind::LoadRegistered { load: load_481207() })
}

pub fn ping(id: &str, when: DateTime<Utc>, stop: u32, band: RiskBand) -> LogEntry {
    event(id, when, EventKind::Ping { stop, delay_risk: band, recorded_at: when, lat: None, lon: None })
}

pub fn stop_status(id: &str, when: DateTime<Utc>, stop: u32, status: StopStatusKind) -> LogEntry {
    event(id, when, EventKind::StopStatus { stop, status, source: None })
}

pub fn decision(
    event_id: &str,
    when: DateTime<Utc>,
    transitions: Vec<AskTransition>,
    actions: Vec<Action>,
) -> DecisionRecord {
    DecisionRecord::new(DecisionDraft {
        load_id: "481207".into(),
        trigger_event_id: event_id.into(),
        trigger_kind: "test".into(),
        decided_at: when,
        sop: Some(SopRef { id: "client_a".into(), version: 1 }),
        path: DecisionPath::Sop,
        transitions,
        contact_updates: vec![],
        actions,
        rationale: "test".into(),
        intent: None,
        llm_usage: vec![],
    })
    .expect("valid decision")
}

/// One contact attempt of the ETA ask by SMS with a timer, as client_a's SOP takes it.
pub fn sms_step(
    keys: &mut ActionKeys<'_>,
    transitions: &mut Vec<AskTransition>,
    ask_id: &str,
    attempt: u32,
    decided_at: DateTime<Utc>,
) {
    let step = AskStepRef { ask_id: ask_id.into(), ask_type: "eta_request".into(), attempt };
    let tid = timer_id("481207", ask_id, attempt);
    let fire_at = decided_at + Duration::minutes(30);
    keys.step(step.clone(), ActionBody::SendSms { to: "drv".into(), body: "ETA?".into() });
    keys.step(step, ActionBody::SetTimer { timer_id: tid.clone(), ask_id: ask_id.into(), attempt, fire_at });
    transitions.push(AskTransition::AskStepTaken {
        ask_id: ask_id.into(),
        step: attempt,
        step_kind: StepKind::Attempt,
        timer: Some(TimerRef { timer_id: tid, fire_at }),
    });
}
