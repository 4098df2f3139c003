//! Builders of the domain tests over the shared test kit (`load-agent-testkit`): the domain
//! tests' spelling of its events, decisions and ask steps.
#![allow(dead_code)]

use chrono::{DateTime, Duration, Utc};
use load_agent_domain::*;
use load_agent_testkit::LOAD;
use load_agent_testkit::events::{self, entry};

pub use load_agent_testkit::at;

/// Load 481207 of ADR 0001 as the domain tests register it: on client_a's SOP version 1.
pub fn load_481207() -> LoadRegistered {
    LoadRegistered { sop_version: Some(1), ..load_agent_testkit::load::load_481207() }
}

pub fn event(id: &str, when: DateTime<Utc>, kind: EventKind) -> LogEntry {
    entry(LOAD, id, when, kind)
}

pub fn registered(when: DateTime<Utc>) -> LogEntry {
    event("reg_481207", when, EventKind::LoadRegistered { load: load_481207() })
}

pub fn ping(id: &str, when: DateTime<Utc>, stop: u32, band: RiskBand) -> LogEntry {
    event(id, when, events::ping(stop, band, when))
}

pub fn stop_status(id: &str, when: DateTime<Utc>, stop: u32, status: StopStatusKind) -> LogEntry {
    event(id, when, events::stop_status(stop, status))
}

pub fn decision(
    event_id: &str,
    when: DateTime<Utc>,
    transitions: Vec<AskTransition>,
    actions: Vec<Action>,
) -> DecisionRecord {
    DecisionRecord::new(draft(event_id, when, transitions, actions)).expect("valid decision")
}

/// The draft of a decision on client_a's SOP taken for `event_id` (`DecisionRecord::new` checks it).
pub fn draft(
    event_id: &str,
    when: DateTime<Utc>,
    transitions: Vec<AskTransition>,
    actions: Vec<Action>,
) -> DecisionDraft {
    DecisionDraft {
        load_id: LOAD.into(),
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
    }
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
    let tid = timer_id(LOAD, ask_id, attempt);
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
