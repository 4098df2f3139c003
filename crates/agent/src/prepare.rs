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

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use load_agent_domain::{
        Contact, Language, LoadRegistered, LogEntry, OutcomeStatus, RiskBand, Role, Stop, StopKind,
        project_state,
    };

    use super::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 2, 13, 0, 0).single().expect("time")
    }

    fn registration() -> InboundEvent {
        let at = |s: &str| DateTime::parse_from_rfc3339(s).expect("time");
        let load = LoadRegistered {
            load_id: "481207".into(),
            client: "client_a".into(),
            sop_version: None,
            contacts: vec![Contact {
                id: "drv".into(),
                role: Role::Driver,
                name: "Luis".into(),
                phone: Some("+13125550111".into()),
                email: None,
                slack: None,
                language: Language::En,
            }],
            stops: vec![
                Stop {
                    sequence: 1,
                    kind: StopKind::Pickup,
                    name: "Acme DC".into(),
                    address: "1 Dock Rd".into(),
                    appointment: at("2026-03-02T08:00:00-06:00"),
                    po_numbers: vec![],
                    reference: None,
                },
                Stop {
                    sequence: 2,
                    kind: StopKind::Delivery,
                    name: "Store 88".into(),
                    address: "88 Main St".into(),
                    appointment: at("2026-03-02T16:00:00-05:00"),
                    po_numbers: vec![],
                    reference: None,
                },
            ],
            reefer: None,
        };
        event("reg", EventKind::LoadRegistered { load })
    }

    fn event(id: &str, kind: EventKind) -> InboundEvent {
        InboundEvent { event_id: id.into(), load_id: "481207".into(), occurred_at: now(), kind }
    }

    fn sms(id: &str, text: &str) -> InboundEvent {
        event(id, EventKind::Sms { from: "drv".into(), text: text.into() })
    }

    fn email(text: &str, subject: &str) -> InboundEvent {
        event(
            "em",
            EventKind::Email {
                from: "disp".into(),
                subject: subject.into(),
                text: text.into(),
                thread: None,
            },
        )
    }

    fn registered(agent: &Agent) -> LoadState {
        let reg = prepare_event(&LoadState::new("481207"), registration(), agent).expect("registration");
        project_state("481207", &[LogEntry::Event(reg)])
    }

    fn agent() -> Agent {
        Agent::embedded().expect("agent")
    }

    #[test]
    fn messages_over_their_channels_limit_are_oversized_and_at_the_limit_pass() {
        let agent = agent();
        let state = registered(&agent);
        let ok = "x".repeat(MAX_SMS_TEXT_BYTES);
        assert!(prepare_event(&state, sms("s1", &ok), &agent).is_ok());
        let err = prepare_event(&state, sms("s1", &format!("{ok}x")), &agent).expect_err("oversized");
        assert_eq!(
            err,
            InvalidEvent::Oversized {
                field: "payload.text",
                kind: "sms",
                bytes: MAX_SMS_TEXT_BYTES + 1,
                limit: MAX_SMS_TEXT_BYTES
            }
        );
        assert!(err.to_string().contains("16385 bytes, over the 16384-byte limit"), "{err}");
        let slack = event("sl", EventKind::Slack { from: "brk".into(), text: format!("{ok}x") });
        assert!(matches!(
            prepare_event(&state, slack, &agent),
            Err(InvalidEvent::Oversized { field: "payload.text", kind: "slack", .. })
        ));
        // An email body may be much longer than an SMS, up to its own limit.
        assert!(prepare_event(&state, email(&"y".repeat(MAX_EMAIL_TEXT_BYTES), "ETA"), &agent).is_ok());
        let err = prepare_event(&state, email(&"y".repeat(MAX_EMAIL_TEXT_BYTES + 1), "ETA"), &agent)
            .expect_err("oversized body");
        assert!(matches!(
            err,
            InvalidEvent::Oversized { field: "payload.text", limit: MAX_EMAIL_TEXT_BYTES, .. }
        ));
        let err = prepare_event(&state, email("eta 2", &"s".repeat(MAX_FIELD_BYTES + 1)), &agent)
            .expect_err("oversized subject");
        assert!(matches!(err, InvalidEvent::Oversized { field: "payload.subject", .. }));
        // The limit is in bytes: 4-byte characters reach it four times sooner.
        let emoji = "👍".repeat(MAX_SMS_TEXT_BYTES / 4 + 1);
        assert!(matches!(
            prepare_event(&state, sms("s2", &emoji), &agent),
            Err(InvalidEvent::Oversized { .. })
        ));
    }

    #[test]
    fn attachment_fields_over_the_field_limit_are_oversized() {
        let agent = agent();
        let state = registered(&agent);
        let attachment = |filename: String| {
            event(
                "att",
                EventKind::Attachment {
                    from: "drv".into(),
                    channel: load_agent_domain::MessageChannel::Sms,
                    filename,
                    content_type: "application/pdf".into(),
                    content_ref: Some("s3://docs/pod.pdf".into()),
                    extracted: None,
                },
            )
        };
        assert!(prepare_event(&state, attachment("pod.pdf".into()), &agent).is_ok());
        let err = prepare_event(&state, attachment("p".repeat(MAX_FIELD_BYTES + 1)), &agent)
            .expect_err("long name");
        assert!(matches!(err, InvalidEvent::Oversized { field: "payload.filename", kind: "attachment", .. }));
    }

    #[test]
    fn times_far_ahead_of_or_behind_the_workers_clock_are_bad_timestamps() {
        let agent = agent();
        let state = registered(&agent);
        let at = |offset: TimeDelta| InboundEvent { occurred_at: now() + offset, ..sms("s1", "ok") };
        for fine in [TimeDelta::zero(), MAX_CLOCK_AHEAD, -MAX_EVENT_AGE, TimeDelta::hours(-3)] {
            assert!(prepare_event_at(&state, at(fine), &agent, now()).is_ok(), "{fine}");
        }
        let err = prepare_event_at(&state, at(MAX_CLOCK_AHEAD + TimeDelta::seconds(1)), &agent, now())
            .expect_err("future");
        assert!(
            matches!(&err, InvalidEvent::BadTimestamp { field: "occurred_at", problem, .. } if problem.contains("future")),
            "{err}"
        );
        assert!(err.to_string().contains("2026-03-03 13:00:01"), "{err}");
        let err = prepare_event_at(&state, at(-MAX_EVENT_AGE - TimeDelta::seconds(1)), &agent, now())
            .expect_err("past");
        assert!(
            matches!(&err, InvalidEvent::BadTimestamp { problem, .. } if problem.contains("past")),
            "{err}"
        );
        // The epoch (a zero timestamp) and a year-58000 time (nanoseconds read as microseconds).
        for t in [DateTime::UNIX_EPOCH, now() + TimeDelta::days(365 * 56_000)] {
            let e = InboundEvent { occurred_at: t, ..sms("s1", "ok") };
            assert!(matches!(
                prepare_event_at(&state, e, &agent, now()),
                Err(InvalidEvent::BadTimestamp { .. })
            ));
        }
        // A ping's recorded_at, which orders pings, is held to the same bounds.
        let ping = event(
            "p1",
            EventKind::Ping {
                stop: 1,
                delay_risk: RiskBand::High,
                recorded_at: now() + TimeDelta::days(30),
                lat: None,
                lon: None,
            },
        );
        let err = prepare_event_at(&state, ping, &agent, now()).expect_err("future ping");
        assert!(matches!(err, InvalidEvent::BadTimestamp { field: "payload.recorded_at", .. }));
        // The bounds follow the clock the caller passes (a fake clock in evals and replays).
        let later = now() + TimeDelta::days(400);
        assert!(prepare_event_at(&state, at(TimeDelta::days(400)), &agent, later).is_ok());
        assert!(prepare_event_at(&state, at(TimeDelta::zero()), &agent, later).is_err());
    }

    #[test]
    fn internal_events_stamped_by_the_same_clock_pass_the_time_bounds() {
        let agent = agent();
        let state = registered(&agent);
        let timer = event(
            "evt:tmr:1",
            EventKind::TimerFired {
                timer_id: "tmr:1".into(),
                ask_id: "ask:1".into(),
                attempt: 1,
                fire_at: now(),
            },
        );
        assert!(prepare_event_at(&state, timer, &agent, now()).is_ok());
        let outcome = event(
            "out:delivered:k",
            EventKind::ActionOutcome {
                idempotency_key: "k".into(),
                status: OutcomeStatus::Delivered,
                action_kind: load_agent_domain::ActionKind::SendSms,
                contact_id: Some("drv".into()),
                hero_channel: false,
                reason: None,
            },
        );
        assert!(prepare_event_at(&state, outcome, &agent, now()).is_ok());
    }

    #[test]
    fn a_redelivery_is_the_same_event_and_a_reused_id_names_what_differs() {
        let logged = sms("s1", "eta 2:30");
        assert_eq!(check_redelivery(&logged, &logged.clone()), Ok(()));
        // Sent again and stamped again by its producer: still the same event.
        let restamped =
            InboundEvent { occurred_at: logged.occurred_at + TimeDelta::minutes(1), ..logged.clone() };
        assert_eq!(check_redelivery(&logged, &restamped), Ok(()));

        let other_text = sms("s1", "eta 4:00");
        let err = check_redelivery(&logged, &other_text).expect_err("reused");
        assert!(matches!(&err, InvalidEvent::EventIdReused { event_id, .. } if event_id == "s1"));
        assert!(
            err.to_string().contains("\"s1\" is reused") && err.to_string().contains("sms payload"),
            "{err}"
        );
        let other_kind = event(
            "s1",
            EventKind::StopStatus {
                stop: 1,
                status: load_agent_domain::StopStatusKind::Arrived,
                source: None,
            },
        );
        let err = check_redelivery(&logged, &other_kind).expect_err("reused");
        assert!(err.to_string().contains("the logged event is a sms, this one a stop_status"), "{err}");
        // A ping re-sent with a new recorded_at is the same ping; another band is another ping.
        let ping = |band, minute| {
            event(
                "p1",
                EventKind::Ping {
                    stop: 1,
                    delay_risk: band,
                    recorded_at: now() + TimeDelta::minutes(minute),
                    lat: None,
                    lon: None,
                },
            )
        };
        assert_eq!(check_redelivery(&ping(RiskBand::Medium, 0), &ping(RiskBand::Medium, 1)), Ok(()));
        assert!(check_redelivery(&ping(RiskBand::Medium, 0), &ping(RiskBand::High, 0)).is_err());
    }

    #[test]
    fn a_registration_redelivered_without_its_pinned_sop_version_is_the_same_event() {
        let agent = agent();
        let logged = prepare_event(&LoadState::new("481207"), registration(), &agent).expect("valid");
        assert!(matches!(&logged.kind, EventKind::LoadRegistered { load } if load.sop_version.is_some()));
        assert_eq!(check_redelivery(&logged, &registration()), Ok(()));
        let mut other = registration();
        if let EventKind::LoadRegistered { load } = &mut other.kind {
            load.client = "client_b".into();
        }
        assert!(check_redelivery(&logged, &other).is_err());
    }

    #[test]
    fn republished_timers_and_outcomes_compare_by_what_their_ids_name() {
        let timer = |fire_min: i64, attempt: u32| InboundEvent {
            occurred_at: now() + TimeDelta::minutes(fire_min),
            ..event(
                "evt:tmr:1",
                EventKind::TimerFired {
                    timer_id: "tmr:1".into(),
                    ask_id: "ask:1".into(),
                    attempt,
                    fire_at: now(),
                },
            )
        };
        // Published again by the pump later: a redelivery.
        assert_eq!(check_redelivery(&timer(0, 1), &timer(2, 1)), Ok(()));
        assert!(check_redelivery(&timer(0, 1), &timer(0, 2)).is_err());
        let outcome = |reason: &str, status| InboundEvent {
            occurred_at: now() + TimeDelta::seconds(reason.len() as i64),
            ..event(
                "out:failed_permanent:k",
                EventKind::ActionOutcome {
                    idempotency_key: "k".into(),
                    status,
                    action_kind: load_agent_domain::ActionKind::SendSms,
                    contact_id: None,
                    hero_channel: false,
                    reason: Some(reason.into()),
                },
            )
        };
        assert_eq!(
            check_redelivery(
                &outcome("503", OutcomeStatus::FailedPermanent),
                &outcome("timeout", OutcomeStatus::FailedPermanent)
            ),
            Ok(())
        );
        assert!(
            check_redelivery(
                &outcome("x", OutcomeStatus::FailedPermanent),
                &outcome("x", OutcomeStatus::Delivered)
            )
            .is_err()
        );
    }
}
