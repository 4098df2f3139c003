//! `prepare_event`: what the worker checks before deciding (behavior.md §1): size limits per
//! channel, time bounds against the worker's clock, and redeliveries (the same event, or an id
//! reused for another).

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use load_agent_agent::prepare::{
    MAX_CLOCK_AHEAD, MAX_EMAIL_TEXT_BYTES, MAX_EVENT_AGE, MAX_FIELD_BYTES, MAX_SMS_TEXT_BYTES,
};
use load_agent_agent::{Agent, InvalidEvent, check_redelivery, prepare_event, prepare_event_at};
use load_agent_domain::*;
use load_agent_testkit::load::load_481207;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 13, 0, 0).single().expect("time")
}

fn registration() -> InboundEvent {
    event("reg", EventKind::LoadRegistered { load: load_481207() })
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
        EventKind::Email { from: "disp".into(), subject: subject.into(), text: text.into(), thread: None },
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
    assert!(matches!(prepare_event(&state, sms("s2", &emoji), &agent), Err(InvalidEvent::Oversized { .. })));
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
    let err =
        prepare_event(&state, attachment("p".repeat(MAX_FIELD_BYTES + 1)), &agent).expect_err("long name");
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
    assert!(matches!(&err, InvalidEvent::BadTimestamp { problem, .. } if problem.contains("past")), "{err}");
    // The epoch (a zero timestamp) and a year-58000 time (nanoseconds read as microseconds).
    for t in [DateTime::UNIX_EPOCH, now() + TimeDelta::days(365 * 56_000)] {
        let e = InboundEvent { occurred_at: t, ..sms("s1", "ok") };
        assert!(matches!(prepare_event_at(&state, e, &agent, now()), Err(InvalidEvent::BadTimestamp { .. })));
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
    assert!(err.to_string().contains("\"s1\" is reused") && err.to_string().contains("sms payload"), "{err}");
    let other_kind = event(
        "s1",
        EventKind::StopStatus { stop: 1, status: load_agent_domain::StopStatusKind::Arrived, source: None },
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
