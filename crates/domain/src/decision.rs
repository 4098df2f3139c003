//! The decision record: the unit of change of a load (ADR 0001). A log never holds an action
//! without the state change that explains it, because both travel in one record.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::action::{Action, ActionBody, ActionKind, AskStepRef};
use crate::ids::{KeyBasis, decision_id_for, idempotency_key};
use crate::load::SopRef;

crate::spelled_enum! {
    /// How a decision was reached (scenarios.md report `path`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum DecisionPath {
        Filtered => "filtered",
        Sop => "sop",
        Triage => "triage",
        Planner => "planner",
        HeroFallback => "hero_fallback",
        Validation => "validation",
    }
}

crate::spelled_enum! {
    /// Whether an ask step contacts the target again or escalates.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum StepKind {
        Attempt => "attempt",
        Escalation => "escalation",
    }
}

/// The timer armed by a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerRef {
    pub timer_id: String,
    pub fire_at: DateTime<Utc>,
}

/// The only way ask state changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AskTransition {
    AskOpened {
        ask_id: String,
        ask_type: String,
        target_contact: String,
        sop: SopRef,
        opened_at: DateTime<Utc>,
        max_attempts: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop_sequence: Option<u32>,
    },
    AskStepTaken {
        ask_id: String,
        step: u32,
        step_kind: StepKind,
        /// The timer armed by this step, if any; `None` clears the ask's pending timer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timer: Option<TimerRef>,
    },
    AskResolved {
        ask_id: String,
        resolved_by: String,
        resolved_at: DateTime<Utc>,
    },
    AskCancelled {
        ask_id: String,
        reason: String,
        cancelled_at: DateTime<Utc>,
    },
}

impl AskTransition {
    pub fn ask_id(&self) -> &str {
        match self {
            AskTransition::AskOpened { ask_id, .. }
            | AskTransition::AskStepTaken { ask_id, .. }
            | AskTransition::AskResolved { ask_id, .. }
            | AskTransition::AskCancelled { ask_id, .. } => ask_id,
        }
    }

    pub fn kind_str(&self) -> &'static str {
        match self {
            AskTransition::AskOpened { .. } => "ask_opened",
            AskTransition::AskStepTaken { .. } => "ask_step_taken",
            AskTransition::AskResolved { .. } => "ask_resolved",
            AskTransition::AskCancelled { .. } => "ask_cancelled",
        }
    }

    pub fn step(&self) -> Option<u32> {
        match self {
            AskTransition::AskStepTaken { step, .. } => Some(*step),
            _ => None,
        }
    }
}

/// Changes to what a contact supports, decided from its messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ContactUpdate {
    /// The contact no longer supports SMS (opt-out or wrong number).
    SmsBlocked { contact_id: String, reason: String },
}

/// One model call made while deciding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LlmUsage {
    /// `triage`, `draft`, `extract_document`, `plan` or `extract_sop`.
    pub method: String,
    pub model_id: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub latency_ms: u64,
}

/// A decision that breaks an invariant of the record; a decision bug, never user input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionError {
    #[error(
        "action {key} carries ask {ask_id} attempt {attempt} but the record takes no ask_step_taken with step {attempt} for that ask"
    )]
    StepRule { key: String, ask_id: String, attempt: u32 },
    #[error("action key {0} appears twice in one decision")]
    DuplicateKey(String),
    #[error("a noop decision may hold only the noop action")]
    NoopMixed,
}

/// One record per processed event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub decision_id: String,
    pub load_id: String,
    pub trigger_event_id: String,
    pub trigger_kind: String,
    pub decided_at: DateTime<Utc>,
    /// The SOP the decision followed (the load's pinned SOP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sop: Option<SopRef>,
    pub path: DecisionPath,
    #[serde(default)]
    pub transitions: Vec<AskTransition>,
    #[serde(default)]
    pub contact_updates: Vec<ContactUpdate>,
    /// The actions; a decision that does nothing holds exactly one `Noop`.
    pub actions: Vec<Action>,
    pub rationale: String,
    /// The triage intent and its probability, for messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<IntentRecord>,
    #[serde(default)]
    pub llm_usage: Vec<LlmUsage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntentRecord {
    pub intent: String,
    pub probability: f64,
}

/// The parts of a decision, before the record checks them.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionDraft {
    pub load_id: String,
    pub trigger_event_id: String,
    pub trigger_kind: String,
    pub decided_at: DateTime<Utc>,
    pub sop: Option<SopRef>,
    pub path: DecisionPath,
    pub transitions: Vec<AskTransition>,
    pub contact_updates: Vec<ContactUpdate>,
    pub actions: Vec<Action>,
    pub rationale: String,
    pub intent: Option<IntentRecord>,
    pub llm_usage: Vec<LlmUsage>,
}

