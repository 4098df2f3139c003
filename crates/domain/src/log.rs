//! Log entries: what one load's append-only log holds (ADR 0001).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::decision::DecisionRecord;
use crate::event::InboundEvent;

/// One entry of a load's log. Its position (`seq`, 1-based) is given by the store; the version
/// of a log is the seq of its last entry, which is also its number of entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "entry", rename_all = "snake_case")]
pub enum LogEntry {
    /// An inbound event (its first entry is always `load_registered`).
    Event(InboundEvent),
    /// The decision taken for an event (`DecisionRecorded`).
    Decision(DecisionRecord),
}

impl LogEntry {
    /// The entry id, unique within a load: the event id, or `dec:{event_id}` for a decision.
    pub fn entry_id(&self) -> &str {
        match self {
            LogEntry::Event(e) => &e.event_id,
            LogEntry::Decision(d) => &d.decision_id,
        }
    }

    /// The kind column: the event kind (`sms`, `ping`, ...) or `decision`.
    pub fn kind_str(&self) -> &'static str {
        match self {
            LogEntry::Event(e) => e.kind_str(),
            LogEntry::Decision(_) => "decision",
        }
    }

    /// When the entry happened: the event's time or the decision's time.
    pub fn recorded_at(&self) -> DateTime<Utc> {
        match self {
            LogEntry::Event(e) => e.occurred_at,
            LogEntry::Decision(d) => d.decided_at,
        }
    }

    /// The LLM cost carried by the entry (decisions only).
    pub fn llm_cost_usd(&self) -> f64 {
        match self {
            LogEntry::Event(_) => 0.0,
            LogEntry::Decision(d) => d.total_cost_usd(),
        }
    }

    pub fn load_id(&self) -> &str {
        match self {
            LogEntry::Event(e) => &e.load_id,
            LogEntry::Decision(d) => &d.load_id,
        }
    }
}
