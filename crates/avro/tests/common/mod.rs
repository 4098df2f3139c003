//! Sample domain values: every event kind, every action body, decisions with every transition.
#![allow(dead_code)]

use load_agent_domain::{
    Action, ActionBody, ActionKeys, AskStepRef, AskTransition, ContactUpdate, DecisionPath, DecisionRecord,
    DocumentFields, DocumentType, EmailThread, EventKind, InboundEvent, IntentRecord, LlmUsage,
    LoadRegistered, LogEntry, MessageChannel, OutcomeStatus, RiskBand, SlackTarget, SopRef, Stage, StepKind,
    StopStatusKind, TimerRef,
};

pub use load_agent_testkit::at;

/// Load 481207 with every optional field set (the test kit's `full_load`).
pub fn load_481207() -> LoadRegistered {
    load_agent_testkit::load::full_load()
}

fn event(id: &str, t: &str, kind: EventKind) -> InboundEvent {
    InboundEvent { event_id: id.into(), load_id: "481207".into(), occurred_at: at(t), kind }
}

/// One event of every kind, with optional fields both set and unset.
pub fn every_event_kind() -> Vec<InboundEvent> {
    vec![
        event("reg_1", "2026-03-02T12:00:00Z", EventKind::LoadRegistered { load: load_481207() }),
        event(
            "reg_2",
            "2026-03-02T12:00:00Z",
            EventKind::LoadRegistered {
                load: LoadRegistered { sop_version: None, reefer: None, ..load_481207() },
            },
        ),
        event(
            "sms_0713",
            "2026-03-02T13:13:00.123456Z",
            EventKind::Sms { from: "+13125550111".into(), text: "What's the PO number?".into() },
        ),
        event(
            "email_1",
            "2026-03-02T13:20:00Z",
            EventKind::Email {
                from: "dana@carrier.example".into(),
                subject: "Re: 481207".into(),
                text: "ETA 9:30".into(),
                thread: Some(EmailThread::Main),
            },
        ),
        event(
            "email_2",
            "2026-03-02T13:21:00Z",
            EventKind::Email {
                from: "x@y.example".into(),
                subject: String::new(),
                text: "hi".into(),
                thread: None,
            },
        ),
        event(
            "slack_1",
            "2026-03-02T13:22:00Z",
            EventKind::Slack { from: "#acme-loads".into(), text: "status?".into() },
        ),
        event(
            "ping_0700",
            "2026-03-02T13:00:00Z",
            EventKind::Ping {
                stop: 1,
                delay_risk: RiskBand::High,
                recorded_at: at("2026-03-02T12:59:30Z"),
                lat: Some(41.525),
                lon: Some(-88.0817),
            },
        ),
        event(
            "ping_0701",
            "2026-03-02T13:01:00Z",
            EventKind::Ping {
                stop: 2,
                delay_risk: RiskBand::Low,
                recorded_at: at("2026-03-02T13:00:59Z"),
                lat: None,
                lon: None,
            },
        ),
        event(
            "evt:tmr:481207:ask:eta_request:ping_0700:1",
            "2026-03-02T13:31:00Z",
            EventKind::TimerFired {
                timer_id: "tmr:481207:ask:eta_request:ping_0700:1".into(),
                ask_id: "ask:eta_request:ping_0700".into(),
                attempt: 1,
                fire_at: at("2026-03-02T13:31:00Z"),
            },
        ),
        event(
            "att_1",
            "2026-03-02T18:00:00Z",
            EventKind::Attachment {
                from: "drv".into(),
                channel: MessageChannel::Sms,
                filename: "pod.jpg".into(),
                content_type: "image/jpeg".into(),
                content_ref: Some("s3://docs/pod.jpg".into()),
                extracted: Some(DocumentFields {
                    document_type: DocumentType::Pod,
                    signed: Some(true),
                    exceptions_noted: Some(false),
                    po_numbers: vec!["55821".into()],
                    seal: Some("SEAL-9".into()),
                    pieces: Some(24),
                    temperature_f: Some(35.5),
                }),
            },
        ),
        event(
            "att_2",
            "2026-03-02T18:01:00Z",
            EventKind::Attachment {
                from: "dana@carrier.example".into(),
                channel: MessageChannel::Email,
                filename: "bol.pdf".into(),
                content_type: "application/pdf".into(),
                content_ref: None,
                extracted: Some(DocumentFields {
                    document_type: DocumentType::LumperReceipt,
                    ..DocumentFields::default()
                }),
            },
        ),
        event(
            "att_3",
            "2026-03-02T18:02:00Z",
            EventKind::Attachment {
                from: "#acme-loads".into(),
                channel: MessageChannel::Slack,
                filename: "x.png".into(),
                content_type: "image/png".into(),
                content_ref: None,
                extracted: None,
            },
        ),
        event(
            "arr_1",
            "2026-03-02T14:02:00Z",
            EventKind::StopStatus {
                stop: 1,
                status: StopStatusKind::Arrived,
                source: Some("geofence".into()),
            },
        ),
        event(
            "dep_1",
            "2026-03-02T15:00:00Z",
            EventKind::StopStatus { stop: 1, status: StopStatusKind::Departed, source: None },
        ),
        event(
            "del_2",
            "2026-03-02T22:00:00Z",
            EventKind::StopStatus { stop: 2, status: StopStatusKind::Delivered, source: Some("tms".into()) },
        ),
        event(
            "out:delivered:481207/ask:eta_request:ping_0700/1/send_sms",
            "2026-03-02T13:01:02Z",
            EventKind::ActionOutcome {
                idempotency_key: "481207/ask:eta_request:ping_0700/1/send_sms".into(),
                status: OutcomeStatus::Delivered,
                action_kind: load_agent_domain::ActionKind::SendSms,
                contact_id: Some("drv".into()),
                hero_channel: false,
                reason: None,
            },
        ),
        event(
            "out:failed_permanent:481207/evt:x/create_hero_task",
            "2026-03-02T13:01:03Z",
            EventKind::ActionOutcome {
                idempotency_key: "481207/evt:x/create_hero_task".into(),
                status: OutcomeStatus::FailedPermanent,
                action_kind: load_agent_domain::ActionKind::CreateHeroTask,
                contact_id: None,
                hero_channel: true,
                reason: Some("hero service rejected the task".into()),
            },
        ),
    ]
}

