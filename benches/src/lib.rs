//! Criterion benchmarks for the workspace crates live in `benches/`; this library holds the
//! fixtures they share: load 481207 of ADR 0001, events, logs built by processing events the way
//! the worker does (no store), [`BenchLlm`], the LLM the decision benches run on, and
//! [`agent_append`], an append of the agent's shape for the store and relay benches.

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use load_agent_agent::{Agent, Deps, Processed, prepare_event, process_event};
use load_agent_domain::{
    ActionKind, Contact, DocumentFields, DocumentType, EventKind, InboundEvent, Language, LoadRegistered,
    LoadState, LogEntry, MessageChannel, OutcomeStatus, RiskBand, Role, Stop, StopKind, timer_fired_event_id,
    timer_id,
};
use load_agent_llm::{
    DocumentRequest, Draft, DraftRequest, ExtractedSop, LlmClient, LlmError, LlmMethod, LlmOutput, LlmResult,
    LocalTriage, Plan, PlanRequest, SopExtractionRequest, TriageRequest, TriageResult, Unconfigured,
};

/// The load every fixture is about.
pub const LOAD: &str = "481207";

/// The ask opened by the `ping_0700` high-risk ping of [`padded_log`].
pub const ETA_ASK: &str = "ask:eta_request:ping_0700";

pub fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).expect("a valid time").with_timezone(&Utc)
}

/// The registration of load 481207 for client_a: a driver (SMS), a carrier dispatcher (email)
/// and a broker (Slack); a pickup with a PO and a delivery.
pub fn registration() -> EventKind {
    EventKind::LoadRegistered { load: registered_load(LOAD) }
}

