//! `OpenAiClient`: the only code here that touches the network. One `POST /chat/completions`
//! per call; no retry, no timeout of its own beyond connecting (wrap it in
//! `load_agent_llm::Guarded`, as `build_llm_client` does).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

use async_trait::async_trait;
use serde_json::{Value, json};

use load_agent_domain::pii;
use load_agent_llm::{
    ConfigError, DocumentFields, DocumentRequest, Draft, DraftRequest, ExtractedSop, LlmClient, LlmError,
    LlmMethod, LlmOutput, LlmResult, LlmUsage, Plan, PlanRequest, SopExtractionRequest, TriageRequest,
    TriageResult, output_schema, parse_document_fields, parse_draft, parse_extracted_sop, parse_plan,
    parse_triage, sop_output_schema,
};

use crate::config::OpenAiConfig;
use crate::wire::{CallSpec, UserMessage, parse_completion, request_body, status_error};

/// The name this provider goes by in routes and logs.
pub const PROVIDER_NAME: &str = "openai";

/// Errors listed in an `InvalidOutput` reason, at most.
const MAX_SCHEMA_ERRORS: usize = 3;

/// A method's output schema with its compiled validator.
struct MethodSchema {
    schema: Value,
    validator: jsonschema::Validator,
}

/// An OpenAI-compatible chat-completions client (DeepSeek, OpenAI, llama.cpp server, vLLM).
pub struct OpenAiClient {
    http: reqwest::Client,
    url: String,
    config: OpenAiConfig,
    schemas: BTreeMap<LlmMethod, MethodSchema>,
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("url", &self.url)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiClient {
    pub fn new(config: OpenAiConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let provider_error =
            |reason: String| ConfigError::Provider { provider: PROVIDER_NAME.to_owned(), reason };
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| provider_error(format!("HTTP client: {e}")))?;
        let mut schemas = BTreeMap::new();
        for method in LlmMethod::ALL {
            let schema = output_schema(method);
            let validator = jsonschema::validator_for(&schema)
                .map_err(|e| provider_error(format!("output schema of {method}: {e}")))?;
            schemas.insert(method, MethodSchema { schema, validator });
        }
        Ok(OpenAiClient { http, url: config.chat_completions_url(), config, schemas })
    }

    /// The methods this client has a model for.
    pub fn methods(&self) -> Vec<LlmMethod> {
        self.config.models.keys().copied().collect()
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    fn schema(&self, method: LlmMethod) -> Result<&MethodSchema, LlmError> {
        self.schemas.get(&method).ok_or_else(|| LlmError::unavailable_final(method, "no output schema"))
    }

    /// Replaces the API key wherever it appears in `text` (an error body echoing it).
    fn redact(&self, text: &str) -> String {
        match &self.config.api_key {
            Some(key) if !key.expose().is_empty() => text.replace(key.expose(), "***"),
            _ => text.to_owned(),
        }
    }

    /// One call: sends, reads, checks the status and the envelope, measures. Returns the model's
    /// JSON object (not yet validated) and the usage.
    async fn complete(
        &self,
        method: LlmMethod,
        schema: &Value,
        strict: bool,
        user: UserMessage,
    ) -> Result<(Value, LlmUsage), LlmError> {
        let model = self.config.models.get(&method).ok_or_else(|| {
            LlmError::unavailable_final(method, format!("no model configured for {method}"))
        })?;
        let max_tokens = match method {
            LlmMethod::ExtractSop => self.config.max_output_tokens_sop,
            _ => self.config.max_output_tokens,
        };
        let call =
            CallSpec { method, model, schema, format: self.config.response_format, strict, max_tokens };
        let body = request_body(&call, &user);

        let started = Instant::now();
        let mut request = self.http.post(&self.url).json(&body);
        if let Some(key) = &self.config.api_key {
            // reqwest marks the Authorization header sensitive, so it never shows in its Debug.
            request = request.bearer_auth(key.expose());
        }
        let response = request.send().await.map_err(|e| self.transport_error(method, &e))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| self.transport_error(method, &e))?;
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);

        if !status.is_success() {
            let err = status_error(
                method,
                status.as_u16(),
                self.redact(&String::from_utf8_lossy(&bytes)).as_bytes(),
            );
            // The body may quote the request (message text): its length only, unless log.debug_pii.
            tracing::warn!(method = method.as_str(), model = %model, status = status.as_u16(), latency_ms, error = %pii::reason(reason_of(&err)), "LLM call failed");
            return Err(err);
        }
        let completion = parse_completion(method, &bytes).map_err(|e| {
            let e = redact_error(e, |t| self.redact(t));
            tracing::warn!(method = method.as_str(), model = %model, latency_ms, error = %pii::reason(reason_of(&e)), "LLM output rejected");
            e
        })?;

