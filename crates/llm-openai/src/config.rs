//! The provider's configuration: where to send, with which key, which model per method, what a
//! model costs, read from the `openai_*` keys of the `[llm]` section ([`OpenAiConfig::from_llm_config`]).
//! The key is an [`ApiKey`], which never prints.

use std::collections::BTreeMap;
use std::time::Duration;

use load_agent_domain::settings::Secret;
use load_agent_llm::{ConfigError, LlmConfig, LlmMethod};

/// Environment names of the `llm.openai_*` settings (errors name a setting by them; see
/// `docs/llm.md`).
pub mod env {
    /// The API root; requests go to `{base_url}/chat/completions`. Setting it configures the
    /// provider.
    pub const BASE_URL: &str = "LOAD_AGENT_LLM_OPENAI_BASE_URL";
    /// Bearer token; unset for local servers that need none.
    pub const API_KEY: &str = "LOAD_AGENT_LLM_OPENAI_API_KEY";
    /// Default model of `draft`, `plan` and `extract_sop`.
    pub const MODEL: &str = "LOAD_AGENT_LLM_OPENAI_MODEL";
    pub const MODEL_DRAFT: &str = "LOAD_AGENT_LLM_OPENAI_MODEL_DRAFT";
    pub const MODEL_PLAN: &str = "LOAD_AGENT_LLM_OPENAI_MODEL_PLAN";
    pub const MODEL_EXTRACT_SOP: &str = "LOAD_AGENT_LLM_OPENAI_MODEL_EXTRACT_SOP";
    /// A vision model; without it the document reader is unavailable.
    pub const MODEL_EXTRACT_DOCUMENT: &str = "LOAD_AGENT_LLM_OPENAI_MODEL_EXTRACT_DOCUMENT";
    /// Only with `LOAD_AGENT_LLM_PROVIDER=openai`; without it triage stays local.
    pub const MODEL_TRIAGE: &str = "LOAD_AGENT_LLM_OPENAI_MODEL_TRIAGE";
    /// `json_schema` (default) or `json_object` (DeepSeek).
    pub const RESPONSE_FORMAT: &str = "LOAD_AGENT_LLM_OPENAI_RESPONSE_FORMAT";
    /// `model=input/output;model=input/output`, USD per million tokens.
    pub const PRICES: &str = "LOAD_AGENT_LLM_OPENAI_PRICES";
    /// Cap on output tokens per call (all methods but `extract_sop`).
    pub const MAX_OUTPUT_TOKENS: &str = "LOAD_AGENT_LLM_OPENAI_MAX_OUTPUT_TOKENS";

    /// The per-method model setting.
    pub fn model_for(method: load_agent_llm::LlmMethod) -> &'static str {
        use load_agent_llm::LlmMethod;
        match method {
            LlmMethod::Triage => MODEL_TRIAGE,
            LlmMethod::Draft => MODEL_DRAFT,
            LlmMethod::ExtractDocument => MODEL_EXTRACT_DOCUMENT,
            LlmMethod::Plan => MODEL_PLAN,
            LlmMethod::ExtractSop => MODEL_EXTRACT_SOP,
        }
    }
}

/// An API key: the configuration's [`Secret`] (`llm.openai_api_key`). `Debug` and `Display`
/// print `***`; read it only with `expose`, where the request's `Authorization` header is built
/// (and marked sensitive).
pub type ApiKey = Secret;

/// What a model costs, in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrice {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl ModelPrice {
    pub fn cost_usd(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        (input_tokens as f64 * self.input_per_mtok + output_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0
    }
}

/// How the output schema is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResponseFormat {
    /// `response_format: {type: "json_schema", json_schema: {name, strict: true, schema}}`
    /// (OpenAI, llama.cpp server, vLLM): the server constrains decoding to the schema.
    #[default]
    JsonSchema,
    /// `response_format: {type: "json_object"}` with the schema in the system prompt, for servers
    /// without schema support (DeepSeek). The output is validated against the schema either way.
    JsonObject,
}

