//! The JSON report of `load-agent eval --report FILE` (scenarios.md "Report"). Times are UTC.

use chrono::{DateTime, SecondsFormat, Utc};
use load_agent_domain::{ActionBody, DecisionRecord};
use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EvalReport {
    pub passed: usize,
    pub failed: usize,
    pub scenarios: Vec<ScenarioReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioReport {
    pub name: String,
    pub file: String,
    pub passed: bool,
    /// A failure outside the steps (the store, the registration), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub steps: Vec<StepReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    pub index: usize,
    pub at: String,
    pub event_id: Option<String>,
    pub passed: bool,
    pub failures: Vec<String>,
    pub decisions: Vec<DecisionReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionReport {
    pub decision_id: String,
    pub trigger_event_id: String,
    pub trigger_kind: String,
    pub path: String,
    pub noop: bool,
    pub transitions: Vec<TransitionReport>,
    pub actions: Vec<ActionReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransitionReport {
    pub kind: String,
    pub ask_id: String,
    pub step: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActionReport {
    pub kind: String,
    pub key: String,
    pub to: Option<String>,
    pub ask_id: Option<String>,
    pub ask_type: Option<String>,
    pub attempt: Option<u32>,
    pub urgent: Option<bool>,
    pub thread: Option<String>,
    pub body: Option<String>,
    pub fire_at: Option<String>,
}

/// `2026-03-02T13:00:00Z`.
pub fn utc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

impl DecisionReport {
    pub fn from_record(d: &DecisionRecord) -> Self {
        DecisionReport {
            decision_id: d.decision_id.clone(),
            trigger_event_id: d.trigger_event_id.clone(),
            trigger_kind: d.trigger_kind.clone(),
            path: d.path.as_str().to_string(),
            noop: d.is_noop(),
            transitions: d
                .transitions
                .iter()
                .map(|t| TransitionReport {
                    kind: t.kind_str().into(),
                    ask_id: t.ask_id().into(),
                    step: t.step(),
                })
                .collect(),
            actions: d
                .effective_actions()
                .map(|a| ActionReport {
                    kind: a.kind().as_str().into(),
                    key: a.key.clone(),
                    to: a.body.contact_id().map(str::to_string),
                    ask_id: a.ask.as_ref().map(|s| s.ask_id.clone()),
                    ask_type: a.ask.as_ref().map(|s| s.ask_type.clone()),
                    attempt: a.ask.as_ref().map(|s| s.attempt),
                    urgent: match &a.body {
                        ActionBody::CreateHeroTask { urgent, .. } => Some(*urgent),
                        _ => None,
                    },
                    thread: match &a.body {
                        ActionBody::SendEmail { thread, .. } => Some(thread.as_str().into()),
                        _ => None,
                    },
                    body: match &a.body {
                        ActionBody::CreateHeroTask { title, body, .. } => Some(format!("{title}: {body}")),
                        ActionBody::UpdateStage { stage, current_stop } => {
                            Some(format!("{} (stop {current_stop})", stage.as_str()))
                        }
                        ActionBody::CancelTimer { timer_id } => Some(timer_id.clone()),
                        other => other.text().map(str::to_string),
                    },
                    fire_at: match &a.body {
                        ActionBody::SetTimer { fire_at, .. } => Some(utc(*fire_at)),
                        _ => None,
                    },
                })
                .collect(),
        }
    }
}
