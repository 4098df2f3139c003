//! Settings of every provider call and of a run, and their environment names.

use std::time::Duration;

/// Environment variable names (proposed; the binary's config layer reads them, see
/// `docs/llm.md`). Provider-specific names (`LOAD_AGENT_LLM_OPENAI_*`) live with the provider.
pub mod env {
    /// Which providers answer: `local` (default), `local+openai`, `openai`, `fake`.
    pub const PROVIDER: &str = "LOAD_AGENT_LLM_PROVIDER";
    pub const CALL_TIMEOUT_MS: &str = "LOAD_AGENT_LLM_CALL_TIMEOUT_MS";
    pub const MAX_RETRIES: &str = "LOAD_AGENT_LLM_MAX_RETRIES";
    pub const BACKOFF_BASE_MS: &str = "LOAD_AGENT_LLM_BACKOFF_BASE_MS";
    pub const BACKOFF_MAX_MS: &str = "LOAD_AGENT_LLM_BACKOFF_MAX_MS";
    pub const RUN_DEADLINE_MS: &str = "LOAD_AGENT_LLM_RUN_DEADLINE_MS";
    pub const CALLS_PER_SECOND: &str = "LOAD_AGENT_LLM_CALLS_PER_SECOND";
}

/// A configuration value that cannot be used; raised at start-up, never on the load path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{setting}={value:?} is not a known LLM provider (expected one of: {expected})")]
    UnknownProvider { setting: &'static str, value: String, expected: &'static str },
    #[error("{setting}={value:?} is invalid: {reason}")]
    Invalid { setting: String, value: String, reason: String },
    #[error("{setting} is required: {why}")]
    Missing { setting: String, why: String },
    /// The HTTP client could not be built (TLS backend, ...).
    #[error("LLM provider {provider} could not be built: {reason}")]
    Provider { provider: String, reason: String },
}

impl ConfigError {
    pub fn invalid(setting: impl Into<String>, value: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError::Invalid { setting: setting.into(), value: value.into(), reason: reason.into() }
    }
}

/// Per-call timeout and bounded retries with exponential backoff and jitter, the run deadline
/// and the rate limit.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmSettings {
    /// The timeout of one provider call (one attempt); a call made under a [`crate::RunDeadline`]
    /// gets `min(call_timeout, remaining)`.
    pub call_timeout: Duration,
    /// Retries after the first attempt for a retryable `Unavailable`; 2 means at most 3 attempts.
    pub max_retries: u32,
    /// Backoff before retry `n` (0-based) is uniform in `[0, min(backoff_max, backoff_base * 2^n)]`
    /// (full jitter).
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// The deadline of one worker run, spanning conflict re-decides.
    pub run_deadline: Duration,
    /// Provider calls per second allowed (a governor rate limit, burst of the same size).
    pub calls_per_second: u32,
}

impl Default for LlmSettings {
    fn default() -> Self {
        LlmSettings {
            call_timeout: Duration::from_secs(20),
            max_retries: 2,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(8),
            run_deadline: Duration::from_secs(120),
            calls_per_second: 20,
        }
    }
}

impl LlmSettings {
    /// Defaults overridden by the `LOAD_AGENT_LLM_*` values `lookup` returns (for example
    /// `|name| std::env::var(name).ok()`), validated.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut s = LlmSettings::default();
        if let Some(v) = lookup(env::CALL_TIMEOUT_MS) {
            s.call_timeout = Duration::from_millis(parse_u64(env::CALL_TIMEOUT_MS, &v)?);
        }
        if let Some(v) = lookup(env::MAX_RETRIES) {
            s.max_retries = parse_u64(env::MAX_RETRIES, &v)?
                .try_into()
                .map_err(|_| ConfigError::invalid(env::MAX_RETRIES, &v, "too large"))?;
        }
        if let Some(v) = lookup(env::BACKOFF_BASE_MS) {
            s.backoff_base = Duration::from_millis(parse_u64(env::BACKOFF_BASE_MS, &v)?);
        }
        if let Some(v) = lookup(env::BACKOFF_MAX_MS) {
            s.backoff_max = Duration::from_millis(parse_u64(env::BACKOFF_MAX_MS, &v)?);
        }
        if let Some(v) = lookup(env::RUN_DEADLINE_MS) {
            s.run_deadline = Duration::from_millis(parse_u64(env::RUN_DEADLINE_MS, &v)?);
        }
        if let Some(v) = lookup(env::CALLS_PER_SECOND) {
            s.calls_per_second = parse_u64(env::CALLS_PER_SECOND, &v)?
                .try_into()
                .map_err(|_| ConfigError::invalid(env::CALLS_PER_SECOND, &v, "too large"))?;
        }
        s.validate()?;
        Ok(s)
    }

    /// Rejects values no run can work with.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.call_timeout.is_zero() {
            return Err(ConfigError::invalid(env::CALL_TIMEOUT_MS, "0", "must be positive"));
        }
        if self.run_deadline.is_zero() {
            return Err(ConfigError::invalid(env::RUN_DEADLINE_MS, "0", "must be positive"));
        }
        if self.calls_per_second == 0 {
            return Err(ConfigError::invalid(env::CALLS_PER_SECOND, "0", "must be positive"));
        }
        if self.max_retries > 10 {
            return Err(ConfigError::invalid(
                env::MAX_RETRIES,
                self.max_retries.to_string(),
                "at most 10 (retries must stay bounded)",
            ));
        }
        if self.backoff_max < self.backoff_base {
            return Err(ConfigError::invalid(
                env::BACKOFF_MAX_MS,
                self.backoff_max.as_millis().to_string(),
                "must be at least the backoff base",
            ));
        }
        Ok(())
    }
}

fn parse_u64(setting: &'static str, value: &str) -> Result<u64, ConfigError> {
    value.trim().parse().map_err(|_| ConfigError::invalid(setting, value, "expected a non-negative integer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_hold_without_overrides() {
        let s = LlmSettings::from_lookup(|_| None).expect("defaults are valid");
        assert_eq!(s, LlmSettings::default());
        assert_eq!(s.run_deadline, Duration::from_secs(120));
    }

    #[test]
    fn overrides_are_read_and_validated() {
        let s = LlmSettings::from_lookup(|name| match name {
            env::CALL_TIMEOUT_MS => Some("1500".into()),
            env::MAX_RETRIES => Some("4".into()),
            env::RUN_DEADLINE_MS => Some("60000".into()),
            _ => None,
        })
        .expect("valid");
        assert_eq!(s.call_timeout, Duration::from_millis(1500));
        assert_eq!(s.max_retries, 4);
        assert_eq!(s.run_deadline, Duration::from_secs(60));

        let err = LlmSettings::from_lookup(|name| (name == env::CALLS_PER_SECOND).then(|| "0".into()))
            .expect_err("zero rate");
        assert!(err.to_string().contains(env::CALLS_PER_SECOND), "{err}");
        let err = LlmSettings::from_lookup(|name| (name == env::MAX_RETRIES).then(|| "three".into()))
            .expect_err("not a number");
        assert!(err.to_string().contains(env::MAX_RETRIES), "{err}");
    }
}
