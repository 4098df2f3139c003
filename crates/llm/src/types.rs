//! The typed requests and results of the five methods, the output wrapper and the two failures.

use serde::{Deserialize, Serialize};

use load_agent_domain::{ActionKind, DocumentFields, LlmUsage};
use load_agent_triage::{Abstain, ExtractedValues, Intent};

/// The validated output of a call and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmOutput<T> {
    pub value: T,
    pub usage: LlmUsage,
}

impl<T> LlmOutput<T> {
    /// Keeps the usage, transforms the value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> LlmOutput<U> {
        LlmOutput { value: f(self.value), usage: self.usage }
    }
}

pub type LlmResult<T> = Result<LlmOutput<T>, LlmError>;

load_agent_domain::spelled_enum! {
    /// The five model methods.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum LlmMethod {
        Triage => "triage",
        Draft => "draft",
        ExtractDocument => "extract_document",
        Plan => "plan",
        ExtractSop => "extract_sop",
    }
}

impl LlmMethod {
    /// Position in [`LlmMethod::ALL`].
    pub(crate) fn index(self) -> usize {
        match self {
            LlmMethod::Triage => 0,
            LlmMethod::Draft => 1,
            LlmMethod::ExtractDocument => 2,
            LlmMethod::Plan => 3,
            LlmMethod::ExtractSop => 4,
        }
    }
}

/// `LLMUnavailableError` and `LLMInvalidOutputError` of ADR 0001. The pipeline turns either into
/// an urgent Hero task.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// Timeout, overload, connection refused, 5xx after retries, a provider rejecting our
    /// configuration (401, 403, 400), no provider configured, or the run's deadline passed.
    ///
    /// `retryable` tells the guard ([`crate::Guarded`]) whether trying again can help: true for
    /// timeouts, 429, 5xx and connection errors; false for configuration errors, a missing
    /// provider and a passed deadline.
    #[error("LLM unavailable for {method}: {reason}")]
    Unavailable { method: &'static str, reason: String, retryable: bool },
    /// The output failed schema validation (or a semantic check, such as the planner proposing an
    /// action it may not propose). Never retried: the same prompt tends to give the same answer,
    /// and the pipeline must not parse leniently or guess.
    #[error("LLM output invalid for {method}: {reason}")]
    InvalidOutput { method: &'static str, reason: String },
}

impl LlmError {
    /// A transient failure; the guard retries it.
    pub fn unavailable(method: LlmMethod, reason: impl Into<String>) -> Self {
        LlmError::Unavailable { method: method.as_str(), reason: reason.into(), retryable: true }
    }

    /// A failure that retrying cannot fix (no provider, configuration rejected, deadline passed).
    pub fn unavailable_final(method: LlmMethod, reason: impl Into<String>) -> Self {
        LlmError::Unavailable { method: method.as_str(), reason: reason.into(), retryable: false }
    }

    pub fn invalid(method: LlmMethod, reason: impl Into<String>) -> Self {
        LlmError::InvalidOutput { method: method.as_str(), reason: reason.into() }
    }

    /// Whether the guard may try the call again.
    pub fn is_retryable(&self) -> bool {
        matches!(self, LlmError::Unavailable { retryable: true, .. })
    }

    pub fn is_unavailable(&self) -> bool {
        matches!(self, LlmError::Unavailable { .. })
    }

    pub fn is_invalid_output(&self) -> bool {
        matches!(self, LlmError::InvalidOutput { .. })
    }

    /// The reason text, without the method.
    pub fn reason(&self) -> &str {
        match self {
            LlmError::Unavailable { reason, .. } | LlmError::InvalidOutput { reason, .. } => reason,
        }
    }
}

/// A message to classify, with the load context triage may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriageRequest {
    pub text: String,
    pub lang: Option<String>,
    pub from_role: Option<String>,
    /// The type of an ask open for the sender, if any.
    pub open_ask: Option<String>,
}

/// Triage's typed answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriageResult {
    pub intent: Intent,
    /// Calibrated probability of `intent`.
    pub probability: f64,
    /// Whether the intent may be acted on (`abstain` is `None`); otherwise the message takes
    /// the planner path.
    pub confident: bool,
    /// Why not to act on `intent`: below its threshold, or a possible opt-out or wrong number
    /// (docs/triage.md).
    #[serde(default)]
    pub abstain: Option<Abstain>,
    pub values: ExtractedValues,
    /// Detected language, `en` or `es`.
    pub lang: String,
    /// Every intent with its probability, most probable first (empty when the provider gives
    /// only the top intent).
    #[serde(default)]
    pub distribution: Vec<(Intent, f64)>,
}

/// A message body with no template (rare).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DraftRequest {
    pub purpose: String,
    pub language: String,
    pub facts: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Draft {
    pub body: String,
}

/// A document to read (a photo or PDF of a BOL, POD or lumper receipt).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentRequest {
    pub load_id: String,
    pub filename: String,
    pub content_type: String,
    /// Where the document can be fetched (an `https:` or `data:` URL); the HTTP provider sends
    /// it as an `image_url` part for vision models.
    pub content_ref: Option<String>,
    /// Fields extracted upstream, if the event carried them (the fake reader returns these).
    pub extracted: Option<DocumentFields>,
}

/// A situation no SOP rule and no triage intent covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    pub load_id: String,
    pub situation: String,
    /// A compact JSON summary of the load state (stage, open asks, contacts by role).
    pub state_summary: serde_json::Value,
    pub message: Option<String>,
    pub from_role: Option<String>,
}

/// What the planner may propose: only non-carrier-facing actions (ADR 0001). The enum is
/// closed, so any other kind in a provider's output is refused when it is parsed
/// ([`crate::parse_plan`]), naming the kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PlannedAction {
    CreateHeroTask {
        title: String,
        body: String,
        urgent: bool,
    },
    TmsNote {
        text: String,
    },
    /// A Slack post to the load's broker contact.
    PostSlack {
        text: String,
    },
}

impl PlannedAction {
    /// The action kinds the planner may propose.
    pub const ALLOWED_KINDS: [ActionKind; 3] =
        [ActionKind::CreateHeroTask, ActionKind::TmsNote, ActionKind::PostSlack];

    pub fn kind(&self) -> ActionKind {
        match self {
            PlannedAction::CreateHeroTask { .. } => ActionKind::CreateHeroTask,
            PlannedAction::TmsNote { .. } => ActionKind::TmsNote,
            PlannedAction::PostSlack { .. } => ActionKind::PostSlack,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub actions: Vec<PlannedAction>,
    pub rationale: String,
}

/// An SOP written in plain English, to compile into a spec (edit time only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SopExtractionRequest {
    pub sop_id: String,
    pub text: String,
    /// The JSON schema of a compiled SOP spec that the output must satisfy.
    pub spec_schema: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractedSop {
    pub spec: serde_json::Value,
}

#[cfg(test)]
mod spelling_tests {
    use super::*;

    /// serde (the JSON formats) and `as_str` (SQL, query strings, metric labels) agree.
    #[test]
    fn serde_spells_every_variant_as_as_str_does() {
        for r in LlmMethod::ALL {
            assert_eq!(serde_json::to_value(r).ok(), Some(serde_json::json!(r.as_str())));
            let read: Option<LlmMethod> = serde_json::from_value(serde_json::json!(r.as_str())).ok();
            assert_eq!(read, Some(r));
        }
    }
}
