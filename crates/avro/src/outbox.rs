//! The stored form of an outbox row's action: the `action` column of `outbox`, JSON, version 1.
//!
//! [`OutboxActionV1`] is a wire type of its own, kept apart from the domain's
//! [`load_agent_domain::Action`] like [`crate::json::InboundEventV1`] is from the domain's event:
//! renaming a domain field or variant changes nothing here, and rows written by every earlier
//! release stay readable. Changing this type is a change of a stored format: additive only
//! (a new optional field, a new body kind), and the tests below pin the shape of every kind.
//!
//! Shape (unchanged since the outbox was first written): `key`, `ask` (absent when the action
//! takes no ask step) and `body`, a JSON object tagged by `kind` with the kind's fields next to
//! it; a Slack post's `target` is tagged by `to`. Instants are RFC 3339 strings in UTC;
//! enumerated values (`thread`, `stage`) are the domain's spellings, checked when read.
//!
//! No IO here: [`encode_outbox_action`] and [`decode_outbox_action`] are sync functions over
//! strings.

use chrono::{DateTime, Utc};
use load_agent_domain as d;
use serde::{Deserialize, Serialize};

/// An outbox row's action, as stored (version 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboxActionV1 {
    /// The idempotency key, also the row's id.
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<AskStepV1>,
    pub body: ActionBodyV1,
}

/// The ask step an action takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskStepV1 {
    pub ask_id: String,
    pub ask_type: String,
    pub attempt: u32,
}

/// What the action does, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActionBodyV1 {
    SendSms { to: String, body: String },
    SendEmail { to: String, subject: String, body: String, thread: String },
    PostSlack { target: SlackTargetV1, text: String },
    TmsNote { text: String },
    SetTimer { timer_id: String, ask_id: String, attempt: u32, fire_at: DateTime<Utc> },
    CancelTimer { timer_id: String },
    CreateHeroTask { title: String, body: String, urgent: bool },
    UpdateStage { stage: String, current_stop: u32 },
    Noop { reason: String },
}

/// Where a Slack post goes, tagged by `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "to", rename_all = "snake_case")]
pub enum SlackTargetV1 {
    Broker { contact_id: String },
    HeroChannel,
}

/// A stored action that cannot be read: bad JSON, a missing field, an unknown kind or spelling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OutboxActionError(String);

impl From<&d::Action> for OutboxActionV1 {
    fn from(a: &d::Action) -> Self {
        use d::ActionBody as B;
        let body = match &a.body {
            B::SendSms { to, body } => ActionBodyV1::SendSms { to: to.clone(), body: body.clone() },
            B::SendEmail { to, subject, body, thread } => ActionBodyV1::SendEmail {
                to: to.clone(),
                subject: subject.clone(),
                body: body.clone(),
                thread: thread.as_str().to_owned(),
            },
            B::PostSlack { target, text } => ActionBodyV1::PostSlack {
                target: match target {
                    d::SlackTarget::Broker { contact_id } => {
                        SlackTargetV1::Broker { contact_id: contact_id.clone() }
                    }
                    d::SlackTarget::HeroChannel => SlackTargetV1::HeroChannel,
                },
                text: text.clone(),
            },
            B::TmsNote { text } => ActionBodyV1::TmsNote { text: text.clone() },
            B::SetTimer { timer_id, ask_id, attempt, fire_at } => ActionBodyV1::SetTimer {
                timer_id: timer_id.clone(),
                ask_id: ask_id.clone(),
                attempt: *attempt,
                fire_at: *fire_at,
            },
            B::CancelTimer { timer_id } => ActionBodyV1::CancelTimer { timer_id: timer_id.clone() },
            B::CreateHeroTask { title, body, urgent } => {
                ActionBodyV1::CreateHeroTask { title: title.clone(), body: body.clone(), urgent: *urgent }
            }
            B::UpdateStage { stage, current_stop } => {
                ActionBodyV1::UpdateStage { stage: stage.as_str().to_owned(), current_stop: *current_stop }
            }
            B::Noop { reason } => ActionBodyV1::Noop { reason: reason.clone() },
        };
        OutboxActionV1 {
            key: a.key.clone(),
            ask: a.ask.as_ref().map(|s| AskStepV1 {
                ask_id: s.ask_id.clone(),
                ask_type: s.ask_type.clone(),
                attempt: s.attempt,
            }),
            body,
        }
    }
}

