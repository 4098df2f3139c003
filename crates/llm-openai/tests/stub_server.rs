//! The OpenAI-compatible provider against a local stub server speaking the chat-completions
//! protocol (bound to 127.0.0.1:0 per test). Real sockets, so real (short) time: no paused clock.

use std::collections::VecDeque;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};

use load_agent_llm::{
    DocumentRequest, DocumentType, DraftRequest, Guarded, LlmClient, LlmClientExt, LlmMethod, LlmSettings,
    PlanRequest, PlannedAction, RunDeadline, SopExtractionRequest, output_schema,
};
use load_agent_llm_openai::{
    ApiKey, ModelPrice, OpenAiClient, OpenAiConfig, ResponseFormat, build_llm_client,
};

const KEY: &str = "sk-test-5f3c9a-never-print-me";

/// One scripted reply of the stub.
#[derive(Clone)]
struct Reply {
    status: u16,
    body: String,
    delay: Duration,
}

impl Reply {
    fn completion(content: &str, prompt_tokens: u64, completion_tokens: u64) -> Self {
        let body = json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "replaced by the requested model",
            "choices": [{
                "index": 0,
                "message": { "role": "assistant", "content": content },
                "finish_reason": "stop"
            }],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens
            }
        });
        Reply { status: 200, body: body.to_string(), delay: Duration::ZERO }
    }

    fn json(value: Value) -> Self {
        Reply::completion(&value.to_string(), 1_000, 200)
    }

    fn status(status: u16, body: &str) -> Self {
        Reply { status, body: body.to_owned(), delay: Duration::ZERO }
    }

    fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A request the stub received.
#[derive(Clone, Debug)]
struct Seen {
    authorization: Option<String>,
    body: Value,
}

#[derive(Default)]
struct StubState {
    replies: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
}

struct Stub {
    addr: SocketAddr,
    state: Arc<StubState>,
}

