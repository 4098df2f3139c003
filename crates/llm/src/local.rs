//! Providers that need no network: the local triage model, and the provider of nothing.

use std::sync::OnceLock;
use std::time::Instant;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use load_agent_domain::{DocumentFields, LlmUsage};
use load_agent_triage::{TriageInput, TriageModel};

use crate::LlmClient;
use crate::types::{
    DocumentRequest, Draft, DraftRequest, ExtractedSop, LlmError, LlmMethod, LlmOutput, LlmResult, Plan,
    PlanRequest, SopExtractionRequest, TriageRequest, TriageResult,
};

/// Answers every method with `Unavailable("no provider configured for <method>")`, not
/// retryable. The pipeline then takes behavior.md's fallbacks (an urgent Hero task).
#[derive(Debug, Clone, Copy, Default)]
pub struct Unconfigured;

impl Unconfigured {
    pub fn error(method: LlmMethod) -> LlmError {
        LlmError::unavailable_final(method, format!("no provider configured for {method}"))
    }
}

#[async_trait]
impl LlmClient for Unconfigured {
    async fn triage(&self, _: &TriageRequest) -> LlmResult<TriageResult> {
        Err(Unconfigured::error(LlmMethod::Triage))
    }
    async fn draft(&self, _: &DraftRequest) -> LlmResult<Draft> {
        Err(Unconfigured::error(LlmMethod::Draft))
    }
    async fn extract_document(&self, _: &DocumentRequest) -> LlmResult<DocumentFields> {
        Err(Unconfigured::error(LlmMethod::ExtractDocument))
    }
    async fn plan(&self, _: &PlanRequest) -> LlmResult<Plan> {
        Err(Unconfigured::error(LlmMethod::Plan))
    }
    async fn extract_sop(&self, _: &SopExtractionRequest) -> LlmResult<ExtractedSop> {
        Err(Unconfigured::error(LlmMethod::ExtractSop))
    }
}

/// `triage` on the local decision model (`load-agent-triage`): in process, zero cost, a model id
/// of `local-triage/<first 12 hex digits of the weights' SHA-256>`. The other four methods are
/// [`Unconfigured`].
#[derive(Debug, Clone)]
pub struct LocalTriage {
    model: &'static TriageModel,
    model_id: String,
}

impl LocalTriage {
    /// The model committed with `load-agent-triage`.
    pub fn embedded() -> Self {
        static MODEL_ID: OnceLock<String> = OnceLock::new();
        let model = TriageModel::embedded();
        LocalTriage { model, model_id: MODEL_ID.get_or_init(|| model_id_of(model)).clone() }
    }

    /// Another model (a retrained one, in an eval).
    pub fn new(model: &'static TriageModel) -> Self {
        LocalTriage { model, model_id: model_id_of(model) }
    }

    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Classifies one message; infallible and synchronous, `latency_ms` measured.
    pub fn classify(&self, req: &TriageRequest) -> LlmOutput<TriageResult> {
        let started = Instant::now();
        let t = self.model.classify(&TriageInput {
            text: &req.text,
            lang: req.lang.as_deref(),
            from_role: req.from_role.as_deref(),
            open_ask: req.open_ask.as_deref(),
        });
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        LlmOutput {
            value: TriageResult {
                intent: t.intent,
                probability: t.probability,
                confident: t.confident,
                abstain: t.abstain,
                values: t.values,
                lang: t.lang.as_str().to_owned(),
                distribution: t.distribution,
            },
            usage: LlmUsage {
                method: LlmMethod::Triage.as_str().to_owned(),
                model_id: self.model_id.clone(),
                input_tokens: 0,
                output_tokens: 0,
                cost_usd: 0.0,
                latency_ms,
            },
        }
    }
}

fn model_id_of(model: &TriageModel) -> String {
    let digest = Sha256::digest(model.to_weights_string().as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("local-triage/{hex}")
}

#[async_trait]
impl LlmClient for LocalTriage {
    async fn triage(&self, req: &TriageRequest) -> LlmResult<TriageResult> {
        Ok(self.classify(req))
    }
    async fn draft(&self, req: &DraftRequest) -> LlmResult<Draft> {
        Unconfigured.draft(req).await
    }
    async fn extract_document(&self, req: &DocumentRequest) -> LlmResult<DocumentFields> {
        Unconfigured.extract_document(req).await
    }
    async fn plan(&self, req: &PlanRequest) -> LlmResult<Plan> {
        Unconfigured.plan(req).await
    }
    async fn extract_sop(&self, req: &SopExtractionRequest) -> LlmResult<ExtractedSop> {
        Unconfigured.extract_sop(req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use load_agent_triage::Intent;

    fn req(text: &str) -> TriageRequest {
        TriageRequest { text: text.into(), lang: None, from_role: Some("driver".into()), open_ask: None }
    }

    #[tokio::test]
    async fn local_triage_classifies_at_zero_cost() {
        let local = LocalTriage::embedded();
        let out = local.triage(&req("stop texting me")).await.expect("local triage never fails");
        assert_eq!(out.value.intent, Intent::OptOut);
        assert_eq!(out.usage.method, "triage");
        assert!(out.usage.model_id.starts_with("local-triage/"), "{}", out.usage.model_id);
        assert_eq!(out.usage.model_id.len(), "local-triage/".len() + 12);
        assert_eq!((out.usage.input_tokens, out.usage.output_tokens, out.usage.cost_usd), (0, 0, 0.0));
        assert!(!out.value.distribution.is_empty());
        assert_eq!(LocalTriage::embedded().model_id(), local.model_id(), "model id is stable");
    }

    #[tokio::test]
    async fn other_methods_are_unconfigured_and_not_retryable() {
        let local = LocalTriage::embedded();
        let err = local
            .plan(&PlanRequest {
                load_id: "L1".into(),
                situation: "s".into(),
                state_summary: serde_json::json!({}),
                message: None,
                from_role: None,
            })
            .await
            .expect_err("no planner");
        assert_eq!(err.to_string(), "LLM unavailable for plan: no provider configured for plan");
        assert!(err.is_unavailable() && !err.is_retryable());
    }
}