impl TryFrom<OutboxActionV1> for d::Action {
    type Error = OutboxActionError;

    fn try_from(w: OutboxActionV1) -> Result<Self, OutboxActionError> {
        use d::ActionBody as B;
        let spelling = |field: &str, e: String| OutboxActionError(format!("body.{field}: {e}"));
        let body = match w.body {
            ActionBodyV1::SendSms { to, body } => B::SendSms { to, body },
            ActionBodyV1::SendEmail { to, subject, body, thread } => B::SendEmail {
                to,
                subject,
                body,
                thread: thread.parse::<d::EmailThread>().map_err(|e| spelling("thread", e.to_string()))?,
            },
            ActionBodyV1::PostSlack { target, text } => B::PostSlack {
                target: match target {
                    SlackTargetV1::Broker { contact_id } => d::SlackTarget::Broker { contact_id },
                    SlackTargetV1::HeroChannel => d::SlackTarget::HeroChannel,
                },
                text,
            },
            ActionBodyV1::TmsNote { text } => B::TmsNote { text },
            ActionBodyV1::SetTimer { timer_id, ask_id, attempt, fire_at } => {
                B::SetTimer { timer_id, ask_id, attempt, fire_at }
            }
            ActionBodyV1::CancelTimer { timer_id } => B::CancelTimer { timer_id },
            ActionBodyV1::CreateHeroTask { title, body, urgent } => B::CreateHeroTask { title, body, urgent },
            ActionBodyV1::UpdateStage { stage, current_stop } => B::UpdateStage {
                stage: stage.parse::<d::Stage>().map_err(|e| spelling("stage", e.to_string()))?,
                current_stop,
            },
            ActionBodyV1::Noop { reason } => B::Noop { reason },
        };
        Ok(d::Action {
            key: w.key,
            ask: w.ask.map(|s| d::AskStepRef { ask_id: s.ask_id, ask_type: s.ask_type, attempt: s.attempt }),
            body,
        })
    }
}

/// The stored JSON of `action` (version 1).
pub fn encode_outbox_action(action: &d::Action) -> Result<String, OutboxActionError> {
    serde_json::to_string(&OutboxActionV1::from(action)).map_err(|e| OutboxActionError(e.to_string()))
}

