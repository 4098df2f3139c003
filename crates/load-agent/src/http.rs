//! The HTTP surface (docs/http.md): `POST /events` (the versioned JSON form of the Avro
//! `InboundEvent`, [`load_agent_avro::json::InboundEventV1`]; embedded mode), `GET /loads/{id}`
//! (the inspect view), `/metrics` (Prometheus), `/openapi.json` (this API's OpenAPI 3 document,
//! generated from the handlers' `#[utoipa::path]` and the wire types' `ToSchema`), `/healthz`,
//! `/readyz`. Bound to loopback by default; with `http.token` set every endpoint but the probes
//! requires `Authorization: Bearer <token>`. Every error answer but the probes' is JSON
//! ([`ErrorV1`]: the message and the field at fault, if any).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRef, Path, Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use load_agent_avro::json::{AcceptedV1, ErrorV1, InboundEventV1};
use load_agent_domain::InboundEvent;
use load_agent_store::Stores;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Deserialize;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoParams, Modify, OpenApi};

use crate::access;
use crate::console::{self, ConsoleConfig, ConsoleState};
use crate::timeline;
use crate::timeline::inspect_text;

/// Where `POST /events` puts an accepted event.
pub type Publish =
    Arc<dyn Fn(InboundEvent) -> futures::future::BoxFuture<'static, Result<(), String>> + Send + Sync>;

#[derive(Clone)]
pub struct HttpState {
    pub stores: Stores,
    pub metrics: PrometheusHandle,
    /// `None` where this role accepts no events (production mode reads Kafka).
    pub publish: Option<Publish>,
    pub token: Option<String>,
    pub ready: Arc<AtomicBool>,
    /// How the operations console lists loads (`[console]`).
    pub console: ConsoleConfig,
}

/// What the console's handlers read of this state.
impl FromRef<HttpState> for ConsoleState {
    fn from_ref(state: &HttpState) -> Self {
        ConsoleState { index: state.stores.index.clone(), token: state.token.clone(), config: state.console }
    }
}

/// The OpenAPI document of this API: every route of [`router`] has its `#[utoipa::path]` here
/// (a test checks the list against the routes).
#[derive(OpenApi)]
#[openapi(
    info(
        title = "load-agent HTTP API",
        version = "1.0.0",
        description = "Events in (embedded mode), a load's timeline out, metrics and probes. \
            Version 1: changes within it are additive only; see docs/http.md.",
    ),
    paths(post_event, get_load, get_metrics, get_openapi, healthz, readyz),
    components(schemas(InboundEventV1, AcceptedV1, ErrorV1)),
    modifiers(&BearerToken),
    tags(
        (name = "events", description = "Inbound events for a load"),
        (name = "loads", description = "What the agent knows and did for a load"),
        (name = "operations", description = "Metrics, probes and this document"),
    ),
)]
pub struct ApiDoc;

/// The `bearer` security scheme the protected operations name.
struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("The value of `http.token`; required only when it is set."))
                    .build(),
            ),
        );
    }
}

pub fn router(state: HttpState) -> Router {
    let protected = Router::new()
        .route("/", get(console::attention))
        .route("/events", post(post_event))
        .route("/loads/{load_id}", get(get_load))
        .route("/metrics", get(get_metrics))
        .route("/openapi.json", get(get_openapi))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/login", get(console::login_form).post(console::login))
        .route("/logout", post(console::logout))
        .merge(protected)
        .with_state(state)
}

/// A JSON error answer.
fn error(status: StatusCode, message: impl Into<String>, field: Option<String>) -> Response {
    (status, Json(ErrorV1 { error: message.into(), field })).into_response()
}

/// The token rule: with `http.token` set, a request carries `Authorization: Bearer <token>`,
/// or (GET only: the console's pages and reads) the console cookie `/login` sets. A browser
/// without either gets the sign-in page, anything else a JSON 401.
async fn require_token(State(state): State<HttpState>, req: Request, next: Next) -> Response {
    if let Some(token) = &state.token {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let by_header = given.is_some_and(|g| access::token_matches(g, token));
        let by_cookie = req.method() == Method::GET && access::cookie_matches(req.headers(), token);
        if !by_header && !by_cookie {
            if console::wants_html(req.headers()) {
                let asked = req.uri().path_and_query().map_or("/", |p| p.as_str());
                return console::unauthorized_page(asked);
            }
            let mut resp = error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token", None);
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            return resp;
        }
    }
    next.run(req).await
}

