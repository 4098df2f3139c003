//! The decision most store and runtime fixtures hold: the one that opens the ETA ask of
//! behavior.md §3 and takes its first step (an SMS to the driver and the 30-minute timer).
//! Callers set what their test is about (trigger kind, rationale, intent, LLM usage, contact
//! updates) with struct update syntax.

use chrono::{DateTime, TimeDelta, Utc};
use load_agent_domain::{
    ActionBody, ActionKeys, AskStepRef, AskTransition, DecisionPath, DecisionRecord, SopRef, StepKind,
    TimerRef, ask_id_for, ask_types, decision_id_for, timer_id,
};

/// The decision taken for `event_id` on `load` at `opened_at` under `sop`: the ETA ask opened for
/// the driver `drv` (two attempts, stop 1), its step 1 taken: an SMS saying `sms_body` and the
/// timer 30 minutes later. Path `Triage`, trigger kind `sms`, no intent, no LLM usage.
pub fn eta_ask_opened(
    load: &str,
    event_id: &str,
    opened_at: DateTime<Utc>,
    sop: SopRef,
    sms_body: &str,
) -> DecisionRecord {
    let ask_id = ask_id_for(event_id, ask_types::ETA_REQUEST);
    let step = AskStepRef { ask_id: ask_id.clone(), ask_type: ask_types::ETA_REQUEST.into(), attempt: 1 };
    let tid = timer_id(load, &ask_id, 1);
    let fire_at = opened_at + TimeDelta::minutes(30);
    let mut keys = ActionKeys::new(load, event_id);
    keys.step(step.clone(), ActionBody::SendSms { to: "drv".into(), body: sms_body.into() });
    keys.step(
        step,
        ActionBody::SetTimer { timer_id: tid.clone(), ask_id: ask_id.clone(), attempt: 1, fire_at },
    );
    DecisionRecord {
        decision_id: decision_id_for(event_id),
        load_id: load.into(),
        trigger_event_id: event_id.into(),
        trigger_kind: "sms".into(),
        decided_at: opened_at,
        sop: Some(sop.clone()),
        path: DecisionPath::Triage,
        transitions: vec![
            AskTransition::AskOpened {
                ask_id: ask_id.clone(),
                ask_type: ask_types::ETA_REQUEST.into(),
                target_contact: "drv".into(),
                sop,
                opened_at,
                max_attempts: 2,
                stop_sequence: Some(1),
            },
            AskTransition::AskStepTaken {
                ask_id,
                step: 1,
                step_kind: StepKind::Attempt,
                timer: Some(TimerRef { timer_id: tid, fire_at }),
            },
        ],
        contact_updates: vec![],
        actions: keys.into_actions(),
        rationale: "ask the driver for an ETA".into(),
        intent: None,
        llm_usage: vec![],
    }
}
