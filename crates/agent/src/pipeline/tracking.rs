//! Tracking: pings and stop statuses. The triggers are a diff of the tracking state before
//! and after the event; none is a filtered noop (stale, unknown stop, no band change), a band
//! change opens the asks its SOP rule names, a stage entered updates the stage, cancels the
//! asks it ends and opens the asks of the new stage.

use load_agent_domain::{ActionBody, AskTransition, EventKind, OpenAsk, RiskBand, Trigger, detect_triggers};

use super::decision::Decision;
use super::executor::open_ask;
use crate::context::Ctx;
use crate::sop::AskTrigger;

pub(super) fn on_tracking(ctx: &Ctx<'_>, d: &mut Decision, ping_stop: Option<u32>) {
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