/// Liveness: the process answers.
#[utoipa::path(
    get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process is up", body = String, example = "ok")),
)]
async fn healthz() -> &'static str {
    "ok"
}

/// Readiness: 503 while starting or shutting down.
#[utoipa::path(
    get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready to take requests", body = String, example = "ready\n"),
        (status = 503, description = "Starting or shutting down", body = String, example = "not ready\n"),
    ),
)]
async fn readyz(State(state): State<HttpState>) -> Response {
    if state.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

/// The Prometheus metrics (docs/operations.md names them).
#[utoipa::path(
    get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "Prometheus text exposition format 0.0.4", body = String,
            content_type = "text/plain; version=0.0.4"),
        (status = 401, description = "A token is set and the request does not carry it", body = ErrorV1),
    ),
    security(("bearer" = [])),
)]
async fn get_metrics(State(state): State<HttpState>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render()).into_response()
}

/// This document.
#[utoipa::path(
    get, path = "/openapi.json", tag = "operations",
    responses(
        (status = 200, description = "The OpenAPI 3 document of this API", body = Object,
            content_type = "application/json"),
        (status = 401, description = "A token is set and the request does not carry it", body = ErrorV1),
    ),
    security(("bearer" = [])),
)]
async fn get_openapi() -> Response {
    match ApiDoc::openapi().to_pretty_json() {
        Ok(doc) => ([(header::CONTENT_TYPE, "application/json")], doc).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("openapi: {e}"), None),
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct LoadQuery {
    /// Show the load as it was at this log version (default: the newest).
    at: Option<u64>,
    /// `text` for the plain-text timeline of `load-agent inspect`; JSON otherwise.
    #[param(example = "text")]
    format: Option<String>,
}

/// A load's state and timeline (the view of `load-agent inspect`).
#[utoipa::path(
    get, path = "/loads/{load_id}", tag = "loads",
    params(("load_id" = String, Path, description = "The load's id"), LoadQuery),
    responses(
        (status = 200, description = "The load at the version asked for", content(
            (Object = "application/json"),
            (String = "text/plain; charset=utf-8"),
        )),
        (status = 400, description = "A query parameter is malformed", body = ErrorV1),
        (status = 401, description = "A token is set and the request does not carry it", body = ErrorV1),
        (status = 404, description = "No event of this load was logged", body = ErrorV1),
        (status = 503, description = "The store cannot be read", body = ErrorV1),
    ),
    security(("bearer" = [])),
)]
async fn get_load(
    State(state): State<HttpState>,
    headers: HeaderMap,
    load_id: Result<Path<String>, PathRejection>,
    q: Result<Query<LoadQuery>, QueryRejection>,
) -> Response {
    let Path(load_id) = match load_id {
        Ok(p) => p,
        Err(e) => return error(e.status(), e.body_text(), Some("load_id".into())),
    };
    let Query(q) = match q {
        Ok(q) => q,
        Err(e) => return error(e.status(), e.body_text(), None),
    };
    if q.format.is_none() && console::wants_html(&headers) {
        return load_html(&state, &load_id, q.at).await;
    }
    let text = q.format.as_deref() == Some("text");
    match inspect_text(&state.stores, &load_id, q.at, !text).await {
        Ok(Some(body)) => {
            let ct = if text { "text/plain; charset=utf-8" } else { "application/json" };
            ([(header::CONTENT_TYPE, ct)], body).into_response()
        }
        Ok(None) => error(StatusCode::NOT_FOUND, format!("no load {load_id:?}"), None),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, format!("store: {e}"), None),
    }
}

