//! The LLM boundary (ADR 0001): `LlmClient` has five methods, each taking a typed request
//! and returning the validated output plus its `LlmUsage`. Failures are typed: unavailable
//! (timeout, overload, connection refused, 5xx after retries) or invalid output (the output
//! failed schema validation). Nothing here parses leniently or guesses.
//!
//! Layout:
//! - [`types`]: requests, results, [`LlmOutput`], [`LlmError`], [`LlmMethod`].
//! - [`settings`]: the `[llm]` section of the configuration ([`LlmConfig`]), [`LlmSettings`]
//!   (timeouts, retries, backoff, deadline, rate limit) taken from it, their `LOAD_AGENT_LLM_*`
//!   names, and [`ConfigError`].
//! - [`output`]: strict parsing and semantic checks of provider output, the planner's allowed
//!   actions ([`parse_plan`], [`validate_plan`]) and the JSON schema of each method's output.
//! - [`local`]: [`LocalTriage`] (the embedded triage model) and [`Unconfigured`].
//! - [`fake`]: [`FakeLlm`], scripted per call, the default in tests and evals.
//! - [`composite`]: [`Composite`] routes each method to a provider; [`ProviderSpec`] parses
//!   `LOAD_AGENT_LLM_PROVIDER`; [`compose`] builds the client from a spec.
//! - [`guard`]: [`Guarded`] wraps a provider with a rate limit, a per-call timeout and bounded
//!   retries with backoff and full jitter.
//! - [`deadline`]: [`RunDeadline`] and [`WithDeadline`], the per-run deadline spanning
//!   conflict re-decides.
//!
//! Architecture invariant: the pipeline (`load-agent-agent`) depends on this crate only; it
//! never knows which vendor, if any, answers. This crate speaks no HTTP; providers that do live
//! in their own crates (`load-agent-llm-openai`, which also hosts `build_llm_client`).

pub mod composite;
pub mod deadline;
pub mod fake;
pub mod guard;
pub mod local;
pub mod output;
pub mod settings;
pub mod types;

use std::sync::Arc;

use async_trait::async_trait;

pub use load_agent_domain::{DocumentFields, DocumentType, LlmUsage};
pub use load_agent_triage::{EtaValue, ExtractedValues, Intent, StopRef};

pub use composite::{Composite, ProviderSpec, RemoteProvider, compose};
pub use deadline::{DEADLINE_PASSED, LlmClientExt, RunDeadline, WithDeadline};
pub use fake::{FAKE_MODEL_ID, FakeLlm, Received};
pub use guard::{Guarded, backoff_ceiling, full_jitter};
pub use local::{LocalTriage, Unconfigured};
pub use output::{
    MAX_PLANNED_ACTIONS, output_schema, parse_document_fields, parse_draft, parse_extracted_sop, parse_plan,
    parse_triage, sop_output_schema, validate_document_fields, validate_draft, validate_plan,
};
pub use settings::{ConfigError, LlmConfig, LlmSettings, env};
pub use types::{
    DocumentRequest, Draft, DraftRequest, ExtractedSop, LlmError, LlmMethod, LlmOutput, LlmResult, Plan,
    PlanRequest, PlannedAction, SopExtractionRequest, TriageRequest, TriageResult,
};

/// The five methods of ADR 0001.
#[async_trait]
pub trait LlmClient: Send + Sync {
    async fn triage(&self, req: &TriageRequest) -> LlmResult<TriageResult>;
    async fn draft(&self, req: &DraftRequest) -> LlmResult<Draft>;
    async fn extract_document(&self, req: &DocumentRequest) -> LlmResult<DocumentFields>;
    async fn plan(&self, req: &PlanRequest) -> LlmResult<Plan>;
    async fn extract_sop(&self, req: &SopExtractionRequest) -> LlmResult<ExtractedSop>;
}

/// Forwards every method to the client behind a pointer, so `&C`, `Arc<dyn LlmClient>` and
/// `Box<dyn LlmClient>` are clients too (and can be wrapped by [`Guarded`] or [`WithDeadline`]).
macro_rules! forward_client {
    ($($ptr:ty),*) => {$(
        #[async_trait]
        impl<C: LlmClient + ?Sized> LlmClient for $ptr {
            async fn triage(&self, req: &TriageRequest) -> LlmResult<TriageResult> {
                (**self).triage(req).await
            }
            async fn draft(&self, req: &DraftRequest) -> LlmResult<Draft> {
                (**self).draft(req).await
            }
            async fn extract_document(&self, req: &DocumentRequest) -> LlmResult<DocumentFields> {
                (**self).extract_document(req).await
            }
            async fn plan(&self, req: &PlanRequest) -> LlmResult<Plan> {
                (**self).plan(req).await
            }
            async fn extract_sop(&self, req: &SopExtractionRequest) -> LlmResult<ExtractedSop> {
                (**self).extract_sop(req).await
            }
        }
    )*};
}

forward_client!(&C, Arc<C>, Box<C>);