pub fn sms_event() -> InboundEvent {
    event(
        "sms_0713",
        "2026-03-02T13:13:00Z",
        EventKind::Sms { from: "+13125550111".into(), text: "What's the PO number?".into() },
    )
}

/// One action body of every kind (and both Slack targets, both email threads).
pub fn every_action_body() -> Vec<ActionBody> {
    vec![
        ActionBody::SendSms { to: "drv".into(), body: "Hi Luis, what's your ETA to Acme DC?".into() },
        ActionBody::SendEmail {
            to: "disp".into(),
            subject: "Load 481207".into(),
            body: "ETA?".into(),
            thread: EmailThread::Main,
        },
        ActionBody::SendEmail {
            to: "disp".into(),
            subject: "New".into(),
            body: "b".into(),
            thread: EmailThread::New,
        },
        ActionBody::PostSlack {
            target: SlackTarget::Broker { contact_id: "brk".into() },
            text: "Driver is late".into(),
        },
        ActionBody::PostSlack { target: SlackTarget::HeroChannel, text: "Look at 481207".into() },
        ActionBody::TmsNote { text: "PO 55821 sent".into() },
        ActionBody::SetTimer {
            timer_id: "tmr:481207:ask:eta_request:ping_0700:1".into(),
            ask_id: "ask:eta_request:ping_0700".into(),
            attempt: 1,
            fire_at: at("2026-03-02T13:31:00Z"),
        },
        ActionBody::CancelTimer { timer_id: "tmr:481207:ask:eta_request:ping_0700:1".into() },
        ActionBody::CreateHeroTask {
            title: "Call the driver".into(),
            body: "No answer after 3 tries".into(),
            urgent: true,
        },
        ActionBody::UpdateStage { stage: Stage::ToDelivery, current_stop: 2 },
        ActionBody::Noop { reason: "ok with no open ask".into() },
    ]
}

/// Actions with keys: the first takes an ask step, the rest are keyed by event.
pub fn every_action() -> Vec<Action> {
    let mut keys = ActionKeys::new("481207", "ping_0700");
    let mut bodies = every_action_body().into_iter().filter(|b| !matches!(b, ActionBody::Noop { .. }));
    if let Some(first) = bodies.next() {
        keys.step(step_ref(1), first);
    }
    for b in bodies {
        keys.by_event(b);
    }
    let mut actions = keys.into_actions();
    actions.push(Action {
        key: String::new(),
        ask: None,
        body: ActionBody::Noop { reason: "nothing to do".into() },
    });
    actions
}

pub fn step_ref(attempt: u32) -> AskStepRef {
    AskStepRef { ask_id: "ask:eta_request:ping_0700".into(), ask_type: "eta_request".into(), attempt }
}

