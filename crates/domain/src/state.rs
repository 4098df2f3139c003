//! `LoadState`: a pure fold over the log (ADR 0001). Nothing writes state directly.
//!
//! Events move the tracking part (stage, current stop, delay risk, last ping) — only
//! `stop_status` moves the stage; decision records move asks, contacts and committed keys.
//! Collections that grow with history are persistent (`imbl`) so that cloning a state, as the
//! snapshot cache does, costs the same for a log of 10 entries and one of 5,000.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::action::ActionBody;
use crate::decision::{AskTransition, ContactUpdate, DecisionRecord, StepKind, TimerRef};
use crate::event::{EventKind, InboundEvent, MessageChannel, RiskBand, StopStatusKind};
use crate::load::{Contact, LoadRegistered, SopRef, Stage};
use crate::log::LogEntry;

/// The part of the state that inbound events move; small and cheap to copy, so triggers are a
/// diff of two of these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Tracking {
    pub stage: Stage,
    /// The sequence of the stop being approached or at (1 at registration).
    pub current_stop: u32,
    /// Delay risk per stop; a stop with no ping yet is `low`.
    pub delay_risk: BTreeMap<u32, RiskBand>,
    /// `recorded_at` of the last applied ping.
    pub last_ping_at: Option<DateTime<Utc>>,
    /// The stop the last stage change departed from, if it was a departure.
    pub departed_stop: Option<u32>,
}

impl Tracking {
    pub fn risk(&self, stop: u32) -> RiskBand {
        self.delay_risk.get(&stop).copied().unwrap_or(RiskBand::Low)
    }

    /// Whether stop `stop` has already been reached or passed.
    pub fn reached(&self, stop: u32) -> bool {
        stop < self.current_stop
            || (stop == self.current_stop && self.stage.is_at_stop())
            || self.stage == Stage::Delivered
    }

    /// Applies an event to the tracking state; events that do not move tracking (and stale or
    /// out-of-order ones) leave it unchanged.
    pub fn apply_event(&mut self, load: &LoadRegistered, event: &EventKind) {
        match event {
            EventKind::Ping { stop, delay_risk, recorded_at, .. } => {
                if self.last_ping_at.is_some_and(|last| *recorded_at < last) {
                    return; // stale: recorded before the last applied ping
                }
                if load.stop(*stop).is_none() || self.reached(*stop) {
                    return; // a stop already reached or passed, or not a stop of this load
                }
                self.delay_risk.insert(*stop, *delay_risk);
                self.last_ping_at = Some(*recorded_at);
            }
            EventKind::StopStatus { stop, status, .. } => self.apply_stop_status(load, *stop, *status),
            _ => {}
        }
    }

