//! `process_event` on a cached state, for every event path, on a 10-entry and a 5,000-entry log:
//! the cost of a decision must not grow with history (issue 4). Also `detect_triggers`.
//! `Throughput::Elements(1)` per event.
//!
//! The state is projected once and held in memory, as the worker's snapshot cache holds it;
//! each case's event is checked with `prepare_event` outside the timing, as the worker does
//! before deciding. Triage runs on the local model (no network); the document reader returns
//! the fields the event carries; the planner is not configured (the Hero fallback).
//! Before timing, each case is decided once and its path and actions are checked, so a case
//! measures the path its name says.
//!
//! `cargo bench -p load-agent-benches --bench agent -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use chrono::{DateTime, Utc};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use load_agent_agent::{Agent, Deps, Processed, prepare_event, process_event};
use load_agent_domain::{
    DecisionPath, EventKind, InboundEvent, LoadState, OutcomeStatus, RiskBand, StopStatusKind, Tracking,
    detect_triggers,
};
use load_agent_testkit::decide::{BenchLlm, ETA_ASK, padded_log, pod_attachment, registration, sms_outcome};
use load_agent_testkit::events::{event, ping, sms, timer_fired};
use load_agent_testkit::{LOAD, at};

/// One event path: the event, and the path and effective action kinds its decision must have.
struct Case {
    name: &'static str,
    event: InboundEvent,
    path: DecisionPath,
    kinds: &'static [&'static str],
}

