//! An OpenAI-compatible chat-completions provider for the LLM boundary (`load-agent-llm`):
//! DeepSeek's API, OpenAI, and local servers that speak the same protocol (llama.cpp server,
//! vLLM). Also home of [`build_llm_client`], which composes the client a
//! `LOAD_AGENT_LLM_PROVIDER` value asks for (it lives here because `load-agent-llm` must not
//! depend on HTTP).
//!
//! Layout:
//! - [`config`]: [`OpenAiConfig`] (base URL, model per method, prices, response format), the
//!   [`ApiKey`] secret, the `LOAD_AGENT_LLM_OPENAI_*` names.
//! - `prompts`: the system prompt of each method.
//! - `wire`: the protocol as sync code over JSON: the request body (JSON-schema structured
//!   output, the typed request as the user message, documents as `image_url` parts), reading a
//!   response, the meaning of an HTTP status.
//! - [`client`]: [`OpenAiClient`], the only code that touches the network; validates every
//!   output against the method's typed struct and JSON schema.
//!
//! Architecture invariant: the pipeline never names this crate; only the binary's start-up does,
//! through [`build_llm_client`].

pub mod client;
pub mod config;
mod prompts;
mod wire;

use std::sync::Arc;

use load_agent_llm::{ConfigError, Guarded, LlmClient, LlmSettings, ProviderSpec, RemoteProvider, compose};

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
