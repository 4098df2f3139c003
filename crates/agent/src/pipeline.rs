//! `process_event`: the single entry point the worker and the evals drive (ADR 0001).
//!
//! project (done by the caller) → triggers → deterministic filter → triage (messages) →
//! SOP executor or planner → validation → decision record. It never panics and never returns
//! an error for a business situation or a model failure: those become decisions.

use chrono::{DateTime, Duration, Utc};
use load_agent_domain::{
    ActionBody, ActionKind, AskStepRef, AskTransition, ContactUpdate, DecisionDraft, DecisionPath,
    DecisionRecord, EmailThread, EventKind, InboundEvent, IntentRecord, LlmUsage, LoadState, MessageChannel,
    OpenAsk, OutcomeStatus, RiskBand, Role, SlackTarget, StepKind, Stop, TimerRef, Trigger, ask_id_for,
    detect_triggers, timer_id,
};
use load_agent_llm::{
    DocumentRequest, LlmClient, LlmOutput, PlanRequest, PlannedAction, TriageRequest,
    validate_document_fields,
};
use load_agent_triage::{Intent, resolve_eta};

use crate::context::{Ctx, first_name, format_local};
use crate::sop::{AskRule, AskTrigger, EscalationStep, Sop, SopRegistry};
use crate::templates::{Fields, Templates};
use crate::validate::{Proposal, finish_actions};

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
    if state.event_ids.contains(&event.event_id) {
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
        EventKind::Ping { stop, .. } => on_tracking(&ctx, &mut d, Some(*stop)),
        EventKind::StopStatus { .. } => on_tracking(&ctx, &mut d, None),
        EventKind::TimerFired { ask_id, attempt, .. } => on_timer(&ctx, &mut d, ask_id, *attempt),
        EventKind::Sms { from, text } => {
            on_message(&ctx, &mut d, deps, MessageChannel::Sms, from, text, None).await
        }
        EventKind::Email { from, subject, text, thread } => {
            let reply = EmailReply { subject: subject.clone(), thread: thread.unwrap_or(EmailThread::Main) };
            on_message(&ctx, &mut d, deps, MessageChannel::Email, from, text, Some(reply)).await
        }
        EventKind::Slack { from, text } => {
            on_message(&ctx, &mut d, deps, MessageChannel::Slack, from, text, None).await
        }
        EventKind::Attachment { from, filename, content_type, content_ref, extracted, .. } => {
            let req = DocumentRequest {
                load_id: load.load_id.clone(),
                filename: filename.clone(),
                content_type: content_type.clone(),
                content_ref: content_ref.clone(),
                extracted: extracted.clone(),
            };
            on_attachment(&ctx, &mut d, deps, from, filename, req).await
        }
        EventKind::ActionOutcome {
            idempotency_key,
            status,
            action_kind,
            contact_id,
            hero_channel,
            reason,
        } => on_outcome(
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

/// A decision in the making.
pub(crate) struct Decision {
    load_id: String,
    event_id: String,
    event_kind: &'static str,
    now: DateTime<Utc>,
    sop: Option<load_agent_domain::SopRef>,
    path: DecisionPath,
    transitions: Vec<AskTransition>,
    contact_updates: Vec<ContactUpdate>,
    proposals: Vec<Proposal>,
    rationale: Vec<String>,
    intent: Option<IntentRecord>,
    usage: Vec<LlmUsage>,
}

impl Decision {
    fn bare(state: &LoadState, event: &InboundEvent, now: DateTime<Utc>) -> Self {
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

    fn filtered(&mut self) -> &mut Self {
        self.path = DecisionPath::Filtered;
        self
    }

    fn rationale(&mut self, why: impl Into<String>) {
        self.rationale.push(why.into());
    }

    fn propose(&mut self, step: Option<AskStepRef>, body: ActionBody) {
        self.proposals.push(Proposal::Ready { step, body });
    }

    fn hero(
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

    fn cancel_timer_of(&mut self, ask: &OpenAsk) {
        if let Some(t) = &ask.next_timer {
            self.propose(None, ActionBody::CancelTimer { timer_id: t.timer_id.clone() });
        }
    }

    fn finish_without_load(self) -> DecisionRecord {
        let rationale = self.rationale.join("; ");
        build_record(self, Vec::new(), rationale)
    }

    fn finish(mut self, ctx: &Ctx<'_>) -> DecisionRecord {
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

// ---------------------------------------------------------------------------------------------
// Tracking: pings and stop statuses.

fn on_tracking(ctx: &Ctx<'_>, d: &mut Decision, ping_stop: Option<u32>) {
    let before = &ctx.state.tracking;
    let mut after = before.clone();
    after.apply_event(ctx.load, &ctx.event.kind);
    let triggers = detect_triggers(before, &after);
    if triggers.is_empty() {
        d.filtered();
        d.rationale(match (&ctx.event.kind, ping_stop) {
            (EventKind::Ping { recorded_at, .. }, _)
                if before.last_ping_at.is_some_and(|l| *recorded_at < l) =>
            {
                "stale ping: recorded before the last applied ping".to_string()
            }
            (EventKind::Ping { .. }, Some(stop)) if ctx.load.stop(stop).is_none() => {
                format!("ping for stop {stop}, which is not a stop of this load")
            }
            (EventKind::Ping { .. }, Some(stop)) if before.reached(stop) => {
                format!("ping for stop {stop}, already reached or passed")
            }
            (EventKind::Ping { delay_risk, .. }, Some(stop)) => {
                format!("no band change: stop {stop} is already {}", delay_risk.as_str())
            }
            _ => "stale stop status: behind the current stop or no stage change".to_string(),
        });
        return;
    }
    for t in &triggers {
        match t {
            Trigger::DelayRiskChanged { stop, from, to } => on_risk_changed(ctx, d, *stop, *from, *to),
            Trigger::StageEntered { stage, from, stop, departed_stop } => {
                on_stage_entered(ctx, d, *stage, *from, *stop, *departed_stop, before.current_stop)
            }
        }
    }
}

fn on_risk_changed(ctx: &Ctx<'_>, d: &mut Decision, stop: u32, from: RiskBand, to: RiskBand) {
    d.rationale(format!("DelayRiskChanged(stop {stop}, {} -> {})", from.as_str(), to.as_str()));
    let Some(sop) = ctx.sop else {
        d.rationale("no SOP is loaded for this load");
        return;
    };
    let mut matched = false;
    for (ask_type, rule) in &sop.spec.asks {
        let AskTrigger::DelayRiskChanged { to: band } = &rule.on else { continue };
        if *band != to {
            continue;
        }
        matched = true;
        let cur = ctx.current_stop();
        if ctx.state.open_asks_of_type(ask_type).any(|a| a.stop_or(cur) == stop) {
            d.rationale(format!("an {ask_type} for stop {stop} is already open"));
            continue;
        }
        open_ask(ctx, d, sop, ask_type, rule, stop);
    }
    if !matched {
        d.rationale("no SOP rule for this band change");
    }
}

#[allow(clippy::too_many_arguments)]
fn on_stage_entered(
    ctx: &Ctx<'_>,
    d: &mut Decision,
    stage: load_agent_domain::Stage,
    from: load_agent_domain::Stage,
    stop: u32,
    departed_stop: Option<u32>,
    current_before: u32,
) {
    use load_agent_domain::Stage;
    d.rationale(format!("StageEntered({} from {}, stop {stop})", stage.as_str(), from.as_str()));
    d.propose(None, ActionBody::UpdateStage { stage, current_stop: stop });
    match stage {
        Stage::AtPickup | Stage::AtDelivery => {
            for ask in ctx.state.open_asks_of_type(load_agent_domain::ask_types::ETA_REQUEST) {
                if ask.stop_or(current_before) == stop {
                    cancel_ask(d, ask, "arrived at the stop");
                }
            }
        }
        Stage::Delivered => {
            for ask in &ctx.state.open_asks {
                cancel_ask(d, ask, "load delivered");
            }
        }
        Stage::ToPickup | Stage::ToDelivery => {}
    }
    let Some(sop) = ctx.sop else { return };
    for (ask_type, rule) in &sop.spec.asks {
        let AskTrigger::StageEntered { stage: want, after_departing, requires_reefer } = &rule.on else {
            continue;
        };
        if *want != stage || (*requires_reefer && ctx.load.reefer.is_none()) {
            continue;
        }
        let about = match after_departing {
            Some(kind) => match departed_stop.and_then(|s| ctx.stop(s)) {
                Some(s) if s.kind == *kind => s.sequence,
                _ => continue,
            },
            None => stop,
        };
        if ctx.state.open_asks_of_type(ask_type).any(|a| a.stop_sequence == Some(about)) {
            continue;
        }
        open_ask(ctx, d, sop, ask_type, rule, about);
    }
}

fn cancel_ask(d: &mut Decision, ask: &OpenAsk, reason: &str) {
    d.transitions.push(AskTransition::AskCancelled {
        ask_id: ask.id.clone(),
        reason: reason.to_string(),
        cancelled_at: d.now,
    });
    d.cancel_timer_of(ask);
    d.rationale(format!("cancelled {} ({reason})", ask.id));
}

// ---------------------------------------------------------------------------------------------
// The SOP executor: opening asks and taking their steps.

fn open_ask(ctx: &Ctx<'_>, d: &mut Decision, sop: &Sop, ask_type: &str, rule: &AskRule, stop: u32) {
    let ask_id = ask_id_for(&ctx.event.event_id, ask_type);
    let target = ctx.contact_with_role(rule.target.role);
    d.transitions.push(AskTransition::AskOpened {
        ask_id: ask_id.clone(),
        ask_type: ask_type.to_string(),
        target_contact: target.map(|c| c.id.clone()).unwrap_or_default(),
        sop: sop.sop_ref(),
        opened_at: ctx.now,
        max_attempts: rule.max_attempts,
        stop_sequence: Some(stop),
    });
    d.rationale(format!("opened {ask_id} for stop {stop}"));
    let ask = OpenAsk {
        id: ask_id,
        ask_type: ask_type.to_string(),
        target_contact: target.map(|c| c.id.clone()).unwrap_or_default(),
        sop: sop.sop_ref(),
        opened_at: ctx.now,
        attempts: 0,
        max_attempts: rule.max_attempts,
        escalations_done: 0,
        next_timer: None,
        stop_sequence: Some(stop),
        status: load_agent_domain::AskStatus::Open,
        resolved_by: None,
        resolved_at: None,
    };
    take_next_step(ctx, d, &ask, rule);
}

fn on_timer(ctx: &Ctx<'_>, d: &mut Decision, ask_id: &str, attempt: u32) {
    let Some(ask) = ctx.state.open_ask(ask_id).filter(|a| a.is_timer_current(attempt)) else {
        d.filtered();
        d.rationale(format!("stale timer: {ask_id} attempt {attempt} is not current"));
        return;
    };
    d.rationale(format!("timer for {ask_id} attempt {attempt} is current"));
    take_step_pinned(ctx, d, ask);
}

fn take_step_pinned(ctx: &Ctx<'_>, d: &mut Decision, ask: &OpenAsk) {
    // Steps follow the SOP version the ask was opened under, not the newest one.
    let sop = ctx.sops.get(&ask.sop.id, ask.sop.version);
    let Some(rule) = sop.and_then(|s| s.ask_rule(&ask.ask_type)) else {
        d.path = DecisionPath::HeroFallback;
        d.rationale(format!("SOP {} v{} has no rule for {}", ask.sop.id, ask.sop.version, ask.ask_type));
        let mut f = ctx.fields(None, None);
        f.insert("reason", format!("no SOP rule for the open {} ask {}", ask.ask_type, ask.id));
        d.hero(ctx, "hero_decision_error", &f, true, None);
        return;
    };
    take_next_step(ctx, d, ask, rule);
}

/// Takes the ask's next step: another contact attempt while attempts remain (with a timer),
/// else the whole escalation chain in this one decision, with no timer.
fn take_next_step(ctx: &Ctx<'_>, d: &mut Decision, ask: &OpenAsk, rule: &AskRule) {
    let stop = ctx.stop(ask.stop_or(ctx.current_stop()));
    let step_ref =
        |attempt: u32| AskStepRef { ask_id: ask.id.clone(), ask_type: ask.ask_type.clone(), attempt };
    if ask.attempts < rule.max_attempts && ask.escalations_done == 0 {
        let step = ask.step() + 1;
        let fire_at = ctx.now + Duration::minutes(i64::from(rule.retry_after_minutes));
        let tid = timer_id(&ctx.load.load_id, &ask.id, step);
        d.transitions.push(AskTransition::AskStepTaken {
            ask_id: ask.id.clone(),
            step,
            step_kind: StepKind::Attempt,
            timer: Some(TimerRef { timer_id: tid.clone(), fire_at }),
        });
        let template = if ask.attempts == 0 {
            rule.question.clone()
        } else {
            rule.followup.clone().unwrap_or_else(|| {
                let f = format!("{}_followup", rule.question);
                if ctx.templates.get(&f).is_some() { f } else { rule.question.clone() }
            })
        };
        match ctx.load.contact(&ask.target_contact) {
            Some(target) => {
                let fields = ctx.fields(stop, Some(target));
                let r = ctx.render(&template, target.language, &fields);
                let body = match rule.target.channel {
                    MessageChannel::Email => ActionBody::SendEmail {
                        to: target.id.clone(),
                        subject: format!("Load {}", ctx.load.load_id),
                        body: r.body,
                        thread: EmailThread::Main,
                    },
                    _ => ActionBody::SendSms { to: target.id.clone(), body: r.body },
                };
                d.propose(Some(step_ref(step)), body);
            }
            None => d.proposals.push(Proposal::Rejected {
                step: Some(step_ref(step)),
                what: format!("{} {}", rule.target.channel, ask.ask_type),
                reason: format!("the load has no {} contact", rule.target.role),
            }),
        }
        d.propose(
            Some(step_ref(step)),
            ActionBody::SetTimer { timer_id: tid, ask_id: ask.id.clone(), attempt: step, fire_at },
        );
        d.rationale(format!("{} attempt {step}, next timer at {}", ask.id, fire_at.to_rfc3339()));
        return;
    }
    let done = ask.escalations_done as usize;
    if done >= rule.escalation.len() {
        d.rationale(format!("{}: attempts and escalations are spent; the ask stays open", ask.id));
        return;
    }
    let mut step = ask.step();
    for esc in &rule.escalation[done..] {
        step += 1;
        d.transitions.push(AskTransition::AskStepTaken {
            ask_id: ask.id.clone(),
            step,
            step_kind: StepKind::Escalation,
            timer: None,
        });
        escalation_action(ctx, d, esc, stop, step_ref(step));
    }
    d.rationale(format!("{}: escalated (steps {}..={step})", ask.id, ask.step() + 1));
}

fn escalation_action(
    ctx: &Ctx<'_>,
    d: &mut Decision,
    esc: &EscalationStep,
    stop: Option<&Stop>,
    step: AskStepRef,
) {
    match esc {
        EscalationStep::SendEmail { role, thread, template } => match ctx.contact_with_role(*role) {
            Some(c) => {
                let r = ctx.render(template, c.language, &ctx.fields(stop, Some(c)));
                let thread = *thread;
                d.propose(
                    Some(step),
                    ActionBody::SendEmail { to: c.id.clone(), subject: r.subject, body: r.body, thread },
                );
            }
            None => d.proposals.push(Proposal::Rejected {
                step: Some(step),
                what: "escalation email".into(),
                reason: format!("the load has no {role} contact"),
            }),
        },
        EscalationStep::SendSms { role, template } => match ctx.contact_with_role(*role) {
            Some(c) => {
                let r = ctx.render(template, c.language, &ctx.fields(stop, Some(c)));
                d.propose(Some(step), ActionBody::SendSms { to: c.id.clone(), body: r.body });
            }
            None => d.proposals.push(Proposal::Rejected {
                step: Some(step),
                what: "escalation SMS".into(),
                reason: format!("the load has no {role} contact"),
            }),
        },
        EscalationStep::CreateHeroTask { urgent, template } => {
            d.hero(ctx, template, &ctx.fields(stop, None), *urgent, Some(step));
        }
        EscalationStep::PostSlack { template } => match ctx.contact_with_role(Role::Broker) {
            Some(b) => {
                let r = ctx.render(template, b.language, &ctx.fields(stop, Some(b)));
                d.propose(
                    Some(step),
                    ActionBody::PostSlack {
                        target: SlackTarget::Broker { contact_id: b.id.clone() },
                        text: r.body,
                    },
                );
            }
            None => d.proposals.push(Proposal::Rejected {
                step: Some(step),
                what: "escalation Slack post".into(),
                reason: "the load has no broker contact".into(),
            }),
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Messages.

pub(crate) struct EmailReply {
    subject: String,
    thread: EmailThread,
}

/// Words that need no model to tell: an acknowledgement or a sign of confusion.
fn quick_intent(text: &str) -> Option<Intent> {
    let t: String = text.trim().to_lowercase();
    let t = t.trim_end_matches(['.', '!']).trim();
    const ACKS: &[&str] = &[
        "ok",
        "okay",
        "k",
        "kk",
        "ok thanks",
        "ok thx",
        "10-4",
        "10 4",
        "104",
        "👍",
        "👌",
        "thanks",
        "thank you",
        "thx",
        "ty",
        "got it",
        "roger",
        "roger that",
        "copy",
        "copy that",
        "sounds good",
        "will do",
        "gracias",
        "ok gracias",
        "va",
        "vale",
        "sale",
        "entendido",
        "de acuerdo",
        "okey",
    ];
    const CONFUSED: &[&str] = &[
        "?",
        "??",
        "???",
        "huh",
        "huh?",
        "what?",
        "que?",
        "qué?",
        "¿?",
        "no entiendo",
        "no entendí",
        "??? what",
    ];
    if ACKS.contains(&t) {
        Some(Intent::Ack)
    } else if CONFUSED.contains(&t) {
        Some(Intent::Confusion)
    } else {
        None
    }
}

async fn on_message(
    ctx: &Ctx<'_>,
    d: &mut Decision,
    deps: &Deps<'_>,
    channel: MessageChannel,
    from: &str,
    text: &str,
    email: Option<EmailReply>,
) {
    d.path = DecisionPath::Triage;
    let Some(contact) = ctx.load.resolve_sender(from) else {
        let mut f = ctx.fields(None, None);
        f.insert("sender", from.to_string());
        f.insert("text", text.to_string());
        d.hero(ctx, "hero_unknown_sender", &f, false, None);
        d.rationale(format!("message from unknown sender {from}; no reply"));
        return;
    };
    let open_for_sender = ctx.state.open_asks.iter().find(|a| a.target_contact == contact.id);
    let intent = match quick_intent(text) {
        Some(Intent::Ack) => {
            d.filtered();
            d.intent = Some(IntentRecord { intent: "ack".into(), probability: 1.0 });
            d.rationale("acknowledgement; an acknowledgement never resolves an ask");
            return;
        }
        Some(Intent::Confusion) if open_for_sender.is_none() => {
            d.filtered();
            d.intent = Some(IntentRecord { intent: "confusion".into(), probability: 1.0 });
            d.rationale("confusion with no ask open for the sender");
            return;
        }
        Some(quick) => (quick, 1.0, Default::default()),
        None => {
            let req = TriageRequest {
                text: text.to_string(),
                lang: Some(contact.language.as_str().to_string()),
                from_role: Some(contact.role.as_str().to_string()),
                open_ask: open_for_sender.map(|a| a.ask_type.clone()),
            };
            match deps.llm.triage(&req).await {
                Ok(LlmOutput { value, usage }) => {
                    d.usage.push(usage);
                    if !value.confident {
                        d.intent = Some(IntentRecord {
                            intent: value.intent.as_str().into(),
                            probability: value.probability,
                        });
                        let why = value.abstain.map_or_else(|| "not confident".to_owned(), |a| a.to_string());
                        d.rationale(format!(
                            "triage not acted on ({} at {:.2}, {why}): planner",
                            value.intent.as_str(),
                            value.probability
                        ));
                        plan(ctx, d, deps, contact, text, "triage was not confident").await;
                        return;
                    }
                    (value.intent, value.probability, value.values)
                }
                Err(e) => {
                    d.path = DecisionPath::HeroFallback;
                    let mut f = ctx.fields(None, Some(contact));
                    f.insert("text", text.to_string());
                    f.insert("reason", e.to_string());
                    d.hero(ctx, "hero_needs_human", &f, true, None);
                    d.rationale(format!("triage failed: {e}"));
                    return;
                }
            }
        }
    };
    let (intent, probability, values) = intent;
    d.intent = Some(IntentRecord { intent: intent.as_str().into(), probability });
    d.rationale(format!("intent {} ({probability:.2})", intent.as_str()));
    let reply = |d: &mut Decision, template: &str, stop: Option<&Stop>, extra: Fields| {
        let mut f = ctx.fields(stop, Some(contact));
        f.extend(extra);
        let r = ctx.render(template, contact.language, &f);
        let body = match (channel, &email) {
            (MessageChannel::Email, Some(e)) => ActionBody::SendEmail {
                to: contact.id.clone(),
                subject: if e.subject.is_empty() {
                    format!("Load {}", ctx.load.load_id)
                } else if e.subject.to_lowercase().starts_with("re:") {
                    e.subject.clone()
                } else {
                    format!("Re: {}", e.subject)
                },
                body: r.body,
                thread: e.thread,
            },
            (MessageChannel::Slack, _) => ActionBody::PostSlack {
                target: SlackTarget::Broker { contact_id: contact.id.clone() },
                text: r.body,
            },
            _ => ActionBody::SendSms { to: contact.id.clone(), body: r.body },
        };
        d.propose(None, body);
    };
    let note = |d: &mut Decision, template: &str, stop: Option<&Stop>, extra: Fields| {
        let mut f = ctx.fields(stop, Some(contact));
        f.insert("contact_name", format!("{} ({})", contact.name, contact.role.as_str()));
        f.insert("text", text.to_string());
        f.extend(extra);
        let r = ctx.render(template, load_agent_domain::Language::En, &f);
        d.propose(None, ActionBody::TmsNote { text: r.body });
    };
    let cur = ctx.current_stop();
    match intent {
        Intent::EtaGiven => {
            let ask = ctx
                .state
                .open_asks_of_type(load_agent_domain::ask_types::ETA_REQUEST)
                .min_by_key(|a| a.stop_or(cur));
            let stop_seq = ask.map(|a| a.stop_or(cur));
            if let Some(ask) = ask {
                resolve_ask(d, ask);
            }
            let stop = stop_seq.and_then(|s| ctx.stop(s)).or_else(|| ctx.stop_for(values.stop));
            let eta = match (values.eta, stop) {
                (Some(v), Some(s)) => format_local(resolve_eta(&v, ctx.now, s.offset()), s.offset()),
                _ => "see message".to_string(),
            };
            note(d, "tms_eta", stop, Fields::from([("eta", eta)]));
        }
        Intent::ArrivalReport => {
            let stop = ctx.stop(cur);
            if let Some(ask) = ctx
                .state
                .open_asks_of_type(load_agent_domain::ask_types::ETA_REQUEST)
                .find(|a| a.stop_or(cur) == cur)
            {
                resolve_ask(d, ask);
            }
            note(d, "tms_arrival", stop, Fields::new());
        }
        Intent::DepartureReport => note(d, "tms_departure", ctx.stop(cur), Fields::new()),
        Intent::TemperatureReport => {
            if let Some(ask) = ctx.state.open_asks_of_type(load_agent_domain::ask_types::REEFER_TEMP).next() {
                resolve_ask(d, ask);
            }
            let reading = values.temperature_f;
            let shown = reading.map(fmt_temp).unwrap_or_else(|| "(unreadable)".into());
            note(d, "tms_temperature", None, Fields::from([("reading", shown.clone())]));
            if let (Some(reefer), Some(r)) = (ctx.load.reefer, reading)
                && !reefer.in_range(r)
            {
                let range = format!("{}±{}°F", fmt_temp(reefer.set_point_f), fmt_temp(reefer.tolerance_f));
                let mut f = ctx.fields(None, None);
                f.insert("reading", shown);
                f.insert("range", range);
                f.insert("sender", format!("{} ({})", contact.name, contact.role.as_str()));
                let rule = ctx.sop.and_then(|s| s.spec.reefer_out_of_range.clone());
                let (urgent, hero_t) = rule
                    .as_ref()
                    .map(|r| (r.hero_task.urgent, r.hero_task.template.clone()))
                    .unwrap_or((true, "hero_reefer_out_of_range".into()));
                d.hero(ctx, &hero_t, &f, urgent, None);
                if let Some(slack) = rule.and_then(|r| r.post_slack_to_broker)
                    && let Some(b) = ctx.contact_with_role(Role::Broker)
                {
                    let r = ctx.render(&slack.template, load_agent_domain::Language::En, &f);
                    d.propose(
                        None,
                        ActionBody::PostSlack {
                            target: SlackTarget::Broker { contact_id: b.id.clone() },
                            text: r.body,
                        },
                    );
                }
                d.rationale(format!("reading {r}°F is out of range"));
            }
        }
        Intent::QuestionPo => {
            let stop = ctx.stop_for(values.stop);
            match stop.filter(|s| !s.po_numbers.is_empty()) {
                Some(s) => reply(d, "reply_po", Some(s), Fields::new()),
                None => {
                    let mut f = ctx.fields(stop, Some(contact));
                    f.insert("text", text.to_string());
                    d.hero(ctx, "hero_no_po", &f, false, None);
                }
            }
        }
        Intent::QuestionAppointment => {
            reply(d, "reply_appointment", ctx.stop_for(values.stop), Fields::new())
        }
        Intent::QuestionAddress => reply(d, "reply_address", ctx.stop_for(values.stop), Fields::new()),
        Intent::Confusion => match open_for_sender {
            Some(ask) => {
                let stop = ctx.stop(ask.stop_or(cur));
                let question = ctx
                    .sops
                    .get(&ask.sop.id, ask.sop.version)
                    .and_then(|s| s.ask_rule(&ask.ask_type))
                    .map(|r| r.question.clone())
                    .unwrap_or_else(|| ask.ask_type.clone());
                let q = ctx.render(&question, contact.language, &ctx.fields(stop, Some(contact)));
                reply(d, "restate", stop, Fields::from([("question", q.body)]));
                d.rationale(format!("restating {} (the ask does not advance)", ask.id));
            }
            None => d.rationale("confusion with no ask open for the sender"),
        },
        Intent::Ack => d.rationale("acknowledgement; an acknowledgement never resolves an ask"),
        Intent::OptOut | Intent::WrongNumber => {
            let (reason, template) = if intent == Intent::OptOut {
                ("opt_out", "hero_opt_out")
            } else {
                ("wrong_number", "hero_wrong_number")
            };
            d.contact_updates
                .push(ContactUpdate::SmsBlocked { contact_id: contact.id.clone(), reason: reason.into() });
            let mut f = ctx.fields(None, Some(contact));
            f.insert("contact_name", contact.name.clone());
            f.insert("sender", from.to_string());
            f.insert("text", text.to_string());
            d.hero(ctx, template, &f, false, None);
        }
        Intent::ProblemReport => {
            let mut f = ctx.fields(ctx.stop(cur), Some(contact));
            f.insert("contact_name", format!("{} ({})", contact.name, contact.role.as_str()));
            f.insert("text", text.to_string());
            d.hero(ctx, "hero_problem_report", &f, true, None);
            note(d, "tms_problem", ctx.stop(cur), Fields::new());
        }
        Intent::Other => plan(ctx, d, deps, contact, text, "intent other").await,
    }
}

fn fmt_temp(t: f64) -> String {
    if t.fract() == 0.0 { format!("{t:.0}") } else { format!("{t:.1}") }
}

fn resolve_ask(d: &mut Decision, ask: &OpenAsk) {
    d.transitions.push(AskTransition::AskResolved {
        ask_id: ask.id.clone(),
        resolved_by: d.event_id.clone(),
        resolved_at: d.now,
    });
    d.cancel_timer_of(ask);
    d.rationale(format!("resolved {}", ask.id));
}

/// The planner (a strong model, rare). It may only propose non-carrier-facing actions; if it
/// is unavailable or its output is invalid, an urgent Hero task.
async fn plan(
    ctx: &Ctx<'_>,
    d: &mut Decision,
    deps: &Deps<'_>,
    contact: &load_agent_domain::Contact,
    text: &str,
    why: &str,
) {
    let req = PlanRequest {
        load_id: ctx.load.load_id.clone(),
        situation: why.to_string(),
        state_summary: state_summary(ctx),
        message: Some(text.to_string()),
        from_role: Some(contact.role.as_str().to_string()),
    };
    match deps.llm.plan(&req).await {
        Ok(LlmOutput { value, usage }) => {
            d.usage.push(usage);
            d.path = DecisionPath::Planner;
            d.rationale(format!("planner: {}", value.rationale));
            for a in value.actions {
                match a {
                    PlannedAction::CreateHeroTask { title, body, urgent } => {
                        d.propose(None, ActionBody::CreateHeroTask { title, body, urgent })
                    }
                    PlannedAction::TmsNote { text } => d.propose(None, ActionBody::TmsNote { text }),
                    PlannedAction::PostSlack { text } => match ctx.contact_with_role(Role::Broker) {
                        Some(b) => d.propose(
                            None,
                            ActionBody::PostSlack {
                                target: SlackTarget::Broker { contact_id: b.id.clone() },
                                text,
                            },
                        ),
                        None => d.proposals.push(Proposal::Rejected {
                            step: None,
                            what: "planner Slack post".into(),
                            reason: "the load has no broker contact".into(),
                        }),
                    },
                }
            }
        }
        Err(e) => {
            d.path = DecisionPath::HeroFallback;
            let mut f = ctx.fields(None, Some(contact));
            f.insert("contact_name", format!("{} ({})", contact.name, contact.role.as_str()));
            f.insert("text", text.to_string());
            f.insert("reason", format!("{why}; planner unavailable: {e}"));
            d.hero(ctx, "hero_needs_human", &f, true, None);
            d.rationale(format!("planner failed: {e}"));
        }
    }
}

fn state_summary(ctx: &Ctx<'_>) -> serde_json::Value {
    serde_json::json!({
        "stage": ctx.state.tracking.stage.as_str(),
        "current_stop": ctx.state.tracking.current_stop,
        "open_asks": ctx.state.open_asks.iter().map(|a| serde_json::json!({
            "type": a.ask_type, "stop": a.stop_sequence, "attempts": a.attempts,
            "escalations_done": a.escalations_done})).collect::<Vec<_>>(),
        "contacts": ctx.load.contacts.iter().map(|c| serde_json::json!({"id": c.id, "role": c.role.as_str()}))
            .collect::<Vec<_>>(),
    })
}

// ---------------------------------------------------------------------------------------------
// Attachments and outcomes.

async fn on_attachment(
    ctx: &Ctx<'_>,
    d: &mut Decision,
    deps: &Deps<'_>,
    from: &str,
    filename: &str,
    req: DocumentRequest,
) {
    let sender = ctx.load.resolve_sender(from);
    let mut f = ctx.fields(None, sender);
    f.insert(
        "sender",
        sender.map(|c| format!("{} ({})", c.name, c.role.as_str())).unwrap_or_else(|| from.into()),
    );
    f.insert("document", filename.to_string());
    if sender.is_none() {
        d.path = DecisionPath::Triage;
        f.insert("text", format!("attachment {filename}"));
        d.hero(ctx, "hero_unknown_sender", &f, false, None);
        d.rationale(format!("attachment from unknown sender {from}"));
        return;
    }
    // Fields extracted upstream are used as they are (checked as a reader's output is): the
    // reader is called only when the event carries none, so the live consumer and a replay of
    // the same records decide alike whatever LLM provider is configured.
    let read = match &req.extracted {
        Some(fields) => validate_document_fields(fields.clone()).map(|doc| (doc, None, "extracted upstream")),
        None => deps.llm.extract_document(&req).await.map(|o| (o.value, Some(o.usage), "read")),
    };
    match read {
        Ok((doc, usage, how)) => {
            d.usage.extend(usage);
            d.path = DecisionPath::Sop;
            let yn = |b: Option<bool>| match b {
                Some(true) => "yes",
                Some(false) => "no",
                None => "unknown",
            };
            let summary = format!(
                "type {}, signed {}, exceptions noted {}, POs [{}], seal {}, pieces {}, temperature {}",
                doc.document_type.as_str(),
                yn(doc.signed),
                yn(doc.exceptions_noted),
                doc.po_numbers.join(", "),
                doc.seal.as_deref().unwrap_or("none"),
                doc.pieces.map(|p| p.to_string()).unwrap_or_else(|| "unknown".into()),
                doc.temperature_f.map(|t| format!("{}°F", fmt_temp(t))).unwrap_or_else(|| "none".into()),
            );
            f.insert("reason", summary.clone());
            let note = ctx.render("tms_document", load_agent_domain::Language::En, &f);
            d.propose(None, ActionBody::TmsNote { text: note.body });
            let unsigned_pod =
                doc.document_type == load_agent_domain::DocumentType::Pod && doc.signed != Some(true);
            if doc.exceptions_noted == Some(true) || unsigned_pod {
                let why =
                    if doc.exceptions_noted == Some(true) { "exceptions noted" } else { "POD not signed" };
                f.insert("reason", why.to_string());
                d.hero(ctx, "hero_document_review", &f, false, None);
            }
            d.rationale(format!("document {how}: {summary}"));
        }
        Err(e) => {
            d.path = DecisionPath::HeroFallback;
            f.insert("reason", e.to_string());
            d.hero(ctx, "hero_document_unreadable", &f, true, None);
            d.rationale(format!("document reader failed: {e}"));
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn on_outcome(
    ctx: &Ctx<'_>,
    d: &mut Decision,
    key: &str,
    status: OutcomeStatus,
    kind: ActionKind,
    contact_id: Option<&str>,
    hero_channel: bool,
    reason: &Option<String>,
) {
    if matches!(status, OutcomeStatus::Published | OutcomeStatus::Delivered) {
        // The SOP does not wait for either: a step waits for its timer, not a confirmation.
        d.filtered();
        d.rationale(format!("{}: {key}", status.as_str()));
        return;
    }
    let internal = matches!(kind, ActionKind::SetTimer | ActionKind::CancelTimer | ActionKind::UpdateStage);
    if hero_channel || kind == ActionKind::CreateHeroTask || internal {
        d.filtered();
        d.rationale(format!(
            "{} failed ({}): an ops alert was raised; never another Hero task",
            kind.as_str(),
            if internal { "internal action" } else { "Hero channel" }
        ));
        return;
    }
    let contact = contact_id.and_then(|c| ctx.load.contact(c));
    let what = match kind {
        ActionKind::SendSms => "SMS",
        ActionKind::SendEmail => "Email",
        ActionKind::PostSlack => "Slack post",
        ActionKind::TmsNote => "TMS note",
        _ => kind.as_str(),
    };
    let to =
        contact.map(|c| format!(" to {} {}", c.role.as_str().replace('_', " "), c.name)).unwrap_or_default();
    let mut f = ctx.fields(None, contact);
    f.insert("action", format!("{what}{to}"));
    f.insert(
        "reason",
        format!("{}{}", reason.as_deref().unwrap_or("failed permanently"), contact_hint(contact)),
    );
    d.path = DecisionPath::Sop;
    d.hero(ctx, "hero_action_failed", &f, true, None);
    d.rationale(format!("{what}{to} failed permanently ({key})"));
}

fn contact_hint(c: Option<&load_agent_domain::Contact>) -> String {
    match c {
        Some(c) => {
            let how: Vec<&str> = [c.phone.as_deref(), c.email.as_deref()].into_iter().flatten().collect();
            if how.is_empty() {
                String::new()
            } else {
                format!(" (reach {} at {})", first_name(&c.name), how.join(" / "))
            }
        }
        None => String::new(),
    }
}