/// The console's page of a load (a browser asked for `/loads/{id}`).
async fn load_html(state: &HttpState, load_id: &str, at: Option<u64>) -> Response {
    let read = async {
        let (entries, _) = state.stores.events.read(load_id).await?;
        let rows = state.stores.outbox.rows_for_load(load_id).await?;
        let timers = state.stores.timers.timers_for_load(load_id).await?;
        Ok::<_, load_agent_store::StoreError>((entries, rows, timers))
    };
    match read.await {
        Ok((entries, _, _)) if entries.is_empty() => console::no_load_page(load_id),
        Ok((entries, rows, timers)) => {
            console::load_page(&timeline::view(load_id, &entries, at, &rows), &timers)
        }
        Err(e) => console::store_error_page(&e.to_string()),
    }
}

/// Queues one event for its load (embedded mode). 202 means queued: the event is then checked
/// against the load's log and decided on in order with the load's other events; an event whose
/// `event_id` is already logged is dropped, so retrying with the same id is safe.
#[utoipa::path(
    post, path = "/events", tag = "events",
    request_body(content = InboundEventV1, content_type = "application/json",
        description = "One event (version 1); the `type` field is the event kind"),
    responses(
        (status = 202, description = "Queued", body = AcceptedV1),
        (status = 400, description = "The body is not a valid event; `field` names the field at fault",
            body = ErrorV1,
            example = json!({"error": "invalid InboundEvent: field `event_id`: missing field `event_id`", "field": "event_id"})),
        (status = 401, description = "A token is set and the request does not carry it", body = ErrorV1),
        (status = 409, description = "This role reads events from Kafka (production mode)", body = ErrorV1),
        (status = 413, description = "The body is larger than 2 MB", body = ErrorV1),
        (status = 503, description = "The queue does not take events (shutting down)", body = ErrorV1),
    ),
    security(("bearer" = [])),
)]
async fn post_event(
    State(state): State<HttpState>,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    let Some(publish) = &state.publish else {
        return error(
            StatusCode::CONFLICT,
            "this role reads events from Kafka; POST /events is for the embedded mode",
            None,
        );
    };
    let body = match body {
        Ok(b) => b,
        Err(e) => return error(e.status(), e.body_text(), None),
    };
    let event = match load_agent_avro::json::decode_inbound_json(&body) {
        Ok(e) => e,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("invalid InboundEvent: {e}"), e.field),
    };
    let id = event.event_id.clone();
    match publish(event).await {
        Ok(()) => (StatusCode::ACCEPTED, Json(AcceptedV1 { accepted: id })).into_response(),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, format!("queue: {e}"), None),
    }
}

#[cfg(test)]
mod tests {
    //! The HTTP contract as a client sees it: every documented example is accepted and becomes
    //! the domain event it describes; malformed bodies get a JSON 400 naming the field; the
    //! OpenAPI document is OpenAPI 3, lists every route and validates every example; the token
    //! rule holds.

    use std::sync::Mutex;

    use axum::body::Body;
    use chrono::{DateTime, FixedOffset};
    use load_agent_avro::json::EXAMPLES;
    use load_agent_domain as d;
    use load_agent_testkit::at as utc;
    use serde_json::{Value, json};
    use tower::ServiceExt;

    use super::*;

    const TOKEN: &str = "test-token";

    struct Fixture {
        router: Router,
        published: Arc<Mutex<Vec<InboundEvent>>>,
    }

    /// A router over an empty SQLite store whose `publish` records what it is given (or fails
    /// with `queue_error`), or that takes no events at all (`accepts_events` false).
    async fn fixture(token: Option<&str>, accepts_events: bool, queue_error: Option<&str>) -> Fixture {
        let stores = load_agent_store::open_store("sqlite::memory:").await.expect("a SQLite store");
        let metrics = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder().handle();
        let published = Arc::new(Mutex::new(Vec::new()));
        let sink = published.clone();
        let queue_error = queue_error.map(str::to_owned);
        let publish: Publish = Arc::new(move |event| {
            let sink = sink.clone();
            let queue_error = queue_error.clone();
            Box::pin(async move {
                match queue_error {
                    Some(e) => Err(e),
                    None => {
                        sink.lock().expect("lock").push(event);
                        Ok(())
                    }
                }
            })
        });
        let state = HttpState {
            stores,
            metrics,
            publish: accepts_events.then_some(publish),
            token: token.map(str::to_owned),
            ready: Arc::new(AtomicBool::new(true)),
            console: ConsoleConfig::default(),
        };
        Fixture { router: router(state), published }
    }

