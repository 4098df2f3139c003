//! Encode and decode of the hot records: an inbound SMS (Confluent-framed, every consumed
//! record) and a decision log entry (every processed event appends one).
//!
//! `cargo bench -p load-agent-benches --bench avro -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use chrono::{DateTime, Utc};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use load_agent_avro::{decode_inbound, decode_log_entry, encode_inbound, encode_log_entry};
use load_agent_domain::{
    ActionBody, ActionKeys, AskStepRef, AskTransition, DecisionPath, DecisionRecord, EventKind, InboundEvent,
    IntentRecord, LlmUsage, LogEntry, SopRef, StepKind, TimerRef,
};

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc)).unwrap_or_default()
}

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
    let ask_id = "ask:eta_request:ping_0700";
    let timer_id = "tmr:481207:ask:eta_request:ping_0700:1";
    let step = AskStepRef { ask_id: ask_id.into(), ask_type: "eta_request".into(), attempt: 1 };
    let mut keys = ActionKeys::new("481207", "ping_0700");
    keys.step(
        step.clone(),
        ActionBody::SendSms { to: "drv".into(), body: "Hi Luis, what's your ETA to Acme DC?".into() },
    );
    keys.step(
        step,
        ActionBody::SetTimer {
            timer_id: timer_id.into(),
            ask_id: ask_id.into(),
            attempt: 1,
            fire_at: at("2026-03-02T13:31:00Z"),
        },
    );
    LogEntry::Decision(DecisionRecord {
        decision_id: "dec:ping_0700".into(),
        load_id: "481207".into(),
        trigger_event_id: "ping_0700".into(),
        trigger_kind: "ping".into(),
        decided_at: at("2026-03-02T13:01:00Z"),
        sop: Some(SopRef { id: "client_a".into(), version: 1 }),
        path: DecisionPath::Sop,
        transitions: vec![
            AskTransition::AskOpened {
                ask_id: ask_id.into(),
                ask_type: "eta_request".into(),
                target_contact: "drv".into(),
                sop: SopRef { id: "client_a".into(), version: 1 },
                opened_at: at("2026-03-02T13:01:00Z"),
                max_attempts: 2,
                stop_sequence: Some(1),
            },
            AskTransition::AskStepTaken {
                ask_id: ask_id.into(),
                step: 1,
                step_kind: StepKind::Attempt,
                timer: Some(TimerRef { timer_id: timer_id.into(), fire_at: at("2026-03-02T13:31:00Z") }),
            },
        ],
        contact_updates: vec![],
        actions: keys.into_actions(),
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
    })
}

fn bench_avro(c: &mut Criterion) {
    let mut group = c.benchmark_group("avro");
    group.throughput(Throughput::Elements(1));

    let event = sms();
    let framed = encode_inbound(&event);
    group.bench_function("encode_inbound_sms", |b| b.iter(|| encode_inbound(black_box(&event))));
    group.bench_function("decode_inbound_sms", |b| b.iter(|| decode_inbound(black_box(&framed))));

    let entry = decision();
    let (id, body) = encode_log_entry(&entry);
    group.bench_function("encode_log_entry_decision", |b| b.iter(|| encode_log_entry(black_box(&entry))));
    group.bench_function("decode_log_entry_decision", |b| b.iter(|| decode_log_entry(id, black_box(&body))));
    group.finish();
}

criterion_group!(benches, bench_avro);
criterion_main!(benches);
