//! The HTTP surface: `POST /events` (the JSON form of the Avro `InboundEvent`, embedded mode),
//! `GET /loads/{id}` (the inspect view), `/metrics` (Prometheus), `/healthz`, `/readyz`.
//! Bound to loopback by default; with `http.token` set every endpoint but the probes requires
//! `Authorization: Bearer <token>`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use load_agent_domain::InboundEvent;
use load_agent_store::Stores;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Deserialize;

use crate::commands::store_cmds::inspect_text;

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
}

pub fn router(state: HttpState) -> Router {
    let protected = Router::new()
        .route("/events", post(post_event))
        .route("/loads/{load_id}", get(get_load))
        .route("/metrics", get(get_metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .merge(protected)
        .with_state(state)
}

async fn require_token(State(state): State<HttpState>, req: Request, next: Next) -> Response {
    if let Some(token) = &state.token {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
            return (StatusCode::UNAUTHORIZED, "missing or wrong bearer token\n").into_response();
        }
    }
    next.run(req).await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn readyz(State(state): State<HttpState>) -> Response {
    if state.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

async fn get_metrics(State(state): State<HttpState>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render()).into_response()
}

#[derive(Debug, Deserialize)]
struct LoadQuery {
    at: Option<u64>,
    format: Option<String>,
}

async fn get_load(
    State(state): State<HttpState>,
    Path(load_id): Path<String>,
    Query(q): Query<LoadQuery>,
) -> Response {
    let text = q.format.as_deref() == Some("text");
    match inspect_text(&state.stores, &load_id, q.at, !text).await {
        Ok(Some(body)) => {
            let ct = if text { "text/plain; charset=utf-8" } else { "application/json" };
            ([(header::CONTENT_TYPE, ct)], body).into_response()
        }
        Ok(None) => (StatusCode::NOT_FOUND, format!("no load {load_id:?}\n")).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("store: {e}\n")).into_response(),
    }
}

/// Accepts one event as JSON; 202 when queued, 400 with the reason when malformed.
async fn post_event(State(state): State<HttpState>, body: axum::body::Bytes) -> Response {
    let Some(publish) = &state.publish else {
        return (
            StatusCode::CONFLICT,
            "this role reads events from Kafka; POST /events is for the embedded mode\n",
        )
            .into_response();
    };
    let event: InboundEvent = match serde_json::from_slice(&body) {
        Ok(e) => e,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, format!("invalid InboundEvent JSON: {e}\n")).into_response();
        }
    };
    let id = event.event_id.clone();
    match publish(event).await {
        Ok(()) => (StatusCode::ACCEPTED, format!("{{\"accepted\": {}}}\n", serde_json::Value::String(id)))
            .into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("queue: {e}\n")).into_response(),
    }
}