impl DecisionRecord {
    /// Builds the record, refusing one that breaks the step rule: an action with an ask and an
    /// attempt needs an `ask_step_taken` for that ask with `step == attempt` in the same record.
    /// A draft with no action gets an explicit `Noop`.
    pub fn new(draft: DecisionDraft) -> Result<Self, DecisionError> {
        let DecisionDraft {
            load_id,
            trigger_event_id,
            trigger_kind,
            decided_at,
            sop,
            path,
            transitions,
            contact_updates,
            mut actions,
            rationale,
            intent,
            llm_usage,
        } = draft;
        let noops = actions.iter().filter(|a| a.is_noop()).count();
        if noops > 0 && (noops != actions.len() || noops > 1) {
            return Err(DecisionError::NoopMixed);
        }
        if actions.is_empty() {
            actions.push(Action {
                key: String::new(),
                ask: None,
                body: ActionBody::Noop { reason: rationale.clone() },
            });
        }
        let mut seen = std::collections::HashSet::new();
        for a in actions.iter().filter(|a| !a.is_noop()) {
            if !seen.insert(a.key.as_str()) {
                return Err(DecisionError::DuplicateKey(a.key.clone()));
            }
            if let Some(step) = &a.ask {
                let taken = transitions.iter().any(|t| {
                    matches!(t, AskTransition::AskStepTaken { ask_id, step: s, .. }
                        if *ask_id == step.ask_id && *s == step.attempt)
                });
                if !taken {
                    return Err(DecisionError::StepRule {
                        key: a.key.clone(),
                        ask_id: step.ask_id.clone(),
                        attempt: step.attempt,
                    });
                }
            }
        }
        Ok(DecisionRecord {
            decision_id: decision_id_for(&trigger_event_id),
            load_id,
            trigger_event_id,
            trigger_kind,
            decided_at,
            sop,
            path,
            transitions,
            contact_updates,
            actions,
            rationale,
            intent,
            llm_usage,
        })
    }

    /// The actions that do something: empty for a noop.
    pub fn effective_actions(&self) -> impl Iterator<Item = &Action> {
        self.actions.iter().filter(|a| !a.is_noop())
    }

    pub fn is_noop(&self) -> bool {
        self.effective_actions().next().is_none()
    }

    pub fn total_cost_usd(&self) -> f64 {
        self.llm_usage.iter().map(|u| u.cost_usd).sum()
    }
}

/// Assigns idempotency keys to the actions one event emits, in order, appending `/{n}` to the
/// n-th action of the same kind and basis.
#[derive(Debug)]
pub struct ActionKeys<'a> {
    load_id: &'a str,
    event_id: &'a str,
    counts: BTreeMap<(Option<(String, u32)>, ActionKind), u32>,
    actions: Vec<Action>,
}

impl<'a> ActionKeys<'a> {
    pub fn new(load_id: &'a str, event_id: &'a str) -> Self {
        ActionKeys { load_id, event_id, counts: BTreeMap::new(), actions: Vec::new() }
    }

    /// An action that takes step `attempt` of an ask.
    pub fn step(&mut self, ask: AskStepRef, body: ActionBody) -> &mut Self {
        let kind = body.kind();
        let n = self.bump(Some((ask.ask_id.clone(), ask.attempt)), kind);
        let basis = KeyBasis::AskStep { ask_id: &ask.ask_id, attempt: ask.attempt };
        let key = idempotency_key(self.load_id, &basis, kind, n);
        self.actions.push(Action { key, ask: Some(ask), body });
        self
    }

    /// An action keyed by the triggering event.
    pub fn by_event(&mut self, body: ActionBody) -> &mut Self {
        let kind = body.kind();
        let n = self.bump(None, kind);
        let basis = KeyBasis::Event { caused_by_event_id: self.event_id };
        let key = idempotency_key(self.load_id, &basis, kind, n);
        self.actions.push(Action { key, ask: None, body });
        self
    }

    fn bump(&mut self, basis: Option<(String, u32)>, kind: ActionKind) -> u32 {
        let n = self.counts.entry((basis, kind)).or_insert(0);
        *n += 1;
        *n
    }

    pub fn len(&self) -> usize {
        self.actions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    pub fn into_actions(self) -> Vec<Action> {
        self.actions
    }
}
