//! Inbound events and their kinds, as the tests write them: [`event`] wraps a kind; the other
//! builders return the kinds tests use most.

use chrono::{DateTime, Utc};
use load_agent_domain::{
    EventKind, InboundEvent, LogEntry, RiskBand, StopStatusKind, timer_fired_event_id, timer_id,
};

use crate::load::sample_load;

/// An inbound event of `load_id`.
pub fn event(load_id: &str, id: &str, when: DateTime<Utc>, kind: EventKind) -> InboundEvent {
    InboundEvent { event_id: id.into(), load_id: load_id.into(), occurred_at: when, kind }
}

/// [`event`] as a log entry.
pub fn entry(load_id: &str, id: &str, when: DateTime<Utc>, kind: EventKind) -> LogEntry {
    LogEntry::Event(event(load_id, id, when, kind))
}

/// The registration of [`sample_load`] under `load_id`, as event `id`.
pub fn registration(load_id: &str, id: &str, when: DateTime<Utc>) -> InboundEvent {
    event(load_id, id, when, EventKind::LoadRegistered { load: sample_load(load_id) })
}

/// A location ping for `stop` with its delay-risk band, recorded when it occurs.
pub fn ping(stop: u32, band: RiskBand, when: DateTime<Utc>) -> EventKind {
    EventKind::Ping { stop, delay_risk: band, recorded_at: when, lat: None, lon: None }
}

/// An SMS from contact `from`.
pub fn sms(from: &str, text: &str) -> EventKind {
    EventKind::Sms { from: from.into(), text: text.into() }
}

/// A stop status with no source.
pub fn stop_status(stop: u32, status: StopStatusKind) -> EventKind {
    EventKind::StopStatus { stop, status, source: None }
}

/// The timer of `ask`'s `attempt` on `load_id` firing at `now`, with the event id the pump gives it.
pub fn timer_fired(load_id: &str, ask: &str, attempt: u32, now: DateTime<Utc>) -> InboundEvent {
    let tid = timer_id(load_id, ask, attempt);
    event(
        load_id,
        &timer_fired_event_id(&tid),
        now,
        EventKind::TimerFired { timer_id: tid.clone(), ask_id: ask.into(), attempt, fire_at: now },
    )
}