/// The `LoadRegistered` payload of [`registration`], for any load id.
pub fn registered_load(load_id: &str) -> LoadRegistered {
    let t = |s: &str| DateTime::parse_from_rfc3339(s).expect("a valid time");
    let contact = |id: &str, role, name: &str| Contact {
        id: id.into(),
        role,
        name: name.into(),
        phone: None,
        email: None,
        slack: None,
        language: Language::En,
    };
    LoadRegistered {
        load_id: load_id.into(),
        client: "client_a".into(),
        sop_version: None,
        contacts: vec![
            Contact { phone: Some("+13125550111".into()), ..contact("drv", Role::Driver, "Luis") },
            Contact {
                email: Some("dana@carrier.example".into()),
                ..contact("disp", Role::CarrierDispatcher, "Dana")
            },
            Contact { slack: Some("#acme-loads".into()), ..contact("brk", Role::Broker, "Acme desk") },
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
    }
}

pub fn event(id: &str, when: DateTime<Utc>, kind: EventKind) -> InboundEvent {
    InboundEvent { event_id: id.into(), load_id: LOAD.into(), occurred_at: when, kind }
}

pub fn ping(stop: u32, band: RiskBand, when: DateTime<Utc>) -> EventKind {
    EventKind::Ping { stop, delay_risk: band, recorded_at: when, lat: None, lon: None }
}

pub fn sms(from: &str, text: &str) -> EventKind {
    EventKind::Sms { from: from.into(), text: text.into() }
}

/// The timer of `ask`'s `attempt` firing at `now`.
pub fn timer_fired(ask: &str, attempt: u32, now: DateTime<Utc>) -> InboundEvent {
    let tid = timer_id(LOAD, ask, attempt);
    event(
        &timer_fired_event_id(&tid),
        now,
        EventKind::TimerFired { timer_id: tid.clone(), ask_id: ask.into(), attempt, fire_at: now },
    )
}

/// The outcome of the first ETA SMS of [`ETA_ASK`].
pub fn sms_outcome(id: &str, now: DateTime<Utc>, status: OutcomeStatus) -> InboundEvent {
    event(
        id,
        now,
        EventKind::ActionOutcome {
            idempotency_key: format!("{LOAD}/{ETA_ASK}/1/send_sms"),
            status,
            action_kind: ActionKind::SendSms,
            contact_id: Some("drv".into()),
            hero_channel: false,
            reason: (status != OutcomeStatus::Delivered).then(|| "carrier rejected the number".into()),
        },
    )
}

/// A proof of delivery sent by the driver by SMS, its fields already extracted upstream.
pub fn pod_attachment(id: &str, now: DateTime<Utc>, signed: bool) -> InboundEvent {
    event(
        id,
        now,
        EventKind::Attachment {
            from: "drv".into(),
            channel: MessageChannel::Sms,
            filename: "pod.jpg".into(),
            content_type: "image/jpeg".into(),
            content_ref: None,
            extracted: Some(DocumentFields {
                document_type: DocumentType::Pod,
                signed: Some(signed),
                ..Default::default()
            }),
        },
    )
}

/// The LLM of the decision benches: triage on the local model (as [`LocalTriage`], the embedded
/// default), a document reader that returns the fields the event carries (as `FakeLlm` does in
/// the scenario evals), and nothing else configured, so the planner falls back to a Hero task.
/// Unlike `FakeLlm` it records no request, so a long bench run does not grow a request list.
#[derive(Debug, Clone)]
pub struct BenchLlm {
    local: LocalTriage,
}

impl BenchLlm {
    pub fn new() -> Self {
        BenchLlm { local: LocalTriage::embedded() }
    }
}

impl Default for BenchLlm {
    fn default() -> Self {
        BenchLlm::new()
    }
}

#[async_trait]
impl LlmClient for BenchLlm {
    async fn triage(&self, req: &TriageRequest) -> LlmResult<TriageResult> {
        Ok(self.local.classify(req))
    }
    async fn draft(&self, req: &DraftRequest) -> LlmResult<Draft> {
        Unconfigured.draft(req).await
    }
    async fn extract_document(&self, req: &DocumentRequest) -> LlmResult<DocumentFields> {
        match &req.extracted {
            Some(fields) => Ok(LlmOutput { value: fields.clone(), usage: Default::default() }),
            None => Err(LlmError::unavailable_final(LlmMethod::ExtractDocument, "bench: no reader")),
        }
    }
    async fn plan(&self, req: &PlanRequest) -> LlmResult<Plan> {
        Unconfigured.plan(req).await
    }
    async fn extract_sop(&self, req: &SopExtractionRequest) -> LlmResult<ExtractedSop> {
        Unconfigured.extract_sop(req).await
    }
}

/// A load's log and the state projected from it.
#[derive(Debug, Clone)]
pub struct Log {
    pub state: LoadState,
    pub entries: Vec<LogEntry>,
}

/// Processes `events` in order as the worker does (prepare, decide, apply `[event, decision]`),
/// without a store, and returns the log.
pub fn build(agent: &Agent, llm: &dyn LlmClient, events: Vec<InboundEvent>) -> Log {
    let mut log = Log { state: LoadState::new(LOAD), entries: Vec::new() };
    for e in events {
        let e = prepare_event(&log.state, e, agent).expect("a valid event");
        let deps = Deps { agent, llm, now: e.occurred_at };
        if let Processed::Decided(d) = futures::executor::block_on(process_event(&log.state, &e, &deps)) {
            let pair = [LogEntry::Event(e), LogEntry::Decision(d)];
            log.state.apply_all(&pair);
            log.entries.extend(pair);
        }
    }
    log
}

/// A load with an open ETA ask for the pickup ([`ETA_ASK`], its timer for attempt 1 armed),
/// padded to `entries` log entries (at least 4; even) with delay-risk changes for the delivery
/// and acknowledgements: history that does not matter to the next decision.
pub fn padded_log(agent: &Agent, llm: &dyn LlmClient, entries: usize) -> Log {
    let start = at("2026-03-02T12:00:00Z");
    let mut events = vec![event("reg", start, registration())];
    let padding = entries.saturating_sub(4) / 2;
    for i in 0..padding {
        let when = start + Duration::seconds(i as i64);
        let kind = if i % 2 == 0 {
            ping(2, if i % 4 == 0 { RiskBand::Medium } else { RiskBand::Low }, when)
        } else {
            sms("drv", "ok")
        };
        events.push(event(&format!("pad{i}"), when, kind));
    }
    let t = start + Duration::seconds(padding as i64 + 1);
    events.push(event("ping_0700", t, ping(1, RiskBand::High, t)));
    build(agent, llm, events)
}

/// A log of `entries` entries (rounded down to even) that exercises every part of the fold: after
/// the registration, each cycle of five events opens an ETA ask on a high-risk ping (an SMS and
/// a timer), fires its timer (the second attempt), resolves it with an ETA by SMS (cancelling the
/// timer), lowers the band again, and logs an acknowledgement.
pub fn varied_log(agent: &Agent, llm: &dyn LlmClient, entries: usize) -> Log {
    let start = at("2026-03-02T12:00:00Z");
    let mut events = vec![event("reg", start, registration())];
    let wanted = entries.saturating_sub(2) / 2;
    for c in 0.. {
        if events.len() > wanted {
            break;
        }
        let t0 = start + Duration::minutes(60 * c + 1);
        let ping_id = format!("ping_{c}");
        let ask = format!("ask:eta_request:{ping_id}");
        let timer = timer_id(LOAD, &ask, 1);
        let fired = t0 + Duration::minutes(30);
        let low = fired + Duration::minutes(10);
        events.extend([
            event(&ping_id, t0, ping(1, RiskBand::High, t0)),
            event(
                &timer_fired_event_id(&timer),
                fired,
                EventKind::TimerFired { timer_id: timer.clone(), ask_id: ask, attempt: 1, fire_at: fired },
            ),
            event(&format!("eta_{c}"), fired + Duration::minutes(5), sms("drv", "eta 2:30 pm")),
            event(&format!("low_{c}"), low, ping(1, RiskBand::Low, low)),
            event(&format!("ack_{c}"), low + Duration::minutes(1), sms("drv", "ok thanks")),
        ]);
    }
    events.truncate(wanted + 1);
    build(agent, llm, events)
}

// ---------------------------------------------------------------------------------------------
// Store and relay benches: appends of the agent's shape.

/// The time the store and relay benches start from: 2026-03-02 13:00 UTC.
pub fn base_time() -> DateTime<Utc> {
    use chrono::TimeZone;
    Utc.with_ymd_and_hms(2026, 3, 2, 13, 0, 0).single().expect("a valid time")
}

/// One append of the agent's shape: an inbound SMS (about 300 bytes of text), its decision
/// (taking a step of an ask: an SMS and a timer, about 700 bytes encoded) and the decision's
/// two outbox rows. `n` numbers the append within its load; the log is at `version` before it.
pub fn agent_append(
    load: &str,
    n: u64,
    version: u64,
) -> (Vec<LogEntry>, Vec<load_agent_store::NewOutboxRow>) {
    use chrono::TimeDelta;
    use load_agent_domain::*;
    let at = base_time() + TimeDelta::seconds(i64::try_from(n).unwrap_or(0) * 60 + 60);
    let event_id = format!("sms_{n}");
    let inbound = LogEntry::Event(InboundEvent {
        event_id: event_id.clone(),
        load_id: load.into(),
        occurred_at: at,
        kind: EventKind::Sms {
            from: "drv".into(),
            text: format!(
                "{n}: {}",
                "running about twenty minutes late, traffic on I-80 near the Joliet exit; ".repeat(4)
            ),
        },
    });
    let ask_id = ask_id_for(&event_id, ask_types::ETA_REQUEST);
    let step = AskStepRef { ask_id: ask_id.clone(), ask_type: ask_types::ETA_REQUEST.into(), attempt: 1 };
    let tid = timer_id(load, &ask_id, 1);
    let fire_at = at + TimeDelta::minutes(30);
    let mut keys = ActionKeys::new(load, &event_id);
    keys.step(
        step.clone(),
        ActionBody::SendSms {
            to: "drv".into(),
            body: "Hi Luis, what is your ETA to Acme DC? Reply with a time.".into(),
        },
    );
    keys.step(
        step,
        ActionBody::SetTimer { timer_id: tid.clone(), ask_id: ask_id.clone(), attempt: 1, fire_at },
    );
    let sop = SopRef { id: "client_a".into(), version: 1 };
    let decision = DecisionRecord {
        decision_id: decision_id_for(&event_id),
        load_id: load.into(),
        trigger_event_id: event_id.clone(),
        trigger_kind: "sms".into(),
        decided_at: at + TimeDelta::seconds(1),
        sop: Some(sop.clone()),
        path: DecisionPath::Triage,
        transitions: vec![
            AskTransition::AskOpened {
                ask_id: ask_id.clone(),
                ask_type: ask_types::ETA_REQUEST.into(),
                target_contact: "drv".into(),
                sop,
                opened_at: at,
                max_attempts: 2,
                stop_sequence: Some(1),
            },
            AskTransition::AskStepTaken {
                ask_id,
                step: 1,
                step_kind: StepKind::Attempt,
                timer: Some(TimerRef { timer_id: tid, fire_at }),
            },
        ],
        contact_updates: vec![],
        actions: keys.into_actions(),
        rationale:
            "The driver reports a delay without an ETA; client_a's SOP asks for one and waits 30 minutes."
                .into(),
        intent: Some(IntentRecord { intent: "delay_report".into(), probability: 0.91 }),
        llm_usage: vec![LlmUsage {
            method: "triage".into(),
            model_id: "typesafe-decision-1".into(),
            input_tokens: 640,
            output_tokens: 12,
            cost_usd: 0.0004,
            latency_ms: 38,
        }],
    };
    let rows = load_agent_runtime::outbox_rows(&decision, version + 2);
    (vec![inbound, LogEntry::Decision(decision)], rows)
}

/// Where the Postgres benches run: `BENCH_DATABASE_URL`, else `DATABASE_URL`, else
/// `postgres://postgres@127.0.0.1:5432/bench`.
pub fn bench_database_url() -> String {
    std::env::var("BENCH_DATABASE_URL")
        .or_else(|_| std::env::var("DATABASE_URL"))
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/bench".to_owned())
}

/// Commits `rows` due outbox rows (an [`agent_append`] per load: a `send_sms` and a `set_timer`,
/// both heads of their queues) with batched appends, on loads named `{prefix}-{run}-{i}`;
/// untimed preparation.
pub async fn prepare_rows(stores: &load_agent_store::Stores, rows: u64, prefix: &str) {
    use load_agent_store::AppendRequest;
    let run = uuid::Uuid::new_v4().simple().to_string();
    let loads = rows.div_ceil(2);
    let requests: Vec<AppendRequest> = (0..loads)
        .map(|i| {
            let load = format!("{prefix}-{run}-{i}");
            let (entries, mut outbox) = agent_append(&load, 0, 0);
            if i == loads - 1 && rows % 2 == 1 {
                outbox.truncate(1);
            }
            AppendRequest { load_id: load, entries, expected_version: 0, outbox, summary: None }
        })
        .collect();
    for chunk in requests.chunks(50) {
        for result in stores.events.append_batch(chunk.to_vec()).await {
            result.expect("prepare outbox rows");
        }
    }
}