impl Stub {
    async fn start(replies: Vec<Reply>) -> Stub {
        let state = Arc::new(StubState { replies: Mutex::new(replies.into()), seen: Mutex::default() });
        let app =
            Router::new().route("/v1/chat/completions", post(chat_completions)).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a local port");
        let addr = listener.local_addr().expect("bound address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Stub { addr, state }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().expect("stub lock").clone()
    }
}

async fn chat_completions(
    State(state): State<Arc<StubState>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, [(&'static str, &'static str); 1], String) {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let requested_model = body.get("model").cloned().unwrap_or(Value::Null);
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
    state.seen.lock().expect("stub lock").push(Seen { authorization, body });
    let reply = state
        .replies
        .lock()
        .expect("stub lock")
        .pop_front()
        .unwrap_or_else(|| Reply::status(500, r#"{"error":{"message":"stub: nothing scripted"}}"#));
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // Like a real server, a completion names the model that answered: the one asked for.
    let body = match serde_json::from_str::<Value>(&reply.body) {
        Ok(mut completion) if completion.get("model").is_some() => {
            completion["model"] = requested_model;
            completion.to_string()
        }
        _ => reply.body,
    };
    (status, [("content-type", "application/json")], body)
}

fn config(stub: &Stub) -> OpenAiConfig {
    OpenAiConfig::new(stub.base_url())
        .with_api_key(ApiKey::new(KEY))
        .with_model(LlmMethod::Plan, "deepseek-chat")
        .with_model(LlmMethod::Draft, "deepseek-chat")
        .with_model(LlmMethod::ExtractDocument, "qwen2.5-vl")
        .with_model(LlmMethod::ExtractSop, "deepseek-chat")
        .with_price("deepseek-chat", ModelPrice { input_per_mtok: 0.27, output_per_mtok: 1.10 })
}

fn settings() -> LlmSettings {
    LlmSettings {
        call_timeout: Duration::from_millis(300),
        max_retries: 2,
        backoff_base: Duration::from_millis(5),
        backoff_max: Duration::from_millis(20),
        run_deadline: Duration::from_secs(120),
        calls_per_second: 1_000,
    }
}

fn guarded(stub: &Stub) -> Guarded<OpenAiClient> {
    Guarded::new(OpenAiClient::new(config(stub)).expect("valid config"), &settings()).expect("valid settings")
}

fn plan_req() -> PlanRequest {
    PlanRequest {
        load_id: "481207".into(),
        situation: "message with intent other".into(),
        state_summary: json!({ "stage": "to_pickup", "open_asks": [] }),
        message: Some("is there overnight parking at the shipper".into()),
        from_role: Some("driver".into()),
    }
}

fn good_plan() -> Value {
    json!({
        "actions": [
            { "kind": "create_hero_task", "title": "Parking question", "body": "Driver asks about overnight parking at the shipper", "urgent": false },
            { "kind": "tms_note", "text": "Driver asked about overnight parking at the shipper" }
        ],
        "rationale": "No SOP covers parking; a human should answer."
    })
}

#[tokio::test]
async fn success_carries_usage_cost_and_the_structured_output_request() {
    let stub = Stub::start(vec![Reply::json(good_plan())]).await;
    let out = guarded(&stub).plan(&plan_req()).await.expect("plan");

    assert_eq!(out.value.actions.len(), 2);
    assert!(matches!(out.value.actions[0], PlannedAction::CreateHeroTask { urgent: false, .. }));
    assert_eq!(out.usage.method, "plan");
    assert_eq!(out.usage.model_id, "deepseek-chat");
    assert_eq!((out.usage.input_tokens, out.usage.output_tokens), (1_000, 200));
    // 1000 × 0.27 / 1M + 200 × 1.10 / 1M
    assert!((out.usage.cost_usd - 0.00049).abs() < 1e-12, "{}", out.usage.cost_usd);

    let seen = stub.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].authorization.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    let body = &seen[0].body;
    assert_eq!(body["model"], "deepseek-chat");
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["name"], "plan");
    assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    assert_eq!(body["response_format"]["json_schema"]["schema"], output_schema(LlmMethod::Plan));
    assert_eq!(body["messages"][0]["role"], "system");
    let user: PlanRequest = serde_json::from_str(body["messages"][1]["content"].as_str().expect("text"))
        .expect("the typed request");
    assert_eq!(user, plan_req());
}

#[tokio::test]
async fn a_slow_server_times_out_as_unavailable() {
    let slow = || Reply::json(good_plan()).delayed(Duration::from_secs(3));
    let stub = Stub::start(vec![slow(), slow(), slow()]).await;
    let started = std::time::Instant::now();
    let err = guarded(&stub).plan(&plan_req()).await.expect_err("timeout");
    assert!(err.is_unavailable(), "{err}");
    assert_eq!(err.reason(), "timed out after 300 ms (after 3 attempts)");
    // 3 × 300 ms plus two short backoffs; generous for a loaded CI machine.
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

#[tokio::test]
async fn rate_limited_then_success_is_retried() {
    let stub = Stub::start(vec![
        Reply::status(429, r#"{"error":{"message":"Rate limit reached"}}"#),
        Reply::json(good_plan()),
    ])
    .await;
    let out = guarded(&stub).plan(&plan_req()).await.expect("second attempt");
    assert_eq!(out.value.actions.len(), 2);
    assert_eq!(stub.seen().len(), 2);
}

#[tokio::test]
async fn server_errors_exhaust_the_retries() {
    let busy = || Reply::status(503, r#"{"error":{"message":"Server busy"}}"#);
    let stub = Stub::start(vec![busy(), busy(), busy(), Reply::json(good_plan())]).await;
    let err = guarded(&stub).plan(&plan_req()).await.expect_err("exhausted");
    assert!(err.is_unavailable());
    assert!(err.reason().starts_with("HTTP 503"), "{err}");
    assert!(err.reason().ends_with("(after 3 attempts)"), "{err}");
    assert_eq!(stub.seen().len(), 3, "1 attempt + 2 retries");
}

#[tokio::test]
async fn a_rejected_key_is_final_and_never_echoed() {
    let body = format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}"}}}}"#);
    let stub = Stub::start(vec![Reply::status(401, &body), Reply::json(good_plan())]).await;
    let err = guarded(&stub).plan(&plan_req()).await.expect_err("401");
    assert!(err.is_unavailable() && !err.is_retryable(), "{err}");
    assert!(err.reason().starts_with("HTTP 401"), "{err}");
    assert!(!err.to_string().contains(KEY), "{err}");
    assert_eq!(stub.seen().len(), 1, "configuration errors are not retried");
}

#[tokio::test]
async fn malformed_json_content_is_invalid_output_and_not_retried() {
    let stub = Stub::start(vec![
        Reply::completion("Sure! Here is the plan: {\"actions\": [", 900, 40),
        Reply::json(good_plan()),
    ])
    .await;
    let err = guarded(&stub).plan(&plan_req()).await.expect_err("malformed");
    assert!(err.is_invalid_output(), "{err}");
    assert!(err.reason().contains("not JSON"), "{err}");
    assert_eq!(stub.seen().len(), 1);
}

#[tokio::test]
async fn a_planner_proposing_send_sms_is_invalid_output_naming_it() {
    let sms = json!({
        "actions": [
            { "kind": "tms_note", "text": "Driver asked about parking" },
            { "kind": "send_sms", "contact_id": "drv-1", "body": "Yes, there is parking" }
        ],
        "rationale": "Answer the driver directly"
    });
    let stub = Stub::start(vec![Reply::json(sms), Reply::json(good_plan())]).await;
    let err = guarded(&stub).plan(&plan_req()).await.expect_err("refused");
    assert!(err.is_invalid_output(), "{err}");
    assert!(err.reason().contains("`send_sms`"), "{err}");
    assert_eq!(stub.seen().len(), 1, "invalid output is never retried");
}

#[tokio::test]
async fn schema_invalid_documents_are_invalid_output() {
    // `seal` left out: serde would accept it as None, the schema requires it.
    let missing = json!({
        "document_type": "pod", "signed": true, "exceptions_noted": false,
        "po_numbers": ["55821"], "pieces": 22, "temperature_f": null
    });
    let wrong_type = json!({
        "document_type": "invoice", "signed": true, "exceptions_noted": false,
        "po_numbers": [], "seal": null, "pieces": null, "temperature_f": null
    });
    let stub = Stub::start(vec![Reply::json(missing), Reply::json(wrong_type)]).await;
    let client = guarded(&stub);
    let req = DocumentRequest {
        load_id: "481207".into(),
        filename: "pod.jpg".into(),
        content_type: "image/jpeg".into(),
        content_ref: Some("https://files.example/481207/pod.jpg".into()),
        extracted: None,
    };
    let err = client.extract_document(&req).await.expect_err("missing seal");
    assert!(err.is_invalid_output() && err.reason().contains("seal"), "{err}");
    let err = client.extract_document(&req).await.expect_err("invoice");
    assert!(err.is_invalid_output() && err.reason().contains("invoice"), "{err}");
}

#[tokio::test]
async fn documents_are_read_from_an_image_url_part() {
    let pod = json!({
        "document_type": "pod", "signed": false, "exceptions_noted": true,
        "po_numbers": ["55821"], "seal": "SL-7731", "pieces": 22, "temperature_f": 34.0
    });
    let stub = Stub::start(vec![Reply::json(pod)]).await;
    let req = DocumentRequest {
        load_id: "481207".into(),
        filename: "pod.jpg".into(),
        content_type: "image/jpeg".into(),
        content_ref: Some("https://files.example/481207/pod.jpg".into()),
        extracted: None,
    };
    let out = guarded(&stub).extract_document(&req).await.expect("fields");
    assert_eq!(out.value.document_type, DocumentType::Pod);
    assert_eq!(out.value.signed, Some(false));
    assert_eq!(out.value.seal.as_deref(), Some("SL-7731"));
    assert_eq!(out.value.pieces, Some(22));
    assert_eq!(out.usage.cost_usd, 0.0, "qwen2.5-vl has no configured price");

    let body = &stub.seen()[0].body;
    assert_eq!(body["model"], "qwen2.5-vl");
    let parts = body["messages"][1]["content"].as_array().expect("content parts");
    assert_eq!(parts[1]["type"], "image_url");
    assert_eq!(parts[1]["image_url"]["url"], "https://files.example/481207/pod.jpg");

    let no_ref = DocumentRequest { content_ref: None, ..req };
    let err = guarded(&stub).extract_document(&no_ref).await.expect_err("nothing to read");
    assert!(err.is_unavailable() && !err.is_retryable(), "{err}");
}

#[tokio::test]
async fn the_run_deadline_cuts_a_call_short() {
    let stub = Stub::start(vec![Reply::json(good_plan()).delayed(Duration::from_secs(5))]).await;
    let settings = LlmSettings { call_timeout: Duration::from_secs(10), ..settings() };
    let client = Guarded::new(OpenAiClient::new(config(&stub)).expect("valid"), &settings).expect("valid");
    let deadline = RunDeadline::after(Duration::from_millis(250));
    let started = std::time::Instant::now();
    let err = client.with_deadline(deadline).plan(&plan_req()).await.expect_err("deadline");
    assert_eq!(err.reason(), "run deadline passed");
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(240) && elapsed < Duration::from_secs(4), "{elapsed:?}");

    // Later calls of the same run fail at once, without reaching the server.
    let err = client.with_deadline(deadline).plan(&plan_req()).await.expect_err("passed");
    assert_eq!(err.reason(), "run deadline passed");
    assert_eq!(stub.seen().len(), 1);
}

#[tokio::test]
async fn json_object_mode_and_sop_schema_validation() {
    let spec_schema = json!({
        "type": "object",
        "properties": { "id": { "type": "string" }, "retry_after_min": { "type": "integer", "minimum": 1 } },
        "required": ["id", "retry_after_min"],
        "additionalProperties": false
    });
    let stub = Stub::start(vec![
        Reply::json(json!({ "spec": { "id": "client_c", "retry_after_min": 30 } })),
        Reply::json(json!({ "spec": { "id": "client_c", "retry_after_min": 0 } })),
    ])
    .await;
    let client =
        OpenAiClient::new(config(&stub).with_response_format(ResponseFormat::JsonObject)).expect("valid");
    let req = SopExtractionRequest {
        sop_id: "client_c".into(),
        text: "Ask the driver for an ETA, retry every 30 minutes.".into(),
        spec_schema,
    };
    let out = client.extract_sop(&req).await.expect("valid spec");
    assert_eq!(out.value.spec["retry_after_min"], 30);
    let err = client.extract_sop(&req).await.expect_err("violates the spec schema");
    assert!(err.is_invalid_output() && err.reason().contains("retry_after_min"), "{err}");

    let body = &stub.seen()[0].body;
    assert_eq!(body["response_format"], json!({ "type": "json_object" }));
    assert!(body["messages"][0]["content"].as_str().expect("text").contains("retry_after_min"));
}

#[tokio::test]
async fn build_llm_client_routes_by_provider_value() {
    let stub = Stub::start(vec![Reply::json(json!({ "body": "PO for the pickup is 55821." }))]).await;
    let client = build_llm_client("local+openai", &settings(), Some(config(&stub))).expect("valid");
    let draft = DraftRequest {
        purpose: "reply with the PO".into(),
        language: "en".into(),
        facts: json!({ "po": "55821" }),
    };
    assert_eq!(client.draft(&draft).await.expect("remote draft").value.body, "PO for the pickup is 55821.");
    let triage = client
        .triage(&load_agent_llm::TriageRequest {
            text: "eta 2:30".into(),
            lang: None,
            from_role: None,
            open_ask: None,
        })
        .await
        .expect("local triage");
    assert!(triage.usage.model_id.starts_with("local-triage/"));
    assert_eq!(stub.seen().len(), 1, "triage stays local");

    let local = build_llm_client("local", &settings(), Some(config(&stub))).expect("valid");
    let err = local.plan(&plan_req()).await.expect_err("no planner");
    assert_eq!(err.reason(), "no provider configured for plan");

    let Err(err) = build_llm_client("openai", &settings(), None) else { panic!("no config") };
    assert!(err.to_string().contains("LOAD_AGENT_LLM_OPENAI_BASE_URL"), "{err}");
    let Err(err) = build_llm_client("gpt", &settings(), None) else { panic!("unknown provider") };
    assert!(err.to_string().contains("LOAD_AGENT_LLM_PROVIDER"), "{err}");
}

/// A writer the test subscriber logs into.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_api_key_never_appears_in_debug_output_or_logs() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // The test runtime is single-threaded: the stub server and the client log on this thread.
    let _guard = tracing::subscriber::set_default(subscriber);

    let echo = format!(r#"{{"error":{{"message":"bad key {KEY}"}}}}"#);
    let stub = Stub::start(vec![
        Reply::json(good_plan()),
        Reply::status(503, &echo),
        Reply::status(401, &echo),
        Reply::completion(&format!("not json {KEY}"), 1, 1),
    ])
    .await;
    let client = guarded(&stub);
    let mut texts =
        vec![format!("{:?}", config(&stub)), format!("{:#?}", client.inner()), format!("{client:?}")];
    texts.push(format!("{:?}", client.plan(&plan_req()).await.map(|o| o.usage)));
    texts.push(format!("{:?}", client.plan(&plan_req()).await));
    texts.push(format!("{:?}", client.plan(&plan_req()).await));
    let built = build_llm_client("local+openai", &settings(), Some(config(&stub))).expect("valid");
    texts.push(format!("{:?}", built.plan(&plan_req()).await));

    let logs = String::from_utf8_lossy(&captured.0.lock().expect("log lock")).into_owned();
    assert!(logs.contains("LLM call"), "the calls were logged: {logs}");
    assert!(!logs.contains(KEY), "key in logs: {logs}");
    for text in texts {
        assert!(!text.contains(KEY), "key in {text}");
    }
    assert!(format!("{:?}", config(&stub)).contains("***"));
}

#[tokio::test]
async fn message_text_and_phone_numbers_quoted_by_the_provider_or_model_are_not_logged() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    const TEXT: &str = "Hi Luis, call dispatch at +1 312 555 0199 about the late load";
    let stub = Stub::start(vec![
        // Retried (the guard's line), then final (the client's line): both quote the body.
        Reply::status(503, &format!(r#"{{"error":"overloaded while drafting: {TEXT}"}}"#)),
        Reply::status(400, &format!(r#"{{"error":{{"message":"bad request: {TEXT}"}}}}"#)),
        // Output that is not JSON, then JSON that is not a plan.
        Reply::completion(&format!("not json: {TEXT}"), 1, 1),
        Reply::json(json!({ "actions": [{ "kind": "send_sms", "text": TEXT }], "rationale": TEXT })),
    ])
    .await;
    let client = guarded(&stub);
    for _ in 0..3 {
        assert!(client.plan(&plan_req()).await.is_err());
    }

    let logs = String::from_utf8_lossy(&captured.0.lock().expect("log lock")).into_owned();
    assert!(logs.contains("LLM call failed, retrying"), "{logs}");
    assert!(logs.contains("LLM output rejected") && logs.contains("LLM output invalid"), "{logs}");
    assert!(logs.contains("chars redacted>"), "{logs}");
    for pii in [TEXT, "Hi Luis", "312 555 0199", "late load"] {
        assert!(!logs.contains(pii), "{pii:?} in the logs: {logs}");
    }
}
