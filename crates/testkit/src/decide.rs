//! Decisions without a store: events are prepared, decided and applied `[event, decision]` to a
//! log the way the worker does. [`Given`] is the given/when/then harness of the agent's tests;
//! [`build`], [`padded_log`] and [`varied_log`] make the logs the benches decide and fold over.

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use load_agent_agent::{Agent, Deps, Processed, prepare_event, process_event};
use load_agent_domain::{
    ActionBody, ActionKind, DecisionRecord, DocumentFields, DocumentType, EventKind, InboundEvent,
    LoadRegistered, LoadState, LogEntry, MessageChannel, OutcomeStatus, RiskBand, StopStatusKind,
    timer_fired_event_id, timer_id,
};
use load_agent_llm::{
    DocumentRequest, Draft, DraftRequest, ExtractedSop, FakeLlm, LlmClient, LlmError, LlmMethod, LlmOutput,
    LlmResult, LocalTriage, Plan, PlanRequest, SopExtractionRequest, TriageRequest, TriageResult,
    Unconfigured,
};

use crate::events::{event, ping, sms, timer_fired};
use crate::load::{LOAD, broker, dispatcher, driver, sample_load};
use crate::{at, events};

/// The ask opened by the `ping_0700` high-risk ping of [`padded_log`].
pub const ETA_ASK: &str = "ask:eta_request:ping_0700";

