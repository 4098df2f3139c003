//! Triggers: a pure diff of the tracking state before and after an event (ADR 0001,
//! behavior.md §2–§3), never raw event kinds. A ping at the band the stop already has, a stale
//! ping and a stale stop status change nothing, so they produce no trigger.

use serde::{Deserialize, Serialize};

use crate::event::RiskBand;
use crate::load::Stage;
use crate::state::Tracking;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "trigger", rename_all = "snake_case")]
pub enum Trigger {
    DelayRiskChanged {
        stop: u32,
        from: RiskBand,
        to: RiskBand,
    },
    StageEntered {
        stage: Stage,
        from: Stage,
        /// The stop reached or now approached (the new current stop).
        stop: u32,
        /// The stop just departed, when the change is a departure.
        departed_stop: Option<u32>,
    },
}

/// `detect_triggers(before, after)`: stage changes first, then risk changes by stop.
pub fn detect_triggers(before: &Tracking, after: &Tracking) -> Vec<Trigger> {
    let mut out = Vec::new();
    if before.stage != after.stage || before.current_stop != after.current_stop {
        out.push(Trigger::StageEntered {
            stage: after.stage,
            from: before.stage,
            stop: after.current_stop,
            departed_stop: after.departed_stop,
        });
    }
    for (&stop, &to) in &after.delay_risk {
        let from = before.risk(stop);
        if from != to {
            out.push(Trigger::DelayRiskChanged { stop, from, to });
        }
    }
    out
}
