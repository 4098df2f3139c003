//! The chat-completions protocol as plain synchronous code over JSON and bytes: the request body
//! of a call, the reading of a response, the meaning of an HTTP status. Only `client.rs` touches
//! the network.

use serde::Deserialize;
use serde_json::{Value, json};

use load_agent_llm::{LlmError, LlmMethod};

use crate::config::ResponseFormat;
use crate::prompts::system_prompt;

/// Longest excerpt of an error body kept in an `LlmError` or a log line.
const BODY_EXCERPT_CHARS: usize = 300;

/// The user message: the typed request as JSON, and for the document reader the image.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UserMessage {
    pub json: Value,
    /// Sent as an `image_url` content part (vision models).
    pub image_url: Option<String>,
}

/// What one call asks for.
#[derive(Debug, Clone)]
pub(crate) struct CallSpec<'a> {
    pub method: LlmMethod,
    pub model: &'a str,
    pub schema: &'a Value,
    pub format: ResponseFormat,
    /// `strict` of the `json_schema` response format: true for the fixed schemas of this
    /// boundary (written for strict mode), false for a caller's schema (`extract_sop`), which may
    /// use keywords strict mode refuses; the output is validated against it either way.
    pub strict: bool,
    pub max_tokens: u32,
}

/// The body of `POST /chat/completions`.
pub(crate) fn request_body(call: &CallSpec<'_>, user: &UserMessage) -> Value {
    let method = call.method;
    let (system, response_format) = match call.format {
        ResponseFormat::JsonSchema => (
            system_prompt(method).to_owned(),
            json!({
                "type": "json_schema",
                "json_schema": { "name": method.as_str(), "strict": call.strict, "schema": call.schema }
            }),
        ),
        ResponseFormat::JsonObject => (
            format!(
                "{}\n\nAnswer with one JSON object and nothing else. It must satisfy this JSON schema:\n{}",
                system_prompt(method),
                call.schema
            ),
            json!({ "type": "json_object" }),
        ),
    };
    let user_text = user.json.to_string();
    let user_content = match &user.image_url {
        None => Value::String(user_text),
        Some(url) => json!([
            { "type": "text", "text": user_text },
            { "type": "image_url", "image_url": { "url": url } }
        ]),
    };
    json!({
        "model": call.model,
        "messages": [
            { "role": "system", "content": system },
            { "role": "user", "content": user_content }
        ],
        "response_format": response_format,
        "temperature": 0,
        "max_tokens": call.max_tokens,
        "stream": false
    })
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// A successful response: the model's JSON output, unvalidated, and what it used.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Completion {
    pub output: Value,
    /// The model the server says answered, if it says.
    pub model: Option<String>,
    /// `None` when the server reported no usage.
    pub tokens: Option<(u64, u64)>,
}

/// Reads a 200 response. A body that is not a chat completion is `Unavailable` (a proxy or
/// server fault, retryable); a completion whose content is not one JSON object is
/// `InvalidOutput` (never repaired: no stripping of code fences, no partial parse).
pub(crate) fn parse_completion(method: LlmMethod, body: &[u8]) -> Result<Completion, LlmError> {
    let response: ChatResponse = serde_json::from_slice(body).map_err(|e| {
        LlmError::unavailable(method, format!("response is not a chat completion: {e}: {}", excerpt(body)))
    })?;
    let tokens = response.usage.map(|u| (u.prompt_tokens, u.completion_tokens));
    let Some(choice) = response.choices.into_iter().next() else {
        return Err(LlmError::unavailable(method, "response has no choices"));
    };
    if let Some(refusal) = choice.message.refusal.filter(|r| !r.trim().is_empty()) {
        return Err(LlmError::invalid(method, format!("the model refused: {}", truncate(&refusal))));
    }
    if choice.finish_reason.as_deref() == Some("length") {
        return Err(LlmError::invalid(method, "output cut at max_tokens (finish_reason length)"));
    }
    let content = choice.message.content.unwrap_or_default();
    if content.trim().is_empty() {
        return Err(LlmError::invalid(method, "empty content"));
    }
    let output: Value = serde_json::from_str(&content).map_err(|e| {
        LlmError::invalid(method, format!("content is not JSON ({e}): {}", truncate(&content)))
    })?;
    if !output.is_object() {
        return Err(LlmError::invalid(method, "content is JSON but not an object"));
    }
    Ok(Completion { output, model: response.model.filter(|m| !m.is_empty()), tokens })
}

/// The failure an HTTP status other than 2xx means. 408, 429 and 5xx are transient (retried by
/// the guard); any other status (400, 401, 403, 404, 422, ...) means our configuration or request
/// is wrong, which retrying cannot fix, so it is final.
pub(crate) fn status_error(method: LlmMethod, status: u16, body: &[u8]) -> LlmError {
    let detail = excerpt(body);
    match status {
        408 | 429 | 500..=599 => LlmError::unavailable(method, format!("HTTP {status}: {detail}")),
        401 | 403 => {
            LlmError::unavailable_final(method, format!("HTTP {status} (check the API key): {detail}"))
        }
        _ => LlmError::unavailable_final(
            method,
            format!("HTTP {status} (check the base URL and model): {detail}"),
        ),
    }
}

