//! The `[llm]` section of the configuration ([`LlmConfig`], read by the binary as
//! `LOAD_AGENT_LLM_*`), the settings of every provider call and of a run ([`LlmSettings`])
//! taken from it, and the names errors give settings by. The section's `openai_*` keys are
//! the OpenAI-compatible provider's: `load-agent-llm-openai` reads and checks them (one TOML
//! section is one type, so its fields are all here).

use std::time::Duration;

use load_agent_domain::settings::Secret;
use serde::{Deserialize, Serialize};

/// Environment variable names (the binary's config layer reads `LOAD_AGENT_LLM_<KEY>` into
/// `llm.<key>`, see `docs/llm.md`); errors name a setting by them. Provider-specific names
/// (`LOAD_AGENT_LLM_OPENAI_*`) live with the provider.
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
    /// The setting the error is about, as the configuration names it: `LOAD_AGENT_LLM_X` is
    /// `llm.x`; an error about no one setting (a provider that could not be built) is `llm`.
    pub fn setting(&self) -> String {
        let name = match self {
            ConfigError::UnknownProvider { setting, .. } => *setting,
            ConfigError::Invalid { setting, .. } | ConfigError::Missing { setting, .. } => setting.as_str(),
            ConfigError::Provider { .. } => "",
        };
        name.strip_prefix("LOAD_AGENT_LLM_")
            .map(|k| format!("llm.{}", k.to_ascii_lowercase()))
            .unwrap_or_else(|| "llm".to_string())
    }

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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// `local` (triage only; the planner and document reader are unavailable and behavior.md's
    /// fallbacks apply), `local+openai`, `openai`, `fake`.
    pub provider: String,
    pub call_timeout_ms: u64,
    pub max_retries: u32,
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    /// One run's deadline, conflict re-decides included; after it the run commits an urgent
    /// Hero task.
    pub run_deadline_ms: u64,
    pub calls_per_second: u32,
    /// An OpenAI-compatible endpoint (DeepSeek, llama.cpp server, vLLM); empty means none.
    #[serde(serialize_with = "load_agent_domain::settings::serialize_masked_url")]
    pub openai_base_url: String,
    pub openai_api_key: Secret,
    /// The default model for draft, plan and extract_sop.
    pub openai_model: String,
    pub openai_model_draft: String,
    pub openai_model_plan: String,
    pub openai_model_extract_sop: String,
    /// A vision model for documents.
    pub openai_model_extract_document: String,
    /// Only when triage should not run locally.
    pub openai_model_triage: String,
    /// `json_schema` or `json_object` (DeepSeek).
    pub openai_response_format: String,
    /// `model=input/output;...` in USD per million tokens.
    pub openai_prices: String,
    /// Text or a whole number (an environment variable of digits is read as a number).
    #[serde(deserialize_with = "load_agent_domain::settings::text_or_integer")]
    pub openai_max_output_tokens: String,
}

impl Default for LlmConfig {
    fn default() -> Self {
        let d = LlmSettings::default();
        LlmConfig {
            provider: "local".into(),
            call_timeout_ms: millis(d.call_timeout),
            max_retries: d.max_retries,
            backoff_base_ms: millis(d.backoff_base),
            backoff_max_ms: millis(d.backoff_max),
            run_deadline_ms: millis(d.run_deadline),
            calls_per_second: d.calls_per_second,
            openai_base_url: String::new(),
            openai_api_key: Secret::default(),
            openai_model: String::new(),
            openai_model_draft: String::new(),
            openai_model_plan: String::new(),
            openai_model_extract_sop: String::new(),
            openai_model_extract_document: String::new(),
            openai_model_triage: String::new(),
            openai_response_format: String::new(),
            openai_prices: String::new(),
            openai_max_output_tokens: String::new(),
        }
    }
}

/// A duration in whole milliseconds, as the section holds it.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl LlmConfig {
    /// The call and run settings of the section, validated (the error names the setting by its
    /// environment name, [`ConfigError::setting`] by its configuration name).
    pub fn settings(&self) -> Result<LlmSettings, ConfigError> {
        let s = LlmSettings {
            call_timeout: Duration::from_millis(self.call_timeout_ms),
            max_retries: self.max_retries,
            backoff_base: Duration::from_millis(self.backoff_base_ms),
            backoff_max: Duration::from_millis(self.backoff_max_ms),
            run_deadline: Duration::from_millis(self.run_deadline_ms),
            calls_per_second: self.calls_per_second,
        };
        s.validate()?;
        Ok(s)
    }

    /// One run's deadline (`llm.run_deadline_ms`), which the worker holds every run to.
    pub fn run_deadline(&self) -> Duration {
        Duration::from_millis(self.run_deadline_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_hold_without_overrides() {
        let s = LlmConfig::default().settings().expect("defaults are valid");
        assert_eq!(s, LlmSettings::default());
        assert_eq!(s.run_deadline, Duration::from_secs(120));
    }

    #[test]
    fn overrides_are_read_and_validated() {
        let c = LlmConfig {
            call_timeout_ms: 1500,
            max_retries: 4,
            run_deadline_ms: 60_000,
            ..LlmConfig::default()
        };
        let s = c.settings().expect("valid");
        assert_eq!(s.call_timeout, Duration::from_millis(1500));
        assert_eq!(s.max_retries, 4);
        assert_eq!(s.run_deadline, Duration::from_secs(60));

        let err =
            LlmConfig { calls_per_second: 0, ..LlmConfig::default() }.settings().expect_err("zero rate");
        assert!(err.to_string().contains(env::CALLS_PER_SECOND), "{err}");
        assert_eq!(err.setting(), "llm.calls_per_second");
        let err = LlmConfig { max_retries: 11, ..LlmConfig::default() }.settings().expect_err("unbounded");
        assert!(err.to_string().contains(env::MAX_RETRIES), "{err}");
        assert_eq!(err.setting(), "llm.max_retries");
    }
}