        let (input_tokens, output_tokens) = completion.tokens.unwrap_or_else(|| {
            tracing::warn!(method = method.as_str(), model = %model, "response has no usage; tokens and cost recorded as 0");
            (0, 0)
        });
        let price = self
            .config
            .prices
            .get(model)
            .or_else(|| completion.model.as_ref().and_then(|m| self.config.prices.get(m)));
        let cost_usd = price.map_or(0.0, |p| p.cost_usd(input_tokens, output_tokens));
        let usage = LlmUsage {
            method: method.as_str().to_owned(),
            model_id: completion.model.unwrap_or_else(|| model.clone()),
            input_tokens,
            output_tokens,
            cost_usd,
            latency_ms,
        };
        tracing::debug!(
            method = method.as_str(),
            model = %usage.model_id,
            latency_ms,
            input_tokens,
            output_tokens,
            cost_usd,
            "LLM call answered"
        );
        Ok((completion.output, usage))
    }

    fn transport_error(&self, method: LlmMethod, e: &reqwest::Error) -> LlmError {
        let kind = if e.is_timeout() {
            "timed out"
        } else if e.is_connect() {
            "connection failed"
        } else {
            "request failed"
        };
        let err = LlmError::unavailable(method, self.redact(&format!("{kind}: {e}")));
        tracing::warn!(method = method.as_str(), error = %pii::scrub(&err.to_string()), "LLM call failed");
        err
    }

    /// Typed parsing (`parse`) first, for precise messages (a refused planner action is named),
    /// then the JSON schema, which also checks what serde lets pass (a required nullable field
    /// left out).
    fn finish<T>(
        &self,
        method: LlmMethod,
        output: Value,
        usage: LlmUsage,
        validator: &jsonschema::Validator,
        parse: impl FnOnce(&Value) -> Result<T, LlmError>,
    ) -> LlmResult<T> {
        let checked = parse(&output).and_then(|value| {
            let errors: Vec<String> = validator
                .iter_errors(&output)
                .take(MAX_SCHEMA_ERRORS)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            if errors.is_empty() {
                Ok(value)
            } else {
                Err(LlmError::invalid(method, format!("does not match the schema: {}", errors.join("; "))))
            }
        });
        match checked {
            Ok(value) => Ok(LlmOutput { value, usage }),
            Err(err) => {
                // The tokens were spent: keep them visible even though the call failed.
                tracing::warn!(
                    method = method.as_str(),
                    model = %usage.model_id,
                    input_tokens = usage.input_tokens,
                    output_tokens = usage.output_tokens,
                    cost_usd = usage.cost_usd,
                    error = %pii::text(reason_of(&err)),
                    "LLM output invalid"
                );
                Err(err)
            }
        }
    }

    async fn call_fixed<T>(
        &self,
        method: LlmMethod,
        user: UserMessage,
        parse: impl FnOnce(&Value) -> Result<T, LlmError>,
    ) -> LlmResult<T> {
        let schema = self.schema(method)?;
        let (output, usage) = self.complete(method, &schema.schema, true, user).await?;
        self.finish(method, output, usage, &schema.validator, parse)
    }
}

/// The reason of an error, for a log line that redacts what it quotes (`load_agent_domain::pii`).
fn reason_of(err: &LlmError) -> &str {
    match err {
        LlmError::Unavailable { reason, .. } | LlmError::InvalidOutput { reason, .. } => reason,
    }
}

fn redact_error(err: LlmError, redact: impl Fn(&str) -> String) -> LlmError {
    match err {
        LlmError::Unavailable { method, reason, retryable } => {
            LlmError::Unavailable { method, reason: redact(&reason), retryable }
        }
        LlmError::InvalidOutput { method, reason } => {
            LlmError::InvalidOutput { method, reason: redact(&reason) }
        }
    }
}

fn to_json<T: serde::Serialize>(method: LlmMethod, value: &T) -> Result<Value, LlmError> {
    serde_json::to_value(value)
        .map_err(|e| LlmError::unavailable_final(method, format!("request not serializable: {e}")))
}

#[async_trait]
impl LlmClient for OpenAiClient {
    async fn triage(&self, req: &TriageRequest) -> LlmResult<TriageResult> {
        let method = LlmMethod::Triage;
        let user = UserMessage { json: to_json(method, req)?, image_url: None };
        self.call_fixed(method, user, |v| parse_triage(v, &req.text)).await
    }

    async fn draft(&self, req: &DraftRequest) -> LlmResult<Draft> {
        let method = LlmMethod::Draft;
        let user = UserMessage { json: to_json(method, req)?, image_url: None };
        self.call_fixed(method, user, parse_draft).await
    }

    /// Sends `content_ref` as an `image_url` part; `extracted` (fields an upstream reader
    /// found) is not sent, so the model reads the document itself.
    async fn extract_document(&self, req: &DocumentRequest) -> LlmResult<DocumentFields> {
        let method = LlmMethod::ExtractDocument;
        let Some(url) = req.content_ref.clone().filter(|u| !u.trim().is_empty()) else {
            return Err(LlmError::unavailable_final(method, "the document has no content_ref to read"));
        };
        let json =
            json!({ "load_id": req.load_id, "filename": req.filename, "content_type": req.content_type });
        self.call_fixed(method, UserMessage { json, image_url: Some(url) }, parse_document_fields).await
    }

    async fn plan(&self, req: &PlanRequest) -> LlmResult<Plan> {
        let method = LlmMethod::Plan;
        let user = UserMessage { json: to_json(method, req)?, image_url: None };
        self.call_fixed(method, user, parse_plan).await
    }

    /// The output is validated against the request's `spec_schema`.
    async fn extract_sop(&self, req: &SopExtractionRequest) -> LlmResult<ExtractedSop> {
        let method = LlmMethod::ExtractSop;
        let schema = sop_output_schema(&req.spec_schema);
        let validator = jsonschema::validator_for(&schema).map_err(|e| {
            LlmError::unavailable_final(method, format!("spec_schema is not a valid JSON schema: {e}"))
        })?;
        let user = UserMessage { json: json!({ "sop_id": req.sop_id, "text": req.text }), image_url: None };
        let (output, usage) = self.complete(method, &schema, false, user).await?;
        self.finish(method, output, usage, &validator, parse_extracted_sop)
    }
}
