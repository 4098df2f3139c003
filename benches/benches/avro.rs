//! Encode and decode of the hot records, `Throughput::Elements(1)` per record: an inbound event
//! of every kind (Confluent-framed; every consumed record), log entries (an event and a decision
//! are appended per processed event, and decoded on every read) and action commands (one per
//! outbox row the relay publishes). Each record is checked to round-trip before timing.
//!
//! `cargo bench -p load-agent-benches --bench avro -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use load_agent_avro::{
    Addresses, decode_action_command, decode_inbound, decode_log_entry, encode_action_command,
    encode_inbound, encode_log_entry,
};
use load_agent_domain::{
    Action, ActionBody, DecisionDraft, DecisionPath, DecisionRecord, EmailThread, EventKind, InboundEvent,
    IntentRecord, LlmUsage, LogEntry, OutcomeStatus, RiskBand, SopRef, StopStatusKind,
};
use load_agent_testkit::ask::eta_ask_opened;
use load_agent_testkit::decide::{ETA_ASK, pod_attachment, registration, sms_outcome};
use load_agent_testkit::events::{event, ping, timer_fired};
use load_agent_testkit::{LOAD, at};

fn sms() -> InboundEvent {
    InboundEvent {
        event_id: "sms_0713".into(),
        load_id: "481207".into(),
        occurred_at: at("2026-03-02T13:13:00Z"),
        kind: EventKind::Sms { from: "+13125550111".into(), text: "What's the PO number?".into() },
    }
}

/// The 07:01 decision of ADR 0001: open the ETA ask, take step 1, SMS the driver, arm a timer.
fn decision() -> LogEntry {
    LogEntry::Decision(DecisionRecord {
        trigger_kind: "ping".into(),
        path: DecisionPath::Sop,
        rationale: "delay risk high for the pickup; asking the driver for an ETA".into(),
        intent: Some(IntentRecord { intent: "eta_update".into(), probability: 0.93 }),
        llm_usage: vec![LlmUsage {
            method: "draft".into(),
            model_id: "deepseek-chat".into(),
            input_tokens: 1200,
            output_tokens: 80,
            cost_usd: 0.0011,
            latency_ms: 950,
        }],
        ..eta_ask_opened(
            LOAD,
            "ping_0700",
            at("2026-03-02T13:01:00Z"),
            SopRef { id: "client_a".into(), version: 1 },
            "Hi Luis, what's your ETA to Acme DC?",
        )
    })
}

/// A filtered noop: the decision of most pings and acknowledgements.
fn filtered_decision() -> LogEntry {
    let record = DecisionRecord::new(DecisionDraft {
        load_id: "481207".into(),
        trigger_event_id: "ping_0705".into(),
        trigger_kind: "ping".into(),
        decided_at: at("2026-03-02T13:05:00Z"),
        sop: Some(SopRef { id: "client_a".into(), version: 1 }),
        path: DecisionPath::Filtered,
        transitions: vec![],
        contact_updates: vec![],
        actions: vec![],
        rationale: "delay risk unchanged for stop 1".into(),
        intent: None,
        llm_usage: vec![],
    });
    LogEntry::Decision(record.expect("a valid noop decision"))
}

/// One inbound event of every kind (the registration is the largest record).
fn inbound_events() -> Vec<(&'static str, InboundEvent)> {
    let now = at("2026-03-02T13:13:00Z");
    vec![
        ("load_registered", event(LOAD, "reg", now, registration(LOAD))),
        ("sms", sms()),
        (
            "email",
            event(
                LOAD,
                "email_1",
                now,
                EventKind::Email {
                    from: "dana@carrier.example".into(),
                    subject: "Re: load 481207".into(),
                    text: "Driver says ETA to Acme DC is 2:30 pm. Thanks, Dana".into(),
                    thread: Some(EmailThread::Main),
                },
            ),
        ),
        (
            "slack",
            event(LOAD, "slack_1", now, EventKind::Slack { from: "brk".into(), text: "any update?".into() }),
        ),
        ("ping", event(LOAD, "ping_0700", now, ping(1, RiskBand::High, now))),
        ("timer_fired", timer_fired(LOAD, ETA_ASK, 1, now)),
        (
            "stop_status",
            event(
                LOAD,
                "arr_1",
                now,
                EventKind::StopStatus {
                    stop: 1,
                    status: StopStatusKind::Arrived,
                    source: Some("tracking".into()),
                },
            ),
        ),
        ("attachment", pod_attachment("doc_1", now, true)),
        ("action_outcome", sms_outcome("outcome_1", now, OutcomeStatus::FailedPermanent)),
    ]
}

/// An SMS, a timer and an urgent Hero task: the action commands the relay publishes most.
fn actions() -> Vec<(&'static str, Action, Addresses)> {
    let LogEntry::Decision(d) = decision() else { unreachable!("decision() is a decision") };
    let phone = Addresses { phone: Some("+13125550111".into()), ..Addresses::NONE };
    let hero = Action {
        key: "481207/evt:outcome_1/create_hero_task".into(),
        ask: None,
        body: ActionBody::CreateHeroTask {
            title: "Load 481207: SMS to the driver failed".into(),
            body: "The SMS to Luis (+13125550111) failed permanently: carrier rejected the number. \
                   Call the driver for an ETA to Acme DC."
                .into(),
            urgent: true,
        },
    };
    vec![
        ("send_sms", d.actions[0].clone(), phone),
        ("set_timer", d.actions[1].clone(), Addresses::NONE),
        ("create_hero_task", hero, Addresses::NONE),
    ]
}

fn bench_avro(c: &mut Criterion) {
    let mut group = c.benchmark_group("avro");
    group.throughput(Throughput::Elements(1));

    for (kind, event) in inbound_events() {
        let framed = encode_inbound(&event);
        assert_eq!(decode_inbound(&framed).expect("decodes"), event);
        group.bench_with_input(BenchmarkId::new("encode_inbound", kind), &event, |b, e| {
            b.iter(|| encode_inbound(black_box(e)))
        });
        group.bench_with_input(BenchmarkId::new("decode_inbound", kind), &framed, |b, bytes| {
            b.iter(|| decode_inbound(black_box(bytes)))
        });
    }

    let entries = [
        (
            "event_load_registered",
            LogEntry::Event(event(LOAD, "reg", at("2026-03-02T12:50:00Z"), registration(LOAD))),
        ),
        ("event_sms", LogEntry::Event(sms())),
        ("decision", decision()),
        ("decision_filtered", filtered_decision()),
    ];
    for (kind, entry) in entries {
        let (id, body) = encode_log_entry(&entry);
        assert_eq!(decode_log_entry(id, &body).expect("decodes"), entry);
        group.bench_with_input(BenchmarkId::new("encode_log_entry", kind), &entry, |b, e| {
            b.iter(|| encode_log_entry(black_box(e)))
        });
        group.bench_with_input(BenchmarkId::new("decode_log_entry", kind), &body, |b, body| {
            b.iter(|| decode_log_entry(id, black_box(body)))
        });
    }

    for (kind, action, addresses) in actions() {
        let bytes = encode_action_command(&action, "481207", 7, &addresses);
        assert_eq!(decode_action_command(&bytes).expect("decodes").to_action(), action);
        group.bench_with_input(BenchmarkId::new("encode_action_command", kind), &action, |b, a| {
            b.iter(|| encode_action_command(black_box(a), "481207", 7, black_box(&addresses)))
        });
        group.bench_with_input(BenchmarkId::new("decode_action_command", kind), &bytes, |b, bytes| {
            b.iter(|| decode_action_command(black_box(bytes)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_avro);
criterion_main!(benches);
