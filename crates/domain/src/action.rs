//! Actions are data (ADR 0001): a decision returns them, the outbox carries them, the relay
//! sends them. Deciding never performs a side effect.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::load::{EmailThread, Stage};

crate::spelled_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum ActionKind {
        SendSms => "send_sms",
        SendEmail => "send_email",
        PostSlack => "post_slack",
        TmsNote => "tms_note",
        SetTimer => "set_timer",
        CancelTimer => "cancel_timer",
        CreateHeroTask => "create_hero_task",
        UpdateStage => "update_stage",
        Noop => "noop",
    }
}

/// Where a Slack post goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "to", rename_all = "snake_case")]
pub enum SlackTarget {
    /// A broker contact of the load (its channel or handle).
    Broker { contact_id: String },
    /// The internal Hero channel: a Hero-channel action.
    HeroChannel,
}

crate::spelled_enum! {
    /// The service that owns an action (one Kafka topic each; `timer` is applied by the relay to
    /// the TimerStore and never leaves the agent).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Destination {
        Sms => "sms",
        Email => "email",
        Slack => "slack",
        Tms => "tms",
        Hero => "hero",
        LoadStatus => "load_status",
        Timer => "timer",
    }
}

/// How a permanent failure of an action is handled (ADR 0003, behavior.md §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionClass {
    /// Reaches people or systems outside the agent: a failure becomes an urgent Hero task.
    External,
    /// Hero tooling: a failure raises an ops alert, never another Hero task.
    HeroChannel,
    /// The agent's own plumbing (timers, stage mirror): a failure raises an ops alert.
    Internal,
}

/// The payload of an action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActionBody {
    SendSms { to: String, body: String },
    SendEmail { to: String, subject: String, body: String, thread: EmailThread },
    PostSlack { target: SlackTarget, text: String },
    TmsNote { text: String },
    SetTimer { timer_id: String, ask_id: String, attempt: u32, fire_at: DateTime<Utc> },
    CancelTimer { timer_id: String },
    CreateHeroTask { title: String, body: String, urgent: bool },
    UpdateStage { stage: Stage, current_stop: u32 },
    Noop { reason: String },
}

impl ActionBody {
    pub fn kind(&self) -> ActionKind {
        match self {
            ActionBody::SendSms { .. } => ActionKind::SendSms,
            ActionBody::SendEmail { .. } => ActionKind::SendEmail,
            ActionBody::PostSlack { .. } => ActionKind::PostSlack,
            ActionBody::TmsNote { .. } => ActionKind::TmsNote,
            ActionBody::SetTimer { .. } => ActionKind::SetTimer,
            ActionBody::CancelTimer { .. } => ActionKind::CancelTimer,
            ActionBody::CreateHeroTask { .. } => ActionKind::CreateHeroTask,
            ActionBody::UpdateStage { .. } => ActionKind::UpdateStage,
            ActionBody::Noop { .. } => ActionKind::Noop,
        }
    }

    /// The contact the action addresses, if any.
    pub fn contact_id(&self) -> Option<&str> {
        match self {
            ActionBody::SendSms { to, .. } | ActionBody::SendEmail { to, .. } => Some(to),
            ActionBody::PostSlack { target: SlackTarget::Broker { contact_id }, .. } => Some(contact_id),
            _ => None,
        }
    }

    /// The message body or task text, for reports and `body_contains` checks.
    pub fn text(&self) -> Option<&str> {
        match self {
            ActionBody::SendSms { body, .. } | ActionBody::SendEmail { body, .. } => Some(body),
            ActionBody::PostSlack { text, .. } | ActionBody::TmsNote { text } => Some(text),
            ActionBody::CreateHeroTask { body, .. } => Some(body),
            _ => None,
        }
    }

    pub fn destination(&self) -> Option<Destination> {
        Some(match self {
            ActionBody::SendSms { .. } => Destination::Sms,
            ActionBody::SendEmail { .. } => Destination::Email,
            ActionBody::PostSlack { target: SlackTarget::Broker { .. }, .. } => Destination::Slack,
            ActionBody::PostSlack { target: SlackTarget::HeroChannel, .. } => Destination::Hero,
            ActionBody::TmsNote { .. } => Destination::Tms,
            ActionBody::SetTimer { .. } | ActionBody::CancelTimer { .. } => Destination::Timer,
            ActionBody::CreateHeroTask { .. } => Destination::Hero,
            ActionBody::UpdateStage { .. } => Destination::LoadStatus,
            ActionBody::Noop { .. } => return None,
        })
    }

    pub fn class(&self) -> ActionClass {
        match self {
            ActionBody::CreateHeroTask { .. }
            | ActionBody::PostSlack { target: SlackTarget::HeroChannel, .. } => ActionClass::HeroChannel,
            ActionBody::SetTimer { .. } | ActionBody::CancelTimer { .. } | ActionBody::UpdateStage { .. } => {
                ActionClass::Internal
            }
            _ => ActionClass::External,
        }
    }
}

/// The ask step an action takes: present exactly when the decision takes that step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskStepRef {
    pub ask_id: String,
    pub ask_type: String,
    pub attempt: u32,
}

/// An action with its derived idempotency key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// The idempotency key, also the outbox row id. Empty for a noop.
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<AskStepRef>,
    pub body: ActionBody,
}

impl Action {
    pub fn kind(&self) -> ActionKind {
        self.body.kind()
    }

    pub fn is_noop(&self) -> bool {
        matches!(self.body, ActionBody::Noop { .. })
    }
}
