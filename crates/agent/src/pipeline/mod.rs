//! `process_event`: the single entry point the worker and the evals drive (ADR 0001).
//!
//! project (done by the caller) → triggers → deterministic filter → triage (messages) →
//! SOP executor or planner → validation → decision record. It never panics and never returns
//! an error for a business situation or a model failure: those become decisions.
//!
//! Its sections, one module each (the entry below dispatches each kind of event to one):
//! - `decision`: the decision in the making (`Decision`) and the records it becomes, the hero
//!   fallback record included;
//! - `tracking`: pings and stop statuses (triggers: band changes and stages entered);
//! - `executor`: the SOP executor, opening asks and taking their steps (timers land here);
//! - `message`: an SMS, email or Slack message classified (sender, quick words, triage);
//! - `intent`: a classified message acted on, a sync function of the state and the
//!   classification (`on_message`, below: classify, act, then the planner if the act leaves it
//!   to the planner);
//! - `planner`: the planner fallback (the one other model call of a message);
//! - `attachment`: documents; `outcome`: action outcomes.

mod attachment;
mod decision;
mod executor;
mod intent;
mod message;
mod outcome;
mod planner;
mod tracking;

use chrono::{DateTime, Utc};
use load_agent_domain::{
    DecisionPath, DecisionRecord, EmailThread, EventKind, InboundEvent, LoadState, MessageChannel,
};
use load_agent_llm::{DocumentRequest, LlmClient};

use crate::context::Ctx;
use crate::sop::SopRegistry;
use crate::templates::Templates;

use decision::Decision;
pub use decision::hero_fallback_record;
use intent::ToPlanner;
use message::{EmailReply, Message};

/// What the agent knows that does not change per event: SOPs and templates.
#[derive(Debug, Clone)]
pub struct Agent {
    pub sops: SopRegistry,
    pub templates: Templates,
}

impl Agent {
    /// The SOPs and templates shipped in the binary.
    pub fn embedded() -> Result<Self, String> {
        let templates = Templates::embedded().map_err(|e| e.to_string())?;
        let sops = SopRegistry::embedded(&templates).map_err(|e| e.to_string())?;
        Ok(Agent { sops, templates })
    }
}

/// What `process_event` needs besides the state and the event.
pub struct Deps<'a> {
    pub agent: &'a Agent,
    pub llm: &'a dyn LlmClient,
    /// The clock when the decision is made (`decided_at`).
    pub now: DateTime<Utc>,
}

/// The result of processing one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Processed {
    /// The event id is already in the log: no new decision at all (behavior.md §9).
    AlreadyProcessed,
    Decided(DecisionRecord),
}

/// Decides what to do about `event` given the projected `state` (which does not include it).
pub async fn process_event(state: &LoadState, event: &InboundEvent, deps: &Deps<'_>) -> Processed {
    if state.event_ids.contains(event.event_id.as_str()) {
        return Processed::AlreadyProcessed;
    }
    let Some(load) = state.load.as_ref() else {
        let mut d = Decision::bare(state, event, deps.now);
        match &event.kind {
            EventKind::LoadRegistered { load } => {
                let version = load.sop_version.unwrap_or(1);
                d.sop = Some(load_agent_domain::SopRef { id: load.client.clone(), version });
                d.rationale(format!("load registered under {} v{version}", load.client));
            }
            _ => d.rationale("the load is not registered; nothing to decide"),
        }
        d.filtered();
        return Processed::Decided(d.finish_without_load());
    };
    let sop_ref = state.sop();
    let sop = sop_ref.as_ref().and_then(|r| deps.agent.sops.get(&r.id, r.version));
    let ctx = Ctx {
        state,
        load,
        sop,
        sops: &deps.agent.sops,
        event,
        now: deps.now,
        templates: &deps.agent.templates,
    };
    let mut d = Decision::bare(state, event, deps.now);
    d.sop = sop_ref;
    match &event.kind {
        EventKind::LoadRegistered { .. } => {
            d.rationale("the load is already registered");
            d.filtered();
        }
        EventKind::Ping { stop, .. } => tracking::on_tracking(&ctx, &mut d, Some(*stop)),
        EventKind::StopStatus { .. } => tracking::on_tracking(&ctx, &mut d, None),
        EventKind::TimerFired { ask_id, attempt, .. } => executor::on_timer(&ctx, &mut d, ask_id, *attempt),
        EventKind::Sms { from, text } => {
            let msg = Message { channel: MessageChannel::Sms, from, text, email: None };
            on_message(&ctx, &mut d, deps, msg).await
        }
        EventKind::Email { from, subject, text, thread } => {
            let reply = EmailReply { subject: subject.clone(), thread: thread.unwrap_or(EmailThread::Main) };
            let msg = Message { channel: MessageChannel::Email, from, text, email: Some(reply) };
            on_message(&ctx, &mut d, deps, msg).await
        }
        EventKind::Slack { from, text } => {
            let msg = Message { channel: MessageChannel::Slack, from, text, email: None };
            on_message(&ctx, &mut d, deps, msg).await
        }
        EventKind::Attachment { from, filename, content_type, content_ref, extracted, .. } => {
            let req = DocumentRequest {
                load_id: load.load_id.clone(),
                filename: filename.clone(),
                content_type: content_type.clone(),
                content_ref: content_ref.clone(),
                extracted: extracted.clone(),
            };
            attachment::on_attachment(&ctx, &mut d, deps, from, filename, req).await
        }
        EventKind::ActionOutcome {
            idempotency_key,
            status,
            action_kind,
            contact_id,
            hero_channel,
            reason,
        } => outcome::on_outcome(
            &ctx,
            &mut d,
            idempotency_key,
            *status,
            *action_kind,
            contact_id.as_deref(),
            *hero_channel,
            reason,
        ),
    }
    Processed::Decided(d.finish(&ctx))
}

/// Classifies the message, acts on it and, when that leaves it to the planner, plans.
async fn on_message(ctx: &Ctx<'_>, d: &mut Decision, deps: &Deps<'_>, msg: Message<'_>) {
    d.path = DecisionPath::Triage;
    let classification = message::classify(ctx, deps, &msg).await;
    if let Some(ToPlanner { contact, why }) = intent::act(ctx, d, &msg, classification) {
        planner::plan(ctx, d, deps, contact, msg.text, why).await;
    }
}

/// A temperature as people write it: `34` or `34.5`.
fn fmt_temp(t: f64) -> String {
    if t.fract() == 0.0 { format!("{t:.0}") } else { format!("{t:.1}") }
}