/// Prepares `event` against `state`, decides it and, when decided, applies `[event, decision]`
/// to `state` and `log`: one step of the worker, without a store.
pub async fn decide(
    agent: &Agent,
    llm: &dyn LlmClient,
    state: &mut LoadState,
    log: &mut Vec<LogEntry>,
    event: InboundEvent,
) -> Processed {
    let now = event.occurred_at;
    let event = prepare_event(state, event, agent).expect("a valid event");
    let deps = Deps { agent, llm, now };
    let out = process_event(state, &event, &deps).await;
    if let Processed::Decided(d) = &out {
        let entries = [LogEntry::Event(event), LogEntry::Decision(d.clone())];
        state.apply_all(&entries);
        log.extend(entries);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Given / when / then (the agent's tests).

/// The load of the agent's tests: [`sample_load`] for `client` with the driver's full name, the
/// broker's desk as a third contact, and a reefer when asked.
pub fn agent_load(client: &str, reefer: bool) -> LoadRegistered {
    LoadRegistered {
        client: client.into(),
        contacts: vec![driver("Luis Ortega"), dispatcher(), broker()],
        reefer: reefer.then_some(load_agent_domain::Reefer { set_point_f: 34.0, tolerance_f: 2.0 }),
        ..sample_load(LOAD)
    }
}

/// A load under test: its log and state, processed as the worker would (no store), on a
/// [`FakeLlm`] (local triage; script the planner or the document reader on `llm`).
pub struct Given {
    pub agent: Agent,
    pub llm: FakeLlm,
    pub state: LoadState,
    pub log: Vec<LogEntry>,
}

impl Given {
    pub async fn registered(reg: LoadRegistered) -> Self {
        let agent = Agent::embedded().expect("embedded SOPs");
        let mut g = Given { agent, llm: FakeLlm::new(), state: LoadState::new(LOAD), log: vec![] };
        g.when("2026-03-02T12:50:00Z", "reg", EventKind::LoadRegistered { load: reg }).await;
        g
    }

    pub async fn client_a() -> Self {
        Self::registered(agent_load("client_a", false)).await
    }

    pub async fn client_b() -> Self {
        Self::registered(agent_load("client_b", true)).await
    }

    /// Processes an event at `now` and applies it and its decision to the log.
    pub async fn when(&mut self, now: &str, id: &str, kind: EventKind) -> DecisionRecord {
        match self.process(now, id, kind).await {
            Processed::Decided(d) => d,
            Processed::AlreadyProcessed => panic!("{id} was already processed"),
        }
    }

    pub async fn process(&mut self, now: &str, id: &str, kind: EventKind) -> Processed {
        let e = event(LOAD, id, at(now), kind);
        decide(&self.agent, &self.llm, &mut self.state, &mut self.log, e).await
    }

    pub async fn ping(&mut self, now: &str, id: &str, stop: u32, band: RiskBand) -> DecisionRecord {
        self.when(now, id, ping(stop, band, at(now))).await
    }

    pub async fn sms(&mut self, now: &str, id: &str, from: &str, text: &str) -> DecisionRecord {
        self.when(now, id, sms(from, text)).await
    }

    pub async fn status(&mut self, now: &str, id: &str, stop: u32, status: StopStatusKind) -> DecisionRecord {
        self.when(now, id, events::stop_status(stop, status)).await
    }

    /// Fires the timer of `ask_id`'s attempt at `now`.
    pub async fn fire(&mut self, now: &str, ask_id: &str, attempt: u32) -> DecisionRecord {
        let e = timer_fired(LOAD, ask_id, attempt, at(now));
        self.when(now, &e.event_id, e.kind).await
    }
}

/// `(kind, to, attempt, urgent)` of one action.
pub type ActionSummary = (String, Option<String>, Option<u32>, Option<bool>);

/// `(kind, to, attempt, urgent)` of each effective action, for compact assertions.
pub fn summary(d: &DecisionRecord) -> Vec<ActionSummary> {
    d.effective_actions()
        .map(|a| {
            let urgent = match &a.body {
                ActionBody::CreateHeroTask { urgent, .. } => Some(*urgent),
                _ => None,
            };
            (
                a.kind().as_str().to_string(),
                a.body.contact_id().map(String::from),
                a.ask.as_ref().map(|s| s.attempt),
                urgent,
            )
        })
        .collect()
}

/// The kinds of the effective actions, in order.
pub fn kinds(d: &DecisionRecord) -> Vec<&'static str> {
    d.effective_actions().map(|a| a.kind().as_str()).collect()
}

/// The texts of the effective actions of `kind`, joined by ` | `.
pub fn text_of(d: &DecisionRecord, kind: ActionKind) -> String {
    d.effective_actions()
        .filter(|a| a.kind() == kind)
        .filter_map(|a| a.body.text())
        .collect::<Vec<_>>()
        .join(" | ")
}

// ---------------------------------------------------------------------------------------------
// The benches' logs.

/// The registration of the benches' load: [`sample_load`] with the broker's desk as a third
/// contact and the delivery a day later.
pub fn registration(load_id: &str) -> EventKind {
    let mut load =
        LoadRegistered { contacts: vec![driver("Luis"), dispatcher(), broker()], ..sample_load(load_id) };
    if let Some(delivery) = load.stops.get_mut(1) {
        delivery.appointment =
            DateTime::parse_from_rfc3339("2026-03-03T16:00:00-05:00").expect("a valid fixture time");
    }
    EventKind::LoadRegistered { load }
}

/// The outcome of the first ETA SMS of [`ETA_ASK`].
pub fn sms_outcome(id: &str, now: DateTime<Utc>, status: OutcomeStatus) -> InboundEvent {
    event(
        LOAD,
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
        LOAD,
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
/// default), a document reader that returns the fields the event carries (as [`FakeLlm`] does),
/// and nothing else configured, so the planner falls back to a Hero task. Unlike [`FakeLlm`] it
/// records no request, so a long bench run does not grow a request list.
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

/// Processes `events` of [`LOAD`] in order as the worker does (prepare, decide, apply
/// `[event, decision]`), without a store, and returns the log.
pub fn build(agent: &Agent, llm: &dyn LlmClient, events: Vec<InboundEvent>) -> Log {
    let mut log = Log { state: LoadState::new(LOAD), entries: Vec::new() };
    for e in events {
        futures::executor::block_on(decide(agent, llm, &mut log.state, &mut log.entries, e));
    }
    log
}

/// A load with an open ETA ask for the pickup ([`ETA_ASK`], its timer for attempt 1 armed),
/// padded to `entries` log entries (at least 4; even) with delay-risk changes for the delivery
/// and acknowledgements: history that does not matter to the next decision.
pub fn padded_log(agent: &Agent, llm: &dyn LlmClient, entries: usize) -> Log {
    let start = at("2026-03-02T12:00:00Z");
    let mut events = vec![event(LOAD, "reg", start, registration(LOAD))];
    let padding = entries.saturating_sub(4) / 2;
    for i in 0..padding {
        let when = start + Duration::seconds(i as i64);
        let kind = if i % 2 == 0 {
            ping(2, if i % 4 == 0 { RiskBand::Medium } else { RiskBand::Low }, when)
        } else {
            sms("drv", "ok")
        };
        events.push(event(LOAD, &format!("pad{i}"), when, kind));
    }
    let t = start + Duration::seconds(padding as i64 + 1);
    events.push(event(LOAD, "ping_0700", t, ping(1, RiskBand::High, t)));
    build(agent, llm, events)
}

/// A log of `entries` entries (rounded down to even) that exercises every part of the fold: after
/// the registration, each cycle of five events opens an ETA ask on a high-risk ping (an SMS and
/// a timer), fires its timer (the second attempt), resolves it with an ETA by SMS (cancelling the
/// timer), lowers the band again, and logs an acknowledgement.
pub fn varied_log(agent: &Agent, llm: &dyn LlmClient, entries: usize) -> Log {
    let start = at("2026-03-02T12:00:00Z");
    let mut events = vec![event(LOAD, "reg", start, registration(LOAD))];
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
            event(LOAD, &ping_id, t0, ping(1, RiskBand::High, t0)),
            event(
                LOAD,
                &timer_fired_event_id(&timer),
                fired,
                EventKind::TimerFired { timer_id: timer.clone(), ask_id: ask, attempt: 1, fire_at: fired },
            ),
            event(LOAD, &format!("eta_{c}"), fired + Duration::minutes(5), sms("drv", "eta 2:30 pm")),
            event(LOAD, &format!("low_{c}"), low, ping(1, RiskBand::Low, low)),
            event(LOAD, &format!("ack_{c}"), low + Duration::minutes(1), sms("drv", "ok thanks")),
        ]);
    }
    events.truncate(wanted + 1);
    build(agent, llm, events)
}
