//! Checks an inbound event against the load before it is processed, and pins the SOP version
//! of a registration. An event that fails here is not decided on: the consumer sends it to the
//! DLQ with the reason.
//!
//! Limits (docs/kafka.md, "The DLQ"): an event is refused, never truncated, when
//! - a message text is over its channel's limit ([`MAX_SMS_TEXT_BYTES`], [`MAX_SLACK_TEXT_BYTES`],
//!   [`MAX_EMAIL_TEXT_BYTES`]) or another free-text field of a message or attachment (sender,
//!   subject, file name, content type, content reference) is over [`MAX_FIELD_BYTES`];
//! - its `occurred_at` (or a ping's `recorded_at`) is more than [`MAX_CLOCK_AHEAD`] after the
//!   worker's clock or more than [`MAX_EVENT_AGE`] before it ([`prepare_event_at`]);
//! - its id is already in the log for a different event ([`check_redelivery`]).

use chrono::{DateTime, TimeDelta, Utc};
use load_agent_domain::{EventKind, InboundEvent, LoadState};

use crate::pipeline::Agent;

/// SMS text: a long concatenated SMS is a few KiB; more is not a text message.
pub const MAX_SMS_TEXT_BYTES: usize = 16 * 1024;
/// Slack message text.
pub const MAX_SLACK_TEXT_BYTES: usize = 16 * 1024;
/// Email body text (the plain text the integration extracted; attachments travel as
/// `attachment` events with a content reference, never inline).
pub const MAX_EMAIL_TEXT_BYTES: usize = 256 * 1024;
/// Every other free-text field of a message or an attachment: `from`, an email's `subject`, an
/// attachment's `filename`, `content_type` and `content_ref`.
pub const MAX_FIELD_BYTES: usize = 4 * 1024;
/// Kept for callers of the first limit: the SMS and Slack text limit.
pub const MAX_MESSAGE_BYTES: usize = MAX_SMS_TEXT_BYTES;

/// How far after the worker's clock an event's time may be (clock skew between the source and
/// the worker, time zones mislabelled as UTC).
pub const MAX_CLOCK_AHEAD: TimeDelta = TimeDelta::days(1);
/// How far before the worker's clock an event's time may be (consumer lag, a redrive from the
/// DLQ): a load is run for days, not years.
pub const MAX_EVENT_AGE: TimeDelta = TimeDelta::days(365);

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidEvent {
    #[error("event_id is empty")]
    EmptyEventId,
    #[error("the event's load_id {payload:?} differs from the record key {key:?}")]
    KeyMismatch { key: String, payload: String },
    #[error("unknown load {0}: no load_registered event was processed for it")]
    UnknownLoad(String),
    #[error("load_registered: {0}")]
    BadRegistration(String),
    #[error("load_registered: unknown SOP {0:?}")]
    UnknownSop(String),
    #[error("load_registered: SOP {id:?} has no version {version}")]
    UnknownSopVersion { id: String, version: u32 },
    #[error("load_registered: load_id {inner:?} differs from the event's load_id {outer:?}")]
    RegistrationLoadIdMismatch { outer: String, inner: String },
    #[error("{field}: {problem}")]
    BadField { field: &'static str, problem: String },
    /// A field over its size limit.
    #[error("{field} of the {kind} event is {bytes} bytes, over the {limit}-byte limit")]
    Oversized { field: &'static str, kind: &'static str, bytes: usize, limit: usize },
    /// A time too far ahead of or behind the worker's clock.
    #[error("{field} {at} is {problem} (the worker's clock reads {now})")]
    BadTimestamp { field: &'static str, at: DateTime<Utc>, now: DateTime<Utc>, problem: String },
    /// The event id is already in the load's log for a different event.
    #[error(
        "event id {event_id:?} is reused: the log of load {load_id} already holds a different event under it ({difference})"
    )]
    EventIdReused { event_id: String, load_id: String, difference: String },
}

/// Validates `event` for a load in `state` and returns the event as it is to be logged, without
/// the checks that need the clock (see [`prepare_event_at`], which the worker calls).
pub fn prepare_event(
    state: &LoadState,
    event: InboundEvent,
    agent: &Agent,
) -> Result<InboundEvent, InvalidEvent> {
    if event.event_id.trim().is_empty() {
        return Err(InvalidEvent::EmptyEventId);
    }
    if event.load_id != state.load_id {
        return Err(InvalidEvent::KeyMismatch { key: state.load_id.clone(), payload: event.load_id.clone() });
    }
    let mut event = event;
    match &mut event.kind {
        EventKind::LoadRegistered { load } => {
            if load.load_id != event.load_id {
                return Err(InvalidEvent::RegistrationLoadIdMismatch {
                    outer: event.load_id.clone(),
                    inner: load.load_id.clone(),
                });
            }
            load.validate().map_err(|e| InvalidEvent::BadRegistration(e.to_string()))?;
            match load.sop_version {
                Some(v) => {
                    if agent.sops.get(&load.client, v).is_none() {
                        if agent.sops.latest(&load.client).is_none() {
                            return Err(InvalidEvent::UnknownSop(load.client.clone()));
                        }
                        return Err(InvalidEvent::UnknownSopVersion { id: load.client.clone(), version: v });
                    }
                }
                None => {
                    let sop = agent
                        .sops
                        .latest(&load.client)
                        .ok_or_else(|| InvalidEvent::UnknownSop(load.client.clone()))?;
                    load.sop_version = Some(sop.spec.version);
                }
            }
        }
        _ if !state.is_registered() => return Err(InvalidEvent::UnknownLoad(state.load_id.clone())),
        _ => check_sizes(&event.kind)?,
    }
    Ok(event)
}