fn excerpt(body: &[u8]) -> String {
    truncate(&String::from_utf8_lossy(body))
}

fn truncate(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(BODY_EXCERPT_CHARS) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(schema: &Value, format: ResponseFormat) -> CallSpec<'_> {
        CallSpec {
            method: LlmMethod::Plan,
            model: "deepseek-chat",
            schema,
            format,
            strict: true,
            max_tokens: 1024,
        }
    }

    #[test]
    fn json_schema_request_carries_the_strict_schema() {
        let schema = load_agent_llm::output_schema(LlmMethod::Plan);
        let user = UserMessage { json: json!({ "load_id": "L1" }), image_url: None };
        let body = request_body(&call(&schema, ResponseFormat::JsonSchema), &user);
        assert_eq!(body["model"], "deepseek-chat");
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(body["response_format"]["json_schema"]["name"], "plan");
        assert_eq!(body["response_format"]["json_schema"]["strict"], true);
        assert_eq!(body["response_format"]["json_schema"]["schema"], schema);
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][1]["content"], r#"{"load_id":"L1"}"#);
    }

    #[test]
    fn json_object_request_puts_the_schema_in_the_prompt() {
        let schema = load_agent_llm::output_schema(LlmMethod::Plan);
        let user = UserMessage { json: json!({}), image_url: None };
        let body = request_body(&call(&schema, ResponseFormat::JsonObject), &user);
        assert_eq!(body["response_format"], json!({ "type": "json_object" }));
        let system = body["messages"][0]["content"].as_str().expect("text");
        assert!(system.contains("JSON schema") && system.contains("create_hero_task"));
    }

    #[test]
    fn documents_go_as_image_url_parts() {
        let schema = load_agent_llm::output_schema(LlmMethod::ExtractDocument);
        let user = UserMessage {
            json: json!({ "filename": "pod.jpg" }),
            image_url: Some("https://f/pod.jpg".into()),
        };
        let body = request_body(&call(&schema, ResponseFormat::JsonSchema), &user);
        let parts = &body["messages"][1]["content"];
        assert_eq!(parts[0]["type"], "text");
        assert_eq!(parts[1], json!({ "type": "image_url", "image_url": { "url": "https://f/pod.jpg" } }));
    }

    fn completion(content: Value, finish: &str) -> Vec<u8> {
        json!({
            "id": "x", "object": "chat.completion", "model": "deepseek-chat",
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": content }, "finish_reason": finish }],
            "usage": { "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15 }
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn completions_are_read_strictly() {
        let ok = parse_completion(
            LlmMethod::Plan,
            &completion(json!(r#"{"actions":[],"rationale":"r"}"#), "stop"),
        )
        .expect("valid");
        assert_eq!(ok.output, json!({ "actions": [], "rationale": "r" }));
        assert_eq!(ok.tokens, Some((10, 5)));
        assert_eq!(ok.model.as_deref(), Some("deepseek-chat"));

        let fenced = completion(json!("```json\n{\"actions\":[],\"rationale\":\"r\"}\n```"), "stop");
        assert!(parse_completion(LlmMethod::Plan, &fenced).expect_err("fenced").is_invalid_output());
        let cut = completion(json!(r#"{"actions":[],"rati"#), "length");
        assert!(parse_completion(LlmMethod::Plan, &cut).expect_err("cut").reason().contains("max_tokens"));
        let null = completion(Value::Null, "stop");
        assert!(parse_completion(LlmMethod::Plan, &null).expect_err("empty").is_invalid_output());
        let array = completion(json!("[1,2]"), "stop");
        assert!(parse_completion(LlmMethod::Plan, &array).expect_err("array").is_invalid_output());

        let html = b"<html>502 Bad Gateway</html>";
        let err = parse_completion(LlmMethod::Plan, html).expect_err("not a completion");
        assert!(err.is_retryable(), "{err}");
    }

    #[test]
    fn statuses_map_to_retryable_or_final() {
        for s in [408, 429, 500, 502, 503, 504] {
            assert!(status_error(LlmMethod::Plan, s, b"busy").is_retryable(), "{s}");
        }
        for s in [400, 401, 403, 404, 422] {
            let err = status_error(LlmMethod::Plan, s, b"nope");
            assert!(err.is_unavailable() && !err.is_retryable(), "{s}");
            assert!(err.reason().starts_with(&format!("HTTP {s}")));
        }
        let long = "x".repeat(5_000);
        assert!(status_error(LlmMethod::Plan, 500, long.as_bytes()).reason().len() < 400);
    }
}
