//! `LoadSummary`: the few facts of a load the operations console lists and filters loads by
//! (issue 17), a pure function of `LoadState`. The worker writes it in the append transaction
//! (the store's `load_summary` table), so the console's attention list is an index lookup, never
//! a fold of every log.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::load::Stage;
use crate::state::LoadState;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSummary {
    /// The SOP id the load was registered under; `None` before `LoadRegistered`.
    pub client: Option<String>,
    pub stage: Stage,
    /// The log version the summary was taken at.
    pub version: u64,
    pub open_asks: u32,
    /// Open asks that have taken at least one escalation step.
    pub escalated_asks: u32,
    /// When the oldest of those asks was opened.
    pub escalated_since: Option<DateTime<Utc>>,
    /// When the last urgent Hero task was decided.
    pub urgent_task_at: Option<DateTime<Utc>>,
    /// The time of the entries the summary was taken after (their latest `recorded_at`).
    pub updated_at: DateTime<Utc>,
}

impl LoadSummary {
    /// The summary of `state`, taken at `updated_at`.
    pub fn of(state: &LoadState, updated_at: DateTime<Utc>) -> Self {
        let escalated = || state.open_asks.iter().filter(|a| a.is_open() && a.escalations_done > 0);
        LoadSummary {
            client: state.load.as_ref().map(|l| l.client.clone()),
            stage: state.tracking.stage,
            version: state.version,
            open_asks: state.open_asks.iter().filter(|a| a.is_open()).count() as u32,
            escalated_asks: escalated().count() as u32,
            escalated_since: escalated().map(|a| a.opened_at).min(),
            urgent_task_at: state.last_urgent_task_at,
            updated_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::decision::{AskTransition, DecisionPath, DecisionRecord, StepKind};
    use crate::load::SopRef;
    use crate::log::LogEntry;
    use crate::{Action, ActionBody};

    fn at(min: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 1, 10, min, 0).single().expect("a valid time")
    }

    fn decision(id: &str, min: u32, transitions: Vec<AskTransition>, actions: Vec<Action>) -> LogEntry {
        LogEntry::Decision(DecisionRecord {
            decision_id: format!("dec:{id}"),
            load_id: "L1".into(),
            trigger_event_id: id.into(),
            trigger_kind: "timer_fired".into(),
            decided_at: at(min),
            sop: None,
            path: DecisionPath::Sop,
            transitions,
            contact_updates: vec![],
            actions,
            rationale: String::new(),
            intent: None,
            llm_usage: vec![],
        })
    }

    fn hero(key: &str, urgent: bool) -> Action {
        Action {
            key: key.into(),
            ask: None,
            body: ActionBody::CreateHeroTask { title: "call the driver".into(), body: String::new(), urgent },
        }
    }

    #[test]
    fn an_escalated_open_ask_and_an_urgent_task_are_summarized_until_the_ask_closes() {
        let sop = SopRef { id: "client_a".into(), version: 1 };
        let opened = AskTransition::AskOpened {
            ask_id: "ask1".into(),
            ask_type: "eta_request".into(),
            target_contact: "driver".into(),
            sop,
            opened_at: at(1),
            max_attempts: 2,
            stop_sequence: None,
        };
        let escalated = AskTransition::AskStepTaken {
            ask_id: "ask1".into(),
            step: 3,
            step_kind: StepKind::Escalation,
            timer: None,
        };
        let mut state = LoadState::new("L1");
        state.apply(&decision("e1", 1, vec![opened], vec![hero("k0", false)]));
        let s = LoadSummary::of(&state, at(1));
        assert_eq!(
            (s.open_asks, s.escalated_asks, s.urgent_task_at),
            (1, 0, None),
            "a non-urgent task is not"
        );

        state.apply(&decision("e2", 40, vec![escalated], vec![hero("k1", true)]));
        let s = LoadSummary::of(&state, at(40));
        assert_eq!((s.open_asks, s.escalated_asks), (1, 1));
        assert_eq!(s.escalated_since, Some(at(1)), "since the escalated ask was opened");
        assert_eq!(s.urgent_task_at, Some(at(40)));
        assert_eq!((s.version, s.stage, s.client.as_deref()), (2, Stage::ToPickup, None));

        let resolved = AskTransition::AskResolved {
            ask_id: "ask1".into(),
            resolved_by: "e3".into(),
            resolved_at: at(50),
        };
        state.apply(&decision("e3", 50, vec![resolved], vec![]));
        let s = LoadSummary::of(&state, at(50));
        assert_eq!((s.open_asks, s.escalated_asks, s.escalated_since), (0, 0, None));
        assert_eq!(s.urgent_task_at, Some(at(40)), "the urgent task's time stays");
    }
}