    /// Sends one request; answers the status, the content type and the body.
    async fn send(
        router: &Router,
        method: &str,
        uri: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> (StatusCode, String, String) {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(t) = token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        let req = req.body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned()))).expect("request");
        let resp = router.clone().oneshot(req).await.expect("infallible");
        let status = resp.status();
        let ct = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("body");
        (status, ct, String::from_utf8_lossy(&bytes).into_owned())
    }

    fn json_of(body: &str) -> Value {
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
    }

    fn local(s: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(s).expect("time")
    }

    fn event(event_id: &str, occurred_at: &str, kind: d::EventKind) -> InboundEvent {
        InboundEvent {
            event_id: event_id.into(),
            load_id: "481207".into(),
            occurred_at: utc(occurred_at),
            kind,
        }
    }

    /// The domain event each documented example describes, written out by hand.
    fn expected(kind: &str) -> InboundEvent {
        use d::EventKind as K;
        use load_agent_testkit::load::contact;
        match kind {
            "load_registered" => event(
                "reg_481207",
                "2026-03-02T11:00:00Z",
                K::LoadRegistered {
                    load: d::LoadRegistered {
                        load_id: "481207".into(),
                        client: "client_a".into(),
                        sop_version: None,
                        contacts: vec![
                            d::Contact {
                                phone: Some("+13125550111".into()),
                                ..contact("drv", d::Role::Driver, "Luis")
                            },
                            d::Contact {
                                email: Some("dana@carrier.example".into()),
                                ..contact("disp", d::Role::CarrierDispatcher, "Dana")
                            },
                            d::Contact {
                                slack: Some("#acme-loads".into()),
                                ..contact("brk", d::Role::Broker, "Acme desk")
                            },
                        ],
                        stops: vec![
                            d::Stop {
                                sequence: 1,
                                kind: d::StopKind::Pickup,
                                name: "Acme DC".into(),
                                address: "1 Dock Rd, Joliet, IL".into(),
                                appointment: local("2026-03-02T08:00:00-06:00"),
                                po_numbers: vec!["55821".into()],
                                reference: None,
                            },
                            d::Stop {
                                sequence: 2,
                                kind: d::StopKind::Delivery,
                                name: "Store 88".into(),
                                address: "88 Main St, Dayton, OH".into(),
                                appointment: local("2026-03-02T16:00:00-05:00"),
                                po_numbers: vec![],
                                reference: Some("DEL-88-0302".into()),
                            },
                        ],
                        reefer: Some(d::Reefer { set_point_f: 34.0, tolerance_f: 2.0 }),
                    },
                },
            ),
            "sms" => event(
                "sms_0713",
                "2026-03-02T13:13:00Z",
                K::Sms {
                    from: "+13125550111".into(),
                    text: "running late, traffic on I-70, eta 4:45".into(),
                },
            ),
            "email" => event(
                "email_0920",
                "2026-03-02T15:20:00Z",
                K::Email {
                    from: "dana@carrier.example".into(),
                    subject: "Re: Load 481207 ETA".into(),
                    text: "Driver says about 4:45 pm at the receiver.".into(),
                    thread: Some(d::EmailThread::Main),
                },
            ),
            "slack" => event(
                "slack_0935",
                "2026-03-02T15:35:00Z",
                K::Slack { from: "brk".into(), text: "any update on 481207?".into() },
            ),
            "ping" => event(
                "ping_0700",
                "2026-03-02T13:00:00Z",
                K::Ping {
                    stop: 2,
                    delay_risk: d::RiskBand::Medium,
                    recorded_at: utc("2026-03-02T13:00:00Z"),
                    lat: Some(39.7589),
                    lon: Some(-84.1916),
                },
            ),
            "timer_fired" => event(
                "evt:tmr:481207:ask:eta_request:ping_0700:1",
                "2026-03-02T13:30:00Z",
                K::TimerFired {
                    timer_id: "tmr:481207:ask:eta_request:ping_0700:1".into(),
                    ask_id: "ask:eta_request:ping_0700".into(),
                    attempt: 1,
                    fire_at: utc("2026-03-02T13:30:00Z"),
                },
            ),
            "attachment" => event(
                "att_1702",
                "2026-03-02T22:02:00Z",
                K::Attachment {
                    from: "drv".into(),
                    channel: d::MessageChannel::Sms,
                    filename: "pod_481207.jpg".into(),
                    content_type: "image/jpeg".into(),
                    content_ref: Some("s3://load-docs/481207/pod_481207.jpg".into()),
                    extracted: Some(d::DocumentFields {
                        document_type: d::DocumentType::Pod,
                        signed: Some(true),
                        exceptions_noted: Some(false),
                        po_numbers: vec!["55821".into()],
                        seal: None,
                        pieces: Some(22),
                        temperature_f: Some(34.5),
                    }),
                },
            ),
            "stop_status" => event(
                "stop2_arrived",
                "2026-03-02T21:41:00Z",
                K::StopStatus {
                    stop: 2,
                    status: d::StopStatusKind::Arrived,
                    source: Some("geofence".into()),
                },
            ),
            "action_outcome" => event(
                "out:delivered:481207/ask:eta_request:ping_0700/1/send_sms",
                "2026-03-02T13:00:02Z",
                K::ActionOutcome {
                    idempotency_key: "481207/ask:eta_request:ping_0700/1/send_sms".into(),
                    status: d::OutcomeStatus::Delivered,
                    action_kind: d::ActionKind::SendSms,
                    contact_id: Some("drv".into()),
                    hero_channel: false,
                    reason: None,
                },
            ),
            other => panic!("no expected event for {other}"),
        }
    }

    #[tokio::test]
    async fn http_every_documented_example_is_accepted_as_the_event_it_describes() {
        let f = fixture(Some(TOKEN), true, None).await;
        for (kind, body) in EXAMPLES {
            let (status, ct, resp) = send(&f.router, "POST", "/events", Some(TOKEN), Some(body)).await;
            assert_eq!(status, StatusCode::ACCEPTED, "{kind}: {resp}");
            assert_eq!(ct, "application/json", "{kind}");
            let want = expected(kind);
            assert_eq!(json_of(&resp), json!({"accepted": want.event_id}), "{kind}");
            let got = f.published.lock().expect("lock").pop();
            assert_eq!(got, Some(want), "{kind}");
        }
    }

    #[tokio::test]
    async fn http_a_malformed_body_gets_a_json_400_naming_the_field() {
        let f = fixture(None, true, None).await;
        let example = |kind: &str| -> Value {
            let (_, body) = EXAMPLES.iter().find(|(k, _)| *k == kind).expect("example");
            json_of(body)
        };
        let mut no_id = example("sms");
        no_id.as_object_mut().map(|o| o.remove("event_id"));
        let mut stop_as_text = example("ping");
        stop_as_text["stop"] = json!("two");
        let mut bad_sequence = example("load_registered");
        bad_sequence["load"]["stops"][1]["sequence"] = json!(-1);
        let mut no_type = example("slack");
        no_type.as_object_mut().map(|o| o.remove("type"));
        let cases = [
            (no_id.to_string(), Some("event_id"), "missing field `event_id`"),
            // The error docs/http.md shows.
            (
                stop_as_text.to_string(),
                Some("stop"),
                "invalid InboundEvent: field `stop`: invalid type: string \"two\", expected u32",
            ),
            (bad_sequence.to_string(), Some("load.stops[1].sequence"), "-1"),
            (no_type.to_string(), Some("type"), "missing field `type`"),
            ("{\"event_id\": \"e1\",".to_owned(), None, "not JSON"),
            ("[]".to_owned(), None, "expected a JSON object"),
        ];
        for (body, field, message) in cases {
            let (status, ct, resp) = send(&f.router, "POST", "/events", None, Some(&body)).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {resp}");
            assert_eq!(ct, "application/json");
            let err = json_of(&resp);
            assert_eq!(err["field"], field.map_or(Value::Null, Value::from), "{body}: {resp}");
            let text = err["error"].as_str().unwrap_or_default();
            assert!(text.contains(message), "{body}: {resp}");
        }
        assert!(f.published.lock().expect("lock").is_empty(), "nothing malformed was queued");
    }

    #[tokio::test]
    async fn http_409_and_503_are_json_too() {
        let (_, sms) = EXAMPLES[1];
        let f = fixture(None, false, None).await;
        let (status, ct, resp) = send(&f.router, "POST", "/events", None, Some(sms)).await;
        assert_eq!((status, ct.as_str()), (StatusCode::CONFLICT, "application/json"));
        assert_eq!(json_of(&resp)["field"], Value::Null);
        assert!(json_of(&resp)["error"].as_str().unwrap_or_default().contains("Kafka"), "{resp}");

        let f = fixture(None, true, Some("closed")).await;
        let (status, ct, resp) = send(&f.router, "POST", "/events", None, Some(sms)).await;
        assert_eq!((status, ct.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "application/json"));
        assert_eq!(json_of(&resp), json!({"error": "queue: closed", "field": null}));

        let (status, ct, resp) = send(&f.router, "GET", "/loads/nope", None, None).await;
        assert_eq!((status, ct.as_str()), (StatusCode::NOT_FOUND, "application/json"), "{resp}");
        let (status, ct, resp) = send(&f.router, "GET", "/loads/nope?at=soon", None, None).await;
        assert_eq!((status, ct.as_str()), (StatusCode::BAD_REQUEST, "application/json"), "{resp}");
    }

    #[tokio::test]
    async fn http_the_token_is_required_everywhere_but_the_probes() {
        let f = fixture(Some(TOKEN), true, None).await;
        let (_, sms) = EXAMPLES[1];
        for (method, uri, body) in [
            ("POST", "/events", Some(sms)),
            ("GET", "/loads/481207", None),
            ("GET", "/metrics", None),
            ("GET", "/openapi.json", None),
        ] {
            for token in [None, Some("wrong")] {
                let (status, ct, resp) = send(&f.router, method, uri, token, body).await;
                assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {uri} with {token:?}");
                assert_eq!(ct, "application/json");
                assert_eq!(json_of(&resp)["field"], Value::Null);
            }
        }
        assert!(f.published.lock().expect("lock").is_empty());
        for uri in ["/healthz", "/readyz"] {
            assert_eq!(send(&f.router, "GET", uri, None, None).await.0, StatusCode::OK, "{uri}");
        }
        assert_eq!(send(&f.router, "GET", "/metrics", Some(TOKEN), None).await.0, StatusCode::OK);
    }

    #[tokio::test]
    async fn http_openapi_json_is_openapi_3_with_every_route_and_validates_the_examples() {
        let f = fixture(Some(TOKEN), true, None).await;
        let (status, ct, body) = send(&f.router, "GET", "/openapi.json", Some(TOKEN), None).await;
        assert_eq!((status, ct.as_str()), (StatusCode::OK, "application/json"), "{body}");
        let typed: utoipa::openapi::OpenApi = serde_json::from_str(&body).expect("an OpenAPI document");
        let doc = json_of(&body);
        assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")), "{}", doc["openapi"]);

        // Every route of the router, and nothing else.
        let mut paths: Vec<&str> = typed.paths.paths.keys().map(String::as_str).collect();
        paths.sort_unstable();
        assert_eq!(
            paths,
            ["/events", "/healthz", "/loads/{load_id}", "/metrics", "/openapi.json", "/readyz"]
        );
        // An unrouted path gets axum's bare 404 (the control); every documented one is routed.
        let unrouted = |(status, _, body): (StatusCode, String, String)| {
            status == StatusCode::NOT_FOUND && body.is_empty()
        };
        assert!(unrouted(send(&f.router, "GET", "/nope", Some(TOKEN), None).await));
        for uri in ["/healthz", "/readyz", "/metrics", "/openapi.json", "/loads/481207"] {
            assert!(!unrouted(send(&f.router, "GET", uri, Some(TOKEN), None).await), "{uri} is not routed");
        }

        // The schemas of POST /events, resolved against the document's components.
        let post = &doc["paths"]["/events"]["post"];
        let schema_of = |schema: &Value| -> jsonschema::Validator {
            let rooted = json!({"allOf": [schema], "components": doc["components"]});
            jsonschema::validator_for(&rooted).unwrap_or_else(|e| panic!("{e}: {schema}"))
        };
        let request = schema_of(&post["requestBody"]["content"]["application/json"]["schema"]);
        for (kind, example) in EXAMPLES {
            let example = json_of(example);
            let errors: Vec<String> = request.iter_errors(&example).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "the {kind} example does not validate: {errors:?}");
        }
        // The schema can fail: a body without event_id, a ping with a text stop, an unknown type.
        let (_, ping) = EXAMPLES[4];
        let mut bad = json_of(ping);
        bad["stop"] = json!("two");
        assert!(!request.is_valid(&bad), "a text stop validates");
        bad = json_of(ping);
        bad.as_object_mut().map(|o| o.remove("event_id"));
        assert!(!request.is_valid(&bad), "a body without event_id validates");
        bad = json_of(ping);
        bad["type"] = json!("fax");
        assert!(!request.is_valid(&bad), "an unknown type validates");

        // What the service answers matches the response schemas it documents.
        let accepted = schema_of(&post["responses"]["202"]["content"]["application/json"]["schema"]);
        let bad_request = schema_of(&post["responses"]["400"]["content"]["application/json"]["schema"]);
        let (_, sms) = EXAMPLES[1];
        let (_, _, resp) = send(&f.router, "POST", "/events", Some(TOKEN), Some(sms)).await;
        assert!(accepted.is_valid(&json_of(&resp)), "{resp}");
        let (_, _, resp) = send(&f.router, "POST", "/events", Some(TOKEN), Some("{}")).await;
        assert!(bad_request.is_valid(&json_of(&resp)), "{resp}");
    }

    /// The operations console through the router: sign-in, the list, a load's page, filters
    /// (the console's handlers behind this surface's token rule).
    mod console_pages {
        use axum::body::Body;
        use axum::http::Request;
        use chrono::{TimeDelta, Utc};
        use load_agent_domain::{EventKind, InboundEvent, LoadSummary, LogEntry, Stage};
        use tower::ServiceExt;

        use super::super::*;

        const TOKEN: &str = "console-test-token";

        /// A router over a SQLite store holding one load with an urgent Hero task a minute ago.
        async fn console() -> axum::Router {
            let stores = load_agent_store::open_store("sqlite::memory:").await.expect("a SQLite store");
            let at = Utc::now() - TimeDelta::minutes(1);
            let sms = LogEntry::Event(InboundEvent {
                event_id: "sms_1".into(),
                load_id: "L-900".into(),
                occurred_at: at,
                kind: EventKind::Sms { from: "driver".into(), text: "truck broke down on I-80".into() },
            });
            let summary = LoadSummary {
                client: Some("client_a".into()),
                stage: Stage::ToDelivery,
                version: 1,
                open_asks: 0,
                escalated_asks: 0,
                escalated_since: None,
                urgent_task_at: Some(at),
                updated_at: at,
            };
            stores.events.append_summarized("L-900", &[sms], 0, &[], Some(&summary)).await.expect("append");
            router(HttpState {
                stores,
                metrics: metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder().handle(),
                publish: None,
                token: Some(TOKEN.into()),
                ready: Arc::new(AtomicBool::new(true)),
                console: ConsoleConfig::default(),
            })
        }

        async fn get(router: &axum::Router, req: Request<Body>) -> (StatusCode, HeaderMap, String) {
            let resp = router.clone().oneshot(req).await.expect("infallible");
            let (status, headers) = (resp.status(), resp.headers().clone());
            let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("body");
            (status, headers, String::from_utf8_lossy(&bytes).into_owned())
        }

        fn browser(method: &str, uri: &str) -> axum::http::request::Builder {
            Request::builder()
                .method(method)
                .uri(uri)
                .header(header::ACCEPT, "text/html,application/xhtml+xml")
        }

        #[tokio::test]
        async fn a_browser_signs_in_with_the_token_and_then_sees_the_list_and_the_load() {
            let router = console().await;
            // No token: the sign-in page, 401.
            let (status, _, body) = get(&router, browser("GET", "/").body(Body::empty()).expect("req")).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
            assert!(body.contains("<form id=\"login\"") && !body.contains("L-900"), "{body}");
            // A wrong token: refused.
            let form = |t: &str| {
                browser("POST", "/login")
                    .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(Body::from(format!("token={t}")))
                    .expect("req")
            };
            let (status, headers, _) = get(&router, form("nope")).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
            assert!(headers.get(header::SET_COOKIE).is_none());
            // The token: a cookie holding its digest, and a redirect to the list.
            let (status, headers, _) = get(&router, form(TOKEN)).await;
            assert_eq!(status, StatusCode::SEE_OTHER);
            let cookie =
                headers.get(header::SET_COOKIE).and_then(|v| v.to_str().ok()).expect("a cookie").to_owned();
            assert!(
                cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && !cookie.contains(TOKEN)
            );
            let pair = cookie.split(';').next().expect("name=value").to_owned();
            let (status, headers, body) = get(
                &router,
                browser("GET", "/").header(header::COOKIE, &pair).body(Body::empty()).expect("req"),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{body}");
            assert_eq!(headers.get(header::CACHE_CONTROL).and_then(|v| v.to_str().ok()), Some("no-store"));
            assert!(body.contains("href=\"/loads/L-900\"") && body.contains("urgent Hero task"), "{body}");
            // The load's page, as a browser asks for it.
            let (status, _, body) = get(
                &router,
                browser("GET", "/loads/L-900")
                    .header(header::COOKIE, &pair)
                    .body(Body::empty())
                    .expect("req"),
            )
            .await;
            assert_eq!(status, StatusCode::OK);
            assert!(body.contains("truck broke down on I-80") && body.contains("id=\"timeline\""), "{body}");
            // Signing in from a load's page comes back to it.
            let (status, _, body) =
                get(&router, browser("GET", "/loads/L-900?at=1").body(Body::empty()).expect("r")).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
            assert!(body.contains("name=\"next\" value=\"/loads/L-900?at=1\""), "{body}");
            let back = browser("POST", "/login")
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(format!("token={TOKEN}&next=%2Floads%2FL-900%3Fat%3D1")))
                .expect("req");
            let (_, headers, _) = get(&router, back).await;
            assert_eq!(
                headers.get(header::LOCATION).and_then(|v| v.to_str().ok()),
                Some("/loads/L-900?at=1")
            );
            // The cookie reads; it never writes.
            let (status, _, _) = get(
                &router,
                Request::builder()
                    .method("POST")
                    .uri("/events")
                    .header(header::COOKIE, &pair)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from("{}"))
                    .expect("req"),
            )
            .await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
            // An API client with the bearer token still gets JSON from /loads/{id}.
            let (status, headers, _) = get(
                &router,
                Request::builder()
                    .uri("/loads/L-900")
                    .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                    .body(Body::empty())
                    .expect("req"),
            )
            .await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(
                headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()),
                Some("application/json")
            );
        }

        #[tokio::test]
        async fn filters_that_match_nothing_say_so_and_bad_ones_are_named() {
            let router = console().await;
            let auth = |uri: &str| {
                browser("GET", uri)
                    .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                    .body(Body::empty())
                    .expect("r")
            };
            let (_, _, body) = get(&router, auth("/?client=client_b")).await;
            assert!(body.contains("No load needs attention with these filters"), "{body}");
            let (_, _, body) = get(&router, auth("/?stage=at_moon&reason=dead_action")).await;
            assert!(body.contains("unknown stage") && body.contains("No load needs attention"), "{body}");
            let (_, _, body) = get(&router, auth("/?reason=urgent_task")).await;
            assert!(body.contains("L-900"), "{body}");
            // A page past the end shows the last page; a malformed page keeps the filters.
            let (_, _, body) = get(&router, auth("/?page=9")).await;
            assert!(body.contains("past the end") && body.contains("L-900"), "{body}");
            let (_, _, body) = get(&router, auth("/?client=client_b&page=abc")).await;
            assert!(body.contains("not a page number") && body.contains("with these filters"), "{body}");
        }
    }
}
