//! The operations console (issue 17, docs/console.md): two server-rendered pages for the
//! operations team, read-only, no JavaScript.
//!
//! - `/`: the loads that need a person now (`LoadIndex::attention`: an urgent Hero task, a dead
//!   action, an escalated ask, an overdue timer), most urgent first, with filters (client, stage,
//!   reason), counts per reason, paging, and a page refresh every `console.refresh_secs`.
//! - `/loads/{id}` asked for as HTML (a browser's `Accept`): the load's story, the same data as
//!   `load-agent inspect` at any version (`?at=N`): state, asks with their attempts and timers,
//!   contacts, the timeline with each decision's path, intent and probability, rationale, SOP
//!   step and LLM cost, and every outbox row with its delivery.
//!
//! Access follows the HTTP surface's token rule (`http.token`, the `access` module): a browser
//! cannot send an `Authorization` header, so `/login` takes the token once and sets an
//! `HttpOnly`, `SameSite=Strict` cookie holding a digest of it (never the token), which
//! authorizes GET requests only. The handlers read a `ConsoleState`, which the HTTP surface's
//! state gives; this module does not import `http`. Message text and phone numbers are shown to that authorized operator and are
//! never logged (docs/security.md).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Form;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, TimeDelta, Utc};
use load_agent_domain::{EventKind, LogEntry, Stage};
use load_agent_store::{AttentionPage, AttentionQuery, AttentionReason, AttentionRow, LoadIndex, TimerView};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde::Deserialize;

use crate::access::{self, COOKIE};
use crate::timeline::{self, LoadView, describe_action, describe_event, short_time};

/// How the console lists loads (the `[console]` settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsoleConfig {
    /// Urgent Hero tasks and dead actions count for this long after they happen.
    pub window: TimeDelta,
    /// A timer counts as overdue once it is this late.
    pub overdue_after: TimeDelta,
    pub page_size: u64,
    /// The attention page reloads itself this often; 0 turns it off.
    pub refresh_secs: u32,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            window: TimeDelta::hours(72),
            overdue_after: TimeDelta::seconds(60),
            page_size: 50,
            refresh_secs: 30,
        }
    }
}

/// What the console's handlers read: the attention list, the token (`http.token`) and the
/// `[console]` settings. The HTTP surface's state gives it (`FromRef`), so the console does not
/// know that state.
#[derive(Clone)]
pub struct ConsoleState {
    pub index: Arc<dyn LoadIndex>,
    pub token: Option<String>,
    pub config: ConsoleConfig,
}

/// Whether a request asks for a page (a browser navigating) rather than data.
pub fn wants_html(headers: &HeaderMap) -> bool {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"))
}

fn page(status: StatusCode, title: &str, refresh: Option<u32>, body: Markup) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(secs) = refresh { meta http-equiv="refresh" content=(secs); }
                title { (title) " · load-agent" }
                style { (PreEscaped(CSS)) }
            }
            body {
                header {
                    a.brand href="/" { "load-agent" }
                    span.sub { "operations console" }
                    form.signout method="post" action="/logout" { button type="submit" { "Sign out" } }
                }
                main { (body) }
            }
        }
    };
    let mut resp = (status, markup).into_response();
    // Pages show message text and phone numbers: never stored by a shared cache.
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

