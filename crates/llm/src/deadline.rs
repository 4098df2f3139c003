//! The per-run deadline (ADR 0001: "a 120 s per-run deadline spanning conflict re-decides bounds
//! the model calls of a run; after it the run commits an urgent Hero task").
//!
//! The worker creates one [`RunDeadline`] when a run starts and wraps its shared client for
//! each decide attempt, re-decides included:
//!
//! ```ignore
//! let deadline = RunDeadline::start(&settings);          // once per run
//! loop {
//!     let llm = client.with_deadline(deadline);          // client: Arc<dyn LlmClient>
//!     match decide_and_commit(&event, &llm).await {
//!         Err(Conflict) if !deadline.passed() => continue, // re-read, re-decide, same deadline
//!         other => break other,
//!     }
//! }
//! ```
//!
//! A call made after the deadline fails at once with a non-retryable
//! `Unavailable("run deadline passed")` and never reaches a provider; a call in flight is cut
//! at the deadline, so each attempt's timeout is in effect `min(call_timeout, remaining)` and
//! retries (backoff included) stop there too.

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use load_agent_domain::DocumentFields;

use crate::LlmClient;
use crate::settings::LlmSettings;
use crate::types::{
    DocumentRequest, Draft, DraftRequest, ExtractedSop, LlmError, LlmMethod, LlmResult, Plan, PlanRequest,
    SopExtractionRequest, TriageRequest, TriageResult,
};

/// The reason of the `Unavailable` a call gets at or after its run's deadline.
pub const DEADLINE_PASSED: &str = "run deadline passed";

/// The instant a run's model calls must be done by, on tokio's clock (so paused tests drive it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RunDeadline {
    at: Instant,
}

impl RunDeadline {
    /// `settings.run_deadline` from now; call it when the run starts.
    pub fn start(settings: &LlmSettings) -> Self {
        RunDeadline::after(settings.run_deadline)
    }

    /// `duration` from now.
    pub fn after(duration: Duration) -> Self {
        RunDeadline { at: Instant::now() + duration }
    }

    pub fn at(at: Instant) -> Self {
        RunDeadline { at }
    }

    pub fn instant(&self) -> Instant {
        self.at
    }

    /// Time left, zero once passed.
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    pub fn passed(&self) -> bool {
        self.remaining().is_zero()
    }
}

/// A client whose every call is bounded by a [`RunDeadline`]. Build one per decide attempt with
/// [`LlmClientExt::with_deadline`]; it borrows or owns the shared client, it is cheap.
#[derive(Debug, Clone)]
pub struct WithDeadline<C> {
    inner: C,
    deadline: RunDeadline,
}

impl<C: LlmClient> WithDeadline<C> {
    pub fn new(inner: C, deadline: RunDeadline) -> Self {
        WithDeadline { inner, deadline }
    }

    pub fn deadline(&self) -> RunDeadline {
        self.deadline
    }

    async fn call<T>(
        &self,
        method: LlmMethod,
        call: impl Future<Output = LlmResult<T>> + Send,
    ) -> LlmResult<T> {
        let remaining = self.deadline.remaining();
        if remaining.is_zero() {
            return Err(LlmError::unavailable_final(method, DEADLINE_PASSED));
        }
        tokio::time::timeout(remaining, call)
            .await
            .unwrap_or_else(|_| Err(LlmError::unavailable_final(method, DEADLINE_PASSED)))
    }
}

/// `client.with_deadline(deadline)` on any client, `Arc<dyn LlmClient>` included.
pub trait LlmClientExt: LlmClient {
    fn with_deadline(&self, deadline: RunDeadline) -> WithDeadline<&Self> {
        WithDeadline::new(self, deadline)
    }
}

impl<C: LlmClient + ?Sized> LlmClientExt for C {}

#[async_trait]
impl<C: LlmClient> LlmClient for WithDeadline<C> {
    async fn triage(&self, req: &TriageRequest) -> LlmResult<TriageResult> {
        self.call(LlmMethod::Triage, self.inner.triage(req)).await
    }
    async fn draft(&self, req: &DraftRequest) -> LlmResult<Draft> {
        self.call(LlmMethod::Draft, self.inner.draft(req)).await
    }
    async fn extract_document(&self, req: &DocumentRequest) -> LlmResult<DocumentFields> {
        self.call(LlmMethod::ExtractDocument, self.inner.extract_document(req)).await
    }
    async fn plan(&self, req: &PlanRequest) -> LlmResult<Plan> {
        self.call(LlmMethod::Plan, self.inner.plan(req)).await
    }
    async fn extract_sop(&self, req: &SopExtractionRequest) -> LlmResult<ExtractedSop> {
        self.call(LlmMethod::ExtractSop, self.inner.extract_sop(req)).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fake::FakeLlm;

    fn triage_req() -> TriageRequest {
        TriageRequest {
            text: "eta 2:30".into(),
            lang: None,
            from_role: Some("driver".into()),
            open_ask: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn one_deadline_spans_every_decide_attempt_of_a_run() {
        let client: Arc<dyn LlmClient> = Arc::new(FakeLlm::new());
        let deadline = RunDeadline::start(&LlmSettings::default());
        assert_eq!(deadline.remaining(), Duration::from_secs(120));

        // First attempt, then a conflict and a re-decide 100 s later: same deadline.
        assert!(client.with_deadline(deadline).triage(&triage_req()).await.is_ok());
        tokio::time::advance(Duration::from_secs(100)).await;
        assert_eq!(deadline.remaining(), Duration::from_secs(20));
        assert!(client.with_deadline(deadline).triage(&triage_req()).await.is_ok());

        tokio::time::advance(Duration::from_secs(20)).await;
        assert!(deadline.passed());
        let err = client.with_deadline(deadline).triage(&triage_req()).await.expect_err("passed");
        assert_eq!(err, LlmError::unavailable_final(LlmMethod::Triage, DEADLINE_PASSED));
    }
}
