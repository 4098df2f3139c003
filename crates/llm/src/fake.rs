//! `FakeLlm`: scripted per call, the default provider in tests and evals (ADR 0001: "evals use a
//! scripted FakeLLM, so the default test run needs no key").

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use load_agent_domain::{DocumentFields, LlmUsage};

use crate::LlmClient;
use crate::local::LocalTriage;
use crate::types::{
    DocumentRequest, Draft, DraftRequest, ExtractedSop, LlmError, LlmMethod, LlmOutput, LlmResult, Plan,
    PlanRequest, SopExtractionRequest, TriageRequest, TriageResult,
};

/// The model id in the usage of answers the fake makes up itself.
pub const FAKE_MODEL_ID: &str = "fake";

/// A request the fake received, in call order.
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    Triage(TriageRequest),
    Draft(DraftRequest),
    ExtractDocument(DocumentRequest),
    Plan(PlanRequest),
    ExtractSop(SopExtractionRequest),
}

impl Received {
    pub fn method(&self) -> LlmMethod {
        match self {
            Received::Triage(_) => LlmMethod::Triage,
            Received::Draft(_) => LlmMethod::Draft,
            Received::ExtractDocument(_) => LlmMethod::ExtractDocument,
            Received::Plan(_) => LlmMethod::Plan,
            Received::ExtractSop(_) => LlmMethod::ExtractSop,
        }
    }
}

#[derive(Default)]
struct Script {
    triage: VecDeque<LlmResult<TriageResult>>,
    draft: VecDeque<LlmResult<Draft>>,
    extract_document: VecDeque<LlmResult<DocumentFields>>,
    plan: VecDeque<LlmResult<Plan>>,
    extract_sop: VecDeque<LlmResult<ExtractedSop>>,
    received: Vec<Received>,
}

/// Answers each method from a queue of scripted answers (`Ok` with a usage, or an `LlmError`),
/// first in first out, and records every request it receives.
///
/// When a method's queue is empty:
/// - `triage` delegates to the local model ([`LocalTriage`]), with `latency_ms` 0 so replays
///   are byte-identical;
/// - `extract_document` returns `req.extracted` when the request carries it (how scenario evals
///   feed a document reader result);
/// - otherwise `Unavailable("fake: nothing scripted")`, not retryable.
///
/// Share it as `Arc<FakeLlm>`: scripting and inspection take `&self`.
pub struct FakeLlm {
    script: Mutex<Script>,
    local: LocalTriage,
}

impl Default for FakeLlm {
    fn default() -> Self {
        FakeLlm::new()
    }
}

impl std::fmt::Debug for FakeLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeLlm").field("received", &self.lock().received.len()).finish_non_exhaustive()
    }
}

impl FakeLlm {
    /// Nothing scripted; triage answers from the embedded local model.
    pub fn new() -> Self {
        FakeLlm { script: Mutex::new(Script::default()), local: LocalTriage::embedded() }
    }

    /// The usage the fake reports for an answer scripted with [`FakeLlm::answer`]: model `fake`,
    /// zero tokens, zero cost, zero latency.
    pub fn usage(method: LlmMethod) -> LlmUsage {
        LlmUsage {
            method: method.as_str().to_owned(),
            model_id: FAKE_MODEL_ID.to_owned(),
            ..LlmUsage::default()
        }
    }

    /// `Ok(value)` with [`FakeLlm::usage`]; for a given usage write `Ok(LlmOutput { value, usage })`.
    pub fn answer<T>(method: LlmMethod, value: T) -> LlmResult<T> {
        Ok(LlmOutput { value, usage: FakeLlm::usage(method) })
    }

    fn lock(&self) -> MutexGuard<'_, Script> {
        // A test that panicked while holding the lock leaves a usable script behind.
        self.script.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn script_triage(&self, answer: LlmResult<TriageResult>) -> &Self {
        self.lock().triage.push_back(answer);
        self
    }
    pub fn script_draft(&self, answer: LlmResult<Draft>) -> &Self {
        self.lock().draft.push_back(answer);
        self
    }
    pub fn script_extract_document(&self, answer: LlmResult<DocumentFields>) -> &Self {
        self.lock().extract_document.push_back(answer);
        self
    }
    pub fn script_plan(&self, answer: LlmResult<Plan>) -> &Self {
        self.lock().plan.push_back(answer);
        self
    }
    pub fn script_extract_sop(&self, answer: LlmResult<ExtractedSop>) -> &Self {
        self.lock().extract_sop.push_back(answer);
        self
    }

