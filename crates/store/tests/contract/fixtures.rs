//! Log entries and outbox rows for the contract tests: every event kind and a decision with
//! every field set, so that round trips cover the whole entry.

use chrono::{DateTime, Duration, TimeZone, Utc};
use load_agent_domain::*;
use load_agent_store::NewOutboxRow;

/// A time `secs` after 2026-03-02 13:00:00 UTC, with milliseconds (the store keeps microseconds).
pub fn t(secs: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 13, 0, 0).single().expect("valid time")
        + Duration::milliseconds(secs * 1000 + 123)
}

pub fn event(load: &str, id: &str, at: DateTime<Utc>, kind: EventKind) -> LogEntry {
    LogEntry::Event(InboundEvent { event_id: id.into(), load_id: load.into(), occurred_at: at, kind })
}

pub fn sms(load: &str, id: &str, at: DateTime<Utc>) -> LogEntry {
    event(
        load,
        id,
        at,
        EventKind::Sms { from: "drv".into(), text: format!("message {id}: running 20 min late") },
    )
}

pub fn registered(load: &str, at: DateTime<Utc>) -> LogEntry {
    let reg = LoadRegistered { load_id: load.into(), ..load_agent_testkit::load::full_load() };
    event(load, &format!("reg_{load}"), at, EventKind::LoadRegistered { load: reg })
}

/// One entry of every event kind, then a decision with every field set.
pub fn every_kind(load: &str) -> Vec<LogEntry> {
    let key = format!("{load}/ask:eta_request:ping_1/1/send_sms");
    vec![
        registered(load, t(0)),
        event(
            load,
            "ping_1",
            t(60),
            EventKind::Ping {
                stop: 1,
                delay_risk: RiskBand::High,
                recorded_at: t(59),
                lat: Some(41.525_03),
                lon: Some(-88.081_72),
            },
        ),
        decision(load, "ping_1", t(61), 0.004_25),
        event(
            load,
            "email_1",
            t(120),
            EventKind::Email {
                from: "dana@carrier.example".into(),
                subject: "Re: load".into(),
                text: "ETA 07:45 — thanks".into(),
                thread: Some(EmailThread::Main),
            },
        ),
        event(load, "slack_1", t(121), EventKind::Slack { from: "@dana".into(), text: "ok".into() }),
        event(
            load,
            "att_1",
            t(122),
            EventKind::Attachment {
                from: "drv".into(),
                channel: MessageChannel::Sms,
                filename: "bol.jpg".into(),
                content_type: "image/jpeg".into(),
                content_ref: Some("s3://bucket/bol.jpg".into()),
                extracted: Some(DocumentFields {
                    document_type: DocumentType::Bol,
                    signed: Some(true),
                    exceptions_noted: Some(false),
                    po_numbers: vec!["55821".into()],
                    seal: Some("SEAL9".into()),
                    pieces: Some(24),
                    temperature_f: Some(33.5),
                }),
            },
        ),
        event(
            load,
            "stop_1",
            t(180),
            EventKind::StopStatus {
                stop: 1,
                status: StopStatusKind::Arrived,
                source: Some("geofence".into()),
            },
        ),
        event(
            load,
            "evt:tmr:1",
            t(240),
            EventKind::TimerFired {
                timer_id: "tmr:1".into(),
                ask_id: "ask:eta_request:ping_1".into(),
                attempt: 1,
                fire_at: t(239),
            },
        ),
        event(
            load,
            &format!("out:delivered:{key}"),
            t(300),
            EventKind::ActionOutcome {
                idempotency_key: key,
                status: OutcomeStatus::Delivered,
                action_kind: ActionKind::SendSms,
                contact_id: Some("drv".into()),
                hero_channel: false,
                reason: None,
            },
        ),
    ]
}

/// A decision for `event_id` that takes step 1 of an ETA ask: an SMS and its timer.
pub fn decision(load: &str, event_id: &str, at: DateTime<Utc>, cost: f64) -> LogEntry {
    LogEntry::Decision(DecisionRecord {
        trigger_kind: "ping".into(),
        contact_updates: vec![ContactUpdate::SmsBlocked { contact_id: "old".into(), reason: "STOP".into() }],
        rationale: "risk went high; ask the driver".into(),
        intent: Some(IntentRecord { intent: "eta_update".into(), probability: 0.93 }),
        llm_usage: vec![LlmUsage {
            method: "triage".into(),
            model_id: "typesafe-1".into(),
            input_tokens: 812,
            output_tokens: 9,
            cost_usd: cost,
            latency_ms: 41,
        }],
        ..load_agent_testkit::ask::eta_ask_opened(
            load,
            event_id,
            at,
            SopRef { id: "client_a".into(), version: 3 },
            "¿Cuál es su hora estimada?",
        )
    })
}

/// The outbox rows of a decision entry, committed at `version`.
pub fn rows_of(entry: &LogEntry, version: u64) -> Vec<NewOutboxRow> {
    let LogEntry::Decision(d) = entry else { return Vec::new() };
    d.effective_actions()
        .map(|a| NewOutboxRow {
            id: a.key.clone(),
            load_id: d.load_id.clone(),
            destination: a.body.destination().expect("an effective action has a destination"),
            action: a.clone(),
            load_version: version,
        })
        .collect()
}

/// One append of the agent's shape (as pglimit): an inbound SMS, its decision, the decision's
/// two outbox rows (send_sms, set_timer). `n` makes the ids unique within the load; the log
/// is at `2 * n` before it.
pub fn step(load: &str, n: u64) -> (Vec<LogEntry>, Vec<NewOutboxRow>) {
    let at = t(60 * i64::try_from(n).unwrap_or(0));
    let event_id = format!("sms_{n}");
    let entries = vec![sms(load, &event_id, at), decision(load, &event_id, at + Duration::seconds(1), 0.001)];
    let rows = rows_of(&entries[1], 2 * n + 2);
    (entries, rows)
}

/// An outbox row for `destination` with a fresh key, for order tests.
pub fn row(load: &str, key: &str, destination: Destination, version: u64) -> NewOutboxRow {
    let body = match destination {
        Destination::Sms => ActionBody::SendSms { to: "drv".into(), body: key.into() },
        Destination::Email => ActionBody::SendEmail {
            to: "disp".into(),
            subject: "s".into(),
            body: key.into(),
            thread: EmailThread::New,
        },
        Destination::Timer => ActionBody::CancelTimer { timer_id: key.into() },
        Destination::Hero => ActionBody::CreateHeroTask { title: "t".into(), body: key.into(), urgent: true },
        _ => ActionBody::TmsNote { text: key.into() },
    };
    NewOutboxRow {
        id: key.into(),
        load_id: load.into(),
        destination,
        action: Action { key: key.into(), ask: None, body },
        load_version: version,
    }
}
