//! The decision in the making (`Decision`): what each event's handler adds to (the path,
//! ask transitions, contact updates, proposed actions, the rationale, the intent, the model
//! usage), and the `DecisionRecord` it becomes once its actions are validated; the hero
//! fallback record, what a run commits when it cannot decide.

use chrono::{DateTime, Utc};
use load_agent_domain::{
    ActionBody, AskStepRef, AskTransition, ContactUpdate, DecisionDraft, DecisionPath, DecisionRecord,
    InboundEvent, IntentRecord, LlmUsage, LoadState, OpenAsk,
};

use crate::context::Ctx;
use crate::templates::Fields;
use crate::validate::{Proposal, finish_actions};

/// A decision in the making.
pub(super) struct Decision {
    pub load_id: String,
    pub event_id: String,
    pub event_kind: &'static str,
    pub now: DateTime<Utc>,
    pub sop: Option<load_agent_domain::SopRef>,
    pub path: DecisionPath,
    pub transitions: Vec<AskTransition>,
    pub contact_updates: Vec<ContactUpdate>,
    pub proposals: Vec<Proposal>,
    pub rationale: Vec<String>,
    pub intent: Option<IntentRecord>,
    pub usage: Vec<LlmUsage>,
}

impl Decision {
    pub(super) fn bare(state: &LoadState, event: &InboundEvent, now: DateTime<Utc>) -> Self {
        Decision {
            load_id: state.load_id.clone(),
            event_id: event.event_id.clone(),
            event_kind: event.kind_str(),
            now,
            sop: None,
            path: DecisionPath::Sop,
            transitions: Vec::new(),
            contact_updates: Vec::new(),
            proposals: Vec::new(),
            rationale: Vec::new(),
            intent: None,
            usage: Vec::new(),
        }
    }

    pub(super) fn filtered(&mut self) -> &mut Self {
        self.path = DecisionPath::Filtered;
        self
    }

    pub(super) fn rationale(&mut self, why: impl Into<String>) {
        self.rationale.push(why.into());
    }

    pub(super) fn propose(&mut self, step: Option<AskStepRef>, body: ActionBody) {
        self.proposals.push(Proposal::Ready { step, body });
    }

    pub(super) fn hero(
        &mut self,
        ctx: &Ctx<'_>,
        template: &str,
        fields: &Fields,
        urgent: bool,
        step: Option<AskStepRef>,
    ) {
        let r = ctx.render(template, load_agent_domain::Language::En, fields);
        self.propose(step, ActionBody::CreateHeroTask { title: r.title, body: r.body, urgent });
    }

    pub(super) fn cancel_timer_of(&mut self, ask: &OpenAsk) {
        if let Some(t) = &ask.next_timer {
            self.propose(None, ActionBody::CancelTimer { timer_id: t.timer_id.clone() });
        }
    }

    pub(super) fn finish_without_load(self) -> DecisionRecord {
        let rationale = self.rationale.join("; ");
        build_record(self, Vec::new(), rationale)
    }

    pub(super) fn finish(mut self, ctx: &Ctx<'_>) -> DecisionRecord {
        let proposals = std::mem::take(&mut self.proposals);
        let (actions, rejections) =
            finish_actions(ctx, &self.load_id, &self.event_id, &self.contact_updates, proposals);
        if !rejections.is_empty() {
            self.path = DecisionPath::Validation;
            for r in rejections {
                self.rationale(format!("rejected: {r}"));
            }
        }
        let rationale = self.rationale.join("; ");
        build_record(self, actions, rationale)
    }
}

fn build_record(d: Decision, actions: Vec<load_agent_domain::Action>, rationale: String) -> DecisionRecord {
    let draft = DecisionDraft {
        load_id: d.load_id.clone(),
        trigger_event_id: d.event_id.clone(),
        trigger_kind: d.event_kind.to_string(),
        decided_at: d.now,
        sop: d.sop.clone(),
        path: d.path,
        transitions: d.transitions.clone(),
        contact_updates: d.contact_updates.clone(),
        actions,
        rationale: rationale.clone(),
        intent: d.intent.clone(),
        llm_usage: d.usage.clone(),
    };
    match DecisionRecord::new(draft) {
        Ok(r) => r,
        Err(e) => decision_error_record(&d, &e.to_string()),
    }
}

/// A decision that broke an invariant becomes an urgent Hero task keyed by the event, with no
/// state change, so the inbound event is never lost.
fn decision_error_record(d: &Decision, reason: &str) -> DecisionRecord {
    hero_fallback_record(&d.load_id, &d.event_id, d.event_kind, d.now, d.sop.clone(), reason, d.usage.clone())
}

/// An urgent Hero task keyed by the event and no state change: what a run commits when it
/// cannot decide (a decision bug, a duplicate action key, the run deadline).
pub fn hero_fallback_record(
    load_id: &str,
    event_id: &str,
    event_kind: &str,
    now: DateTime<Utc>,
    sop: Option<load_agent_domain::SopRef>,
    reason: &str,
    usage: Vec<LlmUsage>,
) -> DecisionRecord {
    let mut keys = load_agent_domain::ActionKeys::new(load_id, event_id);
    keys.by_event(ActionBody::CreateHeroTask {
        title: format!("The agent could not decide (load {load_id})"),
        body: format!(
            "The agent could not decide on event {event_id} ({event_kind}) and needs a human: {reason}."
        ),
        urgent: true,
    });
    let draft = DecisionDraft {
        load_id: load_id.to_string(),
        trigger_event_id: event_id.to_string(),
        trigger_kind: event_kind.to_string(),
        decided_at: now,
        sop,
        path: DecisionPath::HeroFallback,
        transitions: Vec::new(),
        contact_updates: Vec::new(),
        actions: keys.into_actions(),
        rationale: format!("hero fallback: {reason}"),
        intent: None,
        llm_usage: usage,
    };
    match DecisionRecord::new(draft) {
        Ok(r) => r,
        // A single keyed action with no ask cannot break the record's rules.
        Err(e) => unreachable_record(load_id, event_id, event_kind, now, &e.to_string()),
    }
}

fn unreachable_record(
    load_id: &str,
    event_id: &str,
    kind: &str,
    now: DateTime<Utc>,
    why: &str,
) -> DecisionRecord {
    DecisionRecord {
        decision_id: load_agent_domain::decision_id_for(event_id),
        load_id: load_id.to_string(),
        trigger_event_id: event_id.to_string(),
        trigger_kind: kind.to_string(),
        decided_at: now,
        sop: None,
        path: DecisionPath::HeroFallback,
        transitions: Vec::new(),
        contact_updates: Vec::new(),
        actions: vec![load_agent_domain::Action {
            key: String::new(),
            ask: None,
            body: ActionBody::Noop { reason: why.to_string() },
        }],
        rationale: why.to_string(),
        intent: None,
        llm_usage: Vec::new(),
    }
}