/// [`prepare_event`], then the checks against the worker's clock `now`: `occurred_at` (and a
/// ping's `recorded_at`) at most [`MAX_CLOCK_AHEAD`] after `now` and at most
/// [`MAX_EVENT_AGE`] before it. The bounds apply to every kind: the timer pump and the relay
/// stamp their `timer_fired` and `action_outcome` events with the same clock.
pub fn prepare_event_at(
    state: &LoadState,
    event: InboundEvent,
    agent: &Agent,
    now: DateTime<Utc>,
) -> Result<InboundEvent, InvalidEvent> {
    let event = prepare_event(state, event, agent)?;
    check_time("occurred_at", event.occurred_at, now)?;
    if let EventKind::Ping { recorded_at, .. } = &event.kind {
        check_time("payload.recorded_at", *recorded_at, now)?;
    }
    Ok(event)
}

fn check_time(field: &'static str, at: DateTime<Utc>, now: DateTime<Utc>) -> Result<(), InvalidEvent> {
    let problem = if at > now + MAX_CLOCK_AHEAD {
        format!("more than {} hours in the future", MAX_CLOCK_AHEAD.num_hours())
    } else if at < now - MAX_EVENT_AGE {
        format!("more than {} days in the past", MAX_EVENT_AGE.num_days())
    } else {
        return Ok(());
    };
    Err(InvalidEvent::BadTimestamp { field, at, now, problem })
}

fn check_sizes(kind: &EventKind) -> Result<(), InvalidEvent> {
    let kind_str = kind.kind_str();
    let limit = |field: &'static str, value: &str, limit: usize| {
        if value.len() > limit {
            Err(InvalidEvent::Oversized { field, kind: kind_str, bytes: value.len(), limit })
        } else {
            Ok(())
        }
    };
    match kind {
        EventKind::Sms { from, text } => {
            limit("payload.from", from, MAX_FIELD_BYTES)?;
            limit("payload.text", text, MAX_SMS_TEXT_BYTES)
        }
        EventKind::Slack { from, text } => {
            limit("payload.from", from, MAX_FIELD_BYTES)?;
            limit("payload.text", text, MAX_SLACK_TEXT_BYTES)
        }
        EventKind::Email { from, subject, text, .. } => {
            limit("payload.from", from, MAX_FIELD_BYTES)?;
            limit("payload.subject", subject, MAX_FIELD_BYTES)?;
            limit("payload.text", text, MAX_EMAIL_TEXT_BYTES)
        }
        EventKind::Attachment { from, filename, content_type, content_ref, .. } => {
            limit("payload.from", from, MAX_FIELD_BYTES)?;
            limit("payload.filename", filename, MAX_FIELD_BYTES)?;
            limit("payload.content_type", content_type, MAX_FIELD_BYTES)?;
            limit("payload.content_ref", content_ref.as_deref().unwrap_or_default(), MAX_FIELD_BYTES)
        }
        _ => Ok(()),
    }
}

/// An event whose id is already in the log: `Ok` when it is a redelivery of `logged` (the
/// entry under that id), [`InvalidEvent::EventIdReused`] when it is a different event.
///
/// What is compared is what the event says, not when: the kind and the payload. Times
/// (`occurred_at`, a ping's `recorded_at`, a timer's `fire_at`) are not compared, because a
/// producer that sends an event again may stamp it again (the recorded sample dump holds such a
/// ping, delivered twice a minute apart).
/// - `timer_fired` and `action_outcome` ids are derived from what they report
///   (`timer_fired_event_id`, `action_outcome_event_id`); a second publication of the same
///   outcome may carry another failure text, so only the identifying fields are compared
///   (timer id, ask, attempt; key and status).
/// - A registration's SOP version, pinned when it was logged, is compared only when the
///   redelivery names one.
pub fn check_redelivery(logged: &InboundEvent, event: &InboundEvent) -> Result<(), InvalidEvent> {
    let reused = |difference: String| InvalidEvent::EventIdReused {
        event_id: event.event_id.clone(),
        load_id: logged.load_id.clone(),
        difference,
    };
    if logged.kind_str() != event.kind_str() {
        return Err(reused(format!(
            "the logged event is a {}, this one a {}",
            logged.kind_str(),
            event.kind_str()
        )));
    }
    if logged.load_id != event.load_id {
        return Err(reused(format!("the logged event is about load {}", logged.load_id)));
    }
    let same_payload = match (&logged.kind, &event.kind) {
        (
            EventKind::TimerFired { timer_id: t1, ask_id: a1, attempt: n1, .. },
            EventKind::TimerFired { timer_id: t2, ask_id: a2, attempt: n2, .. },
        ) => return if (t1, a1, n1) == (t2, a2, n2) { Ok(()) } else { Err(reused(differs("timer"))) },
        (
            EventKind::ActionOutcome { idempotency_key: k1, status: s1, .. },
            EventKind::ActionOutcome { idempotency_key: k2, status: s2, .. },
        ) => return if (k1, s1) == (k2, s2) { Ok(()) } else { Err(reused(differs("outcome"))) },
        (EventKind::LoadRegistered { load: l1 }, EventKind::LoadRegistered { load: l2 }) => {
            let mut l2 = l2.clone();
            if l2.sop_version.is_none() {
                l2.sop_version = l1.sop_version;
            }
            *l1 == l2
        }
        (
            EventKind::Ping { stop: s1, delay_risk: r1, lat: x1, lon: y1, .. },
            EventKind::Ping { stop: s2, delay_risk: r2, lat: x2, lon: y2, .. },
        ) => (s1, r1, x1, y1) == (s2, r2, x2, y2),
        (a, b) => a == b,
    };
    if same_payload { Ok(()) } else { Err(reused(differs(event.kind_str()))) }
}

fn differs(what: &str) -> String {
    format!("a different {what} payload")
}
