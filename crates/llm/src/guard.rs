//! `Guarded<C>`: what every call to a provider goes through. A governor rate limit, a per-call
//! timeout, bounded retries with exponential backoff and full jitter for retryable
//! `Unavailable` failures (never for `InvalidOutput`).
//!
//! Time is tokio's (`tokio::time`), including the rate limiter's clock, so tests run under
//! `tokio::time::pause()` without sleeping. The run deadline is a separate layer
//! ([`crate::WithDeadline`]) outside the composite, so it bounds every method, local or remote.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use rand::Rng;

use load_agent_domain::DocumentFields;

use crate::LlmClient;
use crate::settings::{ConfigError, LlmSettings, env};
use crate::types::{
    DocumentRequest, Draft, DraftRequest, ExtractedSop, LlmError, LlmMethod, LlmResult, Plan, PlanRequest,
    SopExtractionRequest, TriageRequest, TriageResult,
};

/// The rate limiter's clock: time elapsed on tokio's clock since the limiter was built, so a
/// paused test runtime drives it.
#[derive(Debug, Clone)]
struct TokioClock {
    start: tokio::time::Instant,
}

impl Clock for TokioClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        self.start.elapsed()
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Duration>>;

struct Shared {
    settings: LlmSettings,
    limiter: Limiter,
    clock: TokioClock,
}

/// Wraps a provider: rate limit, per-call timeout, bounded retries. Cheap to clone (the limiter
/// is shared between clones, so one provider has one budget).
pub struct Guarded<C> {
    inner: Arc<C>,
    shared: Arc<Shared>,
}

impl<C> Clone for Guarded<C> {
    fn clone(&self) -> Self {
        Guarded { inner: self.inner.clone(), shared: self.shared.clone() }
    }
}

impl<C> std::fmt::Debug for Guarded<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded").field("settings", &self.shared.settings).finish_non_exhaustive()
    }
}

/// The upper bound of the backoff before retry `retry` (0-based):
/// `min(backoff_max, backoff_base * 2^retry)`.
pub fn backoff_ceiling(settings: &LlmSettings, retry: u32) -> Duration {
    let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
    settings.backoff_base.saturating_mul(factor).min(settings.backoff_max)
}

/// Full jitter: a point in `[0, ceiling]` chosen by `unit` in `[0, 1]`.
pub fn full_jitter(ceiling: Duration, unit: f64) -> Duration {
    ceiling.mul_f64(unit.clamp(0.0, 1.0))
}

impl<C: LlmClient> Guarded<C> {
    /// Validates the settings and builds the limiter (`calls_per_second`, burst of the same size).
    /// Build it inside the tokio runtime it will run on.
    pub fn new(inner: C, settings: &LlmSettings) -> Result<Self, ConfigError> {
        settings.validate()?;
        let per_second = std::num::NonZeroU32::new(settings.calls_per_second)
            .ok_or_else(|| ConfigError::invalid(env::CALLS_PER_SECOND, "0", "must be positive"))?;
        let clock = TokioClock { start: tokio::time::Instant::now() };
        let limiter = RateLimiter::direct_with_clock(Quota::per_second(per_second), clock.clone());
        Ok(Guarded {
            inner: Arc::new(inner),
            shared: Arc::new(Shared { settings: settings.clone(), limiter, clock }),
        })
    }

    pub fn inner(&self) -> &C {
        &self.inner
    }

    pub fn settings(&self) -> &LlmSettings {
        &self.shared.settings
    }

    /// Waits until the rate limiter lets one call through.
    async fn acquire(&self) {
        while let Err(not_until) = self.shared.limiter.check() {
            let wait = not_until.wait_time_from(self.shared.clock.now());
            tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
        }
    }

    async fn call<T, F, Fut>(&self, method: LlmMethod, attempt: F) -> LlmResult<T>
    where
        F: Fn() -> Fut + Send,
        Fut: Future<Output = LlmResult<T>> + Send,
        T: Send,
    {
        let settings = &self.shared.settings;
        let mut retry = 0u32;
        loop {
            self.acquire().await;
            let result = match tokio::time::timeout(settings.call_timeout, attempt()).await {
                Ok(result) => result,
                Err(_) => Err(LlmError::unavailable(
                    method,
                    format!("timed out after {} ms", settings.call_timeout.as_millis()),
                )),
            };
            match result {
                Ok(out) => return Ok(out),
                Err(err) if err.is_retryable() && retry < settings.max_retries => {
                    let delay = full_jitter(backoff_ceiling(settings, retry), rand::rng().random::<f64>());
                    tracing::warn!(
                        method = method.as_str(),
                        attempt = retry + 1,
                        delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        error = %load_agent_domain::pii::reason(match &err {
                            LlmError::Unavailable { reason, .. } | LlmError::InvalidOutput { reason, .. } => reason,
                        }),
                        "LLM call failed, retrying"
                    );
                    tokio::time::sleep(delay).await;
                    retry += 1;
                }
                Err(err) if err.is_retryable() => {
                    return Err(LlmError::unavailable(
                        method,
                        format!("{} (after {} attempts)", err.reason(), retry + 1),
                    ));
                }
                Err(err) => return Err(err),
            }
        }
    }
}