/// A decision with every transition, a contact update, an intent and LLM usage.
pub fn full_decision() -> DecisionRecord {
    let mut actions = every_action();
    actions.retain(|a| !a.is_noop());
    DecisionRecord {
        decision_id: "dec:ping_0700".into(),
        load_id: "481207".into(),
        trigger_event_id: "ping_0700".into(),
        trigger_kind: "ping".into(),
        decided_at: at("2026-03-02T13:01:00.000321Z"),
        sop: Some(SopRef { id: "client_a".into(), version: 2 }),
        path: DecisionPath::Sop,
        transitions: vec![
            AskTransition::AskOpened {
                ask_id: "ask:eta_request:ping_0700".into(),
                ask_type: "eta_request".into(),
                target_contact: "drv".into(),
                sop: SopRef { id: "client_a".into(), version: 2 },
                opened_at: at("2026-03-02T13:01:00Z"),
                max_attempts: 2,
                stop_sequence: Some(1),
            },
            AskTransition::AskStepTaken {
                ask_id: "ask:eta_request:ping_0700".into(),
                step: 1,
                step_kind: StepKind::Attempt,
                timer: Some(TimerRef {
                    timer_id: "tmr:481207:ask:eta_request:ping_0700:1".into(),
                    fire_at: at("2026-03-02T13:31:00Z"),
                }),
            },
            AskTransition::AskStepTaken {
                ask_id: "ask:reefer_temp:x".into(),
                step: 3,
                step_kind: StepKind::Escalation,
                timer: None,
            },
            AskTransition::AskOpened {
                ask_id: "ask:reefer_temp:x".into(),
                ask_type: "reefer_temp".into(),
                target_contact: "disp".into(),
                sop: SopRef { id: "client_b".into(), version: 1 },
                opened_at: at("2026-03-02T13:01:00Z"),
                max_attempts: 3,
                stop_sequence: None,
            },
            AskTransition::AskResolved {
                ask_id: "ask:eta_request:old".into(),
                resolved_by: "email_1".into(),
                resolved_at: at("2026-03-02T13:20:00Z"),
            },
            AskTransition::AskCancelled {
                ask_id: "ask:eta_request:older".into(),
                reason: "arrived at the stop".into(),
                cancelled_at: at("2026-03-02T13:01:00Z"),
            },
        ],
        contact_updates: vec![ContactUpdate::SmsBlocked { contact_id: "drv".into(), reason: "STOP".into() }],
        actions,
        rationale: "delay risk high for the pickup; asking the driver for an ETA".into(),
        intent: Some(IntentRecord { intent: "eta_update".into(), probability: 0.93 }),
        llm_usage: vec![
            LlmUsage {
                method: "triage".into(),
                model_id: "typesafe-jev-1".into(),
                input_tokens: 812,
                output_tokens: 9,
                cost_usd: 0.00042,
                latency_ms: 180,
            },
            LlmUsage {
                method: "draft".into(),
                model_id: "deepseek-chat".into(),
                input_tokens: 1200,
                output_tokens: 80,
                cost_usd: 0.0011,
                latency_ms: 950,
            },
        ],
    }
}

/// A noop decision with nothing optional.
pub fn noop_decision() -> DecisionRecord {
    DecisionRecord {
        decision_id: "dec:sms_0720".into(),
        load_id: "481207".into(),
        trigger_event_id: "sms_0720".into(),
        trigger_kind: "sms".into(),
        decided_at: at("2026-03-02T13:20:00Z"),
        sop: None,
        path: DecisionPath::Filtered,
        transitions: vec![],
        contact_updates: vec![],
        actions: vec![Action {
            key: String::new(),
            ask: None,
            body: ActionBody::Noop { reason: "ok, no open ask".into() },
        }],
        rationale: "ok, no open ask".into(),
        intent: None,
        llm_usage: vec![],
    }
}

/// One decision per decision path.
pub fn decisions_on_every_path() -> Vec<DecisionRecord> {
    DecisionPath::ALL
        .into_iter()
        .map(|path| DecisionRecord {
            path,
            decision_id: format!("dec:{}", path.as_str()),
            trigger_event_id: path.as_str().into(),
            ..noop_decision()
        })
        .collect()
}

pub fn every_log_entry() -> Vec<LogEntry> {
    let mut entries: Vec<LogEntry> = every_event_kind().into_iter().map(LogEntry::Event).collect();
    entries.push(LogEntry::Decision(full_decision()));
    entries.push(LogEntry::Decision(noop_decision()));
    entries.extend(decisions_on_every_path().into_iter().map(LogEntry::Decision));
    entries
}

/// `PartialEq` on `DateTime<FixedOffset>` compares instants only; the offset is the stop's
/// time zone and must survive too.
pub fn appointment_offsets(entry: &LogEntry) -> Vec<String> {
    match entry {
        LogEntry::Event(InboundEvent { kind: EventKind::LoadRegistered { load }, .. }) => {
            load.stops.iter().map(|s| s.appointment.to_rfc3339()).collect()
        }
        _ => vec![],
    }
}