impl ResponseFormat {
    pub fn parse(value: &str) -> Result<Self, ConfigError> {
        match value.trim() {
            "json_schema" => Ok(ResponseFormat::JsonSchema),
            "json_object" => Ok(ResponseFormat::JsonObject),
            other => {
                Err(ConfigError::invalid(env::RESPONSE_FORMAT, other, "expected json_schema or json_object"))
            }
        }
    }
}

/// The OpenAI-compatible provider's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// The API root, for example `https://api.deepseek.com/v1` or `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    pub api_key: Option<ApiKey>,
    /// The model of each method it serves; a method without a model is not routed here.
    pub models: BTreeMap<LlmMethod, String>,
    /// Prices by model name; a model without a price costs 0 (a local server).
    pub prices: BTreeMap<String, ModelPrice>,
    pub response_format: ResponseFormat,
    /// `max_tokens` of every call but `extract_sop`.
    pub max_output_tokens: u32,
    /// `max_tokens` of `extract_sop` (a whole spec; edit time only).
    pub max_output_tokens_sop: u32,
    /// TCP + TLS connect timeout. The whole call's timeout is the guard's
    /// (`LOAD_AGENT_LLM_CALL_TIMEOUT_MS`).
    pub connect_timeout: Duration,
}

impl OpenAiConfig {
    /// A provider at `base_url` with no key, no model, no price.
    pub fn new(base_url: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            models: BTreeMap::new(),
            prices: BTreeMap::new(),
            response_format: ResponseFormat::default(),
            max_output_tokens: 1_024,
            max_output_tokens_sop: 8_192,
            connect_timeout: Duration::from_secs(5),
        }
    }

    pub fn with_api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    pub fn with_model(mut self, method: LlmMethod, model: impl Into<String>) -> Self {
        self.models.insert(method, model.into());
        self
    }

    pub fn with_price(mut self, model: impl Into<String>, price: ModelPrice) -> Self {
        self.prices.insert(model.into(), price);
        self
    }

    pub fn with_response_format(mut self, format: ResponseFormat) -> Self {
        self.response_format = format;
        self
    }

    /// The `openai_*` settings of the `[llm]` section; `None` when the base URL is not set.
    /// Values are trimmed, and an empty one is unset.
    pub fn from_llm_config(llm: &LlmConfig) -> Result<Option<Self>, ConfigError> {
        let get = |value: &str| Some(value.trim().to_owned()).filter(|v| !v.is_empty());
        let Some(base_url) = get(&llm.openai_base_url) else {
            return Ok(None);
        };
        let mut config = OpenAiConfig::new(base_url);
        config.api_key = get(llm.openai_api_key.expose()).map(ApiKey::new);
        let default_model = get(&llm.openai_model);
        for method in LlmMethod::ALL {
            let defaulted = matches!(method, LlmMethod::Draft | LlmMethod::Plan | LlmMethod::ExtractSop);
            let configured = match method {
                LlmMethod::Triage => &llm.openai_model_triage,
                LlmMethod::Draft => &llm.openai_model_draft,
                LlmMethod::ExtractDocument => &llm.openai_model_extract_document,
                LlmMethod::Plan => &llm.openai_model_plan,
                LlmMethod::ExtractSop => &llm.openai_model_extract_sop,
            };
            let model = get(configured).or_else(|| default_model.clone().filter(|_| defaulted));
            if let Some(model) = model {
                config.models.insert(method, model);
            }
        }
        if let Some(v) = get(&llm.openai_response_format) {
            config.response_format = ResponseFormat::parse(&v)?;
        }
        if let Some(v) = get(&llm.openai_prices) {
            config.prices = parse_prices(&v)?;
        }
        if let Some(v) = get(&llm.openai_max_output_tokens) {
            config.max_output_tokens = v.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                ConfigError::invalid(env::MAX_OUTPUT_TOKENS, &v, "expected a positive integer")
            })?;
        }
        config.validate()?;
        Ok(Some(config))
    }

    /// The base URL is http(s) and some method has a model.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let url = self.base_url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError::invalid(env::BASE_URL, url, "expected an http:// or https:// URL"));
        }
        if self.models.is_empty() {
            return Err(ConfigError::Missing {
                setting: env::MODEL.to_owned(),
                why: "the OpenAI-compatible provider has no model for any method".to_owned(),
            });
        }
        Ok(())
    }

    /// `{base_url}/chat/completions`.
    pub fn chat_completions_url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim().trim_end_matches('/'))
    }
}