#[async_trait]
impl<C: LlmClient> LlmClient for Guarded<C> {
    async fn triage(&self, req: &TriageRequest) -> LlmResult<TriageResult> {
        self.call(LlmMethod::Triage, || self.inner.triage(req)).await
    }
    async fn draft(&self, req: &DraftRequest) -> LlmResult<Draft> {
        self.call(LlmMethod::Draft, || self.inner.draft(req)).await
    }
    async fn extract_document(&self, req: &DocumentRequest) -> LlmResult<DocumentFields> {
        self.call(LlmMethod::ExtractDocument, || self.inner.extract_document(req)).await
    }
    async fn plan(&self, req: &PlanRequest) -> LlmResult<Plan> {
        self.call(LlmMethod::Plan, || self.inner.plan(req)).await
    }
    async fn extract_sop(&self, req: &SopExtractionRequest) -> LlmResult<ExtractedSop> {
        self.call(LlmMethod::ExtractSop, || self.inner.extract_sop(req)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deadline::{LlmClientExt, RunDeadline};
    use crate::fake::FakeLlm;
    use crate::types::PlannedAction;
    use tokio::time::Instant;

    /// The defaults: a 20 s call timeout, 2 retries backing off from 500 ms to 8 s, a 120 s run
    /// deadline, 20 calls per second.
    fn settings() -> LlmSettings {
        LlmSettings::default()
    }

    fn req() -> PlanRequest {
        PlanRequest {
            load_id: "L1".into(),
            situation: "s".into(),
            state_summary: serde_json::json!({}),
            message: None,
            from_role: None,
        }
    }

    fn plan() -> Plan {
        Plan { actions: vec![PlannedAction::TmsNote { text: "n".into() }], rationale: "r".into() }
    }

    fn overloaded() -> LlmError {
        LlmError::unavailable(LlmMethod::Plan, "HTTP 503")
    }

    #[test]
    fn backoff_grows_exponentially_to_its_cap_and_jitter_stays_below_it() {
        let s = settings();
        let ceilings: Vec<u128> = (0..6).map(|n| backoff_ceiling(&s, n).as_millis()).collect();
        assert_eq!(ceilings, [500, 1000, 2000, 4000, 8000, 8000]);
        assert_eq!(backoff_ceiling(&s, 200), s.backoff_max, "no overflow");
        assert_eq!(full_jitter(Duration::from_secs(2), 0.0), Duration::ZERO);
        assert_eq!(full_jitter(Duration::from_secs(2), 0.25), Duration::from_millis(500));
        assert_eq!(full_jitter(Duration::from_secs(2), 7.0), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_then_success() {
        let fake = Arc::new(FakeLlm::new());
        fake.script_plan(Err(overloaded()))
            .script_plan(Err(overloaded()))
            .script_plan(FakeLlm::answer(LlmMethod::Plan, plan()));
        let guarded = Guarded::new(fake.clone(), &settings()).expect("valid");
        let started = Instant::now();
        let out = guarded.plan(&req()).await.expect("third attempt succeeds");
        assert_eq!(out.value, plan());
        assert_eq!(fake.calls(LlmMethod::Plan), 3);
        // Two backoffs, each at most its ceiling (0.5 s, then 1 s).
        assert!(started.elapsed() <= Duration::from_millis(1500), "{:?}", started.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn retries_exhausted_is_unavailable() {
        let fake = Arc::new(FakeLlm::new());
        for _ in 0..5 {
            fake.script_plan(Err(overloaded()));
        }
        let guarded = Guarded::new(fake.clone(), &settings()).expect("valid");
        let err = guarded.plan(&req()).await.expect_err("exhausted");
        assert!(err.is_unavailable());
        assert_eq!(err.reason(), "HTTP 503 (after 3 attempts)");
        assert_eq!(fake.calls(LlmMethod::Plan), 3, "1 attempt + max_retries 2");
    }

    #[tokio::test(start_paused = true)]
    async fn invalid_output_and_final_errors_are_not_retried() {
        let fake = Arc::new(FakeLlm::new());
        fake.script_plan(Err(LlmError::invalid(LlmMethod::Plan, "action 1 proposes `send_sms`")))
            .script_plan(FakeLlm::answer(LlmMethod::Plan, plan()));
        let guarded = Guarded::new(fake.clone(), &settings()).expect("valid");
        let err = guarded.plan(&req()).await.expect_err("invalid");
        assert!(err.is_invalid_output());
        assert_eq!(fake.calls(LlmMethod::Plan), 1);

        let fake = Arc::new(FakeLlm::new());
        fake.script_plan(Err(LlmError::unavailable_final(LlmMethod::Plan, "HTTP 401: check the API key")));
        let guarded = Guarded::new(fake.clone(), &settings()).expect("valid");
        assert_eq!(guarded.plan(&req()).await.expect_err("final").reason(), "HTTP 401: check the API key");
        assert_eq!(fake.calls(LlmMethod::Plan), 1);
    }

    /// Never answers: a provider that hangs.
    struct Hangs;

    #[async_trait]
    impl LlmClient for Hangs {
        async fn triage(&self, _: &TriageRequest) -> LlmResult<TriageResult> {
            std::future::pending().await
        }
        async fn draft(&self, _: &DraftRequest) -> LlmResult<Draft> {
            std::future::pending().await
        }
        async fn extract_document(&self, _: &DocumentRequest) -> LlmResult<DocumentFields> {
            std::future::pending().await
        }
        async fn plan(&self, _: &PlanRequest) -> LlmResult<Plan> {
            std::future::pending().await
        }
        async fn extract_sop(&self, _: &SopExtractionRequest) -> LlmResult<ExtractedSop> {
            std::future::pending().await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_attempt_times_out_then_the_call_is_unavailable() {
        let s = LlmSettings { call_timeout: Duration::from_secs(5), max_retries: 1, ..settings() };
        let guarded = Guarded::new(Hangs, &s).expect("valid");
        let started = Instant::now();
        let err = guarded.plan(&req()).await.expect_err("hangs");
        assert_eq!(err.reason(), "timed out after 5000 ms (after 2 attempts)");
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_secs(10) && elapsed <= Duration::from_millis(10_500),
            "{elapsed:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_caps_the_call_timeout_and_fails_fast_once_passed() {
        let guarded = Guarded::new(Hangs, &settings()).expect("valid");
        let deadline = RunDeadline::after(Duration::from_secs(7));
        let started = Instant::now();
        let err = guarded.with_deadline(deadline).plan(&req()).await.expect_err("deadline");
        assert_eq!(err.reason(), "run deadline passed");
        assert!(!err.is_retryable());
        assert_eq!(started.elapsed(), Duration::from_secs(7), "min(call_timeout 20 s, remaining 7 s)");

        // After the deadline, no call reaches the provider.
        let fake = Arc::new(FakeLlm::new());
        fake.script_plan(FakeLlm::answer(LlmMethod::Plan, plan()));
        let guarded = Guarded::new(fake.clone(), &settings()).expect("valid");
        let err = guarded.with_deadline(deadline).plan(&req()).await.expect_err("passed");
        assert_eq!(err.reason(), "run deadline passed");
        assert_eq!(fake.calls(LlmMethod::Plan), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_cuts_retries_short() {
        let fake = Arc::new(FakeLlm::new());
        for _ in 0..20 {
            fake.script_plan(Err(overloaded()));
        }
        let s = LlmSettings {
            max_retries: 10,
            backoff_base: Duration::from_secs(4),
            backoff_max: Duration::from_secs(60),
            ..settings()
        };
        let guarded = Guarded::new(fake.clone(), &s).expect("valid");
        let started = Instant::now();
        let err = guarded
            .with_deadline(RunDeadline::after(Duration::from_secs(10)))
            .plan(&req())
            .await
            .expect_err("cut");
        assert_eq!(err.reason(), "run deadline passed");
        assert!(started.elapsed() <= Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limit_spaces_calls() {
        let fake = Arc::new(FakeLlm::new());
        for _ in 0..6 {
            fake.script_plan(FakeLlm::answer(LlmMethod::Plan, plan()));
        }
        let s = LlmSettings { calls_per_second: 2, ..settings() };
        let guarded = Guarded::new(fake.clone(), &s).expect("valid");
        let started = Instant::now();
        let mut at = Vec::new();
        for _ in 0..6 {
            guarded.plan(&req()).await.expect("scripted");
            at.push(started.elapsed().as_millis());
        }
        // A burst of 2, then one call every 500 ms.
        assert_eq!(at, [0, 0, 500, 1000, 1500, 2000]);
    }

    #[tokio::test(start_paused = true)]
    async fn clones_share_one_rate_budget() {
        let fake = Arc::new(FakeLlm::new());
        for _ in 0..3 {
            fake.script_plan(FakeLlm::answer(LlmMethod::Plan, plan()));
        }
        let a = Guarded::new(fake, &LlmSettings { calls_per_second: 1, ..settings() }).expect("valid");
        let b = a.clone();
        let started = Instant::now();
        a.plan(&req()).await.expect("first");
        b.plan(&req()).await.expect("second");
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[test]
    fn invalid_settings_are_refused() {
        let err = Guarded::new(FakeLlm::new(), &LlmSettings { calls_per_second: 0, ..settings() })
            .expect_err("zero");
        assert!(err.to_string().contains(env::CALLS_PER_SECOND));
    }
}