const CSS: &str = r#"
body { font-family: system-ui, sans-serif; margin: 0; color: #1b1f24; background: #f6f7f9; }
header { background: #1f2a37; color: #fff; padding: .6rem 1.2rem; display: flex; gap: 1rem; align-items: baseline; }
header a.brand { color: #fff; font-weight: 700; text-decoration: none; font-size: 1.1rem; }
header .sub { color: #c7d0db; }
header form.signout { margin-left: auto; }
main { padding: 1rem 1.2rem; max-width: 1400px; }
h1 { font-size: 1.3rem; margin: .2rem 0 .8rem; }
h2 { font-size: 1.05rem; margin: 1.4rem 0 .5rem; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: .9rem; }
th, td { border-bottom: 1px solid #e3e6ea; padding: .35rem .5rem; text-align: left; vertical-align: top; }
th { background: #eef1f4; font-weight: 600; }
.badge { display: inline-block; border-radius: .7rem; padding: 0 .5rem; margin: 0 .2rem .1rem 0; font-size: .8rem; white-space: nowrap; }
.urgent_task { background: #fde2e1; color: #9b1c1c; }
.dead_action { background: #fbe7c6; color: #8a4b08; }
.escalated_ask { background: #fff3c4; color: #7a5d00; }
.overdue_timer { background: #dbeafe; color: #1e429f; }
.counts a { margin-right: .8rem; }
.counts a.active { font-weight: 700; }
form.filters { margin: .6rem 0 1rem; display: flex; gap: .6rem; align-items: end; flex-wrap: wrap; }
form.filters label { display: flex; flex-direction: column; font-size: .8rem; color: #4b5563; }
.muted { color: #6b7280; }
.pager { margin: .8rem 0; display: flex; gap: 1rem; }
.empty { background: #fff; padding: 1rem; border: 1px solid #e3e6ea; }
.facts { display: grid; grid-template-columns: max-content auto; gap: .2rem 1rem; background: #fff; padding: .6rem; border: 1px solid #e3e6ea; }
.decision td { background: #fafbfc; }
.rationale { color: #374151; }
.error { color: #9b1c1c; }
code { font-size: .85rem; }
"#;

/// The query string of `/`.
#[derive(Debug, Default, Deserialize)]
pub struct AttentionParams {
    #[serde(default)]
    client: Option<String>,
    #[serde(default)]
    stage: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    /// Read leniently: a malformed page is page 1, with a note, and keeps the other filters.
    #[serde(default)]
    page: Option<String>,
}

impl AttentionParams {
    /// The same filters on another page, or with one filter changed, as a query string.
    fn href(&self, reason: Option<&str>, page: u64) -> String {
        let mut parts = Vec::new();
        let mut push = |k: &str, v: Option<&str>| {
            if let Some(v) = v.filter(|v| !v.is_empty()) {
                parts.push(format!("{k}={}", urlencode(v)));
            }
        };
        push("client", self.client.as_deref());
        push("stage", self.stage.as_deref());
        push("reason", reason);
        if page > 1 {
            parts.push(format!("page={page}"));
        }
        if parts.is_empty() { "/".into() } else { format!("/?{}", parts.join("&")) }
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn reason_label(r: AttentionReason) -> &'static str {
    match r {
        AttentionReason::UrgentTask => "urgent Hero task",
        AttentionReason::DeadAction => "dead action",
        AttentionReason::EscalatedAsk => "escalated ask",
        AttentionReason::OverdueTimer => "overdue timer",
    }
}

/// "3 h 20 min" since `t`.
fn ago(now: DateTime<Utc>, t: DateTime<Utc>) -> String {
    let mins = (now - t).num_minutes();
    if mins < 1 {
        "just now".into()
    } else if mins < 60 {
        format!("{mins} min ago")
    } else if mins < 48 * 60 {
        format!("{} h {} min ago", mins / 60, mins % 60)
    } else {
        format!("{} days ago", mins / (24 * 60))
    }
}

/// `GET /`: the loads that need attention.
pub async fn attention(
    State(state): State<ConsoleState>,
    params: Result<Query<AttentionParams>, QueryRejection>,
) -> Response {
    let mut problems = Vec::new();
    let params = match params {
        Ok(Query(p)) => p,
        Err(e) => {
            problems.push(format!("filters ignored: {}", e.body_text()));
            AttentionParams::default()
        }
    };
    let config = state.config;
    let blank = |v: &Option<String>| v.as_deref().filter(|v| !v.is_empty()).map(str::to_owned);
    let stage = match blank(&params.stage) {
        None => None,
        Some(s) => Stage::parse(&s).or_else(|| {
            problems.push(format!("unknown stage {s:?}"));
            None
        }),
    };
    let reason = match blank(&params.reason) {
        None => None,
        Some(r) => AttentionReason::parse(&r).or_else(|| {
            problems.push(format!("unknown reason {r:?}"));
            None
        }),
    };
    let mut page_no = match blank(&params.page) {
        None => 1,
        Some(p) => p.parse::<u64>().ok().filter(|n| *n >= 1).unwrap_or_else(|| {
            problems.push(format!("page {p:?} is not a page number: showing page 1"));
            1
        }),
    };
    let now = Utc::now();
    let mut query = AttentionQuery {
        now,
        window: config.window,
        overdue_after: config.overdue_after,
        client: blank(&params.client),
        stage,
        reason,
        offset: (page_no - 1).saturating_mul(config.page_size),
        limit: config.page_size,
    };
    let mut listed = state.index.attention(&query).await;
    // A page past the end (loads were resolved while it was open and it refreshed): the last page.
    if let Ok(list) = &listed
        && list.rows.is_empty()
        && list.total > 0
        && page_no > 1
    {
        let last = list.total.div_ceil(config.page_size.max(1));
        problems.push(format!("page {page_no} is past the end: showing page {last}"));
        page_no = last;
        query.offset = (last - 1).saturating_mul(config.page_size);
        listed = state.index.attention(&query).await;
    }
    match listed {
        Ok(list) => {
            let body = attention_body(&params, &query, &list, page_no, config, &problems);
            let refresh = (config.refresh_secs > 0).then_some(config.refresh_secs);
            page(StatusCode::OK, "Loads that need attention", refresh, body)
        }
        Err(e) => page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Store unavailable",
            Some(10),
            html! { h1 { "The store cannot be read" } p.error { (e.to_string()) } },
        ),
    }
}

fn attention_body(
    params: &AttentionParams,
    query: &AttentionQuery,
    list: &AttentionPage,
    page_no: u64,
    config: ConsoleConfig,
    problems: &[String],
) -> Markup {
    let now = query.now;
    let first = query.offset + 1;
    let last = query.offset + list.rows.len() as u64;
    let pages = list.total.div_ceil(config.page_size.max(1)).max(1);
    let selected_reason = query.reason.map(|r| r.as_str());
    html! {
        h1 { "Loads that need attention " span.muted id="total" { "(" (list.total) ")" } }
        @for p in problems { p.error { (p) } }
        p.counts {
            a href=(params.href(None, 1)) class=[selected_reason.is_none().then_some("active")] { "all" }
            @for (reason, n) in &list.by_reason {
                a href=(params.href(Some(reason.as_str()), 1))
                    class=[(selected_reason == Some(reason.as_str())).then_some("active")]
                    data-reason=(reason.as_str()) {
                    span class={ "badge " (reason.as_str()) } { (reason_label(*reason)) } " " (n)
                }
            }
        }
        form.filters method="get" action="/" {
            label { "Client"
                select name="client" {
                    option value="" { "any" }
                    @for c in &list.clients {
                        option value=(c) selected[query.client.as_deref() == Some(c.as_str())] { (c) }
                    }
                }
            }
            label { "Stage"
                select name="stage" {
                    option value="" { "any" }
                    @for s in [Stage::ToPickup, Stage::AtPickup, Stage::ToDelivery, Stage::AtDelivery, Stage::Delivered] {
                        option value=(s.as_str()) selected[query.stage == Some(s)] { (s.as_str()) }
                    }
                }
            }
            label { "Reason"
                select name="reason" {
                    option value="" { "any" }
                    @for r in AttentionReason::ALL {
                        option value=(r.as_str()) selected[query.reason == Some(r)] { (reason_label(r)) }
                    }
                }
            }
            button type="submit" { "Filter" }
            a href="/" { "clear" }
        }
        @if list.rows.is_empty() {
            p.empty id="empty" { "No load needs attention" @if query.client.is_some() || query.stage.is_some() || query.reason.is_some() { " with these filters" } "." }
        } @else {
            table id="attention" {
                thead { tr {
                    th { "Load" } th { "Client" } th { "Stage" } th { "Why" } th { "Waiting since" }
                    th { "Open asks" } th { "Dead actions" } th { "Overdue timers" } th { "Last event" }
                } }
                tbody {
                    @for row in &list.rows { (attention_row(row, now)) }
                }
            }
            div.pager {
                span.muted { "showing " (first) "–" (last) " of " (list.total) " · page " (page_no) " of " (pages) }
                @if page_no > 1 { a rel="prev" href=(params.href(selected_reason, page_no - 1)) { "← previous" } }
                @if last < list.total { a rel="next" href=(params.href(selected_reason, page_no + 1)) { "next →" } }
            }
        }
        p.muted {
            "Urgent Hero tasks and dead actions count for " (config.window.num_hours()) " h; a timer is overdue "
            (config.overdue_after.num_seconds()) " s after it is due."
            @if config.refresh_secs > 0 { " This page refreshes every " (config.refresh_secs) " s." }
            " Updated " (short_time(now)) "."
        }
    }
}

fn attention_row(row: &AttentionRow, now: DateTime<Utc>) -> Markup {
    html! {
        tr data-load=(row.load_id) {
            td { a href={ "/loads/" (urlencode(&row.load_id)) } { (row.load_id) } }
            td { (row.client.as_deref().unwrap_or("—")) }
            td { (row.stage.as_str()) }
            td { @for r in &row.reasons { span class={ "badge " (r.as_str()) } { (reason_label(*r)) } } }
            td title=(short_time(row.since)) { (ago(now, row.since)) }
            td { (row.open_asks) @if row.escalated_asks > 0 { " (" (row.escalated_asks) " escalated)" } }
            td { (row.dead_actions) }
            td { (row.overdue_timers) }
            td title=(short_time(row.updated_at)) { (ago(now, row.updated_at)) " · v" (row.version) }
        }
    }
}

/// `GET /loads/{id}` as a page: the load's story.
pub fn load_page(view: &LoadView<'_>, timers: &[TimerView]) -> Response {
    let title = format!("Load {}", view.load_id);
    page(StatusCode::OK, &title, None, load_body(view, timers))
}

/// The 404 page of an unknown load.
pub fn no_load_page(load_id: &str) -> Response {
    page(
        StatusCode::NOT_FOUND,
        "Unknown load",
        None,
        html! { h1 { "No load " code { (load_id) } } p { "No event of this load was logged. " a href="/" { "Back to the list" } } },
    )
}

/// The page of a store error.
pub fn store_error_page(e: &str) -> Response {
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Store unavailable",
        None,
        html! { h1 { "The store cannot be read" } p.error { (e) } },
    )
}

fn load_body(view: &LoadView<'_>, timers: &[TimerView]) -> Markup {
    let s = &view.state;
    let load = s.load.as_ref();
    let actions: BTreeMap<&str, &timeline::ActionStatus> =
        view.actions.iter().map(|a| (a.key.as_str(), a)).collect();
    let contact_name = |id: &str| {
        load.and_then(|l| l.contacts.iter().find(|c| c.id == id))
            .map_or(id.to_owned(), |c| format!("{} ({id})", c.name))
    };
    html! {
        h1 { "Load " code id="load-id" { (view.load_id) } }
        p.muted {
            "Version " (view.version)
            @if view.version < view.latest_version {
                " of " (view.latest_version) " — " a href={ "/loads/" (urlencode(view.load_id)) } { "see the latest" }
            }
            " · " a href={ "/loads/" (urlencode(view.load_id)) "?format=text" } { "as text" }
            " · " a href={ "/loads/" (urlencode(view.load_id)) "?format=json" } { "as JSON" }
        }
        form.filters method="get" {
            label { "State at version"
                input type="number" name="at" min="1" max=(view.latest_version) value=(view.version);
            }
            button type="submit" { "Show" }
        }
        div.facts id="state" {
            span.muted { "client" } span { (load.map_or("—", |l| l.client.as_str())) " (SOP v" (s.sop().map_or(0, |r| r.version)) ")" }
            span.muted { "stage" } span id="stage" { (s.tracking.stage.as_str()) ", current stop " (s.tracking.current_stop) }
            span.muted { "open asks" } span { (s.open_asks.len()) }
            span.muted { "decisions" } span { (s.decisions) }
            span.muted { "LLM cost" } span id="llm-cost" { "$" (format!("{:.4}", s.llm_cost_usd)) }
            @if !s.sms_blocked.is_empty() {
                span.muted { "no SMS to" } span {
                    @for (c, why) in &s.sms_blocked { (contact_name(c)) ": " (why) br; }
                }
            }
        }
        @if let Some(l) = load {
            h2 { "Contacts and stops" }
            table id="contacts" {
                thead { tr { th { "Contact" } th { "Role" } th { "Phone" } th { "Email" } th { "Language" } } }
                tbody { @for c in &l.contacts { tr {
                    td { (c.name) " " span.muted { (c.id) } }
                    td { (c.role.as_str()) }
                    td { (c.phone.as_deref().unwrap_or("—")) }
                    td { (c.email.as_deref().unwrap_or("—")) }
                    td { (c.language.as_str()) }
                } } }
            }
            table id="stops" {
                thead { tr { th { "Stop" } th { "Kind" } th { "Delay risk" } } }
                tbody { @for st in &l.stops { tr {
                    td { (st.sequence) } td { (st.kind.as_str()) } td { (s.tracking.risk(st.sequence).as_str()) }
                } } }
            }
        }
        h2 { "Asks" }
        @if s.open_asks.is_empty() && s.closed_asks.is_empty() {
            p.muted { "No ask was opened." }
        } @else {
            table id="asks" {
                thead { tr { th { "Ask" } th { "To" } th { "Status" } th { "Attempts" } th { "Escalations" } th { "Timers" } } }
                tbody {
                    @for a in s.open_asks.iter().chain(s.closed_asks.iter()) {
                        tr {
                            td { code { (a.id) } br; span.muted { (a.ask_type) " · opened " (short_time(a.opened_at)) } }
                            td { (contact_name(&a.target_contact)) }
                            td { (format!("{:?}", a.status).to_lowercase())
                                @if let (Some(by), Some(at)) = (&a.resolved_by, a.resolved_at) { br; span.muted { (by) " at " (short_time(at)) } } }
                            td { (a.attempts) " / " (a.max_attempts) }
                            td { (a.escalations_done) }
                            td { @for t in timers.iter().filter(|t| t.ask_id == a.id) {
                                (t.status.as_str()) " attempt " (t.attempt) " at " (short_time(t.fire_at)) br;
                            } }
                        }
                    }
                }
            }
        }
        h2 { "Timeline" }
        table id="timeline" {
            thead { tr { th { "#" } th { "Time" } th { "What" } th { "Delivery" } } }
            tbody {
                @for (i, entry) in view.entries.iter().enumerate() {
                    @match entry {
                        LogEntry::Event(e) => tr.event {
                            td { (i + 1) } td { (short_time(e.occurred_at)) }
                            td { (describe_event(&e.kind)) (event_text(&e.kind)) } td {}
                        },
                        LogEntry::Decision(d) => tr.decision {
                            td { (i + 1) } td { (short_time(d.decided_at)) }
                            td {
                                "decision " strong { (d.path.as_str()) }
                                @if let Some(intent) = &d.intent { " · intent " strong.intent { (intent.intent) } " " (format!("{:.2}", intent.probability)) }
                                @if let Some(sop) = &d.sop { " · SOP " (sop.id) " v" (sop.version) }
                                @if d.total_cost_usd() > 0.0 { " · LLM $" (format!("{:.4}", d.total_cost_usd())) }
                                div.rationale { (d.rationale) }
                                @for t in &d.transitions {
                                    div.muted { (t.kind_str()) " " (t.ask_id()) @if let Some(step) = t.step() { " step " (step) } }
                                }
                                @for a in d.effective_actions() {
                                    div { "→ " (describe_action(&a.body)) @if let Some(step) = &a.ask { " (attempt " (step.attempt) ")" } }
                                }
                            }
                            td {
                                @for a in d.effective_actions() {
                                    div { @match actions.get(a.key.as_str()) {
                                        Some(r) => { (r.status) @if r.attempts > 1 { ", " (r.attempts) " attempts" } }
                                        None => { span.muted { "not in outbox" } }
                                    } }
                                }
                            }
                        },
                    }
                }
            }
        }
        h2 { "Actions (outbox)" }
        @if view.actions.is_empty() {
            p.muted { "No action was sent." }
        } @else {
            table id="actions" {
                thead { tr { th { "Key" } th { "Kind" } th { "To" } th { "Status" } th { "Failed attempts" } th { "Last failure" } th { "Receipt" } th { "Created" } th { "Done" } } }
                tbody { @for r in &view.actions { tr data-status=(r.status) {
                    td { code { (r.key) } } td { (r.kind) } td { (r.destination) } td { (r.status) } td { (r.attempts) }
                    td.error { (r.last_failure.as_deref().unwrap_or("")) }
                    td { (r.receipt.as_deref().unwrap_or("")) }
                    td { (short_time(r.created_at)) }
                    td { @if let Some(t) = r.dispatched_at.or(r.dead_at) { (short_time(t)) } }
                } } }
            }
        }
        p { a href="/" { "← loads that need attention" } }
    }
}

/// The whole text of a message, below its one-line description.
fn event_text(kind: &EventKind) -> Markup {
    let text = match kind {
        EventKind::Sms { text, .. } | EventKind::Slack { text, .. } | EventKind::Email { text, .. } => text,
        _ => return html! {},
    };
    html! { div.muted { (text) } }
}

/// `GET /login`: the token form (straight to `/` when no token is set).
pub async fn login_form(State(state): State<ConsoleState>) -> Response {
    if state.token.is_none() {
        return Redirect::to("/").into_response();
    }
    login_page(StatusCode::OK, None, None)
}

/// Where to go after signing in: a path of this service only (never another site).
fn local_path(next: Option<&str>) -> &str {
    match next {
        Some(p)
            if p.starts_with('/')
                && !p.starts_with("//")
                && !p.starts_with("/login")
                && !p.contains('\\') =>
        {
            p
        }
        _ => "/",
    }
}

fn login_page(status: StatusCode, problem: Option<&str>, next: Option<&str>) -> Response {
    page(
        status,
        "Sign in",
        None,
        html! {
            h1 { "Sign in" }
            @if let Some(p) = problem { p.error id="login-error" { (p) } }
            form id="login" method="post" action="/login" {
                input type="hidden" name="next" value=(local_path(next));
                label { "Access token (the service's http.token) " input type="password" name="token" autocomplete="current-password" autofocus; }
                " " button type="submit" { "Sign in" }
            }
        },
    )
}

#[derive(Debug, Deserialize)]
pub struct LoginForm {
    token: String,
    #[serde(default)]
    next: Option<String>,
}

/// `POST /login`: a right token sets the console cookie and goes back to the page asked for.
pub async fn login(
    State(state): State<ConsoleState>,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Response {
    let Some(token) = &state.token else { return Redirect::to("/").into_response() };
    let (given, next) = form.map(|Form(f)| (f.token, f.next)).unwrap_or_default();
    if !access::token_matches(&given, token) {
        return login_page(StatusCode::UNAUTHORIZED, Some("That is not the token."), next.as_deref());
    }
    let cookie =
        format!("{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200", access::cookie_value(token));
    let mut resp = Redirect::to(local_path(next.as_deref())).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// `POST /logout`: forgets the cookie.
pub async fn logout() -> Response {
    let mut resp = Redirect::to("/login").into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("load_agent_console=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    resp
}

/// The answer to a browser without the token: 401 with the sign-in form, which comes back to
/// `asked` (the path and query asked for) once signed in.
pub fn unauthorized_page(asked: &str) -> Response {
    let mut resp = login_page(
        StatusCode::UNAUTHORIZED,
        Some("Sign in with the access token to see this page."),
        Some(asked),
    );
    resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    resp
}

#[cfg(test)]
mod tests {
    //! The pages' helpers; the console through the router (sign-in, the list, a load's page,
    //! filters) is tested with the router, in `http`.

    use super::*;

    #[test]
    fn sign_in_comes_back_only_to_a_page_of_this_service() {
        assert_eq!(local_path(Some("/loads/L1?at=3")), "/loads/L1?at=3");
        for away in ["//evil.example/x", "https://evil.example", "/login", "/\\evil", "loads"] {
            assert_eq!(local_path(Some(away)), "/", "{away}");
        }
        assert_eq!(local_path(None), "/");
    }

    #[test]
    fn filter_links_keep_the_other_filters_and_encode_values() {
        let p = AttentionParams {
            client: Some("client a&b".into()),
            stage: Some("to_pickup".into()),
            reason: None,
            page: None,
        };
        assert_eq!(
            p.href(Some("dead_action"), 2),
            "/?client=client%20a%26b&stage=to_pickup&reason=dead_action&page=2"
        );
        assert_eq!(AttentionParams::default().href(None, 1), "/");
    }
}
