//! An OpenAI-compatible chat-completions provider for the LLM boundary (`load-agent-llm`):
//! DeepSeek's API, OpenAI, and local servers that speak the same protocol (llama.cpp server,
//! vLLM). Also home of [`build_llm_client`], which composes the client a
//! `LOAD_AGENT_LLM_PROVIDER` value asks for (it lives here because `load-agent-llm` must not
//! depend on HTTP).
//!
//! Layout:
//! - [`config`]: [`OpenAiConfig`] (base URL, model per method, prices, response format) read from
//!   the `[llm]` section's `openai_*` keys, the [`ApiKey`] secret, the `LOAD_AGENT_LLM_OPENAI_*`
//!   names.
//! - [`client_from_config`] and [`validate_llm_config`]: the `[llm]` section's client and checks,
//!   as the binary's start-up uses them.
//! - `prompts`: the system prompt of each method.
//! - `wire`: the protocol as sync code over JSON: the request body (JSON-schema structured
//!   output, the typed request as the user message, documents as `image_url` parts), reading a
//!   response, the meaning of an HTTP status.
//! - [`client`]: [`OpenAiClient`], the only code that touches the network; validates every
//!   output against the method's typed struct and JSON schema.
//!
//! Architecture invariant: the pipeline never names this crate; only the binary's start-up does,
//! through [`client_from_config`] ([`build_llm_client`]).

pub mod client;
pub mod config;
mod prompts;
mod wire;

use std::sync::Arc;

use load_agent_domain::settings::SettingError;
use load_agent_llm::{
    ConfigError, Guarded, LlmClient, LlmConfig, LlmSettings, ProviderSpec, RemoteProvider, compose,
};

pub use client::{OpenAiClient, PROVIDER_NAME};
pub use config::{ApiKey, ModelPrice, OpenAiConfig, ResponseFormat, parse_prices};

/// Builds the client for a `LOAD_AGENT_LLM_PROVIDER` value:
///
/// | value | triage | draft, extract_document, plan, extract_sop |
/// |---|---|---|
/// | `local` (default, also empty) | local model | unavailable (behavior.md fallbacks) |
/// | `local+openai` | local model | OpenAI-compatible, for each method with a model |
/// | `openai` | OpenAI-compatible if a triage model is configured, else local | OpenAI-compatible |
/// | `fake` | `FakeLlm` with nothing scripted | `FakeLlm` |
///
/// The OpenAI-compatible client is wrapped in [`Guarded`] (rate limit, per-call timeout, retries
/// from `settings`); the local model is not (it is in process and cannot fail). The worker adds
/// the per-run deadline on top with `client.with_deadline(deadline)`. Must be called inside a
/// tokio runtime (the guard's clock).
pub fn build_llm_client(
    provider: &str,
    settings: &LlmSettings,
    openai: Option<OpenAiConfig>,
) -> Result<Arc<dyn LlmClient>, ConfigError> {
    let spec: ProviderSpec = provider.parse()?;
    settings.validate()?;
    let remote = match openai {
        Some(config) if spec.needs_openai() => {
            let client = OpenAiClient::new(config)?;
            let methods = client.methods();
            Some(RemoteProvider {
                name: PROVIDER_NAME.to_owned(),
                client: Arc::new(Guarded::new(client, settings)?),
                methods,
            })
        }
        _ => None,
    };
    let composite = compose(spec, remote)?;
    let routes: Vec<String> = composite.routes().into_iter().map(|(m, p)| format!("{m}={p}")).collect();
    tracing::info!(provider = %spec, routes = %routes.join(","), "LLM client built");
    Ok(Arc::new(composite))
}

/// The client the `[llm]` section asks for ([`build_llm_client`] of its provider, call settings
/// and OpenAI-compatible provider). Must be called inside a tokio runtime.
pub fn client_from_config(llm: &LlmConfig) -> Result<Arc<dyn LlmClient>, SettingError> {
    build_llm_client(&llm.provider, &llm.settings().map_err(named)?, openai_config(llm)?).map_err(named)
}

/// Checks the `[llm]` section at start: a known provider, call settings a run can work with, and
/// the OpenAI-compatible provider's settings where the provider needs it. The error names the
/// setting (`llm.provider`, `llm.openai_base_url`, ...).
pub fn validate_llm_config(llm: &LlmConfig) -> Result<(), SettingError> {
    llm.provider.parse::<ProviderSpec>().map_err(|e| SettingError::new("llm.provider", e.to_string()))?;
    llm.settings().map_err(named)?;
    let openai = openai_config(llm)?;
    if llm.provider.contains("openai") && openai.is_none() {
        return Err(SettingError::new("llm.openai_base_url", "required by llm.provider with openai"));
    }
    Ok(())
}

fn openai_config(llm: &LlmConfig) -> Result<Option<OpenAiConfig>, SettingError> {
    OpenAiConfig::from_llm_config(llm).map_err(named)
}

/// An LLM configuration error, named by its setting (`llm.x`).
fn named(e: ConfigError) -> SettingError {
    SettingError::new(e.setting(), e.to_string())
}
