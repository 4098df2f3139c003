//! What `DecisionRecord::new` accepts and refuses (ADR 0001: a step's actions come with the
//! transition that takes the step; a decision with nothing to do holds one explicit noop), and the
//! idempotency keys `ActionKeys` gives.

mod common;
use common::*;
use load_agent_domain::*;

const ASK: &str = "ask:eta_request:ping_0700";

fn when() -> chrono::DateTime<chrono::Utc> {
    at("2026-03-02T13:01:00Z")
}

/// Attempt `attempt` of the ETA ask by SMS, without its transition.
fn sms_step(attempt: u32) -> Vec<Action> {
    let mut keys = ActionKeys::new(load_agent_testkit::LOAD, "ping_0700");
    keys.step(
        AskStepRef { ask_id: ASK.into(), ask_type: "eta_request".into(), attempt },
        ActionBody::SendSms { to: "drv".into(), body: "ETA?".into() },
    );
    keys.into_actions()
}

fn step_taken(step: u32) -> AskTransition {
    AskTransition::AskStepTaken { ask_id: ASK.into(), step, step_kind: StepKind::Attempt, timer: None }
}

#[test]
fn a_step_action_without_its_transition_is_refused() {
    let err = DecisionRecord::new(draft("ping_0700", when(), vec![], sms_step(1))).unwrap_err();
    assert!(matches!(err, DecisionError::StepRule { attempt: 1, .. }));
    assert!(DecisionRecord::new(draft("ping_0700", when(), vec![step_taken(2)], sms_step(1))).is_err());
}

#[test]
fn a_step_action_with_its_transition_is_accepted() {
    let rec =
        DecisionRecord::new(draft("ping_0700", when(), vec![step_taken(1)], sms_step(1))).expect("valid");
    assert_eq!(rec.decision_id, "dec:ping_0700");
    assert_eq!(rec.effective_actions().count(), 1);
    assert!(!rec.is_noop());
}

#[test]
fn an_empty_decision_holds_an_explicit_noop_with_no_effective_action() {
    let rec = DecisionRecord::new(draft("ping_0700", when(), vec![], vec![])).expect("valid");
    assert_eq!(rec.actions.len(), 1);
    assert!(rec.actions[0].is_noop());
    assert_eq!(rec.effective_actions().count(), 0);
    assert!(rec.is_noop());
}

#[test]
fn noop_cannot_be_mixed_with_actions() {
    let mut actions = sms_step(1);
    actions.push(Action { key: String::new(), ask: None, body: ActionBody::Noop { reason: "x".into() } });
    assert_eq!(
        DecisionRecord::new(draft("ping_0700", when(), vec![], actions)).unwrap_err(),
        DecisionError::NoopMixed
    );
}

#[test]
fn keys_get_a_sequence_suffix_per_kind() {
    let mut keys = ActionKeys::new(load_agent_testkit::LOAD, "delivered_1");
    keys.by_event(ActionBody::CancelTimer { timer_id: "a".into() });
    keys.by_event(ActionBody::CancelTimer { timer_id: "b".into() });
    keys.by_event(ActionBody::TmsNote { text: "x".into() });
    let got: Vec<_> = keys.into_actions().into_iter().map(|a| a.key).collect();
    assert_eq!(
        got,
        [
            "481207/evt:delivered_1/cancel_timer",
            "481207/evt:delivered_1/cancel_timer/2",
            "481207/evt:delivered_1/tms_note"
        ]
    );
}