/// Reads a stored action; the error names what is wrong (the JSON path of a bad field).
pub fn decode_outbox_action(json: &str) -> Result<d::Action, OutboxActionError> {
    let mut de = serde_json::Deserializer::from_str(json);
    let wire: OutboxActionV1 = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            OutboxActionError(inner.to_string())
        } else {
            OutboxActionError(format!("{path}: {inner}"))
        }
    })?;
    d::Action::try_from(wire)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use serde_json::{Value, json};

    use super::*;

    fn action(body: d::ActionBody) -> d::Action {
        d::Action { key: "481207:ask-1:send_sms:1".into(), ask: None, body }
    }

    /// Every body kind, with the JSON a row holds for it: the stored format, pinned.
    fn every_kind() -> Vec<(d::Action, Value)> {
        let at = Utc.with_ymd_and_hms(2026, 3, 3, 9, 14, 0).single().expect("a valid instant");
        let key = "481207:ask-1:send_sms:1";
        vec![
            (
                d::Action {
                    key: key.into(),
                    ask: Some(d::AskStepRef { ask_id: "ask-1".into(), ask_type: "eta".into(), attempt: 2 }),
                    body: d::ActionBody::SendSms { to: "driver-1".into(), body: "ETA?".into() },
                },
                json!({"key": key, "ask": {"ask_id": "ask-1", "ask_type": "eta", "attempt": 2},
                       "body": {"kind": "send_sms", "to": "driver-1", "body": "ETA?"}}),
            ),
            (
                action(d::ActionBody::SendEmail {
                    to: "dispatch-1".into(),
                    subject: "Load 481207".into(),
                    body: "Hello".into(),
                    thread: d::EmailThread::Main,
                }),
                json!({"key": key, "body": {"kind": "send_email", "to": "dispatch-1", "subject": "Load 481207",
                       "body": "Hello", "thread": "main"}}),
            ),
            (
                action(d::ActionBody::PostSlack {
                    target: d::SlackTarget::Broker { contact_id: "broker-1".into() },
                    text: "late".into(),
                }),
                json!({"key": key, "body": {"kind": "post_slack", "target": {"to": "broker", "contact_id": "broker-1"},
                       "text": "late"}}),
            ),
            (
                action(d::ActionBody::PostSlack {
                    target: d::SlackTarget::HeroChannel,
                    text: "alert".into(),
                }),
                json!({"key": key, "body": {"kind": "post_slack", "target": {"to": "hero_channel"}, "text": "alert"}}),
            ),
            (
                action(d::ActionBody::TmsNote { text: "note".into() }),
                json!({"key": key, "body": {"kind": "tms_note", "text": "note"}}),
            ),
            (
                action(d::ActionBody::SetTimer {
                    timer_id: "t-1".into(),
                    ask_id: "ask-1".into(),
                    attempt: 1,
                    fire_at: at,
                }),
                json!({"key": key, "body": {"kind": "set_timer", "timer_id": "t-1", "ask_id": "ask-1", "attempt": 1,
                       "fire_at": "2026-03-03T09:14:00Z"}}),
            ),
            (
                action(d::ActionBody::CancelTimer { timer_id: "t-1".into() }),
                json!({"key": key, "body": {"kind": "cancel_timer", "timer_id": "t-1"}}),
            ),
            (
                action(d::ActionBody::CreateHeroTask {
                    title: "Call".into(),
                    body: "why".into(),
                    urgent: true,
                }),
                json!({"key": key, "body": {"kind": "create_hero_task", "title": "Call", "body": "why", "urgent": true}}),
            ),
            (
                action(d::ActionBody::UpdateStage { stage: d::Stage::AtDelivery, current_stop: 2 }),
                json!({"key": key, "body": {"kind": "update_stage", "stage": "at_delivery", "current_stop": 2}}),
            ),
            (
                action(d::ActionBody::Noop { reason: "nothing to do".into() }),
                json!({"key": key, "body": {"kind": "noop", "reason": "nothing to do"}}),
            ),
        ]
    }

    #[test]
    fn every_kind_is_stored_in_the_pinned_shape_and_read_back() {
        let cases = every_kind();
        let kinds: std::collections::BTreeSet<_> = cases.iter().map(|(a, _)| a.kind()).collect();
        assert_eq!(kinds.len(), d::ActionKind::ALL.len(), "a case for every action kind");
        for (action, stored) in cases {
            let json = encode_outbox_action(&action).expect("encodes");
            let written: Value = serde_json::from_str(&json).expect("valid JSON");
            assert_eq!(written, stored, "the stored shape of {:?}", action.kind());
            assert_eq!(decode_outbox_action(&stored.to_string()), Ok(action));
        }
    }

    #[test]
    fn what_is_wrong_with_a_stored_action_is_named() {
        let bad_stage =
            r#"{"key":"k","body":{"kind":"update_stage","stage":"at_the_beach","current_stop":1}}"#;
        let e = decode_outbox_action(bad_stage).expect_err("an unknown stage");
        assert!(e.to_string().starts_with("body.stage: "), "{e}");
        let bad_kind = r#"{"key":"k","body":{"kind":"send_fax","to":"x"}}"#;
        let e = decode_outbox_action(bad_kind).expect_err("an unknown kind");
        assert!(e.to_string().contains("send_fax"), "{e}");
        let missing = r#"{"key":"k","body":{"kind":"send_sms","to":"x"}}"#;
        let e = decode_outbox_action(missing).expect_err("a missing field");
        assert!(e.to_string().contains("body"), "{e}");
        assert!(decode_outbox_action("{").is_err());
    }
}
