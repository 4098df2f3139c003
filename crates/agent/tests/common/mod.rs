//! Given/when/then for decisions: given a log (built by processing events the way the worker
//! does), when an event, then this decision record.
#![allow(dead_code)]

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use load_agent_agent::{Agent, Deps, Processed, prepare_event, process_event};
use load_agent_domain::*;
use load_agent_llm::*;
use load_agent_triage::{TriageInput, TriageModel};

/// Local triage; the planner and document reader answer only what a test scripts.
#[derive(Default)]
pub struct TestLlm {
    pub plan: Option<Plan>,
    /// The document reader: `None` is unavailable (the `local` provider); `Some(fields)` is what
    /// it reads from any document.
    pub reader: Option<DocumentFields>,
}

#[async_trait]
impl LlmClient for TestLlm {
    async fn triage(&self, req: &TriageRequest) -> LlmResult<TriageResult> {
        let t = TriageModel::embedded().classify(&TriageInput {
            text: &req.text,
            lang: req.lang.as_deref(),
            from_role: req.from_role.as_deref(),
            open_ask: req.open_ask.as_deref(),
        });
        Ok(LlmOutput {
            value: TriageResult {
                intent: t.intent,
                probability: t.probability,
                confident: t.confident,
                abstain: t.abstain,
                values: t.values,
                lang: t.lang.as_str().to_string(),
                distribution: t.distribution.clone(),
            },
            usage: LlmUsage { method: "triage".into(), model_id: "local".into(), ..Default::default() },
        })
    }
    async fn draft(&self, _: &DraftRequest) -> LlmResult<Draft> {
        Err(LlmError::unavailable(LlmMethod::Draft, "not configured"))
    }
    async fn extract_document(&self, req: &DocumentRequest) -> LlmResult<DocumentFields> {
        let _ = req;
        match &self.reader {
            Some(d) => Ok(LlmOutput { value: d.clone(), usage: LlmUsage::default() }),
            None => Err(LlmError::unavailable(LlmMethod::ExtractDocument, "not configured")),
        }
    }
    async fn plan(&self, _: &PlanRequest) -> LlmResult<Plan> {
        match &self.plan {
            Some(p) => Ok(LlmOutput {
                value: p.clone(),
                usage: LlmUsage {
                    method: "plan".into(),
                    model_id: "test".into(),
                    cost_usd: 0.01,
                    ..Default::default()
                },
            }),
            None => Err(LlmError::unavailable(LlmMethod::Plan, "not configured")),
        }
    }
    async fn extract_sop(&self, _: &SopExtractionRequest) -> LlmResult<ExtractedSop> {
        Err(LlmError::unavailable(LlmMethod::ExtractSop, "not configured"))
    }
}

pub fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).expect("test time").with_timezone(&Utc)
}

pub fn contact(id: &str, role: Role, name: &str) -> Contact {
    Contact {
        id: id.into(),
        role,
        name: name.into(),
        phone: None,
        email: None,
        slack: None,
        language: Language::En,
    }
}

pub fn load(client: &str, reefer: bool) -> LoadRegistered {
    let t = |s: &str| DateTime::parse_from_rfc3339(s).expect("test time");
    LoadRegistered {
        load_id: "481207".into(),
        client: client.into(),
        sop_version: None,
        contacts: vec![
            Contact { phone: Some("+13125550111".into()), ..contact("drv", Role::Driver, "Luis Ortega") },
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
                appointment: t("2026-03-02T16:00:00-05:00"),
                po_numbers: vec![],
                reference: None,
            },
        ],
        reefer: reefer.then_some(Reefer { set_point_f: 34.0, tolerance_f: 2.0 }),
    }
}

/// A load under test: its log and state, processed as the worker would (no store).
pub struct Given {
    pub agent: Agent,
    pub llm: TestLlm,
    pub state: LoadState,
    pub log: Vec<LogEntry>,
}

impl Given {
    pub async fn registered(reg: LoadRegistered) -> Self {
        let agent = Agent::embedded().expect("embedded SOPs");
        let mut g = Given { agent, llm: TestLlm::default(), state: LoadState::new("481207"), log: vec![] };
        g.when("2026-03-02T12:50:00Z", "reg", EventKind::LoadRegistered { load: reg }).await;
        g
    }

    pub async fn client_a() -> Self {
        Self::registered(load("client_a", false)).await
    }

    pub async fn client_b() -> Self {
        Self::registered(load("client_b", true)).await
    }

    /// Processes an event at `now` and applies it and its decision to the log.
    pub async fn when(&mut self, now: &str, id: &str, kind: EventKind) -> DecisionRecord {
        match self.process(now, id, kind).await {
            Processed::Decided(d) => d,
            Processed::AlreadyProcessed => panic!("{id} was already processed"),
        }
    }

    pub async fn process(&mut self, now: &str, id: &str, kind: EventKind) -> Processed {
        let now = at(now);
        let event = InboundEvent { event_id: id.into(), load_id: "481207".into(), occurred_at: now, kind };
        let event = prepare_event(&self.state, event, &self.agent).expect("valid event");
        let deps = Deps { agent: &self.agent, llm: &self.llm, now };
        let out = process_event(&self.state, &event, &deps).await;
        if let Processed::Decided(d) = &out {
            let entries = [LogEntry::Event(event), LogEntry::Decision(d.clone())];
            self.state.apply_all(&entries);
            self.log.extend(entries);
        }
        out
    }

    pub async fn ping(&mut self, now: &str, id: &str, stop: u32, band: RiskBand) -> DecisionRecord {
        let kind = EventKind::Ping { stop, delay_risk: band, recorded_at: at(now), lat: None, lon: None };
        self.when(now, id, kind).await
    }

    pub async fn sms(&mut self, now: &str, id: &str, from: &str, text: &str) -> DecisionRecord {
        self.when(now, id, EventKind::Sms { from: from.into(), text: text.into() }).await
    }

    pub async fn status(&mut self, now: &str, id: &str, stop: u32, status: StopStatusKind) -> DecisionRecord {
        self.when(now, id, EventKind::StopStatus { stop, status, source: None }).await
    }

    /// Fires the timer of `ask_id`'s attempt at `now`.
    pub async fn fire(&mut self, now: &str, ask_id: &str, attempt: u32) -> DecisionRecord {
        let tid = timer_id("481207", ask_id, attempt);
        let kind =
            EventKind::TimerFired { timer_id: tid.clone(), ask_id: ask_id.into(), attempt, fire_at: at(now) };
        let id = timer_fired_event_id(&tid);
        self.when(now, &id, kind).await
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

pub fn kinds(d: &DecisionRecord) -> Vec<&'static str> {
    d.effective_actions().map(|a| a.kind().as_str()).collect()
}

pub fn text_of(d: &DecisionRecord, kind: ActionKind) -> String {
    d.effective_actions()
        .filter(|a| a.kind() == kind)
        .filter_map(|a| a.body.text())
        .collect::<Vec<_>>()
        .join(" | ")
}
