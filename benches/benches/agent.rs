//! `process_event` on a cached state, per path, and for a 10-entry and a 5,000-entry log: the
//! cost of a decision must not grow with history (issue 4). `Throughput::Elements(1)` per event.

use std::hint::black_box;

use chrono::{DateTime, Duration, Utc};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use load_agent_agent::{Agent, Deps, Processed, prepare_event, process_event};
use load_agent_domain::{
    Contact, EventKind, InboundEvent, Language, LoadRegistered, LoadState, LogEntry, RiskBand, Role, Stop,
    StopKind, Tracking, detect_triggers, timer_fired_event_id, timer_id,
};
use load_agent_llm::FakeLlm;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).expect("time").with_timezone(&Utc)
}

fn registration() -> EventKind {
    let t = |s: &str| DateTime::parse_from_rfc3339(s).expect("time");
    let contact = |id: &str, role, name: &str, phone: Option<&str>, email: Option<&str>| Contact {
        id: id.into(),
        role,
        name: name.into(),
        phone: phone.map(Into::into),
        email: email.map(Into::into),
        slack: None,
        language: Language::En,
    };
    EventKind::LoadRegistered {
        load: LoadRegistered {
            load_id: "481207".into(),
            client: "client_a".into(),
            sop_version: None,
            contacts: vec![
                contact("drv", Role::Driver, "Luis", Some("+13125550111"), None),
                contact("disp", Role::CarrierDispatcher, "Dana", None, Some("dana@carrier.example")),
            ],
            stops: vec![
                Stop {
                    sequence: 1,
                    kind: StopKind::Pickup,
                    name: "Acme DC".into(),
                    address: "1 Dock Rd, Joliet, IL".into(),
                    appointment: t("2026-03-02T08:00:00-06:00"),
                    po_numbers: vec!["55821".into()],
                    reference: None,
                },
                Stop {
                    sequence: 2,
                    kind: StopKind::Delivery,
                    name: "Store 88".into(),
                    address: "88 Main St, Dayton, OH".into(),
                    appointment: t("2026-03-03T16:00:00-05:00"),
                    po_numbers: vec![],
                    reference: None,
                },
            ],
            reefer: None,
        },
    }
}

fn event(id: &str, when: DateTime<Utc>, kind: EventKind) -> InboundEvent {
    InboundEvent { event_id: id.into(), load_id: "481207".into(), occurred_at: when, kind }
}

fn ping(stop: u32, band: RiskBand, when: DateTime<Utc>) -> EventKind {
    EventKind::Ping { stop, delay_risk: band, recorded_at: when, lat: None, lon: None }
}

/// Processes events as the worker does (no store) and returns the state.
fn build(agent: &Agent, llm: &FakeLlm, events: Vec<InboundEvent>) -> LoadState {
    let mut state = LoadState::new("481207");
    for e in events {
        let e = prepare_event(&state, e, agent).expect("valid");
        let deps = Deps { agent, llm, now: e.occurred_at };
        if let Processed::Decided(d) = futures::executor::block_on(process_event(&state, &e, &deps)) {
            state.apply_all(&[LogEntry::Event(e), LogEntry::Decision(d)]);
        }
    }
    state
}

/// A load with an open ETA ask for the pickup, padded to about `entries` log entries with
/// band changes for the delivery and acknowledgements (history that does not matter now).
fn state_with(agent: &Agent, llm: &FakeLlm, entries: usize) -> LoadState {
    let start = at("2026-03-02T12:00:00Z");
    let mut events = vec![event("reg", start, registration())];
    let padding = entries.saturating_sub(4) / 2;
    for i in 0..padding {
        let when = start + Duration::seconds(i as i64);
        let kind = if i % 2 == 0 {
            ping(2, if i % 4 == 0 { RiskBand::Medium } else { RiskBand::Low }, when)
        } else {
            EventKind::Sms { from: "drv".into(), text: "ok".into() }
        };
        events.push(event(&format!("pad{i}"), when, kind));
    }
    let t = start + Duration::seconds(padding as i64 + 1);
    events.push(event("ping_0700", t, ping(1, RiskBand::High, t)));
    build(agent, llm, events)
}

fn decide(c: &mut Criterion) {
    let agent = Agent::embedded().expect("embedded SOPs");
    let llm = FakeLlm::new();
    let now = at("2026-03-03T00:00:00Z");
    let ask = "ask:eta_request:ping_0700";
    let mut group = c.benchmark_group("process_event");
    group.throughput(Throughput::Elements(1));
    for entries in [10usize, 5_000] {
        let state = state_with(&agent, &llm, entries);
        let band = state.tracking.risk(2);
        let cases = [
            ("filtered_ping", event("p-bench", now, ping(2, band, now))),
            (
                "sms_eta",
                event("s-bench", now, EventKind::Sms { from: "drv".into(), text: "eta 2:30 pm".into() }),
            ),
            (
                "sms_question_po",
                event(
                    "q-bench",
                    now,
                    EventKind::Sms { from: "drv".into(), text: "whats the po# for this one".into() },
                ),
            ),
            ("timer_step", {
                let tid = timer_id("481207", ask, 1);
                event(
                    &timer_fired_event_id(&tid),
                    now,
                    EventKind::TimerFired {
                        timer_id: tid.clone(),
                        ask_id: ask.into(),
                        attempt: 1,
                        fire_at: now,
                    },
                )
            }),
        ];
        for (name, ev) in cases {
            group.bench_with_input(
                BenchmarkId::new(name, format!("{}_entries", state.version)),
                &ev,
                |b, ev| {
                    b.iter(|| {
                        let deps = Deps { agent: &agent, llm: &llm, now };
                        black_box(futures::executor::block_on(process_event(black_box(&state), ev, &deps)))
                    })
                },
            );
        }
    }
    group.finish();

    let mut group = c.benchmark_group("detect_triggers");
    group.throughput(Throughput::Elements(1));
    let state = state_with(&agent, &llm, 10);
    let before: Tracking = state.tracking.clone();
    let mut after = before.clone();
    if let Some(load) = &state.load {
        after.apply_event(load, &ping(2, RiskBand::High, now));
    }
    group.bench_function("band_change", |b| {
        b.iter(|| black_box(detect_triggers(black_box(&before), black_box(&after))))
    });
    group.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