    /// Every request received, in call order.
    pub fn received(&self) -> Vec<Received> {
        self.lock().received.clone()
    }

    /// How many calls `method` received.
    pub fn calls(&self, method: LlmMethod) -> usize {
        self.lock().received.iter().filter(|r| r.method() == method).count()
    }

    pub fn plan_requests(&self) -> Vec<PlanRequest> {
        self.lock()
            .received
            .iter()
            .filter_map(|r| match r {
                Received::Plan(p) => Some(p.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn document_requests(&self) -> Vec<DocumentRequest> {
        self.lock()
            .received
            .iter()
            .filter_map(|r| match r {
                Received::ExtractDocument(d) => Some(d.clone()),
                _ => None,
            })
            .collect()
    }

    /// Scripted answers not consumed yet, for `method`.
    pub fn unconsumed(&self, method: LlmMethod) -> usize {
        let s = self.lock();
        match method {
            LlmMethod::Triage => s.triage.len(),
            LlmMethod::Draft => s.draft.len(),
            LlmMethod::ExtractDocument => s.extract_document.len(),
            LlmMethod::Plan => s.plan.len(),
            LlmMethod::ExtractSop => s.extract_sop.len(),
        }
    }

    fn nothing_scripted(method: LlmMethod) -> LlmError {
        LlmError::unavailable_final(method, "fake: nothing scripted")
    }
}

#[async_trait]
impl LlmClient for FakeLlm {
    async fn triage(&self, req: &TriageRequest) -> LlmResult<TriageResult> {
        let scripted = {
            let mut s = self.lock();
            s.received.push(Received::Triage(req.clone()));
            s.triage.pop_front()
        };
        scripted.unwrap_or_else(|| {
            let mut out = self.local.classify(req);
            out.usage.latency_ms = 0;
            Ok(out)
        })
    }

    async fn draft(&self, req: &DraftRequest) -> LlmResult<Draft> {
        let mut s = self.lock();
        s.received.push(Received::Draft(req.clone()));
        s.draft.pop_front().unwrap_or_else(|| Err(FakeLlm::nothing_scripted(LlmMethod::Draft)))
    }

    async fn extract_document(&self, req: &DocumentRequest) -> LlmResult<DocumentFields> {
        let mut s = self.lock();
        s.received.push(Received::ExtractDocument(req.clone()));
        s.extract_document.pop_front().unwrap_or_else(|| match &req.extracted {
            Some(fields) => FakeLlm::answer(LlmMethod::ExtractDocument, fields.clone()),
            None => Err(FakeLlm::nothing_scripted(LlmMethod::ExtractDocument)),
        })
    }

    async fn plan(&self, req: &PlanRequest) -> LlmResult<Plan> {
        let mut s = self.lock();
        s.received.push(Received::Plan(req.clone()));
        s.plan.pop_front().unwrap_or_else(|| Err(FakeLlm::nothing_scripted(LlmMethod::Plan)))
    }

    async fn extract_sop(&self, req: &SopExtractionRequest) -> LlmResult<ExtractedSop> {
        let mut s = self.lock();
        s.received.push(Received::ExtractSop(req.clone()));
        s.extract_sop.pop_front().unwrap_or_else(|| Err(FakeLlm::nothing_scripted(LlmMethod::ExtractSop)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::PlannedAction;
    use load_agent_domain::DocumentType;

    fn plan_req() -> PlanRequest {
        PlanRequest {
            load_id: "L1".into(),
            situation: "driver asks about parking".into(),
            state_summary: serde_json::json!({ "stage": "to_pickup" }),
            message: Some("where can i park tonight".into()),
            from_role: Some("driver".into()),
        }
    }

    fn doc_req(extracted: Option<DocumentFields>) -> DocumentRequest {
        DocumentRequest {
            load_id: "L1".into(),
            filename: "pod.jpg".into(),
            content_type: "image/jpeg".into(),
            content_ref: Some("https://files.example/pod.jpg".into()),
            extracted,
        }
    }

    #[tokio::test]
    async fn scripted_answers_come_back_in_order_then_nothing_scripted() {
        let fake = FakeLlm::new();
        let plan = Plan {
            actions: vec![PlannedAction::TmsNote { text: "driver asked about parking".into() }],
            rationale: "no SOP covers parking".into(),
        };
        let usage = LlmUsage {
            method: "plan".into(),
            model_id: "deepseek-chat".into(),
            input_tokens: 900,
            output_tokens: 120,
            cost_usd: 0.0004,
            latency_ms: 1200,
        };
        fake.script_plan(Ok(LlmOutput { value: plan.clone(), usage: usage.clone() }))
            .script_plan(Err(LlmError::unavailable(LlmMethod::Plan, "overloaded")));

        let first = fake.plan(&plan_req()).await.expect("scripted");
        assert_eq!((first.value, first.usage), (plan, usage));
        assert_eq!(
            fake.plan(&plan_req()).await.expect_err("scripted error"),
            LlmError::unavailable(LlmMethod::Plan, "overloaded")
        );
        let err = fake.plan(&plan_req()).await.expect_err("empty script");
        assert_eq!(err.reason(), "fake: nothing scripted");
        assert!(err.is_unavailable());

        assert_eq!(fake.calls(LlmMethod::Plan), 3);
        assert_eq!(fake.plan_requests(), vec![plan_req(), plan_req(), plan_req()]);
        assert_eq!(fake.unconsumed(LlmMethod::Plan), 0);
    }

    #[tokio::test]
    async fn extract_document_returns_the_fields_the_event_carried() {
        let fake = FakeLlm::new();
        let fields = DocumentFields {
            document_type: DocumentType::Pod,
            signed: Some(false),
            exceptions_noted: Some(true),
            po_numbers: vec!["55821".into()],
            seal: None,
            pieces: Some(22),
            temperature_f: None,
        };
        let out = fake.extract_document(&doc_req(Some(fields.clone()))).await.expect("carried fields");
        assert_eq!(out.value, fields);
        assert_eq!(out.usage, FakeLlm::usage(LlmMethod::ExtractDocument));
        let err = fake.extract_document(&doc_req(None)).await.expect_err("nothing carried, nothing scripted");
        assert_eq!(err.reason(), "fake: nothing scripted");

        // A scripted answer wins over the carried fields (an eval of a failing reader).
        fake.script_extract_document(Err(LlmError::invalid(LlmMethod::ExtractDocument, "unreadable")));
        assert!(
            fake.extract_document(&doc_req(Some(fields))).await.expect_err("scripted").is_invalid_output()
        );
        assert_eq!(fake.document_requests().len(), 3);
    }

    #[tokio::test]
    async fn triage_delegates_to_the_local_model_unless_scripted() {
        let fake = FakeLlm::new();
        let req =
            TriageRequest { text: "ok".into(), lang: None, from_role: Some("driver".into()), open_ask: None };
        let local = fake.triage(&req).await.expect("local model");
        assert!(local.usage.model_id.starts_with("local-triage/"));
        assert_eq!(local.usage.latency_ms, 0, "deterministic for replays");

        let scripted = TriageResult { probability: 0.3, confident: false, ..local.value.clone() };
        fake.script_triage(FakeLlm::answer(LlmMethod::Triage, scripted.clone()));
        assert_eq!(fake.triage(&req).await.expect("scripted").value, scripted);
        assert_eq!(fake.calls(LlmMethod::Triage), 2);
        assert!(matches!(fake.received()[0], Received::Triage(_)));
    }

    #[tokio::test]
    async fn unscripted_methods_are_unavailable() {
        let fake = FakeLlm::new();
        let draft = DraftRequest { purpose: "p".into(), language: "en".into(), facts: serde_json::json!({}) };
        assert_eq!(fake.draft(&draft).await.expect_err("nothing").reason(), "fake: nothing scripted");
        let sop =
            SopExtractionRequest { sop_id: "c".into(), text: "t".into(), spec_schema: serde_json::json!({}) };
        assert_eq!(fake.extract_sop(&sop).await.expect_err("nothing").reason(), "fake: nothing scripted");
    }
}
