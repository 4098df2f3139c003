//! Inbound events: everything that reaches a load's queue (behavior.md, topics.md).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::action::ActionKind;
use crate::ids::OutcomeStatus;
use crate::load::{EmailThread, LoadRegistered};

/// An event on the load queue. Its `event_id` is the id of its log entry, so a redelivered
/// event is recognized as "already processed".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboundEvent {
    pub event_id: String,
    pub load_id: String,
    /// When the event happened at its source (a ping's `recorded_at`, a message's receipt).
    pub occurred_at: DateTime<Utc>,
    #[serde(flatten)]
    pub kind: EventKind,
}

crate::spelled_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum RiskBand {
        Low => "low",
        Medium => "medium",
        High => "high",
    }
}

crate::spelled_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum StopStatusKind {
        Arrived => "arrived",
        Departed => "departed",
        Delivered => "delivered",
    }
}

crate::spelled_enum! {
    /// A message channel a contact can write on.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum MessageChannel {
        Sms => "sms",
        Email => "email",
        Slack => "slack",
    }
}

/// The typed fields a document reader returns for an attachment (behavior.md §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DocumentFields {
    pub document_type: DocumentType,
    #[serde(default)]
    pub signed: Option<bool>,
    #[serde(default)]
    pub exceptions_noted: Option<bool>,
    #[serde(default)]
    pub po_numbers: Vec<String>,
    #[serde(default)]
    pub seal: Option<String>,
    #[serde(default)]
    pub pieces: Option<u32>,
    #[serde(default)]
    pub temperature_f: Option<f64>,
}

crate::spelled_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
    #[serde(rename_all = "snake_case")]
    pub enum DocumentType {
        Bol => "bol",
        Pod => "pod",
        LumperReceipt => "lumper_receipt",
        #[default]
        Other => "other",
    }
}

/// What an event says. Serialized with a `type` tag, the ids of topics.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// The load's metadata; the first entry of every log. (A struct variant, so that the JSON
    /// form keeps `load_id` once at the top level and once inside `load`.)
    LoadRegistered {
        load: LoadRegistered,
    },
    Sms {
        /// A contact id, or the raw phone number of the sender.
        from: String,
        text: String,
    },
    Email {
        from: String,
        #[serde(default)]
        subject: String,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<EmailThread>,
    },
    Slack {
        from: String,
        text: String,
    },
    Ping {
        stop: u32,
        delay_risk: RiskBand,
        /// When the tracker measured it; pings recorded before the last applied one are stale.
        recorded_at: DateTime<Utc>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lat: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lon: Option<f64>,
    },
    /// Published by the timer pump. The payload is exactly `{load_id, ask_id, attempt}`.
    TimerFired {
        timer_id: String,
        ask_id: String,
        attempt: u32,
        fire_at: DateTime<Utc>,
    },
    Attachment {
        from: String,
        channel: MessageChannel,
        filename: String,
        content_type: String,
        /// Where the document's bytes can be fetched by the document reader.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content_ref: Option<String>,
        /// Fields already extracted upstream; the fake document reader returns them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        extracted: Option<DocumentFields>,
    },
    StopStatus {
        stop: u32,
        status: StopStatusKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
    /// Reported by the relay (dispatcher) or a delivery service for one outbox row.
    ActionOutcome {
        idempotency_key: String,
        status: OutcomeStatus,
        action_kind: ActionKind,
        /// The contact the action addressed, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        contact_id: Option<String>,
        /// True for Hero-channel actions (`create_hero_task`, a Slack post to the Hero channel).
        #[serde(default)]
        hero_channel: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl EventKind {
    /// The kind id used in log columns, reports and metrics.
    pub fn kind_str(&self) -> &'static str {
        match self {
            EventKind::LoadRegistered { .. } => "load_registered",
            EventKind::Sms { .. } => "sms",
            EventKind::Email { .. } => "email",
            EventKind::Slack { .. } => "slack",
            EventKind::Ping { .. } => "ping",
            EventKind::TimerFired { .. } => "timer_fired",
            EventKind::Attachment { .. } => "attachment",
            EventKind::StopStatus { .. } => "stop_status",
            EventKind::ActionOutcome { .. } => "action_outcome",
        }
    }

    /// The channel, sender and text of a message event.
    pub fn as_message(&self) -> Option<(MessageChannel, &str, &str)> {
        match self {
            EventKind::Sms { from, text } => Some((MessageChannel::Sms, from, text)),
            EventKind::Email { from, text, .. } => Some((MessageChannel::Email, from, text)),
            EventKind::Slack { from, text } => Some((MessageChannel::Slack, from, text)),
            _ => None,
        }
    }
}

impl InboundEvent {
    pub fn kind_str(&self) -> &'static str {
        self.kind.kind_str()
    }
}