/// Parses `model=input/output;model=input/output` (USD per million tokens).
pub fn parse_prices(value: &str) -> Result<BTreeMap<String, ModelPrice>, ConfigError> {
    let bad = |reason: &str| ConfigError::invalid(env::PRICES, value, reason);
    let mut prices = BTreeMap::new();
    for entry in value.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (model, price) = entry.split_once('=').ok_or_else(|| bad("expected model=input/output"))?;
        let (input, output) = price.split_once('/').ok_or_else(|| bad("expected model=input/output"))?;
        let number = |s: &str| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|p| p.is_finite() && *p >= 0.0)
                .ok_or_else(|| bad("prices are non-negative numbers"))
        };
        prices.insert(
            model.trim().to_owned(),
            ModelPrice { input_per_mtok: number(input)?, output_per_mtok: number(output)? },
        );
    }
    Ok(prices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_key_never_prints() {
        let key = ApiKey::new("sk-live-very-secret");
        assert_eq!(format!("{key:?}"), "***");
        assert_eq!(key.to_string(), "***");
        let config = OpenAiConfig::new("https://api.deepseek.com/v1").with_api_key(key.clone());
        assert!(!format!("{config:?}").contains("very-secret"));
        assert!(!format!("{config:#?}").contains("very-secret"));
        assert_eq!(key.expose(), "sk-live-very-secret");
    }

    #[test]
    fn config_from_the_llm_section() {
        let llm = LlmConfig {
            openai_base_url: "https://api.deepseek.com/v1/".into(),
            openai_api_key: Secret::new("sk-1"),
            openai_model: "deepseek-chat".into(),
            openai_model_extract_sop: "deepseek-reasoner".into(),
            openai_response_format: "json_object".into(),
            openai_prices: "deepseek-chat=0.27/1.10; deepseek-reasoner=0.55/2.19".into(),
            ..LlmConfig::default()
        };
        let config = OpenAiConfig::from_llm_config(&llm).expect("valid").expect("configured");
        assert_eq!(config.chat_completions_url(), "https://api.deepseek.com/v1/chat/completions");
        assert_eq!(config.api_key.as_ref().map(ApiKey::expose), Some("sk-1"));
        assert_eq!(config.models.get(&LlmMethod::Plan).map(String::as_str), Some("deepseek-chat"));
        assert_eq!(config.models.get(&LlmMethod::ExtractSop).map(String::as_str), Some("deepseek-reasoner"));
        assert_eq!(config.models.get(&LlmMethod::ExtractDocument), None, "vision model is explicit");
        assert_eq!(config.models.get(&LlmMethod::Triage), None, "remote triage is explicit");
        assert_eq!(config.response_format, ResponseFormat::JsonObject);
        let price = config.prices["deepseek-chat"];
        assert!((price.cost_usd(1_000_000, 1_000_000) - 1.37).abs() < 1e-9);

        assert_eq!(
            OpenAiConfig::from_llm_config(&LlmConfig::default()).expect("valid"),
            None,
            "not configured"
        );
    }

    #[test]
    fn bad_values_name_their_setting() {
        let err = parse_prices("deepseek-chat=0.27").expect_err("no output price");
        assert!(err.to_string().contains(env::PRICES), "{err}");
        let llm = |base_url: &str, model: &str| LlmConfig {
            openai_base_url: base_url.into(),
            openai_model: model.into(),
            ..LlmConfig::default()
        };
        let err = OpenAiConfig::from_llm_config(&llm("http://127.0.0.1:8080/v1", "")).expect_err("no model");
        assert!(err.to_string().contains(env::MODEL), "{err}");
        let err = OpenAiConfig::from_llm_config(&llm("api.deepseek.com", "m")).expect_err("no scheme");
        assert!(err.to_string().contains(env::BASE_URL), "{err}");
        assert!(ResponseFormat::parse("yaml").is_err());
    }
}
