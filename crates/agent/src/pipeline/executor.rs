//! The SOP executor: opening asks and taking their steps (a contact attempt with its timer
//! while attempts remain, else the whole escalation chain), and the timers that take the next
//! step of an ask when they are current.

use chrono::Duration;
use load_agent_domain::{
    ActionBody, AskStepRef, AskTransition, DecisionPath, EmailThread, MessageChannel, OpenAsk, Role,
    SlackTarget, StepKind, Stop, TimerRef, ask_id_for, timer_id,
};

use super::decision::Decision;
use crate::context::Ctx;
use crate::sop::{AskRule, EscalationStep, Sop};
use crate::validate::Proposal;

pub(super) fn open_ask(
    ctx: &Ctx<'_>,
    d: &mut Decision,
    sop: &Sop,
    ask_type: &str,
    rule: &AskRule,
    stop: u32,
) {
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

pub(super) fn on_timer(ctx: &Ctx<'_>, d: &mut Decision, ask_id: &str, attempt: u32) {
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