fn case(name: &'static str, event: InboundEvent, path: DecisionPath, kinds: &'static [&'static str]) -> Case {
    Case { name, event, path, kinds }
}

/// Every path on the padded load (an open ETA ask for the pickup, the delivery at low or
/// medium risk).
fn cases(state: &LoadState, now: DateTime<Utc>) -> Vec<Case> {
    use DecisionPath::*;
    let band = state.tracking.risk(2);
    let status =
        |id: &str, status| event(LOAD, id, now, EventKind::StopStatus { stop: 1, status, source: None });
    vec![
        case("ping_filtered_same_band", event(LOAD, "b-p1", now, ping(2, band, now)), Filtered, &[]),
        case(
            "ping_band_change_asks",
            event(LOAD, "b-p2", now, ping(2, RiskBand::High, now)),
            Sop,
            &["send_sms", "set_timer"],
        ),
        case(
            "sms_eta",
            event(LOAD, "b-s1", now, sms("drv", "eta 2:30 pm")),
            Triage,
            &["cancel_timer", "tms_note"],
        ),
        case(
            "sms_question_po",
            event(LOAD, "b-s2", now, sms("drv", "whats the po# for this one")),
            Triage,
            &["send_sms"],
        ),
        case("sms_ack", event(LOAD, "b-s3", now, sms("drv", "ok thanks")), Filtered, &[]),
        case(
            "sms_problem",
            event(LOAD, "b-s4", now, sms("drv", "truck broke down on i80 waiting on tow")),
            Triage,
            &["create_hero_task", "tms_note"],
        ),
        case(
            "sms_other_hero_fallback",
            event(LOAD, "b-s5", now, sms("drv", "can you guys send me the rate con again, lost it")),
            HeroFallback,
            &["create_hero_task"],
        ),
        case(
            "email_eta",
            event(
                LOAD,
                "b-e1",
                now,
                EventKind::Email {
                    from: "disp".into(),
                    subject: "Re: load 481207".into(),
                    text: "Driver says ETA to Acme DC is 2:30 pm".into(),
                    thread: None,
                },
            ),
            Triage,
            &["cancel_timer", "tms_note"],
        ),
        case(
            "slack_question",
            event(
                LOAD,
                "b-k1",
                now,
                EventKind::Slack { from: "brk".into(), text: "what is the delivery address".into() },
            ),
            Triage,
            &["post_slack"],
        ),
        case("timer_current_step", timer_fired(LOAD, ETA_ASK, 1, now), Sop, &["send_sms", "set_timer"]),
        case("timer_stale", timer_fired(LOAD, ETA_ASK, 5, now), Filtered, &[]),
        case("outcome_delivered", sms_outcome("b-o1", now, OutcomeStatus::Delivered), Filtered, &[]),
        case(
            "outcome_failed",
            sms_outcome("b-o2", now, OutcomeStatus::FailedPermanent),
            Sop,
            &["create_hero_task"],
        ),
        case(
            "status_arrived",
            status("b-t1", StopStatusKind::Arrived),
            Sop,
            &["update_stage", "cancel_timer"],
        ),
        case("status_departed", status("b-t2", StopStatusKind::Departed), Sop, &["update_stage"]),
        case("attachment_signed_pod", pod_attachment("b-a1", now, true), Sop, &["tms_note"]),
        case(
            "attachment_unsigned_pod",
            pod_attachment("b-a2", now, false),
            Sop,
            &["tms_note", "create_hero_task"],
        ),
    ]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().expect("a tokio runtime")
}

/// Decides `case` once and checks its path and actions, returning the prepared event.
fn checked(rt: &tokio::runtime::Runtime, state: &LoadState, case: Case, deps: &Deps<'_>) -> InboundEvent {
    let ev = prepare_event(state, case.event, deps.agent).expect("a valid event");
    let Processed::Decided(d) = rt.block_on(process_event(state, &ev, deps)) else {
        panic!("{}: already processed", case.name);
    };
    let kinds: Vec<&str> = d.effective_actions().map(|a| a.kind().as_str()).collect();
    assert_eq!((d.path, kinds.as_slice()), (case.path, case.kinds), "{}: {}", case.name, d.rationale);
    ev
}

fn decide(c: &mut Criterion) {
    let rt = runtime();
    let agent = Agent::embedded().expect("embedded SOPs");
    let llm = BenchLlm::new();
    let now = at("2026-03-03T00:00:00Z");
    let deps = Deps { agent: &agent, llm: &llm, now };
    let mut group = c.benchmark_group("process_event");
    group.throughput(Throughput::Elements(1));

    let fresh = LoadState::new(LOAD);
    let reg =
        case("registration", event(LOAD, "b-reg", now, registration(LOAD)), DecisionPath::Filtered, &[]);
    let ev = checked(&rt, &fresh, reg, &deps);
    group.bench_with_input(BenchmarkId::new("registration", "0_entries"), &ev, |b, ev| {
        b.to_async(&rt).iter(|| process_event(black_box(&fresh), ev, &deps))
    });

    for entries in [10usize, 5_000] {
        let state = padded_log(&agent, &llm, entries).state;
        assert_eq!(state.version, entries as u64);
        for case in cases(&state, now) {
            let name = case.name;
            let ev = checked(&rt, &state, case, &deps);
            group.bench_with_input(
                BenchmarkId::new(name, format!("{}_entries", state.version)),
                &ev,
                |b, ev| b.to_async(&rt).iter(|| process_event(black_box(&state), ev, &deps)),
            );
        }
    }
    group.finish();

    let mut group = c.benchmark_group("detect_triggers");
    group.throughput(Throughput::Elements(1));
    let state = padded_log(&agent, &llm, 10).state;
    let before: Tracking = state.tracking.clone();
    let mut after = before.clone();
    if let Some(load) = &state.load {
        after.apply_event(load, &ping(2, RiskBand::High, now));
    }
    assert!(!detect_triggers(&before, &after).is_empty(), "a band change is a trigger");
    group.bench_function("band_change", |b| {
        b.iter(|| black_box(detect_triggers(black_box(&before), black_box(&after))))
    });
    group.bench_function("no_change", |b| {
        b.iter(|| black_box(detect_triggers(black_box(&before), black_box(&before))))
    });
    group.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
