//! Derived ids and idempotency keys, exactly as ADR 0001 and behavior.md §4 write them.
//!
//! Every externally visible effect has a deterministic id, so that re-deciding after a
//! concurrency conflict, a redelivery or a crash yields the same ids and keys. Changing any
//! format here is a breaking change for stored logs and for the delivery services.

use serde::{Deserialize, Serialize};

use crate::action::ActionKind;

/// `ask:{type}:{opened_by_event_id}`.
pub fn ask_id_for(opened_by_event_id: &str, ask_type: &str) -> String {
    format!("ask:{ask_type}:{opened_by_event_id}")
}

/// `tmr:{load_id}:{ask_id}:{attempt}`.
pub fn timer_id(load_id: &str, ask_id: &str, attempt: u32) -> String {
    format!("tmr:{load_id}:{ask_id}:{attempt}")
}

/// The event id of the `timer_fired` event the pump publishes for a timer: `evt:{timer_id}`.
/// A pump that crashes between publish and `mark_fired` publishes the same id again and the
/// event store drops the second copy.
pub fn timer_fired_event_id(timer_id: &str) -> String {
    format!("evt:{timer_id}")
}

crate::spelled_enum! {
    /// Status of a delivery attempt as reported in an `action_outcome` event.
    ///
    /// `published` and `delivered` say different things: the relay reports `published` when the
    /// broker acknowledged the action's record on its service's topic (the command reached the SMS
    /// service, not the driver); only a delivery service reports `delivered`, its own confirmation.
    /// In the embedded mode the relay calls the (fake) services themselves, so their receipt is a
    /// `delivered`. Log entries written before `published` existed say `delivered` for both.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
    #[serde(rename_all = "snake_case")]
    pub enum OutcomeStatus {
        /// The broker acknowledged the action's record on its service's topic (the relay).
        Published => "published",
        /// The delivery service confirmed it (the SMS reached the phone, the task was created).
        Delivered => "delivered",
        FailedPermanent => "failed_permanent" | "failed",
    }
}

/// `out:{status}:{idempotency_key}`. Different per status, so that a late `failed_permanent`
/// next to a `delivered` for the same key (ADR 0003) are both recorded.
pub fn action_outcome_event_id(idempotency_key: &str, status: OutcomeStatus) -> String {
    format!("out:{}:{idempotency_key}", status.as_str())
}

/// The log entry id of the decision taken for an event: `dec:{event_id}`.
pub fn decision_id_for(trigger_event_id: &str) -> String {
    format!("dec:{trigger_event_id}")
}

/// How an action's idempotency key is derived (ADR 0001).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyBasis<'a> {
    /// The action takes step `attempt` of ask `ask_id`: `{load_id}/{ask_id}/{attempt}/{kind}`.
    AskStep { ask_id: &'a str, attempt: u32 },
    /// Anything else: `{load_id}/evt:{caused_by_event_id}/{kind}`.
    Event { caused_by_event_id: &'a str },
}

/// The idempotency key of an action. `seq` is the 1-based index of this action among the
/// actions of the same kind (and the same basis) emitted by one event; the first one has no
/// suffix, the n-th (n >= 2) gets `/{n}` appended.
pub fn idempotency_key(load_id: &str, basis: &KeyBasis<'_>, kind: ActionKind, seq: u32) -> String {
    let mut key = match basis {
        KeyBasis::AskStep { ask_id, attempt } => {
            format!("{load_id}/{ask_id}/{attempt}/{}", kind.as_str())
        }
        KeyBasis::Event { caused_by_event_id } => {
            format!("{load_id}/evt:{caused_by_event_id}/{}", kind.as_str())
        }
    };
    if seq >= 2 {
        key.push('/');
        key.push_str(&seq.to_string());
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ask_and_timer_ids_follow_adr_0001() {
        let ask = ask_id_for("ping_0700", "eta_request");
        assert_eq!(ask, "ask:eta_request:ping_0700");
        let tmr = timer_id("481207", &ask, 1);
        assert_eq!(tmr, "tmr:481207:ask:eta_request:ping_0700:1");
        assert_eq!(timer_fired_event_id(&tmr), "evt:tmr:481207:ask:eta_request:ping_0700:1");
    }

    #[test]
    fn outcome_event_ids_differ_by_status() {
        let key = "481207/ask:eta_request:ping_0700/1/send_sms";
        let d = action_outcome_event_id(key, OutcomeStatus::Delivered);
        let f = action_outcome_event_id(key, OutcomeStatus::FailedPermanent);
        assert_ne!(d, f);
        assert!(d.ends_with(key) && f.ends_with(key));
    }

    #[test]
    fn keys_with_and_without_ask_and_with_seq() {
        let with_ask = KeyBasis::AskStep { ask_id: "ask:eta_request:ping_0700", attempt: 2 };
        assert_eq!(
            idempotency_key("481207", &with_ask, ActionKind::SendSms, 1),
            "481207/ask:eta_request:ping_0700/2/send_sms"
        );
        let by_event = KeyBasis::Event { caused_by_event_id: "sms_0713" };
        assert_eq!(
            idempotency_key("481207", &by_event, ActionKind::SendSms, 1),
            "481207/evt:sms_0713/send_sms"
        );
        assert_eq!(
            idempotency_key("481207", &by_event, ActionKind::CancelTimer, 2),
            "481207/evt:sms_0713/cancel_timer/2"
        );
    }

    #[test]
    fn outcome_status_round_trips() {
        for s in [OutcomeStatus::Published, OutcomeStatus::Delivered, OutcomeStatus::FailedPermanent] {
            assert_eq!(OutcomeStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(OutcomeStatus::parse("bogus"), None);
    }
}
