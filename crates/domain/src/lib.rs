//! The pure core of load-agent (ADR 0001).
//!
//! Layout:
//! - [`ids`]: derived ids and idempotency keys (`ask_id_for`, `timer_id`, ...).
//! - [`load`]: the load's metadata (`LoadRegistered`): contacts, stops, reefer, pinned SOP;
//!   its stages (`Stage`) and email threads (`EmailThread`).
//! - [`event`]: inbound events (`InboundEvent`, `EventKind`).
//! - [`log`]: log entries (an event or a `DecisionRecord`).
//! - [`state`]: `LoadState`, a pure fold over the log (`project_state`, `LoadState::apply`).
//! - [`summary`]: `LoadSummary`, what the operations console lists a load by.
//! - [`triggers`]: `detect_triggers(before, after)`, a pure diff.
//! - [`action`]: actions as data, their destinations and classes.
//! - [`decision`]: `DecisionRecord`, ask transitions and the step rule.
//! - [`pii`]: redaction of phone numbers, email addresses and message text in logs.
//! - [`settings`]: what the crates' configuration sections share: [`settings::Secret`],
//!   URL password masking, [`settings::SettingError`].
//! - [`spelling`]: [`spelled_enum!`], one spelling per enum (`as_str`, `parse`, `FromStr`, `ALL`).
//!
//! Architecture invariant: this crate is synchronous and performs no IO. It knows nothing of
//! tokio, databases, Kafka, Avro, HTTP or any LLM vendor; CI checks it with `cargo tree`.

pub mod action;
pub mod decision;
pub mod event;
pub mod ids;
pub mod load;
pub mod log;
pub mod pii;
pub mod settings;
pub mod spelling;
pub mod state;
pub mod summary;
pub mod triggers;

pub use action::{Action, ActionBody, ActionClass, ActionKind, AskStepRef, Destination, SlackTarget};
pub use decision::{
    ActionKeys, AskTransition, ContactUpdate, DecisionDraft, DecisionError, DecisionPath, DecisionRecord,
    IntentRecord, LlmUsage, StepKind, TimerRef,
};
pub use event::{
    DocumentFields, DocumentType, EventKind, InboundEvent, MessageChannel, RiskBand, StopStatusKind,
};
pub use ids::{
    KeyBasis, OutcomeStatus, action_outcome_event_id, ask_id_for, decision_id_for, idempotency_key,
    timer_fired_event_id, timer_id,
};
pub use load::{
    Contact, EmailThread, Language, LoadRegistered, LoadValidationError, Reefer, Role, SopRef, Stage, Stop,
    StopKind,
};
pub use log::LogEntry;
pub use spelling::UnknownSpelling;
pub use state::{AskStatus, LoadState, OpenAsk, Tracking, project_state};
pub use summary::LoadSummary;
pub use triggers::{Trigger, detect_triggers};

/// Ask types the shipped SOPs open.
pub mod ask_types {
    pub const ETA_REQUEST: &str = "eta_request";
    pub const REEFER_TEMP: &str = "reefer_temp";
}