    fn apply_stop_status(&mut self, load: &LoadRegistered, stop: u32, status: StopStatusKind) {
        if self.stage == Stage::Delivered || stop < self.current_stop {
            return;
        }
        let Some(s) = load.stop(stop) else { return };
        let last = load.last_stop_sequence();
        match status {
            StopStatusKind::Arrived => {
                let stage = Stage::at(s.kind);
                if stage != self.stage || stop != self.current_stop {
                    self.stage = stage;
                    self.current_stop = stop;
                    self.departed_stop = None;
                }
            }
            StopStatusKind::Departed => {
                if stop >= last {
                    return;
                }
                let Some(next) = load.stop(stop + 1) else { return };
                self.stage = Stage::approaching(next.kind);
                self.current_stop = stop + 1;
                self.departed_stop = Some(stop);
            }
            StopStatusKind::Delivered => {
                if stop == last {
                    self.stage = Stage::Delivered;
                    self.current_stop = stop;
                    self.departed_stop = None;
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskStatus {
    Open,
    Resolved,
    Cancelled,
}

/// An ask: a question the agent is waiting on, first-class state (ADR 0001).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenAsk {
    pub id: String,
    pub ask_type: String,
    pub target_contact: String,
    pub sop: SopRef,
    pub opened_at: DateTime<Utc>,
    pub attempts: u32,
    pub max_attempts: u32,
    pub escalations_done: u32,
    /// The pending timer (id and fire time), if any.
    pub next_timer: Option<TimerRef>,
    /// The stop the ask is about; `None` (asks logged without it) means the current stop.
    pub stop_sequence: Option<u32>,
    pub status: AskStatus,
    pub resolved_by: Option<String>,
    pub resolved_at: Option<DateTime<Utc>>,
}

impl OpenAsk {
    /// `step = attempts + escalations_done`.
    pub fn step(&self) -> u32 {
        self.attempts + self.escalations_done
    }

    pub fn is_open(&self) -> bool {
        self.status == AskStatus::Open
    }

    /// A timer is current only if the ask is open and the timer's attempt is the ask's step.
    pub fn is_timer_current(&self, attempt: u32) -> bool {
        self.is_open() && attempt == self.step()
    }

    /// The stop the ask is about, given the current stop for asks logged without one.
    pub fn stop_or(&self, current_stop: u32) -> u32 {
        self.stop_sequence.unwrap_or(current_stop)
    }
}

/// The state of one load, projected from its log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LoadState {
    pub load_id: String,
    /// The seq of the last applied entry (0 for an empty log).
    pub version: u64,
    /// The load's metadata, with its pinned SOP version; `None` until registered.
    pub load: Option<LoadRegistered>,
    pub tracking: Tracking,
    /// Open asks, in the order they were opened.
    pub open_asks: Vec<OpenAsk>,
    /// Asks that were resolved or cancelled.
    pub closed_asks: imbl::Vector<OpenAsk>,
    /// Contacts that no longer support SMS (opted out, wrong number), with the reason.
    pub sms_blocked: BTreeMap<String, String>,
    /// Keys of every effective action committed for this load. `Arc<str>`, not `String`: a
    /// state taken from the snapshot cache shares its sets, and the first insert into a shared
    /// node copies the node's entries; copying an `Arc` is a count, copying a `String` an
    /// allocation (at saturation, with a hundred events per load, that copy was what grew).
    pub committed_action_keys: imbl::HashSet<Arc<str>>,
    /// Ids of every event in the log (the store enforces uniqueness; this is for deciding).
    pub event_ids: imbl::HashSet<Arc<str>>,
    /// Number of decisions and their total LLM cost.
    pub decisions: u64,
    pub llm_cost_usd: f64,
    /// When the last urgent Hero task was decided (the operations console lists the load).
    #[serde(default)]
    pub last_urgent_task_at: Option<DateTime<Utc>>,
}

impl LoadState {
    pub fn new(load_id: impl Into<String>) -> Self {
        LoadState { load_id: load_id.into(), ..Default::default() }
    }

    pub fn is_registered(&self) -> bool {
        self.load.is_some()
    }

    pub fn sop(&self) -> Option<SopRef> {
        self.load.as_ref().map(|l| SopRef { id: l.client.clone(), version: l.sop_version.unwrap_or(1) })
    }

    pub fn open_asks_of_type<'a>(&'a self, ask_type: &'a str) -> impl Iterator<Item = &'a OpenAsk> + 'a {
        self.open_asks.iter().filter(move |a| a.ask_type == ask_type)
    }

    pub fn open_ask(&self, ask_id: &str) -> Option<&OpenAsk> {
        self.open_asks.iter().find(|a| a.id == ask_id)
    }

    /// Finds an ask by id, open or closed.
    pub fn ask(&self, ask_id: &str) -> Option<&OpenAsk> {
        self.open_ask(ask_id).or_else(|| self.closed_asks.iter().find(|a| a.id == ask_id))
    }

    /// Whether a contact can get a message on a channel now (behavior.md §1, §8).
    pub fn supports(&self, contact: &Contact, channel: MessageChannel) -> bool {
        match channel {
            MessageChannel::Sms => contact.phone.is_some() && !self.sms_blocked.contains_key(&contact.id),
            MessageChannel::Email => contact.email.is_some(),
            MessageChannel::Slack => contact.slack.is_some(),
        }
    }

    /// Applies entries in order (`apply(state, new_entries)`); equal to folding them from scratch.
    pub fn apply_all<'a>(&mut self, entries: impl IntoIterator<Item = &'a LogEntry>) {
        for e in entries {
            self.apply(e);
        }
    }

    /// Applies one entry.
    pub fn apply(&mut self, entry: &LogEntry) {
        self.version += 1;
        match entry {
            LogEntry::Event(e) => self.apply_event(e),
            LogEntry::Decision(d) => self.apply_decision(d),
        }
    }

    fn apply_event(&mut self, event: &InboundEvent) {
        self.event_ids.insert(Arc::from(event.event_id.as_str()));
        match &event.kind {
            EventKind::LoadRegistered { load: reg } => {
                if self.load.is_none() {
                    self.load = Some(reg.clone());
                    self.tracking = Tracking { current_stop: 1, ..Tracking::default() };
                }
            }
            kind => {
                if let Some(load) = &self.load {
                    self.tracking.apply_event(load, kind);
                }
            }
        }
    }

    fn apply_decision(&mut self, d: &DecisionRecord) {
        self.decisions += 1;
        self.llm_cost_usd += d.total_cost_usd();
        for t in &d.transitions {
            self.apply_transition(t);
        }
        for u in &d.contact_updates {
            match u {
                ContactUpdate::SmsBlocked { contact_id, reason } => {
                    self.sms_blocked.insert(contact_id.clone(), reason.clone());
                }
            }
        }
        for a in d.effective_actions() {
            self.committed_action_keys.insert(Arc::from(a.key.as_str()));
            if matches!(a.body, ActionBody::CreateHeroTask { urgent: true, .. }) {
                self.last_urgent_task_at = Some(d.decided_at);
            }
        }
    }

    fn apply_transition(&mut self, t: &AskTransition) {
        match t {
            AskTransition::AskOpened {
                ask_id,
                ask_type,
                target_contact,
                sop,
                opened_at,
                max_attempts,
                stop_sequence,
            } => {
                if self.ask(ask_id).is_none() {
                    self.open_asks.push(OpenAsk {
                        id: ask_id.clone(),
                        ask_type: ask_type.clone(),
                        target_contact: target_contact.clone(),
                        sop: sop.clone(),
                        opened_at: *opened_at,
                        attempts: 0,
                        max_attempts: *max_attempts,
                        escalations_done: 0,
                        next_timer: None,
                        stop_sequence: *stop_sequence,
                        status: AskStatus::Open,
                        resolved_by: None,
                        resolved_at: None,
                    });
                }
            }
            AskTransition::AskStepTaken { ask_id, step_kind, timer, .. } => {
                if let Some(ask) = self.open_asks.iter_mut().find(|a| a.id == *ask_id) {
                    match step_kind {
                        StepKind::Attempt => ask.attempts += 1,
                        StepKind::Escalation => ask.escalations_done += 1,
                    }
                    ask.next_timer = timer.clone();
                }
            }
            AskTransition::AskResolved { ask_id, resolved_by, resolved_at } => {
                self.close_ask(ask_id, AskStatus::Resolved, Some(resolved_by.clone()), *resolved_at);
            }
            AskTransition::AskCancelled { ask_id, reason, cancelled_at } => {
                self.close_ask(ask_id, AskStatus::Cancelled, Some(reason.clone()), *cancelled_at);
            }
        }
    }

    fn close_ask(&mut self, ask_id: &str, status: AskStatus, by: Option<String>, at: DateTime<Utc>) {
        if let Some(i) = self.open_asks.iter().position(|a| a.id == ask_id) {
            let mut ask = self.open_asks.remove(i);
            ask.status = status;
            ask.next_timer = None;
            ask.resolved_by = by;
            ask.resolved_at = Some(at);
            self.closed_asks.push_back(ask);
        }
    }
}

/// `project_state`: the state of a load as the pure fold of its log.
pub fn project_state<'a>(load_id: &str, entries: impl IntoIterator<Item = &'a LogEntry>) -> LoadState {
    let mut state = LoadState::new(load_id);
    state.apply_all(entries);
    state
}
